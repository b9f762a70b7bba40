-- ember.optim.adam: Adam and AdamW, exactly as torch.optim.Adam / AdamW (single-tensor form).
--   g = grad (negated when maximize); Adam: g = g + weight_decay * p;
--   AdamW instead decays the parameter: p = p * (1 - lr * weight_decay)
--   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
--   amsgrad: vmax = max(vmax, v), used in place of v below
--   p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
local ffi = require 'ffi'
local core = require 'ember.core'
local O = require 'ember.optim.optimizer'
local creation = require 'ember.creation'
local C = core.C

local function check_beta(fn, betas, i)
  local b = betas[i]
  if type(b) ~= 'number' or not (b >= 0 and b < 1) then
    error(('%s: invalid beta parameter at index %d: %s (expected a number in [0, 1))'):format(fn,
      i, tostring(b)), 0)
  end
end

local function validate(fn, o)
  O.check_nonneg(fn, 'lr', o.lr, 'learning rate')
  O.check_nonneg(fn, 'eps', o.eps, 'epsilon value')
  if type(o.betas) ~= 'table' or #o.betas ~= 2 then
    error(('%s: expected betas to be a table of two numbers, got %s'):format(fn,
      tostring(o.betas)), 0)
  end
  check_beta(fn, o.betas, 1)
  check_beta(fn, o.betas, 2)
  O.check_nonneg(fn, 'weight_decay', o.weight_decay, 'weight decay')
  O.check_boolean(fn, 'amsgrad', o.amsgrad)
  O.check_boolean(fn, 'maximize', o.maximize)
end

-- The fused step (one C call: em_adam_step_) where the device has it; false when it does not.
local opts = ffi.new('em_adam_options')
local function fused_step(group, p, g, state, decoupled)
  local vmax = group.amsgrad and state.max_exp_avg_sq or nil
  opts.lr, opts.beta1, opts.beta2 = group.lr, group.betas[1], group.betas[2]
  opts.eps, opts.weight_decay = group.eps, group.weight_decay
  opts.step = state.step + 1
  opts.decoupled, opts.maximize = decoupled and 1 or 0, group.maximize and 1 or 0
  opts.found_inf = O.found_inf_ptr() -- a conditional step (GradScaler), else NULL
  return O.fused_call(p, C.em_adam_step_(p.ptr, g.ptr, state.exp_avg.ptr, state.exp_avg_sq.ptr,
    vmax and vmax.ptr or nil, opts))
end

-- The state a first step needs, made before any parameter changes (optimizer.lua).
local function prepare(group, p, state)
  if state.exp_avg == nil then -- both or neither, also when the second allocation fails
    local m, v = creation.zeros_like(p), creation.zeros_like(p)
    state.step, state.exp_avg, state.exp_avg_sq = 0, m, v
  end
  if group.amsgrad and state.max_exp_avg_sq == nil then
    state.max_exp_avg_sq = creation.zeros_like(p)
  end
end

-- decoupled: AdamW's weight decay on the parameter rather than on the gradient.
local function make_update(decoupled)
  return function(group, p, g, state)
    local lr, wd, eps = group.lr, group.weight_decay, group.eps
    local beta1, beta2 = group.betas[1], group.betas[2]
    local m, v = state.exp_avg, state.exp_avg_sq
    if m == nil then
      state.step = 0
      m = creation.zeros_like(p)
      v = creation.zeros_like(p)
      state.exp_avg, state.exp_avg_sq = m, v
      if group.amsgrad then state.max_exp_avg_sq = creation.zeros_like(p) end
    end
    if group.amsgrad and state.max_exp_avg_sq == nil then
      state.max_exp_avg_sq = creation.zeros_like(p) -- amsgrad switched on after some steps
    end
    if O.has_fused(p) and fused_step(group, p, g, state, decoupled) then
      state.step = state.step + 1
      return
    end
    if O.skip_composed() then return end
    local step = state.step + 1
    state.step = step
    if group.maximize then g = -g end
    if wd ~= 0 then
      if decoupled then p:mul_(1 - lr * wd) else g = g:add(p, wd) end
    end
    m:mul_(beta1):add_(g, 1 - beta1)
    v:mul_(beta2):addcmul_(g, g, 1 - beta2)
    local bias_correction1 = 1 - beta1 ^ step
    local bias_correction2_sqrt = math.sqrt(1 - beta2 ^ step)
    local denom
    if group.amsgrad then
      local vmax = state.max_exp_avg_sq
      vmax:maximum_(v)
      denom = vmax:sqrt()
    else
      denom = v:sqrt()
    end
    denom:div_(bias_correction2_sqrt):add_(eps)
    p:addcdiv_(m, denom, -lr / bias_correction1)
  end
end

local order = { 'lr', 'betas', 'eps', 'weight_decay', 'amsgrad', 'maximize' }

return {
  Adam = O.class('Adam', {
    defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
      amsgrad = false, maximize = false },
    order = order,
    validate = validate,
    prepare = prepare,
    update = make_update(false),
    conditional = true, -- the fused kernel takes a found_inf flag (optimizer.lua)
  }),
  AdamW = O.class('AdamW', {
    defaults = { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 1e-2,
      amsgrad = false, maximize = false },
    order = order,
    validate = validate,
    prepare = prepare,
    update = make_update(true),
    conditional = true,
  }),
}
