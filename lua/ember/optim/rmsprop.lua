-- ember.optim.rmsprop: RMSprop exactly as torch.optim.RMSprop (single-tensor form).
--   g = grad (negated when maximize) + weight_decay * p
--   s = alpha * s + (1 - alpha) * g * g
--   centered: a = alpha * a + (1 - alpha) * g; avg = sqrt(s - a * a), else avg = sqrt(s)
--   avg = avg + eps
--   momentum > 0: buf = momentum * buf + g / avg; p = p - lr * buf
--   otherwise:    p = p - lr * g / avg
local O = require 'ember.optim.optimizer'
local creation = require 'ember.creation'

local function validate(fn, o)
  O.check_nonneg(fn, 'lr', o.lr, 'learning rate')
  O.check_nonneg(fn, 'eps', o.eps, 'epsilon value')
  O.check_nonneg(fn, 'momentum', o.momentum)
  O.check_nonneg(fn, 'weight_decay', o.weight_decay, 'weight decay')
  O.check_nonneg(fn, 'alpha', o.alpha, 'alpha value')
  O.check_boolean(fn, 'centered', o.centered)
  O.check_boolean(fn, 'maximize', o.maximize)
end

-- The state an update needs, made before any parameter changes (optimizer.lua) and again
-- here for direct calls.
local function prepare(group, p, state)
  if state.square_avg == nil then
    state.step = 0
    state.square_avg = creation.zeros_like(p)
  end
  if group.momentum > 0 and state.momentum_buffer == nil then
    state.momentum_buffer = creation.zeros_like(p)
  end
  if group.centered and state.grad_avg == nil then state.grad_avg = creation.zeros_like(p) end
end

local function update(group, p, g, state)
  local lr, alpha, eps, wd, momentum = group.lr, group.alpha, group.eps, group.weight_decay,
    group.momentum
  prepare(group, p, state)
  local s = state.square_avg
  state.step = state.step + 1
  if group.maximize then g = -g end
  if wd ~= 0 then g = g:add(p, wd) end
  s:mul_(alpha):addcmul_(g, g, 1 - alpha)
  local avg
  if group.centered then
    local a = state.grad_avg
    a:mul_(alpha):add_(g, 1 - alpha)
    avg = s:addcmul(a, a, -1):sqrt_()
  else
    avg = s:sqrt()
  end
  avg:add_(eps)
  if momentum > 0 then
    local buf = state.momentum_buffer
    buf:mul_(momentum):addcdiv_(g, avg)
    p:add_(buf, -lr)
  else
    p:addcdiv_(g, avg, -lr)
  end
end

return O.class('RMSprop', {
  defaults = { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
    centered = false, maximize = false },
  order = { 'lr', 'alpha', 'eps', 'weight_decay', 'momentum', 'centered', 'maximize' },
  validate = validate,
  prepare = prepare,
  update = update,
})
