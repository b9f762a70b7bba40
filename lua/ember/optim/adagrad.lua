-- ember.optim.adagrad: Adagrad exactly as torch.optim.Adagrad (single-tensor form).
--   g = grad (negated when maximize) + weight_decay * p
--   clr = lr / (1 + (t - 1) * lr_decay)
--   sum = sum + g * g        (sum starts at initial_accumulator_value, set at construction)
--   p = p - clr * g / (sqrt(sum) + eps)
local O = require 'ember.optim.optimizer'
local creation = require 'ember.creation'

local function validate(fn, o)
  O.check_nonneg(fn, 'lr', o.lr, 'learning rate')
  O.check_nonneg(fn, 'lr_decay', o.lr_decay, 'lr_decay value')
  O.check_nonneg(fn, 'weight_decay', o.weight_decay, 'weight_decay value')
  O.check_nonneg(fn, 'initial_accumulator_value', o.initial_accumulator_value,
    'initial_accumulator_value')
  O.check_nonneg(fn, 'eps', o.eps, 'epsilon value')
  O.check_boolean(fn, 'maximize', o.maximize)
end

-- As in PyTorch, the accumulator exists from construction on, so that a state_dict taken
-- before the first step already holds it.
local function init_state(group, p, state)
  state.step = 0
  state.sum = creation.full_like(p, group.initial_accumulator_value)
end

local function update(group, p, g, state)
  if state.sum == nil then init_state(group, p, state) end
  local step = state.step + 1
  state.step = step
  if group.maximize then g = -g end
  if group.weight_decay ~= 0 then g = g:add(p, group.weight_decay) end
  local clr = group.lr / (1 + (step - 1) * group.lr_decay)
  state.sum:addcmul_(g, g, 1)
  local std = state.sum:sqrt():add_(group.eps)
  p:addcdiv_(g, std, -clr)
end

return O.class('Adagrad', {
  defaults = { lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0,
    eps = 1e-10, maximize = false },
  order = { 'lr', 'lr_decay', 'weight_decay', 'initial_accumulator_value', 'eps', 'maximize' },
  validate = validate,
  init_state = init_state,
  prepare = function(group, p, state) if state.sum == nil then init_state(group, p, state) end end,
  update = update,
})
