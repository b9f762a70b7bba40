-- ember.optim.sgd: stochastic gradient descent with momentum, dampening, Nesterov momentum,
-- L2 weight decay and maximize, exactly as torch.optim.SGD (single-tensor form):
--   g = grad (negated when maximize) + weight_decay * p
--   buf = g at the first step, then momentum * buf + (1 - dampening) * g
--   g = g + momentum * buf (nesterov) or buf
--   p = p - lr * g
local ffi = require 'ffi'
local core = require 'ember.core'
local creation = require 'ember.creation'
local O = require 'ember.optim.optimizer'
local C = core.C

local function validate(fn, o)
  O.check_nonneg(fn, 'lr', o.lr, 'learning rate')
  O.check_nonneg(fn, 'momentum', o.momentum)
  O.check_number(fn, 'dampening', o.dampening)
  O.check_nonneg(fn, 'weight_decay', o.weight_decay, 'weight decay')
  O.check_boolean(fn, 'nesterov', o.nesterov)
  O.check_boolean(fn, 'maximize', o.maximize)
  if o.nesterov and (o.momentum <= 0 or o.dampening ~= 0) then
    error(('%s: Nesterov momentum requires a momentum and zero dampening (got momentum %s, ' ..
      'dampening %s)'):format(fn, tostring(o.momentum), tostring(o.dampening)), 0)
  end
end

-- The fused step (one C call: em_sgd_step_) where the device has it; fused_step returns false
-- when it does not, and the composed form below runs instead.
local opts = ffi.new('em_sgd_options')
local function fused_step(group, p, g, state)
  local momentum = group.momentum
  local buf, first = nil, 0
  if momentum ~= 0 then
    buf = state.momentum_buffer
    if buf == nil then buf, first = creation.empty_like(p), 1 end
    if state._fresh then first = 1 end -- made by prepare, not yet written
  end
  opts.lr, opts.momentum, opts.dampening = group.lr, momentum, group.dampening
  opts.weight_decay = group.weight_decay
  opts.nesterov, opts.maximize = group.nesterov and 1 or 0, group.maximize and 1 or 0
  opts.first_step = first
  opts.found_inf = O.found_inf_ptr() -- a conditional step (GradScaler), else NULL
  if not O.fused_call(p, C.em_sgd_step_(p.ptr, g.ptr, buf and buf.ptr or nil, opts)) then
    return false
  end
  if first == 1 then state.momentum_buffer, state._fresh = buf, nil end
  return true
end

-- The momentum buffer a first step needs, made before any parameter changes (optimizer.lua);
-- _fresh: the first step fills it with the gradient (PyTorch's buf = grad), as when absent.
local function prepare(group, p, state)
  if group.momentum ~= 0 and state.momentum_buffer == nil then
    state.momentum_buffer, state._fresh = creation.empty_like(p), true
  end
end

local function update(group, p, g, state)
  if O.has_fused(p) and fused_step(group, p, g, state) then return end
  if O.skip_composed() then return end
  local lr, momentum, wd = group.lr, group.momentum, group.weight_decay
  if group.maximize then g = -g end
  if wd ~= 0 then g = g:add(p, wd) end
  if momentum ~= 0 then
    local buf = state.momentum_buffer
    if buf == nil then
      buf = g:clone()
      state.momentum_buffer = buf
    elseif state._fresh then
      buf:copy_(g)
      state._fresh = nil
    else
      buf:mul_(momentum):add_(g, 1 - group.dampening)
    end
    if group.nesterov then g = g:add(buf, momentum) else g = buf end
  end
  p:add_(g, -lr)
end

return O.class('SGD', {
  defaults = { lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
    maximize = false },
  order = { 'lr', 'momentum', 'dampening', 'weight_decay', 'nesterov', 'maximize' },
  validate = validate,
  prepare = prepare,
  update = update,
  conditional = true, -- the fused kernel takes a found_inf flag (optimizer.lua)
})
