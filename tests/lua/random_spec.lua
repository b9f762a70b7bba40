-- random_spec: Ember's random numbers against an independent reference: a Philox-4x32-10
-- written here in plain Lua (checked on the published Random123 vectors), the documented stream
-- layout, and statistics with bounds loose enough to pass by a wide margin yet tight enough to
-- catch a wrong distribution.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local bit = require 'bit'

-- ---- the reference generator ----------------------------------------------------------------
local U64 = ffi.typeof('uint64_t')
local TWO32 = 4294967296

local function mulhilo(a, b)
  local p = ffi.cast(U64, a) * b
  return tonumber(p / 4294967296ULL), tonumber(p % 4294967296ULL)
end

local function xor3(a, b, c) return bit.bxor(a, b, c) % TWO32 end

local function philox(ctr, key)
  local c0, c1, c2, c3 = ctr[1], ctr[2], ctr[3], ctr[4]
  local k0, k1 = key[1], key[2]
  for _ = 1, 10 do
    local hi0, lo0 = mulhilo(0xD2511F53, c0)
    local hi1, lo1 = mulhilo(0xCD9E8D57, c2)
    c0, c1, c2, c3 = xor3(hi1, c1, k0), lo1, xor3(hi0, c3, k1), lo0
    k0 = (k0 + 0x9E3779B9) % TWO32
    k1 = (k1 + 0xBB67AE85) % TWO32
  end
  return { c0, c1, c2, c3 }
end

-- Word j (0-based) of the stream of `seed` starting at block `offset` (both below 2^53).
local block_cache = {}
local function word(seed, offset, j)
  local c = offset + math.floor(j / 4)
  local k = seed .. ':' .. c
  local b = block_cache[k]
  if not b then
    b = philox({ c % TWO32, math.floor(c / TWO32), 0, 0 }, { seed % TWO32, math.floor(seed / TWO32) })
    block_cache[k] = b
  end
  return b[j % 4 + 1]
end

-- Element i's 64-bit word pair as uint64_t: low word first.
local function word64(seed, offset, i)
  return ffi.cast(U64, word(seed, offset, 2 * i + 1)) * TWO32 + word(seed, offset, 2 * i)
end

-- High 64 bits of x * r for a uint64_t x and r < 2^32.
local function mulhi64(x, r)
  local xh, xl = x / 4294967296ULL, x % 4294967296ULL
  return tonumber((xh * r + (xl * r) / 4294967296ULL) / 4294967296ULL)
end

-- Flat row-major values of any tensor, as Lua numbers.
local function values(x)
  local d = x:to('float64'):contiguous()
  local p = ffi.cast('double*', d:data_ptr())
  local t = {}
  for i = 0, d:numel() - 1 do t[i + 1] = p[i] end
  return t
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] and not (a[i] ~= a[i] and b[i] ~= b[i]) then return false end end
  return true
end

local function mean_var(v)
  local s = 0
  for i = 1, #v do s = s + v[i] end
  local m = s / #v
  local q = 0
  for i = 1, #v do q = q + (v[i] - m) ^ 2 end
  return m, q / (#v - 1)
end

describe('the reference Philox', function()
  it('reproduces the Random123 known-answer vectors', function()
    assert.are.same({ 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8 }, philox({ 0, 0, 0, 0 }, { 0, 0 }))
    local f = 0xffffffff
    assert.are.same({ 0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd }, philox({ f, f, f, f }, { f, f }))
    assert.are.same({ 0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1 },
      philox({ 0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344 }, { 0xa4093822, 0x299f31d0 }))
  end)
end)

describe('the stream', function()
  it('gives rand float32 values bit for bit: 24 bits of word i', function()
    ember.manual_seed(2024)
    local x = ember.rand(3, 5)
    local got = values(x)
    for i = 0, 14 do
      local want = math.floor(word(2024, 0, i) / 256) * 2 ^ -24
      assert.are.equal(want, got[i + 1])
    end
    assert.are.same({ seed = 2024, offset = 4 }, ember.get_rng_state())
  end)

  it('gives rand float64 values from 53 bits of a word pair', function()
    ember.set_rng_state({ seed = 77, offset = 10 })
    local got = values(ember.rand(7, { dtype = 'float64' }))
    for i = 0, 6 do
      local want = tonumber(word64(77, 10, i) / 2048ULL) * 2 ^ -53
      assert.are.equal(want, got[i + 1])
    end
    assert.are.equal(14, ember.get_rng_state().offset) -- ceil(7 * 2 / 4) blocks
  end)

  it('gives randn float32 by Box-Muller on word pairs', function()
    ember.manual_seed(5)
    local got = values(ember.randn(9))
    for i = 0, 8, 2 do
      local u1 = (word(5, 0, i) + 1) * 2 ^ -32
      local u2 = word(5, 0, i + 1) * 2 ^ -32
      local r, t = math.sqrt(-2 * math.log(u1)), 2 * math.pi * u2
      assert.is_true(math.abs(got[i + 1] - r * math.cos(t)) < 1e-5)
      if i + 1 < 9 then assert.is_true(math.abs(got[i + 2] - r * math.sin(t)) < 1e-5) end
    end
  end)

  it('gives randint values by 64-bit multiply-shift', function()
    ember.manual_seed(11)
    local got = values(ember.randint(-50, 50, { 12 }))
    for i = 0, 11 do assert.are.equal(-50 + mulhi64(word64(11, 0, i), 100), got[i + 1]) end
    ember.manual_seed(11)
    local one_based = values(ember.randint(100, { 12 }))
    for i = 0, 11 do assert.are.equal(mulhi64(word64(11, 0, i), 100), one_based[i + 1]) end
  end)

  it('gives bernoulli_ as word < p * 2^32', function()
    ember.manual_seed(3)
    local got = values(ember.zeros(10):bernoulli_(0.4))
    for i = 0, 9 do
      assert.are.equal(word(3, 0, i) * 2 ^ -32 < 0.4 and 1 or 0, got[i + 1])
    end
  end)

  it('gives randperm by Fisher-Yates on word pairs, 1-based', function()
    ember.manual_seed(8)
    local n = 9
    local v = {}
    for i = 0, n - 1 do v[i] = i end
    for k = 0, n - 2 do
      local i = n - 1 - k
      local j = mulhi64(word64(8, 0, k), i + 1)
      v[i], v[j] = v[j], v[i]
    end
    local want = {}
    for i = 0, n - 1 do want[i + 1] = v[i] + 1 end
    local p = ember.randperm(n)
    assert.are.equal('int64', p:dtype())
    assert.are.same(want, values(p))
    assert.are.equal(4, ember.get_rng_state().offset) -- ceil((n - 1) / 2) blocks
  end)
end)

describe('seeding', function()
  local function draws()
    return {
      values(ember.rand(50)), values(ember.randn(50, { dtype = 'float64' })),
      values(ember.randint(0, 1000, { 50 })), values(ember.randperm(50)),
      values(ember.zeros(50):bernoulli_(0.5)),
    }
  end

  it('replays every kind of draw from the same seed', function()
    ember.manual_seed(123)
    local a = draws()
    ember.manual_seed(123)
    local b = draws()
    for k = 1, #a do assert.is_true(same(a[k], b[k]), 'draw ' .. k) end
  end)

  it('gives different streams for different seeds', function()
    ember.manual_seed(123)
    local a = draws()
    ember.manual_seed(124)
    local b = draws()
    for k = 1, #a do assert.is_false(same(a[k], b[k]), 'draw ' .. k) end
  end)

  it('moves on between calls', function()
    ember.manual_seed(1)
    assert.is_false(same(values(ember.rand(20)), values(ember.rand(20))))
  end)

  it('saves and restores the state', function()
    ember.manual_seed(9)
    ember.rand(13)
    local st = ember.get_rng_state()
    local a = draws()
    ember.manual_seed(1000)
    ember.rand(5)
    ember.set_rng_state(st)
    local b = draws()
    for k = 1, #a do assert.is_true(same(a[k], b[k]), 'draw ' .. k) end
  end)

  it('reports the seed, and takes 64-bit and negative seeds', function()
    ember.manual_seed(42)
    assert.are.equal(42, ember.initial_seed())
    ember.manual_seed(0xffffffffffffffffULL)
    assert.is_true(ember.initial_seed() == 0xffffffffffffffffULL)
    local big = values(ember.rand(8))
    ember.manual_seed(-1) -- wraps to 2^64 - 1, as in PyTorch
    assert.is_true(ember.initial_seed() == 0xffffffffffffffffULL)
    assert.is_true(same(big, values(ember.rand(8))))
    ember.manual_seed(2 ^ 63)
    assert.is_true(ember.initial_seed() == 0x8000000000000000ULL)
  end)

  it('does not move the stream for empty tensors', function()
    ember.manual_seed(6)
    ember.rand(0, 3)
    ember.randn(0)
    ember.randint(5, { 0 })
    ember.randperm(0)
    ember.randperm(1)
    ember.zeros(0):uniform_()
    assert.are.equal(0, ember.get_rng_state().offset)
  end)

  it('does not depend on the thread count', function()
    local saved = ember.get_num_threads()
    local function big()
      ember.manual_seed(17)
      return { ember.rand(100003), ember.randn(70001, { dtype = 'float64' }),
        ember.randint(0, 7, { 90001 }, { dtype = 'int16' }),
        ember.zeros(80001, { dtype = 'uint8' }):bernoulli_(0.25) }
    end
    ember.set_num_threads(1)
    local a = big()
    ember.set_num_threads(2)
    local b = big()
    ember.set_num_threads(saved)
    for k = 1, #a do
      local n = a[k]:numel() * a[k]:element_size()
      local pa, pb = ffi.cast('uint8_t*', a[k]:data_ptr()), ffi.cast('uint8_t*', b[k]:data_ptr())
      local diff = 0
      for i = 0, n - 1 do if pa[i] ~= pb[i] then diff = diff + 1 end end
      assert.are.equal(0, diff, 'draw ' .. k)
    end
  end)
end)

describe('distributions', function()
  it('rand is uniform on [0, 1)', function()
    ember.manual_seed(100)
    local v = values(ember.rand(100000))
    local lo, hi = 1, 0
    for i = 1, #v do lo = math.min(lo, v[i]); hi = math.max(hi, v[i]) end
    assert.is_true(lo >= 0 and hi < 1)
    local m, var = mean_var(v)
    assert.is_true(math.abs(m - 0.5) < 0.005, 'mean ' .. m)
    assert.is_true(math.abs(var - 1 / 12) < 0.0015, 'var ' .. var)
    -- deciles hold a tenth each (chi-square, 9 degrees of freedom)
    local bins = {}
    for i = 0, 9 do bins[i] = 0 end
    for i = 1, #v do local b = math.floor(v[i] * 10); bins[b] = bins[b] + 1 end
    local chi2 = 0
    for i = 0, 9 do chi2 = chi2 + (bins[i] - 10000) ^ 2 / 10000 end
    assert.is_true(chi2 < 40, 'chi2 ' .. chi2)
  end)

  it('uniform_(a, b) covers [a, b)', function()
    ember.manual_seed(101)
    local v = values(ember.empty(50000, { dtype = 'float64' }):uniform_(-3, 5))
    local m, var = mean_var(v)
    for i = 1, #v do assert(v[i] >= -3 and v[i] < 5) end
    assert.is_true(math.abs(m - 1) < 0.05, 'mean ' .. m)
    assert.is_true(math.abs(var - 64 / 12) < 0.1, 'var ' .. var)
  end)

  it('randn is standard normal', function()
    for _, dt in ipairs({ 'float32', 'float64' }) do
      ember.manual_seed(102)
      local v = values(ember.randn(100000, { dtype = dt }))
      local m, var = mean_var(v)
      assert.is_true(math.abs(m) < 0.02, dt .. ' mean ' .. m)
      assert.is_true(math.abs(var - 1) < 0.025, dt .. ' var ' .. var)
      local within, k4 = 0, 0
      for i = 1, #v do
        if math.abs(v[i]) < 1 then within = within + 1 end
        k4 = k4 + v[i] ^ 4
      end
      assert.is_true(math.abs(within / #v - 0.6827) < 0.008, dt .. ' within 1 sigma ' .. within / #v)
      assert.is_true(math.abs(k4 / #v - 3) < 0.1, dt .. ' fourth moment ' .. k4 / #v)
    end
  end)

  it('normal_ and normal scale and shift', function()
    ember.manual_seed(103)
    local m, var = mean_var(values(ember.zeros(50000):normal_(10, 3)))
    assert.is_true(math.abs(m - 10) < 0.1 and math.abs(var - 9) < 0.3, m .. ' ' .. var)
    local n = ember.normal(-2, 0.5, 4, 5, { dtype = 'float64' })
    assert.are.same({ 4, 5 }, { n:size(1), n:size(2) })
    assert.are.equal('float64', n:dtype())
    local m2 = mean_var(values(ember.normal(-2, 0.5, { 40000 })))
    assert.is_true(math.abs(m2 + 2) < 0.02, 'mean ' .. m2)
    H.assert_close(ember.zeros(3):normal_(4, 0), { 4, 4, 4 })
  end)

  it('randint is uniform over [low, high) (chi-square on 10 bins)', function()
    ember.manual_seed(104)
    local v = values(ember.randint(-5, 5, { 100000 }))
    local bins = {}
    for i = 1, #v do
      assert(v[i] == math.floor(v[i]) and v[i] >= -5 and v[i] < 5)
      bins[v[i]] = (bins[v[i]] or 0) + 1
    end
    local chi2 = 0
    for k = -5, 4 do chi2 = chi2 + ((bins[k] or 0) - 10000) ^ 2 / 10000 end
    assert.is_true(chi2 < 40, 'chi2 ' .. chi2)
  end)

  it('randint handles ranges far above 2^32', function()
    ember.manual_seed(105)
    local lo, hi = -2 ^ 52, 2 ^ 52
    local v = values(ember.randint(lo, hi, { 20000 }))
    local m = 0
    for i = 1, #v do assert(v[i] >= lo and v[i] < hi); m = m + v[i] / #v end
    assert.is_true(math.abs(m) < 0.05 * hi, 'mean ' .. m)
  end)

  it('randperm is a permutation, every order equally likely', function()
    ember.manual_seed(106)
    local v = values(ember.randperm(1000))
    local seen = {}
    for i = 1, #v do seen[v[i]] = true end
    for k = 1, 1000 do assert(seen[k], 'missing ' .. k) end
    assert.are.equal(1000, #v)
    local counts = {}
    for _ = 1, 6000 do
      local p = values(ember.randperm(3))
      local key = table.concat(p, ',')
      counts[key] = (counts[key] or 0) + 1
    end
    local chi2, kinds = 0, 0
    for _, c in pairs(counts) do chi2 = chi2 + (c - 1000) ^ 2 / 1000; kinds = kinds + 1 end
    assert.are.equal(6, kinds)
    assert.is_true(chi2 < 30, 'chi2 ' .. chi2)
    assert.are.same({ 1 }, values(ember.randperm(1)))
  end)

  it('bernoulli_ has rate p, and p = 0 / p = 1 are exact', function()
    ember.manual_seed(107)
    local m = mean_var(values(ember.zeros(100000):bernoulli_(0.3)))
    assert.is_true(math.abs(m - 0.3) < 0.01, 'rate ' .. m)
    local zeros, ones = values(ember.ones(1000):bernoulli_(0)), values(ember.zeros(1000):bernoulli_(1))
    for i = 1, 1000 do assert(zeros[i] == 0 and ones[i] == 1) end
    local b = ember.zeros(4, { dtype = 'bool' }):bernoulli_(1)
    assert.are.same({ true, true, true, true }, b:totable())
  end)
end)

describe('dtypes', function()
  it('rand fills float16, bfloat16 and float64 within [0, 1)', function()
    for _, dt in ipairs({ 'float16', 'bfloat16', 'float64', 'float32' }) do
      ember.manual_seed(200)
      local x = ember.rand(20000, { dtype = dt })
      assert.are.equal(dt, x:dtype())
      local v = values(x)
      local m = 0
      for i = 1, #v do assert(v[i] >= 0 and v[i] < 1, dt .. ' value ' .. v[i]); m = m + v[i] / #v end
      assert.is_true(math.abs(m - 0.5) < 0.02, dt .. ' mean ' .. m)
    end
  end)

  it('uniform_ never returns the upper bound, even after rounding', function()
    ember.manual_seed(201)
    for _, dt in ipairs({ 'bfloat16', 'float16', 'float32' }) do
      local v = values(ember.empty(50000, { dtype = dt }):uniform_(1, 2))
      for i = 1, #v do assert(v[i] >= 1 and v[i] < 2, dt .. ' value ' .. v[i]) end
    end
  end)

  it('randn fills float16 and bfloat16', function()
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      ember.manual_seed(202)
      local v = values(ember.randn(20000, { dtype = dt }))
      local m, var = mean_var(v)
      assert.is_true(math.abs(m) < 0.05 and math.abs(var - 1) < 0.06, dt .. ' ' .. m .. ' ' .. var)
    end
  end)

  it('randint fills every integer dtype, float and bool', function()
    local cases = {
      { 'int8', -128, 128 }, { 'uint8', 0, 256 }, { 'int16', -300, 300 }, { 'int32', -7, 8 },
      { 'int64', 0, 3 }, { 'float32', -10, 10 }, { 'float64', 0, 5 }, { 'bool', 0, 2 },
      { 'float16', -2048, 2049 },
    }
    for _, c in ipairs(cases) do
      ember.manual_seed(203)
      local x = ember.randint(c[2], c[3], { 20000 }, { dtype = c[1] })
      assert.are.equal(c[1], x:dtype())
      local v = values(x)
      local lo, hi = math.huge, -math.huge
      for i = 1, #v do
        assert(v[i] == math.floor(v[i]), c[1])
        lo, hi = math.min(lo, v[i]), math.max(hi, v[i])
      end
      assert.is_true(lo >= c[2] and hi <= c[3] - 1, c[1])
      if c[3] - c[2] <= 300 then assert.is_true(lo == c[2] and hi == c[3] - 1, c[1] .. ' range') end
    end
  end)

  it('randperm gives other dtypes', function()
    for _, dt in ipairs({ 'int32', 'int16', 'float32', 'uint8' }) do
      ember.manual_seed(204)
      local x = ember.randperm(255, { dtype = dt })
      assert.are.equal(dt, x:dtype())
      local v = values(x)
      table.sort(v)
      for i = 1, 255 do assert(v[i] == i, dt) end
    end
  end)

  it('bernoulli_ fills integer tensors', function()
    ember.manual_seed(205)
    local x = ember.zeros(1000, { dtype = 'int32' }):bernoulli_(0.5)
    local v = values(x)
    local ones = 0
    for i = 1, #v do assert(v[i] == 0 or v[i] == 1); ones = ones + v[i] end
    assert.is_true(ones > 400 and ones < 600)
  end)
end)

describe('layouts', function()
  -- Each fill must put the value of row-major element i at logical position i, whatever the
  -- strides: the reference is the same fill on a fresh contiguous tensor.
  local fills = {
    { 'uniform_', function(x) return x:uniform_(-1, 1) end },
    { 'normal_', function(x) return x:normal_(2, 3) end },
    { 'bernoulli_', function(x) return x:bernoulli_(0.5) end },
    { 'random_', function(x) return x:random_(-5, 5) end },
    { 'uniform', function(x) return x:uniform(0, 4) end },
    { 'normal', function(x) return x:normal(0, 1) end },
    { 'bernoulli', function(x) return x:bernoulli(0.2) end },
    { 'random', function(x) return x:random(6) end },
  }
  for _, f in ipairs(fills) do
    local name, fill = f[1], f[2]
    it(name .. ' fills contiguous, transposed and sliced tensors alike', function()
      ember.manual_seed(300)
      local ref = fill(ember.zeros(4, 5, { dtype = 'float64' }))
      local want = ref:totable()

      ember.manual_seed(300)
      local tr = ember.zeros(5, 4, { dtype = 'float64' }):t()
      assert.is_false(tr:is_contiguous())
      local r = fill(tr)
      assert.are.equal(tr, r) -- returns self
      assert.are.same(want, tr:totable())

      ember.manual_seed(300)
      local big = ember.full({ 4, 10 }, -7, { dtype = 'float64' })
      local sl = big[{ {}, { 1, -1, 2 } }]
      fill(sl)
      assert.are.same(want, sl:totable())
      for i = 1, 4 do
        for j = 2, 10, 2 do assert.are.equal(-7, big[i][j]) end
      end

      local e = ember.zeros(0, 5)
      assert.are.same({ 0, 5 }, { fill(e):size(1), e:size(2) })

      local ex = ember.zeros(1, 5):expand(3, 5)
      H.assert_error(function() fill(ex) end, 'share memory')
    end)
  end

  it('float values differ across positions (not one value broadcast)', function()
    ember.manual_seed(301)
    local v = values(ember.zeros(3, 4):t():uniform_())
    local distinct = {}
    for i = 1, #v do distinct[v[i]] = true end
    local n = 0
    for _ in pairs(distinct) do n = n + 1 end
    assert.are.equal(12, n)
  end)

  it('8-d and 0-d shapes', function()
    ember.manual_seed(302)
    local x = ember.rand(1, 2, 1, 2, 1, 2, 1, 2)
    assert.are.equal(8, x:dim())
    assert.are.equal(16, x:numel())
    local s = ember.randn()
    assert.are.equal(0, s:dim())
    assert.are.equal('number', type(s:item()))
    -- 16 float32 values take 4 blocks, the scalar normal one more
    assert.are.equal(5, ember.get_rng_state().offset)
  end)
end)

describe('_like forms and bernoulli(p)', function()
  it('take the shape, dtype and device of the model tensor', function()
    local x = ember.zeros(3, 2, { dtype = 'float64' })
    local r = ember.rand_like(x)
    assert.are.same({ 3, 2 }, { r:size(1), r:size(2) })
    assert.are.equal('float64', r:dtype())
    assert.are.equal('float16', ember.randn_like(x, { dtype = 'float16' }):dtype())
    local i = ember.randint_like(ember.zeros(4, { dtype = 'int32' }), 3, 6)
    assert.are.equal('int32', i:dtype())
    for _, v in ipairs(values(i)) do assert(v >= 3 and v < 6) end
    for _, v in ipairs(values(ember.randint_like(x, 2))) do assert(v == 0 or v == 1) end
    H.assert_error(function() ember.rand_like(ember.zeros(2, { dtype = 'int64' })) end,
      'rand: expected a floating point dtype, got int64')
  end)

  it('bernoulli(p) draws each element with its own probability', function()
    local p = ember.tensor({ { 0, 1, 0.5 }, { 1, 0, 0.25 } }, { dtype = 'float64' })
    local ok, err = pcall(ember.bernoulli, p)
    if not ok and tostring(err):find('not implemented', 1, true) then
      pending('needs the pointwise family (' .. tostring(err) .. ')')
      return
    end
    ember.manual_seed(400)
    local b = ember.bernoulli(p)
    assert.are.equal('float64', b:dtype())
    local v = values(b)
    assert.are.same({ 0, 1, 1, 0 }, { v[1], v[2], v[4], v[5] })
    -- the same stream as rand(p.shape, float64) compared with p
    ember.manual_seed(400)
    local u = values(ember.rand(2, 3, { dtype = 'float64' }))
    local pv = values(p)
    for i = 1, 6 do assert.are.equal(u[i] < pv[i] and 1 or 0, v[i]) end
    -- rate, on a transposed probability tensor
    ember.manual_seed(401)
    local big = ember.full({ 200, 300 }, 0.7):t()
    local m = mean_var(values(ember.bernoulli(big)))
    assert.is_true(math.abs(m - 0.7) < 0.01, 'rate ' .. m)
    -- bernoulli_(p_tensor) broadcasts p over x
    ember.manual_seed(402)
    local x = ember.zeros(3, 2):bernoulli_(ember.tensor({ 0, 1 }))
    assert.are.same({ { 0, 1 }, { 0, 1 }, { 0, 1 } }, x:totable())
    assert.are.equal(0, ember.bernoulli(ember.zeros(0, 3)):numel())
    assert.are.equal(4, ember.bernoulli(ember.zeros(4), 0.5):numel())
  end)
end)

describe('errors', function()
  it('reject bad dtypes, bounds and probabilities with clear messages', function()
    H.assert_error(function() ember.rand(3, { dtype = 'int64' }) end,
      'rand: expected a floating point dtype, got int64')
    H.assert_error(function() ember.randn(3, { dtype = 'bool' }) end,
      'randn: expected a floating point dtype, got bool')
    H.assert_error(function() ember.rand(3, { dtype = 'float128' }) end, "unknown dtype 'float128'")
    H.assert_error(function() ember.rand(-1) end, 'rand: expected sizes >= 0, got [-1]')
    H.assert_error(function() ember.rand(1, 1, 1, 1, 1, 1, 1, 1, 1) end, 'at most 8 dimensions')
    H.assert_error(function() ember.randint(5, 5, { 3 }) end, 'randint: expected low < high, got low=5, high=5')
    H.assert_error(function() ember.randint(0, { 3 }) end, 'randint: expected low < high, got low=0, high=0')
    H.assert_error(function() ember.randint(0, 300, { 3 }, { dtype = 'uint8' }) end,
      'randint: range [0, 300) does not fit in uint8')
    H.assert_error(function() ember.randint(-1, 1, { 3 }, { dtype = 'uint8' }) end, 'does not fit in uint8')
    H.assert_error(function() ember.randint(0, 2 ^ 60, { 3 }) end, 'does not fit in int64')
    H.assert_error(function() ember.randint(0, 1.5, { 3 }) end, 'randint: expected an integer high, got 1.5')
    H.assert_error(function() ember.randint(0, 5, { 3 }, 'int8') end, 'randint: expected an options table')
    H.assert_error(function() ember.randperm(-1) end, 'randperm: expected n >= 0, got -1')
    H.assert_error(function() ember.randperm(2.5) end, 'randperm: expected an integer n, got 2.5')
    H.assert_error(function() ember.randperm(256, { dtype = 'uint8' }) end, 'randperm: n=256 is too large for uint8')
    H.assert_error(function() ember.randperm(2, { dtype = 'bool' }) end, 'randperm: expected an integer or floating point dtype, got bool')
    H.assert_error(function() ember.zeros(3):bernoulli_(1.5) end, 'bernoulli_: expected p in [0, 1], got 1.5')
    H.assert_error(function() ember.zeros(3):bernoulli_(-0.1) end, 'bernoulli_: expected p in [0, 1], got -0.1')
    H.assert_error(function() ember.zeros(3):bernoulli(0 / 0) end, 'bernoulli_: expected p in [0, 1]')
    H.assert_error(function() ember.bernoulli(ember.tensor({ 0.5, 1.5 })) end,
      'bernoulli: expected probabilities in [0, 1], got values from 0.5 to 1.5')
    H.assert_error(function() ember.bernoulli(ember.tensor({ { -1 }, { 0 } }):t()) end,
      'bernoulli: expected probabilities in [0, 1], got values from -1 to 0')
    H.assert_error(function() ember.bernoulli(ember.tensor({ 0.5, 0 / 0 })) end,
      'bernoulli: expected probabilities in [0, 1], got NaN')
    H.assert_error(function() ember.bernoulli(0.5) end, 'bernoulli: expected a tensor of probabilities, got number')
    H.assert_error(function() ember.bernoulli(ember.zeros(2, { dtype = 'int64' })) end,
      'bernoulli: expected a floating point tensor, got int64')
    H.assert_error(function() ember.zeros(3):normal_(0, -1) end, 'normal_: expected std >= 0, got -1')
    H.assert_error(function() ember.zeros(3):normal_(0 / 0, 1) end, 'normal_: expected a finite mean and std')
    H.assert_error(function() ember.zeros(3):normal_('a') end, 'normal_: expected a number for mean, got string')
    H.assert_error(function() ember.normal(0, -2, { 3 }) end, 'normal_: expected std >= 0, got -2')
    H.assert_error(function() ember.normal(ember.zeros(2), 1) end, 'normal: expected numbers for mean and std')
    H.assert_error(function() ember.zeros(3):uniform_(2, 1) end, 'uniform_: expected low <= high, got low=2, high=1')
    H.assert_error(function() ember.zeros(3):uniform_(0, math.huge) end, 'uniform_: expected finite bounds')
    H.assert_error(function() ember.zeros(3, { dtype = 'float16' }):uniform_(0, 1e5) end,
      'uniform_: bounds [0, 100000) are outside the range of float16')
    H.assert_error(function() ember.zeros(3, { dtype = 'int32' }):uniform_() end,
      'uniform_: expected a floating point tensor, got int32')
    H.assert_error(function() ember.zeros(3, { dtype = 'int64' }):normal_() end,
      'normal_: expected a floating point tensor, got int64')
    H.assert_error(function() ember.zeros(3):random_() end, 'random_: expected random_(b) or random_(a, b)')
    H.assert_error(function() ember.zeros(3):random_(5, 1) end, 'random_: expected a <= b, got a=5, b=1')
    H.assert_error(function() ember.manual_seed(1.5) end, 'manual_seed: expected an integer seed, got 1.5')
    H.assert_error(function() ember.manual_seed('x') end, 'manual_seed: expected an integer seed, got string')
    H.assert_error(function() ember.manual_seed(2 ^ 64) end, 'manual_seed: seed 18446744073709551616 is out of range')
    H.assert_error(function() ember.set_rng_state(5) end, 'set_rng_state: expected a table {seed=..., offset=...}')
    H.assert_error(function() ember.set_rng_state({ seed = 1, offset = -1 }) end, 'set_rng_state: offset -1 is out of range')
  end)

  it('uniform_(a, a) fills a, and failed calls draw nothing', function()
    H.assert_close(ember.zeros(3):uniform_(2.5, 2.5), { 2.5, 2.5, 2.5 })
    ember.manual_seed(500)
    pcall(function() ember.zeros(3):normal_(0, -1) end)
    pcall(function() ember.randint(3, 1, { 4 }) end)
    pcall(function() ember.rand(4, { dtype = 'int8' }) end)
    assert.are.same({ seed = 500, offset = 0 }, ember.get_rng_state())
  end)
end)
