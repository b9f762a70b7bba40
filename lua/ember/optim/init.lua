-- ember.optim: optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) with PyTorch's update rules and
-- API, learning-rate schedulers, gradient clipping, and Torch7's functional forms
-- (optim.sgd(feval, x, config, state), optim.adam) with flatten_parameters.
--
--   local opt = ember.optim.SGD(model:parameters(), {lr = 0.1, momentum = 0.9})
--   local sched = ember.optim.lr_scheduler.StepLR(opt, {step_size = 30})
--   for each batch: opt:zero_grad(); loss:backward(); opt:step()
--   each epoch: sched:step()
local optimizer = require 'ember.optim.optimizer'
local adam = require 'ember.optim.adam'
local sched = require 'ember.optim.lr_scheduler'
local clip = require 'ember.optim.clip'
local functional = require 'ember.optim.functional'

local M = {
  Optimizer = optimizer.Optimizer,
  SGD = require 'ember.optim.sgd',
  Adam = adam.Adam,
  AdamW = adam.AdamW,
  RMSprop = require 'ember.optim.rmsprop',
  Adagrad = require 'ember.optim.adagrad',
  lr_scheduler = sched,
  clip_grad_norm_ = clip.clip_grad_norm_,
  clip_grad_value_ = clip.clip_grad_value_,
  sgd = functional.sgd,
  adam = functional.adam,
  flatten_parameters = functional.flatten_parameters,
}

-- The schedulers are also reachable as ember.optim.StepLR and so on.
for k, v in pairs(sched) do
  if k ~= 'LRScheduler' then M[k] = v end
end

-- torch.nn.utils names: when ember.nn is already loaded, give its utils table the clipping
-- functions (ember.nn may also alias them itself; an existing entry is left alone).
local nn = package.loaded['ember.nn']
if type(nn) == 'table' and type(nn.utils) == 'table' then
  for _, k in ipairs({ 'clip_grad_norm_', 'clip_grad_value_' }) do
    if rawget(nn.utils, k) == nil then rawset(nn.utils, k, M[k]) end
  end
end

return M
