-- ember.ops.pointwise: unary, binary and ternary elementwise ops, their scalar-operand and
-- in-place (`_`) forms, and the arithmetic operators. Each op is generated from the C op
-- tables, so every name here is one C op.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local unary_ops = {
  neg = C.EM_NEG, abs = C.EM_ABS, sign = C.EM_SIGN, exp = C.EM_EXP, log = C.EM_LOG,
  log1p = C.EM_LOG1P, expm1 = C.EM_EXPM1, sqrt = C.EM_SQRT, rsqrt = C.EM_RSQRT, sin = C.EM_SIN,
  cos = C.EM_COS, tan = C.EM_TAN, tanh = C.EM_TANH, sigmoid = C.EM_SIGMOID, relu = C.EM_RELU,
  silu = C.EM_SILU, softplus = C.EM_SOFTPLUS, floor = C.EM_FLOOR, ceil = C.EM_CEIL,
  round = C.EM_ROUND, trunc = C.EM_TRUNC, reciprocal = C.EM_RECIPROCAL, square = C.EM_SQUARE,
  erf = C.EM_ERF, isnan = C.EM_ISNAN, isinf = C.EM_ISINF, isfinite = C.EM_ISFINITE,
  logical_not = C.EM_LOGICAL_NOT, bitwise_not = C.EM_BITWISE_NOT,
}
M.unary_ops = unary_ops

for name, op in pairs(unary_ops) do
  local function f(x) return own(C.em_unary(op, x.ptr), C.em_unary, op, x.ptr) end
  methods[name] = f
  M[name] = f
  methods[name .. '_'] = function(x)
    check(C.em_unary_(op, x.ptr))
    return x
  end
end
methods.negative = methods.neg

-- gelu(x) is exact; gelu(x, 'tanh') is the tanh approximation, as in PyTorch.
function methods.gelu(x, approximate)
  local op = approximate == 'tanh' and C.EM_GELU_TANH or C.EM_GELU
  return own(C.em_unary(op, x.ptr), C.em_unary, op, x.ptr)
end
M.gelu = methods.gelu
function methods.gelu_(x, approximate)
  check(C.em_unary_(approximate == 'tanh' and C.EM_GELU_TANH or C.EM_GELU, x.ptr))
  return x
end

local binary_ops = {
  add = C.EM_ADD, sub = C.EM_SUB, mul = C.EM_MUL, div = C.EM_DIV,
  floor_divide = C.EM_FLOOR_DIVIDE, pow = C.EM_POW, fmod = C.EM_FMOD,
  remainder = C.EM_REMAINDER, maximum = C.EM_MAXIMUM, minimum = C.EM_MINIMUM,
  atan2 = C.EM_ATAN2, eq = C.EM_EQ, ne = C.EM_NE, lt = C.EM_LT, le = C.EM_LE, gt = C.EM_GT,
  ge = C.EM_GE, logical_and = C.EM_LOGICAL_AND, logical_or = C.EM_LOGICAL_OR,
  logical_xor = C.EM_LOGICAL_XOR, bitwise_and = C.EM_BITWISE_AND,
  bitwise_or = C.EM_BITWISE_OR, bitwise_xor = C.EM_BITWISE_XOR,
  bitwise_left_shift = C.EM_LSHIFT, bitwise_right_shift = C.EM_RSHIFT,
}
M.binary_ops = binary_ops

local function operand_error(name, v)
  error(name .. ': expected a tensor or a number, got ' .. type(v), 3)
end

-- a op b where either side may be a Lua number (or boolean).
local function binary(name, op)
  return function(a, b)
    if type(b) == 'boolean' then b = b and 1 or 0 end
    if type(a) == 'boolean' then a = a and 1 or 0 end
    if is_tensor(a) then
      if is_tensor(b) then return own(C.em_binary(op, a.ptr, b.ptr), C.em_binary, op, a.ptr, b.ptr) end
      if type(b) ~= 'number' then operand_error(name, b) end
      return own(C.em_binary_scalar(op, a.ptr, b, 0), C.em_binary_scalar, op, a.ptr, b, 0)
    end
    if type(a) ~= 'number' then operand_error(name, a) end
    if not is_tensor(b) then operand_error(name, b) end
    return own(C.em_binary_scalar(op, b.ptr, a, 1), C.em_binary_scalar, op, b.ptr, a, 1)
  end
end

for name, op in pairs(binary_ops) do
  local f = binary(name, op)
  methods[name] = f
  M[name] = f
  methods[name .. '_'] = function(a, b)
    if type(b) == 'boolean' then b = b and 1 or 0 end
    if is_tensor(b) then check(C.em_binary_(op, a.ptr, b.ptr))
    elseif type(b) == 'number' then check(C.em_binary_scalar_(op, a.ptr, b))
    else operand_error(name .. '_', b) end
    return a
  end
end

-- add and sub take PyTorch's alpha: x:add(y, alpha) is x + alpha * y.
local plain_add, plain_sub = methods.add, methods.sub
function methods.add(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add(a, b) end
  if not is_tensor(b) then return plain_add(a, b * alpha) end
  return own(C.em_add_scaled(a.ptr, b.ptr, alpha))
end
function methods.sub(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_sub(a, b) end
  if not is_tensor(b) then return plain_sub(a, b * alpha) end
  return own(C.em_add_scaled(a.ptr, b.ptr, -alpha))
end
local plain_add_, plain_sub_ = methods.add_, methods.sub_
function methods.add_(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add_(a, b) end
  if not is_tensor(b) then return plain_add_(a, b * alpha) end
  check(C.em_add_scaled_(a.ptr, b.ptr, alpha))
  return a
end
function methods.sub_(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_sub_(a, b) end
  if not is_tensor(b) then return plain_sub_(a, b * alpha) end
  check(C.em_add_scaled_(a.ptr, b.ptr, -alpha))
  return a
end
M.add, M.sub = methods.add, methods.sub
methods.true_divide = methods.div
methods.multiply = methods.mul
methods.subtract = methods.sub

-- ---- operators ------------------------------------------------------------------------------
local mt = tensor.mt
local add, sub, mul, div = binary('add', C.EM_ADD), binary('sub', C.EM_SUB),
  binary('mul', C.EM_MUL), binary('div', C.EM_DIV)
local rem, pow = binary('remainder', C.EM_REMAINDER), binary('pow', C.EM_POW)
mt.__add = add
mt.__sub = sub
mt.__mul = mul
mt.__div = div
mt.__mod = rem
mt.__pow = pow
mt.__unm = function(x) return own(C.em_unary(C.EM_NEG, x.ptr)) end

return M
