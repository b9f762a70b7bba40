-- ember.nn activations beyond the basic ones (activation.lua): logsigmoid, hardtanh, relu6,
-- hardswish, hardsigmoid, selu, celu, mish, softsign, glu, threshold, prelu, softmin and
-- softplus, as functions (merged into ember.nn.functional) and modules, with PyTorch's
-- argument names and defaults.
--
-- Each is composed from pointwise ops, so its gradient comes from theirs and it runs on every
-- device that runs those ops (no kernel of its own). Arguments come positionally, as in
-- PyTorch, or as one table of named ones: F.hardtanh(x, -2, 2) == F.hardtanh(x, {min_val = -2,
-- max_val = 2}). inplace = true writes the result into the input (copy_), as PyTorch does.
local Module = require 'ember.nn.module'
local tensor = require 'ember.tensor'
local args = require 'ember.nn.args'
local where = require('ember.ops.pointwise').where

local M, F = {}, {}
M.functional = F

local named = require 'ember.nn.named_args'
local field_module = require 'ember.nn.field_module'

local function need(fn, x)
  if not tensor.is_tensor(x) then
    error(('%s: expected input to be a tensor, got %s'):format(fn, type(x)), 3)
  end
end

local function number(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'number' then
    error(('%s: expected %s to be a number, got %s'):format(fn, what, tostring(v)), 3)
  end
  return v
end

-- inplace = true: the result's values go into x (PyTorch's inplace flag).
local function finish(fn, x, y, inplace)
  if args.boolean(fn, 'inplace', inplace, false, 3) then
    x:copy_(y)
    return x
  end
  return y
end

-- logsigmoid(x) = -softplus(-x) = min(x, 0) - log1p(exp(-|x|)), stable for every x.
function F.logsigmoid(x)
  need('logsigmoid', x)
  return x:clamp_max(0) - (-x:abs()):exp():log1p()
end

function F.hardtanh(x, ...)
  local fn = 'hardtanh'
  need(fn, x)
  local o = named(fn, { 'min_val', 'max_val', 'inplace' }, ...)
  local lo, hi = number(fn, 'min_val', o.min_val, -1), number(fn, 'max_val', o.max_val, 1)
  if lo > hi then error(('%s: min_val (%g) must not exceed max_val (%g)'):format(fn, lo, hi), 2) end
  return finish(fn, x, x:clamp(lo, hi), o.inplace)
end

function F.relu6(x, inplace)
  need('relu6', x)
  return finish('relu6', x, x:clamp(0, 6), inplace)
end

-- hardsigmoid(x) = relu6(x + 3) / 6; hardswish(x) = x * hardsigmoid(x).
function F.hardsigmoid(x, inplace)
  need('hardsigmoid', x)
  return finish('hardsigmoid', x, (x + 3):clamp(0, 6) / 6, inplace)
end

function F.hardswish(x, inplace)
  need('hardswish', x)
  return finish('hardswish', x, x * ((x + 3):clamp(0, 6) / 6), inplace)
end

-- selu(x) = scale * (max(0, x) + min(0, alpha * (exp(x) - 1))), PyTorch's constants.
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function F.selu(x, inplace)
  need('selu', x)
  local y = where(x:gt(0), x, x:clamp_max(0):expm1() * SELU_ALPHA) * SELU_SCALE
  return finish('selu', x, y, inplace)
end

-- celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
function F.celu(x, ...)
  local fn = 'celu'
  need(fn, x)
  local o = named(fn, { 'alpha', 'inplace' }, ...)
  local alpha = number(fn, 'alpha', o.alpha, 1)
  if alpha == 0 then error(fn .. ': alpha must not be 0', 2) end
  local y = where(x:gt(0), x, (x:clamp_max(0) / alpha):expm1() * alpha)
  return finish(fn, x, y, o.inplace)
end

-- mish(x) = x * tanh(softplus(x))
function F.mish(x, inplace)
  need('mish', x)
  return finish('mish', x, x * x:softplus():tanh(), inplace)
end

-- softsign(x) = x / (1 + |x|)
function F.softsign(x)
  need('softsign', x)
  return x / (x:abs() + 1)
end

-- glu(x, dim = -1): the first half along dim times the sigmoid of the second.
function F.glu(x, dim)
  local fn = 'glu'
  need(fn, x)
  dim = dim or -1
  if x:dim() == 0 then error(fn .. ': expected an input with at least 1 dim, got a 0-d tensor', 2) end
  local n = x:size(dim)
  if n % 2 ~= 0 then
    error(('%s: halving dimension %d must be even, got size %d'):format(fn, dim, n), 2)
  end
  local a, b = x:narrow(dim, 1, n / 2), x:narrow(dim, n / 2 + 1, n / 2)
  return a * b:sigmoid()
end

-- threshold(x, threshold, value): x where x > threshold, else value.
function F.threshold(x, ...)
  local fn = 'threshold'
  need(fn, x)
  local o = named(fn, { 'threshold', 'value', 'inplace' }, ...)
  local t = number(fn, 'threshold', o.threshold)
  local v = number(fn, 'value', o.value)
  if t == nil or v == nil then error(fn .. ': expected threshold and value numbers', 2) end
  -- x <= threshold takes value: NaN, which compares false, stays NaN (as PyTorch)
  return finish(fn, x, where(x:le(t), v, x), o.inplace)
end

-- prelu(x, weight): x where x > 0, else weight * x; weight has 1 element or one per channel
-- (dim 2 of the input, dim 1 of a 1-D input).
function F.prelu(x, weight)
  local fn = 'prelu'
  need(fn, x)
  if not tensor.is_tensor(weight) then
    error(('%s: expected weight to be a tensor, got %s'):format(fn, type(weight)), 2)
  end
  local n = weight:numel()
  local w = weight
  if n ~= 1 then
    if weight:dim() ~= 1 then
      error(('%s: expected a weight of 1 element or 1-D, got shape %s'):format(fn,
        tostring(weight:size())), 2)
    end
    local cdim = x:dim() >= 2 and 2 or 1
    if x:dim() == 0 or x:size(cdim) ~= n then
      error(('%s: weight has %d elements but the input has %s channels'):format(fn, n,
        x:dim() == 0 and 'no' or tostring(x:size(cdim))), 2)
    end
    local shape = {}
    for d = 1, x:dim() do shape[d] = d == cdim and n or 1 end
    w = weight:view(shape)
  elseif weight:dim() > 0 then
    w = weight:reshape({})
  end
  return where(x:gt(0), x, x * w)
end

function F.softmin(x, dim)
  need('softmin', x)
  if dim == nil then error('softmin: expected a dimension', 2) end
  return (-x):softmax(dim)
end

-- softplus(x, beta = 1, threshold = 20): log(1 + exp(beta x)) / beta, linear above threshold.
function F.softplus(x, ...)
  local fn = 'softplus'
  need(fn, x)
  local o = named(fn, { 'beta', 'threshold' }, ...)
  return x:softplus(number(fn, 'beta', o.beta, 1), number(fn, 'threshold', o.threshold, 20))
end

-- ---- modules ---------------------------------------------------------------------------------
-- Each module keeps PyTorch's attributes (min_val, alpha, ...) and calls its function.

local function module(name, fields, defaults, call, repr)
  local cls = field_module(name, fields, defaults, function(self, x) return call(self, x) end,
    { repr = repr, hide = { inplace = true } })
  M[name] = cls
  return cls
end

module('LogSigmoid', {}, {}, function(_, x) return F.logsigmoid(x) end)
module('Hardtanh', { 'min_val', 'max_val', 'inplace' }, { -1, 1, false },
  function(s, x) return F.hardtanh(x, s.min_val, s.max_val, s.inplace) end)
module('ReLU6', { 'inplace' }, { false }, function(s, x) return F.relu6(x, s.inplace) end)
module('Hardswish', { 'inplace' }, { false }, function(s, x) return F.hardswish(x, s.inplace) end)
module('Hardsigmoid', { 'inplace' }, { false }, function(s, x) return F.hardsigmoid(x, s.inplace) end)
module('SELU', { 'inplace' }, { false }, function(s, x) return F.selu(x, s.inplace) end)
module('CELU', { 'alpha', 'inplace' }, { 1, false },
  function(s, x) return F.celu(x, s.alpha, s.inplace) end)
module('Mish', { 'inplace' }, { false }, function(s, x) return F.mish(x, s.inplace) end)
module('Softsign', {}, {}, function(_, x) return F.softsign(x) end)
module('GLU', { 'dim' }, { -1 }, function(s, x) return F.glu(x, s.dim) end)
module('Threshold', { 'threshold', 'value', 'inplace' }, { nil, nil, false },
  function(s, x) return F.threshold(x, s.threshold, s.value, s.inplace) end)
module('Softmin', { 'dim' }, { nil }, function(s, x) return F.softmin(x, s.dim) end)
module('Softplus', { 'beta', 'threshold' }, { 1, 20 },
  function(s, x) return F.softplus(x, s.beta, s.threshold) end)

-- PReLU(num_parameters = 1, init = 0.25): a learnable slope, one or one per channel.
local PReLU = Module:extend('PReLU')
function PReLU:__init(...)
  local o = named('PReLU', { 'num_parameters', 'init', 'device', 'dtype' }, ...)
  local n = args.positive_int('PReLU', 'num_parameters', o.num_parameters or 1, 2)
  self.num_parameters = n
  local E = require 'ember'
  self:register_parameter('weight', E.full({ n }, o.init or 0.25,
    { dtype = o.dtype or E.get_default_dtype(), device = o.device }))
end
function PReLU:forward(x) return F.prelu(x, self.weight) end
function PReLU:extra_repr() return 'num_parameters=' .. self.num_parameters end
M.PReLU = PReLU

return M
