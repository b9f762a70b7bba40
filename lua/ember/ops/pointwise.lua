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
local function is_bool(v) return is_tensor(v) and v.ptr.dtype_id == C.EM_BOOL end

-- The scalar alpha * s for x:add(s, alpha), with PyTorch's rules: an integer x takes only a
-- whole alpha, and the result's dtype follows s's kind, not the value of alpha * s (so
-- int:add(2.5, 2) is float, as int + 2.5 is). Returns the tensor to add to and the scalar.
local function scaled_scalar(fn, a, s, alpha)
  if type(s) == 'boolean' then s = s and 1 or 0 end
  if type(s) ~= 'number' then operand_error(fn, s) end
  if type(alpha) ~= 'number' then
    error(('%s: expected a number for alpha, got %s'):format(fn, type(alpha)), 3)
  end
  if is_tensor(a) and C.em_dtype_is_floating(a.ptr.dtype_id) == 0 then
    if alpha ~= math.floor(alpha) then
      error(('%s: alpha must be an integer for %s tensors, got %s'):format(fn,
        core.dtype_names[a.ptr.dtype_id], tostring(alpha)), 3)
    end
    if s ~= math.floor(s) then
      if fn:sub(-1) == '_' then
        error(('%s: result type %s cannot be stored in place into a %s tensor'):format(fn,
          core.dtype_names[core.default_dtype], core.dtype_names[a.ptr.dtype_id]), 3)
      end
      a = own(C.em_to_dtype(a.ptr, core.default_dtype))
    end
  end
  return a, s * alpha
end

function methods.add(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add(a, b) end
  if not is_tensor(b) then return plain_add(scaled_scalar('add', a, b, alpha)) end
  return own(C.em_add_scaled(a.ptr, b.ptr, alpha))
end
function methods.sub(a, b, alpha)
  if alpha == nil or alpha == 1 or is_bool(a) or is_bool(b) then return plain_sub(a, b) end
  if not is_tensor(b) then return plain_sub(scaled_scalar('sub', a, b, alpha)) end
  return own(C.em_add_scaled(a.ptr, b.ptr, -alpha))
end
local plain_add_, plain_sub_ = methods.add_, methods.sub_
function methods.add_(a, b, alpha)
  if alpha == nil or alpha == 1 then return plain_add_(a, b) end
  if not is_tensor(b) then return plain_add_(scaled_scalar('add_', a, b, alpha)) end
  check(C.em_add_scaled_(a.ptr, b.ptr, alpha))
  return a
end
function methods.sub_(a, b, alpha)
  if alpha == nil or alpha == 1 or is_bool(a) or is_bool(b) then return plain_sub_(a, b) end
  if not is_tensor(b) then return plain_sub_(scaled_scalar('sub_', a, b, alpha)) end
  check(C.em_add_scaled_(a.ptr, b.ptr, -alpha))
  return a
end
M.add, M.sub = methods.add, methods.sub
methods.multiply = methods.mul
methods.subtract = methods.sub

-- div(b, rounding_mode): nil is true division; 'floor' is floor_divide; 'trunc' rounds the
-- quotient toward zero (for integers, exactly: a - fmod(a, b) is a multiple of b).
local plain_div = methods.div
local function integral(v)
  if is_tensor(v) then return C.em_dtype_is_floating(v.ptr.dtype_id) == 0 end
  return type(v) == 'number' and v == math.floor(v)
end
-- A bool operand counts as the other operand's integer type (int64 for a number), as in
-- PyTorch's promotion; errors of the ops inside name div, the op the user called.
local function bool_to_int(v, other)
  if not (is_tensor(v) and v.ptr.dtype_id == C.EM_BOOL) then return v end
  if is_tensor(other) and other.ptr.dtype_id ~= C.EM_BOOL then return v:to(other:dtype()) end
  if type(other) == 'number' then return v:to('int64') end
  return v
end
local function rounded_div(a, b, rounding_mode)
  if rounding_mode == 'floor' then return methods.floor_divide(a, b) end
  if integral(a) and integral(b) then
    a, b = bool_to_int(a, b), bool_to_int(b, a)
    return methods.floor_divide(a - methods.fmod(a, b), b)
  end
  return plain_div(a, b):trunc_()
end
function methods.div(a, b, rounding_mode)
  if rounding_mode == nil then return plain_div(a, b) end
  if rounding_mode ~= 'trunc' and rounding_mode ~= 'floor' then
    error("div: rounding_mode must be nil, 'trunc' or 'floor', got " .. tostring(rounding_mode), 2)
  end
  local ok, r = pcall(rounded_div, a, b, rounding_mode)
  if ok then return r end
  -- the message without its position and the internal op's name (sub, fmod, floor_divide)
  local msg = tostring(r):gsub('^[^\n]-:%d+: ', '', 1):gsub('^[%w_]+: ', '', 1)
  error('div: ' .. msg, 2)
end
function methods.div_(a, b, rounding_mode)
  if rounding_mode == nil then
    if is_tensor(b) then check(C.em_binary_(C.EM_DIV, a.ptr, b.ptr))
    elseif type(b) == 'number' then check(C.em_binary_scalar_(C.EM_DIV, a.ptr, b))
    else operand_error('div_', b) end
    return a
  end
  -- As PyTorch: the rounded quotient must be storable in a (no float into an int tensor).
  local r = methods.div(a, b, rounding_mode)
  local from, to = r.ptr.dtype_id, a.ptr.dtype_id
  if (C.em_dtype_is_floating(from) ~= 0 and C.em_dtype_is_floating(to) == 0)
    or (to == C.EM_BOOL and from ~= C.EM_BOOL) then
    error(('div_: result type %s cannot be stored in place into a %s tensor'):format(
      core.dtype_names[from], core.dtype_names[to]), 2)
  end
  return methods.copy_(a, r)
end
M.div = methods.div
methods.true_divide = plain_div
methods.divide = methods.div

-- softplus(beta, threshold): PyTorch's parameters, composed from the beta = 1 kernel.
local plain_softplus = methods.softplus
-- float16/bfloat16 compute in float32 and round once (beta * x is not rounded first). Below
-- the threshold, log1p(exp(bx)) is taken on bx clamped to 40, past which it equals bx in
-- float64 already: exp never overflows, so where's unselected side has a finite gradient
-- (inf * 0 would make NaN).
function methods.softplus(x, beta, threshold)
  beta, threshold = beta or 1, threshold or 20
  if is_tensor(x) and C.em_dtype_is_floating(x.ptr.dtype_id) == 0 then -- as the beta = 1 kernel
    error('softplus: expected a floating-point tensor, got ' .. core.dtype_names[x.ptr.dtype_id], 2)
  end
  if beta == 1 and threshold == 20 then return plain_softplus(x) end
  local dt = x:dtype()
  if dt == 'float16' or dt == 'bfloat16' then
    return methods.softplus(x:to('float32'), beta, threshold):to(dt)
  end
  local bx = x * beta
  local big = bx:gt(40)
  local inner = M.where(big, bx, methods.log1p(methods.exp(bx:clamp(nil, 40))))
  return M.where(bx:gt(threshold), x, inner / beta)
end
M.softplus = methods.softplus
local plain_softplus_ = methods.softplus_
function methods.softplus_(x, beta, threshold)
  if (beta or 1) == 1 and (threshold or 20) == 20 then return plain_softplus_(x) end
  return methods.copy_(x, methods.softplus(x, beta, threshold))
end

-- ---- ternary ops ----------------------------------------------------------------------------
-- A Lua number becomes a wrapped-number tensor, int64 when integral and float64 otherwise, so
-- that dtype promotion treats it like a Python scalar (clamp(int_tensor, 0, 10) stays int).
local function scalar_tensor(v, like)
  if type(v) == 'boolean' then v = v and 1 or 0 end
  local integral = v == math.floor(v) and math.abs(v) < 2 ^ 63
  local device = like and like.ptr.device_id or C.em_default_device()
  local dtype = integral and C.EM_INT64 or C.EM_FLOAT64
  return own(C.em_scalar_tensor(v, dtype, device, 1), C.em_scalar_tensor, v, dtype, device, 1)
end

local function operand(fn, what, v, like)
  if is_tensor(v) then return v end
  if type(v) == 'number' or type(v) == 'boolean' then return scalar_tensor(v, like) end
  error(('%s: expected a tensor or a number for %s, got %s'):format(fn, what, type(v)), 3)
end

local function need_tensor(fn, what, v)
  if not is_tensor(v) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what, type(v)), 3)
  end
end

-- ember.where(cond, a, b): a where cond is true, else b. a and b may be numbers.
function M.where(cond, a, b)
  need_tensor('where', 'the condition', cond)
  local ta = operand('where', 'the second argument', a, cond)
  local tb = operand('where', 'the third argument', b, cond)
  return own(C.em_where(cond.ptr, ta.ptr, tb.ptr), C.em_where, cond.ptr, ta.ptr, tb.ptr)
end
-- x:where(cond, y) is PyTorch's method form: where(cond, x, y).
function methods.where(x, cond, y) return M.where(cond, x, y) end

-- clamp(min, max): either bound may be nil (not both), a number or a tensor.
local function bounds(fn, x, lo, hi)
  local l = lo ~= nil and operand(fn, 'min', lo, x) or nil
  local h = hi ~= nil and operand(fn, 'max', hi, x) or nil
  return l and l.ptr or nil, h and h.ptr or nil, l, h
end
function methods.clamp(x, lo, hi)
  need_tensor('clamp', 'the input', x)
  local l, h, keep_l, keep_h = bounds('clamp', x, lo, hi)
  local r = own(C.em_clamp(x.ptr, l, h), C.em_clamp, x.ptr, l, h)
  local _ = keep_l, keep_h
  return r
end
function methods.clamp_(x, lo, hi)
  need_tensor('clamp_', 'the input', x)
  local l, h, keep_l, keep_h = bounds('clamp_', x, lo, hi)
  check(C.em_clamp_(x.ptr, l, h))
  local _ = keep_l, keep_h
  return x
end
function methods.clamp_min(x, lo) return methods.clamp(x, lo, nil) end
function methods.clamp_max(x, hi) return methods.clamp(x, nil, hi) end
function methods.clamp_min_(x, lo) return methods.clamp_(x, lo, nil) end
function methods.clamp_max_(x, hi) return methods.clamp_(x, nil, hi) end
methods.clip, methods.clip_ = methods.clamp, methods.clamp_
M.clamp, M.clamp_min, M.clamp_max, M.clip = methods.clamp, methods.clamp_min,
  methods.clamp_max, methods.clip

-- lerp(end, weight): x + weight * (end - x); weight a number or a tensor.
function methods.lerp(x, e, w)
  need_tensor('lerp', 'the start', x)
  local te, tw = operand('lerp', 'end', e, x), operand('lerp', 'weight', w, x)
  return own(C.em_lerp(x.ptr, te.ptr, tw.ptr), C.em_lerp, x.ptr, te.ptr, tw.ptr)
end
function methods.lerp_(x, e, w)
  need_tensor('lerp_', 'the start', x)
  local te, tw = operand('lerp_', 'end', e, x), operand('lerp_', 'weight', w, x)
  check(C.em_lerp_(x.ptr, te.ptr, tw.ptr))
  return x
end
M.lerp = methods.lerp

-- addcmul(t1, t2 [, value]) is x + value * t1 * t2 (PyTorch's order); Torch7's
-- addcmul(value, t1, t2) is accepted too. addcdiv divides.
local function addc_args(fn, a, b, c)
  if type(a) == 'number' then a, b, c = b, c, a end
  need_tensor(fn, 'tensor1', a)
  need_tensor(fn, 'tensor2', b)
  if c == nil then c = 1 end
  if type(c) ~= 'number' then
    error(('%s: expected a number for value, got %s'):format(fn, type(c)), 3)
  end
  return a, b, c
end
for name, cfun in pairs({ addcmul = 'em_addcmul', addcdiv = 'em_addcdiv' }) do
  local f, f_ = C[cfun], C[cfun .. '_']
  methods[name] = function(x, a, b, c)
    need_tensor(name, 'the input', x)
    local t1, t2, v = addc_args(name, a, b, c)
    return own(f(x.ptr, t1.ptr, t2.ptr, v), f, x.ptr, t1.ptr, t2.ptr, v)
  end
  methods[name .. '_'] = function(x, a, b, c)
    need_tensor(name .. '_', 'the input', x)
    local t1, t2, v = addc_args(name .. '_', a, b, c)
    check(f_(x.ptr, t1.ptr, t2.ptr, v))
    return x
  end
  M[name] = methods[name]
end

-- masked_fill(mask, value): value where the bool mask is true; value is stored in x's dtype.
local function fill_value(fn, v)
  if type(v) == 'boolean' then return v and 1 or 0 end
  if type(v) == 'number' then return v end
  if is_tensor(v) and v.ptr.ndim == 0 then
    local item = methods.item(v)
    if type(item) == 'boolean' then return item and 1 or 0 end
    return item
  end
  error(fn .. ': expected a number, a boolean or a 0-dim tensor as the value, got ' ..
    (is_tensor(v) and ('a ' .. v.ptr.ndim .. '-d tensor') or type(v)), 3)
end
function methods.masked_fill(x, mask, value)
  need_tensor('masked_fill', 'the mask', mask)
  local v = fill_value('masked_fill', value)
  return own(C.em_masked_fill(x.ptr, mask.ptr, v), C.em_masked_fill, x.ptr, mask.ptr, v)
end
function methods.masked_fill_(x, mask, value)
  need_tensor('masked_fill_', 'the mask', mask)
  check(C.em_masked_fill_(x.ptr, mask.ptr, fill_value('masked_fill_', value)))
  return x
end
M.masked_fill = methods.masked_fill

-- ---- operators ------------------------------------------------------------------------------
-- +, -, *, /, % (remainder: the sign of the divisor, like Lua's own %), ^ (pow) and unary minus
-- work elementwise with tensors or numbers on either side. Comparisons do not: Lua requires
-- == to return one boolean (so x == y stays identity, as for any object) and turns a > b into
-- b < a; so <, <=, >, >= raise an error that names the method to use instead.
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
mt.__unm = function(x) return own(C.em_unary(C.EM_NEG, x.ptr), C.em_unary, C.EM_NEG, x.ptr) end
mt.__lt = function()
  error("tensor: use x:lt(y) for elementwise comparison (x:gt(y) for >): Lua's < and > " ..
    'cannot return a tensor', 2)
end
mt.__le = function()
  error("tensor: use x:le(y) for elementwise comparison (x:ge(y) for >=): Lua's <= and >= " ..
    'cannot return a tensor', 2)
end

return M
