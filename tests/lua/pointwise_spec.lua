-- pointwise_spec: every unary and binary op against plain-Lua references in double precision,
-- on contiguous, transposed, sliced, broadcast and zero-size inputs, in several dtypes; the
-- scalar and in-place forms; PyTorch's promotion table; integer edge cases (wrap-around,
-- division by zero, shifts); large inputs that cross the threading threshold; every error.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local bit = require 'bit'

local inf, nan = math.huge, 0 / 0

-- ---- references -----------------------------------------------------------------------------
-- erf by its Taylor series (|x| <= 3 here), independent of any libm erf.
local function erf(x)
  local sum, term, n = x, x, 0
  repeat
    n = n + 1
    term = -term * x * x / n
    local add = term / (2 * n + 1)
    sum = sum + add
  until math.abs(add) < 1e-17 * math.abs(sum) or n > 200
  return 2 / math.sqrt(math.pi) * sum
end

-- Nearest integer, ties to even (PyTorch's round).
local function round_even(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 then return f + 1 elseif d < 0.5 then return f end
  return f % 2 == 0 and f or f + 1
end

local function sign(x)
  if x > 0 then return 1 elseif x < 0 then return -1 end
  return 0
end
local function trunc(x) return x < 0 and math.ceil(x) or math.floor(x) end
local function floordiv(a, b) return math.floor(a / b) end
local function pymod(a, b) return a - b * math.floor(a / b) end
local function truthy(v) return v ~= 0 end

local unary_refs = {
  neg = function(x) return -x end,
  abs = math.abs,
  sign = sign,
  exp = math.exp,
  log = math.log,
  log1p = function(x) return math.log(1 + x) end, -- 1 + x is exact for the inputs used
  expm1 = function(x) return math.exp(x) - 1 end,
  sqrt = math.sqrt,
  rsqrt = function(x) return 1 / math.sqrt(x) end,
  sin = math.sin, cos = math.cos, tan = math.tan, tanh = math.tanh,
  sigmoid = function(x) return 1 / (1 + math.exp(-x)) end,
  relu = function(x) return x > 0 and x or 0 end,
  gelu = function(x) return 0.5 * x * (1 + erf(x / math.sqrt(2))) end,
  silu = function(x) return x / (1 + math.exp(-x)) end,
  softplus = function(x) return x > 20 and x or math.log(1 + math.exp(x)) end,
  floor = math.floor, ceil = math.ceil, round = round_even, trunc = trunc,
  reciprocal = function(x) return 1 / x end,
  square = function(x) return x * x end,
  erf = erf,
  isnan = function(x) return x ~= x end,
  isinf = function(x) return math.abs(x) == inf end,
  isfinite = function(x) return math.abs(x) < inf end,
  logical_not = function(x) return x == 0 end,
}
local function gelu_tanh(x)
  return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ^ 3)))
end

-- Input domain per op: values k/16 in [lo, hi], exact in every float dtype (bfloat16 included),
-- with plenty of ties (x.5) for the roundings.
local domains = {
  log = { 0.0625, 3 }, sqrt = { 0, 4 }, rsqrt = { 0.0625, 4 }, log1p = { -0.75, 3 },
  tan = { -1.2, 1.2 }, reciprocal = { 0.0625, 3 }, softplus = { -4, 4 },
}
local predicates = { isnan = true, isinf = true, isfinite = true, logical_not = true }

local function dyadic_table(shape, lo, hi, step)
  step = step or 16
  return H.nested(shape, function()
    return math.floor(H.uniform(lo, hi) * step + 0.5) / step
  end)
end

local float_tol = {
  float32 = { 2e-6, 1e-6 }, float64 = { 1e-12, 1e-14 },
  float16 = { 2e-3, 1e-3 }, bfloat16 = { 1.6e-2, 1e-2 },
}

-- Checks f(x) against ref on every layout of table t, and on a zero-size input.
local function check_layouts(what, f, ref, t, dtype, out_dtype, tol)
  for _, v in ipairs(H.variants(t, { dtype = dtype })) do
    local layout, x, xt = v[1], v[2], v[3]
    local y = f(x)
    local label = ('%s %s %s'):format(what, dtype, layout)
    assert.are.equal(out_dtype, y:dtype(), label)
    H.assert_close(y, H.map(ref, xt), tol[1], tol[2], label)
  end
  local e = f(H.empty_variant(3, { dtype = dtype }))
  assert.are.same({ 0, 3 }, { e:size(1), e:size(2) })
  assert.are.equal(out_dtype, e:dtype())
end

describe('unary ops on floats', function()
  for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
    it('match the references on every layout in ' .. dtype, function()
      H.seed(11)
      for name, ref in pairs(unary_refs) do
        local d = domains[name] or { -2, 2 }
        local t = dyadic_table({ 5, 7 }, d[1], d[2])
        local out = predicates[name] and 'bool' or dtype
        check_layouts(name, function(x) return x[name](x) end, ref, t, dtype, out, float_tol[dtype])
      end
      local t = dyadic_table({ 5, 7 }, -2, 2)
      check_layouts('gelu tanh', function(x) return x:gelu('tanh') end, gelu_tanh, t, dtype, dtype,
        float_tol[dtype])
    end)
  end

  it('treat special values as PyTorch does', function()
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
      local x = ember.tensor({ inf, -inf, nan, 0, -1.5 }, { dtype = dtype })
      assert.are.same({ false, false, true, false, false }, x:isnan():totable())
      assert.are.same({ true, true, false, false, false }, x:isinf():totable())
      assert.are.same({ false, false, false, true, true }, x:isfinite():totable())
      assert.are.same({ false, false, false, true, false }, x:logical_not():totable())
      H.assert_close(x:sign(), { 1, -1, 0, 0, -1 }) -- sign(NaN) is 0
      H.assert_close(x:relu(), { inf, 0, nan, 0, 0 }) -- NaN stays NaN
      H.assert_close(x:exp(), { inf, 0, nan, 1, math.exp(-1.5) }, 2e-3, 1e-3)
    end
  end)

  it('round half to even, softplus above its threshold, and tell gelu from its approximation',
    function()
      local r = ember.tensor({ 0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -3.5, 2.4999 }):round()
      assert.are.same({ 0, 2, 2, -0, -2, 4, -4, 2 }, r:totable())
      assert.are.equal(21, ember.tensor({ 21 }, { dtype = 'float64' }):softplus():item())
      local s = ember.tensor({ 19.5 }, { dtype = 'float64' }):softplus():item()
      assert.is_true(s > 19.5 and math.abs(s - math.log(1 + math.exp(19.5))) < 1e-12)
      local g = ember.tensor({ 1.5 }, { dtype = 'float64' })
      assert.is_true(math.abs(g:gelu():item() - g:gelu('tanh'):item()) > 1e-5)
      -- softplus with PyTorch's beta and threshold
      local x = ember.tensor({ -1, 0.5, 3 }, { dtype = 'float64' })
      H.assert_close(x:softplus(2, 4), { math.log(1 + math.exp(-2)) / 2,
        math.log(1 + math.exp(1)) / 2, 3 }, 1e-12, 1e-14)
    end)
end)

local int_dtypes = { 'int8', 'uint8', 'int16', 'int32', 'int64' }

describe('unary ops on integers and bools', function()
  local int_refs = {
    neg = function(x) return -x end, abs = math.abs, sign = sign, square = function(x) return x * x end,
    relu = function(x) return x > 0 and x or 0 end, floor = function(x) return x end,
    ceil = function(x) return x end, round = function(x) return x end, trunc = function(x) return x end,
    bitwise_not = function(x) return -x - 1 end,
  }
  it('keep the integer dtype where PyTorch does, on every layout', function()
    H.seed(12)
    for _, dtype in ipairs(int_dtypes) do
      local lo = dtype == 'uint8' and 0 or -9
      local t = H.nested({ 4, 6 }, function() return math.floor(H.uniform(lo, 10)) end)
      for name, ref in pairs(int_refs) do
        if not (dtype == 'uint8' and (name == 'neg' or name == 'bitwise_not')) then
          check_layouts(name, function(x) return x[name](x) end, ref, t, dtype, dtype, { 0, 0 })
        end
      end
      for _, name in ipairs({ 'isnan', 'isinf', 'isfinite', 'logical_not' }) do
        check_layouts(name, function(x) return x[name](x) end, unary_refs[name], t, dtype, 'bool',
          { 0, 0 })
      end
      -- transcendental ops compute integers in float32
      check_layouts('exp', function(x) return x:exp() end, math.exp, t, dtype, 'float32',
        float_tol.float32)
      check_layouts('sigmoid', function(x) return x:sigmoid() end, unary_refs.sigmoid, t, dtype,
        'float32', float_tol.float32)
    end
  end)

  it('wrap around in uint8 and at the edges of signed types', function()
    assert.are.same({ 255, 0, 249 }, ember.tensor({ 1, 0, 7 }, { dtype = 'uint8' }):neg():totable())
    assert.are.same({ 254, 255 }, ember.tensor({ 1, 0 }, { dtype = 'uint8' }):bitwise_not():totable())
    assert.are.same({ -128, 127 }, ember.tensor({ -128, -127 }, { dtype = 'int8' }):abs():totable())
    assert.are.same({ -2147483648 }, ember.tensor({ -2147483648 }, { dtype = 'int32' }):neg():totable())
    assert.are.same({ 24464 }, ember.tensor({ 300 }, { dtype = 'int16' }):square():totable())
  end)

  it('apply the logical meaning on bool tensors', function()
    local b = ember.tensor({ true, false, true })
    assert.are.same({ false, true, false }, b:logical_not():totable())
    assert.are.same({ false, true, false }, b:bitwise_not():totable())
    assert.are.same({ true, false, true }, b:sign():totable())
    assert.are.equal('float32', b:exp():dtype())
    H.assert_close(b:exp(), { math.exp(1), 1, math.exp(1) })
  end)

  it('reject what PyTorch rejects', function()
    local b = ember.tensor({ true, false })
    H.assert_error(function() return b:neg() end, 'neg: not supported for bool tensors (use logical_not)')
    H.assert_error(function() return -b end, 'neg: not supported for bool tensors')
    H.assert_error(function() return b:abs() end, 'abs: not supported for bool tensors')
    H.assert_error(function() return b:square() end, 'square: not supported for bool tensors')
    H.assert_error(function() return b:relu() end, 'relu: not supported for bool tensors')
    H.assert_error(function() return b:floor() end, 'floor: not supported for bool tensors')
    H.assert_error(function() return b:round() end, 'round: not supported for bool tensors')
    local i = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    for _, name in ipairs({ 'gelu', 'silu', 'softplus' }) do
      H.assert_error(function() return i[name](i) end,
        name .. ': expected a floating-point tensor, got int32')
    end
    H.assert_error(function() return b:gelu('tanh') end, 'gelu_tanh: expected a floating-point tensor, got bool')
    H.assert_error(function() return ember.ones(2):bitwise_not() end,
      'bitwise_not: expected an integer or bool tensor, got float32')
  end)
end)

describe('in-place unary ops', function()
  it('write through a view into its base, and cast or refuse by dtype', function()
    local base = ember.tensor({ { 1, 4, 9 }, { 16, 25, 36 } })
    local col = base[{ {}, 2 }]
    assert.are.equal(col, col:sqrt_())
    H.assert_close(base, { { 1, 2, 9 }, { 16, 5, 36 } })
    local t = ember.tensor({ { 1, 2 }, { 3, 4 } }):t()
    t:neg_()
    H.assert_close(t, { { -1, -3 }, { -2, -4 } })
    local f = ember.tensor({ nan, 1 })
    f:isnan_() -- a bool result stored into float32
    H.assert_close(f, { 1, 0 })
    local i = ember.tensor({ 4, 9 }, { dtype = 'int32' })
    H.assert_error(function() i:sqrt_() end,
      'sqrt: result type float32 cannot be stored in place into a int32 tensor')
    H.assert_error(function() ember.ones(3):expand(2, 3):exp_() end,
      'exp: cannot write in place into an expanded tensor')
    local h = ember.tensor({ 0.25, 4 }, { dtype = 'float16' })
    h:sqrt_()
    H.assert_close(h, { 0.5, 2 })
  end)
end)

-- ---- binary ---------------------------------------------------------------------------------
local function bool_of(f) return function(a, b) return f(a, b) end end
local float_binary = {
  add = function(a, b) return a + b end,
  sub = function(a, b) return a - b end,
  mul = function(a, b) return a * b end,
  div = function(a, b) return a / b end,
  floor_divide = floordiv,
  remainder = pymod,
  fmod = math.fmod,
  maximum = math.max,
  minimum = math.min,
  atan2 = math.atan2,
  eq = bool_of(function(a, b) return a == b end),
  ne = bool_of(function(a, b) return a ~= b end),
  lt = bool_of(function(a, b) return a < b end),
  le = bool_of(function(a, b) return a <= b end),
  gt = bool_of(function(a, b) return a > b end),
  ge = bool_of(function(a, b) return a >= b end),
  logical_and = function(a, b) return truthy(a) and truthy(b) end,
  logical_or = function(a, b) return truthy(a) or truthy(b) end,
  logical_xor = function(a, b) return truthy(a) ~= truthy(b) end,
}
local bool_out = { eq = 1, ne = 1, lt = 1, le = 1, gt = 1, ge = 1, logical_and = 1, logical_or = 1,
  logical_xor = 1 }
local needs_nonzero = { div = 1, floor_divide = 1, remainder = 1, fmod = 1 }

-- a op b for every layout of a, with b contiguous, b a broadcast row, and the operands swapped.
local function check_binary(name, ref, ta, tb, dtype, out_dtype, tol)
  local b = ember.tensor(tb, { dtype = dtype })
  local row = ember.tensor({ tb[1] }, { dtype = dtype })
  local rows = {}
  for i = 1, #ta do rows[i] = tb[1] end
  for _, v in ipairs(H.variants(ta, { dtype = dtype })) do
    local layout, a, at = v[1], v[2], v[3]
    local label = ('%s %s %s'):format(name, dtype, layout)
    local r = a[name](a, b)
    assert.are.equal(out_dtype, r:dtype(), label)
    H.assert_close(r, H.map(ref, at, tb), tol[1], tol[2], label)
    H.assert_close(a[name](a, row), H.map(ref, at, rows), tol[1], tol[2], label .. ' row')
    H.assert_close(b[name](b, a), H.map(ref, tb, at), tol[1], tol[2], label .. ' swapped')
  end
  local e = H.empty_variant(3, { dtype = dtype })
  local r = e[name](e, ember.tensor({ tb[1][1], tb[1][2], tb[1][3] }, { dtype = dtype }))
  assert.are.same({ 0, 3 }, { r:size(1), r:size(2) })
  assert.are.equal(out_dtype, r:dtype())
end

describe('binary ops on floats', function()
  for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
    it('match the references on every layout in ' .. dtype, function()
      H.seed(21)
      local ta = dyadic_table({ 5, 7 }, -3, 3, 4) -- quarter steps: many ties for comparisons
      local tb = dyadic_table({ 5, 7 }, -3, 3, 4)
      local nz = H.map(function(v) return v == 0 and 1.25 or v end, tb)
      for name, ref in pairs(float_binary) do
        local out = bool_out[name] and 'bool' or dtype
        check_binary(name, ref, ta, needs_nonzero[name] and nz or tb, dtype, out, float_tol[dtype])
      end
      local pa = dyadic_table({ 5, 7 }, 0.25, 3)
      check_binary('pow', math.pow, pa, tb, dtype, dtype, float_tol[dtype])
    end)
  end

  it('propagate NaN through maximum and minimum, and divide by zero as IEEE does', function()
    local a = ember.tensor({ nan, 1, 2, nan }, { dtype = 'float64' })
    local b = ember.tensor({ 1, nan, 1, nan }, { dtype = 'float64' })
    H.assert_close(a:maximum(b), { nan, nan, 2, nan })
    H.assert_close(a:minimum(b), { nan, nan, 1, nan })
    local x = ember.tensor({ 1, -1, 0, 5 })
    H.assert_close(x / 0, { inf, -inf, nan, inf })
    H.assert_close(x:floor_divide(0), { inf, -inf, nan, inf })
    H.assert_close(ember.tensor({ -0.5 }):floor_divide(2), { -1 })
    H.assert_close(ember.tensor({ 5.5, -5.5 }):remainder(-2), { -0.5, -1.5 })
    H.assert_close(ember.tensor({ 5.5, -5.5 }):fmod(-2), { 1.5, -1.5 })
  end)

  it('take numbers on either side, with the fast powers exact', function()
    local t = { { 0.5, 1.5, 2 }, { 4, 0.25, 3 } }
    local x = ember.tensor(t, { dtype = 'float64' })
    local function ref(f) return H.map(f, t) end
    H.assert_close(2 - x, ref(function(v) return 2 - v end))
    H.assert_close(x - 2, ref(function(v) return v - 2 end))
    H.assert_close(x / 2, ref(function(v) return v / 2 end))
    H.assert_close(2 / x, ref(function(v) return 2 / v end))
    H.assert_close(2 ^ x, ref(function(v) return 2 ^ v end), 1e-12, 1e-14)
    H.assert_close(x % 0.75, ref(function(v) return pymod(v, 0.75) end), 1e-12, 1e-14)
    H.assert_close(-x, ref(function(v) return -v end))
    for _, e in ipairs({ 2, 0.5, -0.5, -1, 3, 1, 0, -2 }) do
      H.assert_close(x ^ e, ref(function(v) return v ^ e end), 1e-12, 1e-14, 'x ^ ' .. e)
      H.assert_close(x:float() ^ e, ref(function(v) return v ^ e end), 2e-6, 1e-6, 'f32 x ^ ' .. e)
    end
    H.assert_close(ember.maximum(1, x), ref(function(v) return math.max(1, v) end))
    assert.are.same({ { false, true, true }, { true, false, true } }, x:gt(1):totable())
    assert.are.same({ { true, true, false }, { false, true, false } }, ember.lt(x, 2):totable())
    assert.are.same({ { false, false, true }, { false, false, false } }, x:eq(2):totable())
  end)

  it('add and sub take alpha', function()
    local a, b = ember.tensor({ 1, 2 }), ember.tensor({ 10, 20 })
    H.assert_close(a:add(b, 0.5), { 6, 12 })
    H.assert_close(a:sub(b, 2), { -19, -38 })
    H.assert_close(a:add(3, 2), { 7, 8 })
    local h = ember.tensor({ 1, 2 }, { dtype = 'float16' })
    H.assert_close(h:add(ember.tensor({ 4, 8 }, { dtype = 'float16' }), 0.25), { 2, 4 })
    local i = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    H.assert_close(i:add(ember.tensor({ 10, 20 }, { dtype = 'int32' }), 3), { 31, 62 })
    H.assert_close(i:sub(ember.tensor({ 10, 20 }, { dtype = 'int32' }), 3), { -29, -58 })
    assert.are.equal('int32', i:add(i, -2):dtype())
    a:add_(b, -1)
    H.assert_close(a, { -9, -18 })
  end)

  it('divide with a rounding mode', function()
    local x = ember.tensor({ 7, -7, 7.5, -7.5 })
    H.assert_close(x:div(2, 'trunc'), { 3, -3, 3, -3 })
    H.assert_close(x:div(2, 'floor'), { 3, -4, 3, -4 })
    local i = ember.tensor({ 7, -7, 9, -9 }, { dtype = 'int64' })
    local q = i:div(ember.tensor({ 2, 2, -4, -4 }, { dtype = 'int64' }), 'trunc')
    assert.are.equal('int64', q:dtype())
    assert.are.same({ 3, -3, -2, 2 }, q:totable())
    assert.are.equal('float32', i:div(2):dtype())
    H.assert_error(function() return x:div(2, 'round') end, "div: rounding_mode must be nil, 'trunc' or 'floor'")
  end)
end)

describe('binary ops on integers', function()
  local int_binary = {
    add = float_binary.add, sub = float_binary.sub, mul = float_binary.mul,
    floor_divide = floordiv, remainder = pymod, fmod = math.fmod,
    maximum = math.max, minimum = math.min,
    eq = float_binary.eq, lt = float_binary.lt, ge = float_binary.ge, ne = float_binary.ne,
    logical_and = float_binary.logical_and, logical_xor = float_binary.logical_xor,
    bitwise_and = function(a, b) return bit.band(a, b) end,
    bitwise_or = function(a, b) return bit.bor(a, b) end,
    bitwise_xor = function(a, b) return bit.bxor(a, b) end,
  }
  it('match the references on every layout', function()
    H.seed(31)
    for _, dtype in ipairs(int_dtypes) do
      local lo = dtype == 'uint8' and 0 or -10
      local ta = H.nested({ 4, 6 }, function() return math.floor(H.uniform(lo, 11)) end)
      local tb = H.nested({ 4, 6 }, function() return math.floor(H.uniform(lo, 11)) end)
      local nz = H.map(function(v) return v == 0 and 3 or v end, tb)
      local anz = H.map(function(v) return v == 0 and -4 % 11 or v end, ta) -- swapped divisors
      for name, ref in pairs(int_binary) do
        local skip = dtype == 'uint8' and name == 'sub'
        if not skip then
          check_binary(name, ref, needs_nonzero[name] and anz or ta, needs_nonzero[name] and nz or tb, dtype,
            bool_out[name] and 'bool' or dtype, { 0, 0 })
        end
      end
      -- small enough that both a ^ b and b ^ a fit in int8
      local pb = H.map(function(v) return math.abs(v) % 4 end, tb)
      local pa = H.map(function(v) return v % 4 end, ta)
      check_binary('pow', math.pow, pa, pb, dtype, dtype, { 0, 0 })
      check_binary('div', float_binary.div, ta, nz, dtype, 'float32', float_tol.float32)
      check_binary('atan2', math.atan2, ta, nz, dtype, 'float32', float_tol.float32)
    end
  end)

  it('wrap around instead of overflowing', function()
    local i32 = ember.tensor({ 2147483647, -2147483648 }, { dtype = 'int32' })
    assert.are.same({ -2147483648, 2147483647 }, (i32 + ember.tensor({ 1, -1 }, { dtype = 'int32' })):totable())
    assert.are.same({ -2, 0 }, (i32 * 2):totable())
    assert.are.same({ -128 }, (ember.tensor({ 127 }, { dtype = 'int8' }) + 1):totable())
    assert.are.same({ 255 }, (ember.tensor({ 0 }, { dtype = 'uint8' }) - 1):totable())
    assert.are.same({ 24464 }, (ember.tensor({ 300 }, { dtype = 'int16' }) * 300):totable())
    assert.are.same({ -131071 }, (ember.tensor({ 65535 }, { dtype = 'int32' }) * 65535):totable())
    local big = ember.tensor({ 2 ^ 62 }, { dtype = 'int64' })
    local min64 = big * 2 -- 2^63 wraps to INT64_MIN
    assert.are.equal(-2 ^ 63, min64:item())
    assert.are.equal(0, (big * 4):item())
    assert.are.equal(-2 ^ 63, min64:floor_divide(-1):item()) -- INT64_MIN / -1 does not trap
    assert.are.equal(0, min64:remainder(-1):item())
    assert.are.equal(0, min64:fmod(-1):item())
    assert.are.equal(-2 ^ 63, (-min64):item())
    assert.are.equal(-2 ^ 63, min64:abs():item())
  end)

  it('floor, truncate and take Python remainders with negative operands', function()
    local a = ember.tensor({ 7, -7, 7, -7 }, { dtype = 'int32' })
    local b = ember.tensor({ 2, 2, -2, -2 }, { dtype = 'int32' })
    assert.are.same({ 3, -4, -4, 3 }, a:floor_divide(b):totable())
    assert.are.same({ 1, 1, -1, -1 }, a:remainder(b):totable())
    assert.are.same({ 1, -1, 1, -1 }, a:fmod(b):totable())
    assert.are.same({ 1, 1, -1, -1 }, (a % b):totable())
  end)

  it('shift with PyTorch semantics for large and negative amounts', function()
    local one = ember.tensor({ 1, 1, 1, 1, 3 }, { dtype = 'int32' })
    local by = ember.tensor({ 31, 32, -1, 40, 2 }, { dtype = 'int32' })
    assert.are.same({ -2147483648, 0, 0, 0, 12 }, one:bitwise_left_shift(by):totable())
    local v = ember.tensor({ -8, -8, 8, 8, -8 }, { dtype = 'int32' })
    local s = ember.tensor({ 1, 40, 40, -3, 31 }, { dtype = 'int32' })
    assert.are.same({ -4, -1, 0, 0, -1 }, v:bitwise_right_shift(s):totable())
    assert.are.same({ -128, 0 }, ember.tensor({ 1, 1 }, { dtype = 'int8' })
      :bitwise_left_shift(ember.tensor({ 7, 8 }, { dtype = 'int8' })):totable())
    assert.are.same({ 0, 128 }, ember.tensor({ 1, 1 }, { dtype = 'uint8' })
      :bitwise_left_shift(ember.tensor({ 8, 7 }, { dtype = 'uint8' })):totable())
    assert.are.equal(2 ^ 62, ember.tensor({ 1 }, { dtype = 'int64' }):bitwise_left_shift(62):item())
    assert.are.equal(0, ember.tensor({ 1 }, { dtype = 'int64' }):bitwise_left_shift(64):item())
  end)

  it('raise integer powers exactly and refuse negative exponents', function()
    local b = ember.tensor({ 3, -2, 0, 2, -1 }, { dtype = 'int64' })
    assert.are.same({ 81, 16, 0, 16, 1 }, (b ^ 4):totable())
    assert.are.same({ 1, 1, 1, 1, 1 }, b:pow(0):totable())
    assert.are.same({ -2147483648 }, (ember.tensor({ 2 }, { dtype = 'int32' }) ^ 31):totable())
    assert.are.same({ 2 ^ 40 }, (ember.tensor({ 2 }, { dtype = 'int64' }) ^ 40):totable())
    assert.are.equal('float32', (b ^ 0.5):dtype())
    H.assert_error(function() return b ^ -1 end, 'pow: integers to negative integer powers are not allowed')
    -- checked before the exponent is cast: in uint8, -1 would become 255
    H.assert_error(function() return ember.tensor({ 2 }, { dtype = 'uint8' }) ^ -1 end,
      'pow: integers to negative integer powers are not allowed')
    H.assert_error(function() return ember.tensor({ 2 }, { dtype = 'uint8' }):pow(ember.tensor(-2, { dtype = 'int64' })) end,
      'pow: integers to negative integer powers are not allowed')
    H.assert_error(function() return b:pow(ember.tensor({ 1, 2, -1, 0, 1 }, { dtype = 'int64' })) end,
      'pow: integers to negative integer powers are not allowed')
  end)

  it('refuse integer division by zero instead of crashing', function()
    for _, dtype in ipairs(int_dtypes) do
      local a = ember.tensor({ 5, 6 }, { dtype = dtype })
      local z = ember.tensor({ 1, 0 }, { dtype = dtype })
      H.assert_error(function() return a:floor_divide(z) end, 'floor_divide: integer division by zero')
      H.assert_error(function() return a:remainder(0) end, 'remainder: integer division by zero')
      H.assert_error(function() return a % 0 end, 'remainder: integer division by zero')
      H.assert_error(function() return a:fmod(z) end, 'fmod: integer division by zero')
      H.assert_close(a / z, { 5, inf }) -- true division is float
      -- in place, the error comes after the loop: elements before the zero may be written
      H.assert_error(function() a:floor_divide_(0) end, 'floor_divide: integer division by zero')
    end
  end)
end)

describe('binary ops on bools', function()
  -- 0/1 numbers stored as bool (H.map cannot carry `false` through its argument tables)
  local ta = { { 1, 0, 1 }, { 0, 0, 1 } }
  local tb = { { 1, 1, 0 }, { 0, 1, 1 } }
  local function t(v) return v == 1 end
  local refs = {
    add = function(a, b) return t(a) or t(b) end, mul = function(a, b) return t(a) and t(b) end,
    maximum = function(a, b) return t(a) or t(b) end, minimum = function(a, b) return t(a) and t(b) end,
    eq = function(a, b) return a == b end, ne = function(a, b) return a ~= b end,
    lt = function(a, b) return a < b end, le = function(a, b) return a <= b end,
    gt = function(a, b) return a > b end, ge = function(a, b) return a >= b end,
    logical_and = function(a, b) return t(a) and t(b) end,
    logical_or = function(a, b) return t(a) or t(b) end,
    logical_xor = function(a, b) return t(a) ~= t(b) end,
    bitwise_and = function(a, b) return t(a) and t(b) end,
    bitwise_or = function(a, b) return t(a) or t(b) end,
    bitwise_xor = function(a, b) return t(a) ~= t(b) end,
  }
  it('compute logic on every layout', function()
    for name, ref in pairs(refs) do
      check_binary(name, ref, ta, tb, 'bool', 'bool', { 0, 0 })
    end
    local x = ember.tensor(ta, { dtype = 'bool' })
    assert.are.equal('float32', x:div(ember.tensor(tb, { dtype = 'bool' })):dtype())
    assert.are.equal('int64', (x + 2):dtype())
    assert.are.same({ { 3, 2, 3 }, { 2, 2, 3 } }, (x + 2):totable())
  end)

  it('reject arithmetic without a logical meaning', function()
    local x = ember.tensor(ta, { dtype = 'bool' })
    H.assert_error(function() return x - x end, 'sub: not supported for bool tensors, use logical_xor')
    H.assert_error(function() return x:sub(ember.tensor({ 1 }, { dtype = 'int32' })) end,
      'sub: not supported for bool tensors')
    H.assert_error(function() return x:floor_divide(x) end, 'floor_divide: not supported for bool tensors')
    H.assert_error(function() return x:remainder(x) end, 'remainder: not supported for bool tensors')
    H.assert_error(function() return x:pow(x) end, 'pow: not supported for bool tensors')
    H.assert_error(function() return x:bitwise_left_shift(x) end,
      'bitwise_left_shift: expected integer tensors, got bool')
  end)
end)

describe('dtype promotion', function()
  local function t(dtype) return ember.ones(2, { dtype = dtype }) end
  local function s(v, dtype) return ember.tensor(v, { dtype = dtype }) end
  it('follows PyTorch for tensors, 0-dim tensors and numbers', function()
    local cases = {
      { t('int32') + t('float32'), 'float32' }, { t('float32') + t('float64'), 'float64' },
      { t('int32') * 2, 'int32' }, { t('int32') + 2.5, 'float32' }, { t('uint8') + t('int8'), 'int16' },
      { t('bool') + t('int32'), 'int32' }, { s(1, 'float64') + t('float32'), 'float32' },
      { t('float16') + t('bfloat16'), 'float32' }, { t('int64') + s(1.5, 'float64'), 'float64' },
      { t('uint8') + 1000, 'uint8' }, { t('float16') * 2.5, 'float16' }, { t('int8') + s(3, 'int64'), 'int8' },
      { t('int16') + t('int64'), 'int64' }, { 2.5 * t('bfloat16'), 'bfloat16' },
      { s(1, 'int32') + s(1, 'int64'), 'int64' },
    }
    for i, c in ipairs(cases) do assert.are.equal(c[2], c[1]:dtype(), 'case ' .. i) end
    assert.are.same({ true, false }, ember.tensor({ 3, 2 }, { dtype = 'int32' }):gt(2.5):totable())
    assert.are.same({ 2.5, 3.5 }, (ember.tensor({ 1, 2 }, { dtype = 'int32' }) + 1.5):totable())
    assert.are.same({ 232, 233 }, (ember.tensor({ 0, 1 }, { dtype = 'uint8' }) + 1000):totable())
  end)
end)

describe('in-place binary ops', function()
  it('write through views, cast to the destination, and check what they may', function()
    local base = ember.zeros(3, 4)
    local v = base[{ { 2, 3 }, { 1, -1, 2 } }] -- rows 2-3, columns 1 and 3
    v:add_(ember.tensor({ { 1, 2 }, { 3, 4 } }))
    H.assert_close(base, { { 0, 0, 0, 0 }, { 1, 0, 2, 0 }, { 3, 0, 4, 0 } })
    v:mul_(10)
    H.assert_close(base, { { 0, 0, 0, 0 }, { 10, 0, 20, 0 }, { 30, 0, 40, 0 } })
    local i = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    i:add_(ember.tensor({ 10, 20 }, { dtype = 'int64' }))
    assert.are.equal('int32', i:dtype())
    assert.are.same({ 11, 22 }, i:totable())
    local f = ember.tensor({ 1, 2 })
    f:add_(ember.tensor({ 0.5, 0.25 }, { dtype = 'float64' }))
    assert.are.equal('float32', f:dtype())
    H.assert_close(f, { 1.5, 2.25 })
    f:lt_(2) -- bool result stored as 0/1
    H.assert_close(f, { 1, 0 })
    local x = ember.tensor({ { 1, 2 }, { 3, 4 } })
    x:add_(x) -- the same view is fine
    H.assert_close(x, { { 2, 4 }, { 6, 8 } })
    H.assert_error(function() i:add_(2.5) end,
      'add: result type float32 cannot be stored in place into a int32 tensor')
    H.assert_error(function() ember.zeros(3):add_(ember.zeros(2, 3)) end,
      "add: the result's shape [2,3] does not match the in-place tensor's shape [3]")
    H.assert_error(function() ember.zeros(3):expand(2, 3):add_(1) end,
      'add: cannot write in place into an expanded tensor')
    H.assert_error(function() x:add_(x:t()) end, 'add: an input shares memory with the tensor')
    H.assert_error(function() x:mul_(x[1]) end, 'partial overlap')
    local y = ember.zeros(2, 4)
    y[{ {}, { 1, -1, 2 } }]:add_(y[{ {}, { 2, -1, 2 } }]) -- interleaved, no shared element
  end)
end)

describe('large inputs', function()
  local function doubles(x)
    local c = x:to('float64'):contiguous()
    return ffi.cast('double*', c:data_ptr()), c
  end
  it('cross the threading threshold with the same results', function()
    local n = 150001
    local a = ember.arange(n):remainder(997):mul(0.01) -- values 0 .. 9.96
    local b = ember.arange(n):remainder(13):add(1)
    local pa, ka = doubles(a)
    local pb, kb = doubles(b)
    for _, case in ipairs({ { 'add', function(u, v) return u + v end },
      { 'mul', function(u, v) return u * v end }, { 'div', function(u, v) return u / v end } }) do
      local r, keep = doubles(a[case[1]](a, b))
      for i = 0, n - 1, 7 do
        local e = case[2](pa[i], pb[i])
        assert(math.abs(r[i] - e) <= 1e-5 * math.abs(e) + 1e-6, case[1] .. ' at ' .. i)
      end
      local _ = keep
    end
    local e, keep = doubles(a:exp())
    for i = 0, n - 1, 13 do
      assert(math.abs(e[i] - math.exp(pa[i])) <= 2e-6 * math.exp(pa[i]), 'exp at ' .. i)
    end
    -- a transposed operand and a half dtype take the chunked paths
    local m = a:narrow(1, 1, 150000):view(300, 500)
    local tsum, keep2 = doubles(m:t():contiguous() + m:t())
    for i = 0, 149999, 11 do
      local row, col = math.floor(i / 300), i % 300
      assert(math.abs(tsum[i] - 2 * pa[col * 500 + row]) < 1e-5, 'transposed at ' .. i)
    end
    local h, keep3 = doubles(a:half():mul(2))
    for i = 0, n - 1, 17 do
      assert(math.abs(h[i] - 2 * pa[i]) <= 4e-3 * math.abs(pa[i]) + 1e-3, 'half at ' .. i)
    end
    local _ = { ka, kb, keep, keep2, keep3 }
  end)

  -- Outputs past EMBER_STREAM_BYTES (default: half the last-level cache) are written with
  -- streaming stores. The threshold is read once per process, so a child process with a tiny
  -- threshold exercises that path on any machine.
  it('stream large outputs to memory with the same results', function()
    local script = [==[
      package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
      local ember = require 'ember'
      local ffi = require 'ffi'
      local function doubles(x)
        local c = x:to('float64'):contiguous()
        return ffi.cast('double*', c:data_ptr()), c
      end
      local n = 300001
      local a = ember.arange(n):mul(1e-5) -- 0 .. 3
      local b = a * 0.5 + 1
      local pa, ka = doubles(a)
      local pb, kb = doubles(b)
      local function check(r, f, off, what, tol)
        local p, keep = doubles(r)
        local m = r:numel()
        local function at(i)
          local e = f(pa[i + off], pb[i + off])
          if type(e) == 'boolean' then e = e and 1 or 0 end
          if math.abs(p[i] - e) > (tol or 1e-5) * (1 + math.abs(e)) then
            io.write(('%s at %d: got %.9g, expected %.9g'):format(what, i, p[i], e))
            os.exit(1)
          end
        end
        for i = 0, m - 1, 97 do at(i) end
        for i = m - 70, m - 1 do at(i) end -- the tail after the last full chunk
        local _ = keep
      end
      check(a + b, function(x, y) return x + y end, 0, 'add')
      check(a:narrow(1, 2, n - 1) - b:narrow(1, 2, n - 1), function(x, y) return x - y end, 1,
        'sub into an output off the 16-byte boundary')
      check(ember.where(a:gt(1.5), a, b), function(x, y) return x > 1.5 and x or y end, 0, 'where')
      check(a:clamp(0.5, 2.5), function(x) return math.min(math.max(x, 0.5), 2.5) end, 0, 'clamp')
      check(a:half():mul(2), function(x) return 2 * x end, 0, 'float16 mul', 2e-3)
      check(a:bfloat16() + b:bfloat16(), function(x, y) return x + y end, 0, 'bfloat16 add', 1e-2)
      check(a:gt(b:mul(0.9)), function(x, y) return x > 0.9 * y end, 0, 'gt into bool')
      check(a:double():exp(), math.exp, 0, 'float64 exp', 1e-6)
      check(a:lerp(b, 0.25), function(x, y) return x + 0.25 * (y - x) end, 0, 'lerp')
      check(a:addcmul(a, b, 0.5), function(x, y) return x + 0.5 * x * y end, 0, 'addcmul')
      -- a transposed input splits the output into rows of 599 floats, most of them starting
      -- off the 16-byte boundary
      local tr = a:narrow(1, 1, 599 * 500):view(599, 500):t() + 1
      local pt, kt = doubles(tr)
      for i = 0, 599 * 500 - 1, 37 do
        local r, col = math.floor(i / 599), i % 599
        if math.abs(pt[i] - (pa[col * 500 + r] + 1)) > 1e-5 then
          io.write('transposed add at ' .. i)
          os.exit(1)
        end
      end
      local c = a:clone()
      c:mul_(b) -- in place: not streamed, still right
      check(c, function(x, y) return x * y end, 0, 'mul_')
      local _ = { ka, kb, kt }
      io.write('ok')
    ]==]
    local path = os.tmpname()
    local f = assert(io.open(path, 'w'))
    f:write(script)
    f:close()
    local p = io.popen('EMBER_STREAM_BYTES=4096 luajit ' .. path .. ' 2>&1')
    local out = p:read('*a')
    p:close()
    os.remove(path)
    assert.are.equal('ok', out)
  end)

  it('report integer division by zero found on any thread', function()
    local n = 200000
    local a = ember.arange(n, { dtype = 'int32' })
    local z = ember.ones(n, { dtype = 'int32' })
    z[n - 5] = 0
    H.assert_error(function() return a:floor_divide(z) end, 'floor_divide: integer division by zero')
    z[n - 5] = 1
    local q = a:floor_divide(z + 1)
    assert.are.equal(math.floor((n - 1) / 2), q[n])
  end)
end)

describe('operators and errors', function()
  it('refuse Lua comparisons instead of answering wrongly', function()
    local x, y = ember.ones(2), ember.ones(2)
    H.assert_error(function() return x < y end, 'use x:lt(y) for elementwise comparison')
    H.assert_error(function() return x > 1 end, 'use x:lt(y) for elementwise comparison')
    H.assert_error(function() return x <= y end, 'use x:le(y) for elementwise comparison')
    H.assert_error(function() return 1 >= x end, 'use x:le(y) for elementwise comparison')
    assert.is_false(x == y) -- identity, not elementwise
    assert.is_true(x == x)
  end)

  it('name the op, the problem and the operands', function()
    H.assert_error(function() return ember.zeros(3, 4) + ember.zeros(5) end,
      'add: shapes [3,4] and [5] cannot broadcast')
    H.assert_error(function() return ember.ones(2):bitwise_and(ember.ones(2)) end,
      'bitwise_and: expected integer or bool tensors, got float32')
    H.assert_error(function() return ember.ones(2, { dtype = 'int32' }):bitwise_or(1.5) end,
      'bitwise_or: expected integer or bool tensors, got float32')
    H.assert_error(function() return ember.ones(2):add('x') end, 'add: expected a tensor or a number, got string')
    H.assert_error(function() return ember.mul({}, ember.ones(2)) end, 'mul: expected a tensor or a number, got table')
    H.assert_error(function() return ember.ones(2, { dtype = 'int32' }):add(ember.ones(2, { dtype = 'int32' }), 2.5) end,
      'add: alpha must be an integer for int32 tensors, got 2.5')
  end)
end)
