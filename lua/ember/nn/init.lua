-- ember.nn: modules (Torch7's API over PyTorch's model), layers, losses, initialization and
-- the functional forms (ember.nn.functional).
local Module = require 'ember.nn.module'

local nn = { Module = Module }

-- The functional namespace: kernels-backed ops (ember.nn.functional_ops, when present) plus
-- the activations and losses composed here.
local ok, kernels = pcall(require, 'ember.nn.functional')
if not ok then
  if not tostring(kernels):find("module 'ember.nn.functional' not found", 1, true) then error(kernels, 0) end
  kernels = {}
end
local F = kernels
nn.functional = F

for _, name in ipairs({ 'containers', 'linear', 'conv', 'norm', 'activation', 'loss', 'rnn', 'rotary',
  'transformer', 'encoding', 'torch7', 'activation_ext', 'loss_ext', 'functional_ext', 'conv3d', 'distributed' }) do
  local m = require('ember.nn.' .. name)
  for k, v in pairs(m) do
    if k == 'functional' then
      for fk, fv in pairs(v) do if F[fk] == nil then F[fk] = fv end end
    elseif k ~= 'tuple' then
      nn[k] = v
    end
  end
end

nn.init = require 'ember.nn.init_fns'

-- nn.utils: clip_grad_norm_ / clip_grad_value_ live with the optimizers.
nn.utils = setmetatable({}, { __index = function(_, k)
  local optim = require 'ember.optim'
  return optim[k]
end })

return nn
