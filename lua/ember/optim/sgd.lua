-- ember.optim.sgd: stochastic gradient descent with momentum, dampening, Nesterov momentum,
-- L2 weight decay and maximize, exactly as torch.optim.SGD (single-tensor form):
--   g = grad (negated when maximize) + weight_decay * p
--   buf = g at the first step, then momentum * buf + (1 - dampening) * g
--   g = g + momentum * buf (nesterov) or buf
--   p = p - lr * g
local O = require 'ember.optim.optimizer'

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

local function update(group, p, g, state)
  local lr, momentum, wd = group.lr, group.momentum, group.weight_decay
  if group.maximize then g = -g end
  if wd ~= 0 then g = g:add(p, wd) end
  if momentum ~= 0 then
    local buf = state.momentum_buffer
    if buf == nil then
      buf = g:clone()
      state.momentum_buffer = buf
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
  update = update,
})
