-- cast_spec: to() between every pair of the ten dtypes against a reference conversion written
-- here in plain Lua (IEEE rounding to float32/float16/bfloat16 computed from the definition,
-- truncation toward zero and wrap-around for integers, != 0 for bool), on contiguous and
-- strided sources, plus the known values of the 16-bit formats and the cases that must not crash.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'

local inf, nan = math.huge, 0 / 0
local dtypes = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
  'int64', 'bool' }

-- ---- reference conversions --------------------------------------------------------------------
local function round_even(x)
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 then return f + 1 elseif d < 0.5 then return f end
  return f % 2 == 0 and f or f + 1
end

-- Rounds v to a binary format with `mant` explicit mantissa bits, smallest normal exponent
-- emin and largest finite value maxv (ties to even, subnormals, overflow to infinity).
local function to_format(v, mant, emin, maxv)
  if v ~= v or v == 0 or math.abs(v) == inf then return v end
  local a = math.abs(v)
  local e = emin
  if a >= 2 ^ emin then
    e = math.floor(math.log(a) / math.log(2))
    while 2 ^ e > a do e = e - 1 end
    while 2 ^ (e + 1) <= a do e = e + 1 end
  end
  local q = 2 ^ (e - mant)
  local r = round_even(a / q) * q
  if r > maxv then r = inf end
  return v < 0 and -r or r
end

local function f32(v) return to_format(v, 23, -126, 3.4028234663852886e38) end
-- float16 and bfloat16 convert from float64 through float32, as PyTorch's constructors do.
local function f16(v) return to_format(f32(v), 10, -14, 65504) end
local function bf16(v) return to_format(f32(v), 7, -126, 3.3895313892515355e38) end

local int_bits = { int8 = 8, uint8 = 8, int16 = 16, int32 = 32, int64 = 64 }
local function to_int(v, dtype)
  if v ~= v then return 0 end -- NaN gives 0
  local t = v < 0 and math.ceil(v) or math.floor(v) -- toward zero
  local bits = int_bits[dtype]
  if bits == 64 then return t end
  local m = 2 ^ bits
  t = t % m -- wrap around (the values used are exact in double)
  if dtype ~= 'uint8' and t >= m / 2 then t = t - m end
  return t
end

local function convert(v, dtype)
  if dtype == 'float64' then return v end
  if dtype == 'float32' then return f32(v) end
  if dtype == 'float16' then return f16(v) end
  if dtype == 'bfloat16' then return bf16(v) end
  if dtype == 'bool' then return v ~= 0 end
  return to_int(v, dtype)
end

-- Source values exactly representable in each dtype (so the source holds what the table says).
local sources = {
  float = { 0, 1, -1, 2.5, -2.5, 100.5, -100.5, 0.375, 3.75, -0.125, 200, 0.99609375, -7.75 },
  float32 = { 1 / 3, 70000.5, 1e-8, -123456.78125, 65520, 1e-40 },
  float64 = { 1 / 3, 0.1, 70000, 1e-8, 6e-8, 2 ^ 40 + 0.5, -3e9, 65519.99 },
  int8 = { 0, 1, -1, 7, -7, 100, -100, 127, -128 },
  uint8 = { 0, 1, 7, 100, 127, 128, 200, 255 },
  int16 = { 0, 1, -1, 300, -300, 32767, -32768, 1000 },
  int32 = { 0, 1, -1, 70000, -70000, 2147483647, -2147483648, 16777217 },
  int64 = { 0, 1, -1, 2 ^ 40, -2 ^ 40, 2 ^ 53, 300, -129 },
  bool = { 1, 0, 1, 1, 0 },
}
local function values_for(dtype)
  local v = {}
  for _, x in ipairs(sources.float) do
    if dtype:find('float') or dtype == 'bfloat16' then v[#v + 1] = x end
  end
  for _, x in ipairs(sources[dtype] or {}) do v[#v + 1] = x end
  return v
end

-- The value a source tensor of `dtype` holds for table value x.
local function stored(x, dtype) return dtype == 'bool' and (x ~= 0 and 1 or 0) or convert(x, dtype) end

local function expect(vals, src, dst)
  local out = {}
  for i, x in ipairs(vals) do
    local s = stored(x, src)
    if type(s) == 'boolean' then s = s and 1 or 0 end
    out[i] = convert(s, dst)
  end
  return out
end

describe('casts', function()
  it('convert between every pair of dtypes like the reference', function()
    for _, src in ipairs(dtypes) do
      local vals = values_for(src)
      local x = ember.tensor(vals, { dtype = src })
      for _, dst in ipairs(dtypes) do
        local y = x:to(dst)
        assert.are.equal(dst, y:dtype())
        H.assert_close(y, expect(vals, src, dst), 0, 0, src .. ' -> ' .. dst)
      end
    end
  end)

  it('read strided sources: transposed, sliced and broadcast', function()
    H.seed(51)
    local t = H.nested({ 4, 6 }, function() return math.floor(H.uniform(-300, 300)) / 4 end)
    for _, src in ipairs({ 'float64', 'float32', 'float16', 'int32', 'int64', 'int16' }) do
      local st = H.map(function(v) return stored(v, src) end, t)
      for _, v in ipairs(H.variants(st, { dtype = src })) do
        for _, dst in ipairs(dtypes) do
          local want = H.map(function(s) return convert(s, dst) end, v[3])
          H.assert_close(v[2]:to(dst), want, 0, 0, ('%s %s -> %s'):format(v[1], src, dst))
        end
      end
      local e = ember.zeros(0, 3, { dtype = src }):to('int8')
      assert.are.same({ 0, 3 }, { e:size(1), e:size(2) })
    end
  end)

  it('give the known 16-bit values', function()
    local function half(v) return ember.tensor({ v }, { dtype = 'float64' }):to('float16'):item() end
    local function bfloat(v) return ember.tensor({ v }, { dtype = 'float64' }):to('bfloat16'):item() end
    assert.are.equal(0.333251953125, half(1 / 3))
    assert.are.equal(inf, half(70000))
    assert.are.equal(-inf, half(-70000))
    assert.are.equal(65504, half(65504))
    assert.are.equal(inf, half(65520)) -- halfway to the next binade rounds up to infinity
    assert.are.equal(65504, half(65519))
    assert.are.equal(0, half(1e-8)) -- below half the smallest subnormal
    assert.are.equal(2 ^ -24, half(6e-8)) -- the smallest subnormal
    assert.are.equal(2 ^ -23, half(1e-7))
    assert.are.equal(2 ^ -14, half(2 ^ -14)) -- the smallest normal
    assert.are.equal(1, half(1 + 2 ^ -11)) -- a tie rounds to even
    assert.are.equal(1 + 2 ^ -9, half(1 + 3 * 2 ^ -11))
    assert.are.equal(0.333984375, bfloat(1 / 3))
    assert.are.equal(256, bfloat(257)) -- a tie rounds to even
    assert.are.equal(260, bfloat(259))
    assert.are.equal(inf, bfloat(3.4e38))
    assert.are.equal(true, ember.tensor({ nan }):to('float16'):isnan():item())
    assert.are.equal(true, ember.tensor({ nan }):to('bfloat16'):isnan():item())
  end)

  it('handle NaN, infinities and out-of-range values without crashing', function()
    local x = ember.tensor({ nan, inf, -inf, 1e30, -1e30, 0.5 }, { dtype = 'float64' })
    for _, dst in ipairs({ 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
      local y = x:to(dst)
      assert.are.equal(0, y[1]) -- NaN gives 0
      assert.are.equal(0, y[6])
    end
    assert.are.same({ true, true, true, true, true, true }, x:to('bool'):totable())
    assert.are.same({ false, true }, ember.tensor({ 0, 1e-300 }, { dtype = 'float64' }):to('bool'):totable())
    H.assert_close(x:to('float32'), { nan, inf, -inf, 1.0000000150474662e30, -1.0000000150474662e30, 0.5 })
    H.assert_close(x:to('float16'), { nan, inf, -inf, inf, -inf, 0.5 })
  end)

  it('keep int64 exact beyond 2^53 between integer dtypes', function()
    local big = ember.tensor({ 2 ^ 62 }, { dtype = 'int64' }) + 1
    assert.are.equal(1, tonumber(big:item_int64() - 4611686018427387904LL))
    assert.are.equal(1, big:to('int32'):item()) -- wraps: the low 32 bits
    assert.are.equal(2 ^ 62, big:to('float64'):item())
  end)
end)
