-- ember.nn activations: modules and their functional forms (merged into ember.nn.functional).
local Module = require 'ember.nn.module'
local where = require('ember.ops.pointwise').where

local M, F = {}, {}
M.functional = F

function F.relu(x) return x:relu() end
function F.sigmoid(x) return x:sigmoid() end
function F.tanh(x) return x:tanh() end
function F.silu(x) return x:silu() end
function F.gelu(x, approximate) return x:gelu(approximate) end
function F.softmax(x, dim)
  if dim == nil then error('softmax: expected a dimension', 2) end
  return x:softmax(dim)
end
function F.log_softmax(x, dim)
  if dim == nil then error('log_softmax: expected a dimension', 2) end
  return x:log_softmax(dim)
end
-- leaky_relu(x) = x for x > 0, slope * x otherwise
function F.leaky_relu(x, slope)
  slope = slope or 0.01
  return where(x:gt(0), x, x * slope)
end
-- elu(x) = x for x > 0, alpha * (exp(x) - 1) otherwise
function F.elu(x, alpha)
  alpha = alpha or 1
  return where(x:gt(0), x, (x:clamp(nil, 0):expm1()) * alpha)
end

local function simple(name, f, repr)
  local cls = Module:extend(name)
  cls.forward = function(_, x) return f(x) end
  if repr then cls.extra_repr = repr end
  M[name] = cls
  return cls
end

simple('ReLU', F.relu)
simple('Sigmoid', F.sigmoid)
simple('Tanh', F.tanh)
simple('SiLU', F.silu)

local GELU = Module:extend('GELU')
function GELU:__init(approximate) self.approximate = approximate or 'none' end
function GELU:forward(x) return F.gelu(x, self.approximate) end
function GELU:extra_repr() return "approximate='" .. self.approximate .. "'" end
M.GELU = GELU

local LeakyReLU = Module:extend('LeakyReLU')
function LeakyReLU:__init(slope) self.negative_slope = slope or 0.01 end
function LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end
function LeakyReLU:extra_repr() return 'negative_slope=' .. self.negative_slope end
M.LeakyReLU = LeakyReLU

local ELU = Module:extend('ELU')
function ELU:__init(alpha) self.alpha = alpha or 1 end
function ELU:forward(x) return F.elu(x, self.alpha) end
function ELU:extra_repr() return 'alpha=' .. self.alpha end
M.ELU = ELU

local Softmax = Module:extend('Softmax')
function Softmax:__init(dim) self.dim = dim or -1 end
function Softmax:forward(x) return F.softmax(x, self.dim) end
function Softmax:extra_repr() return 'dim=' .. self.dim end
M.Softmax = Softmax

local LogSoftmax = Module:extend('LogSoftmax')
function LogSoftmax:__init(dim) self.dim = dim or -1 end
function LogSoftmax:forward(x) return F.log_softmax(x, self.dim) end
function LogSoftmax:extra_repr() return 'dim=' .. self.dim end
M.LogSoftmax = LogSoftmax

return M
