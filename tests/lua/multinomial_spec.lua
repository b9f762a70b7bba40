-- ember.multinomial / x:multinomial against independent expectations:
--  * frequencies over many draws against the weights, within 5 binomial standard deviations
--    (sqrt(N p (1 - p))); the seed is fixed, so the outcome is deterministic;
--  * without replacement: distinct indices, never a zero weight, first-draw frequencies p_i and
--    second-draw frequencies sum_i p_i p_j / (1 - p_i) (computed here in double);
--  * reproducibility under manual_seed and the generator's advance;
--  * every error, in Lua's terms;
--  * the Vulkan kernel (lavapipe) against the CPU's: the same indices from the same seed
--    (runtime/src/multinomial.h: one algorithm, one Philox stream), deferred error reports.
local H = require 'helpers'
local ember = H.ember

-- Counts of each category (1..K) in an int64 tensor.
local function counts(t, K)
  local c = {}
  for i = 1, K do c[i] = 0 end
  local flat = t:reshape(-1)
  for i = 1, flat:numel() do
    local v = flat[i]
    c[v] = c[v] + 1
  end
  return c
end

-- Whether two int64 tensors of one shape hold the same values.
local function equal(a, b)
  return tostring(a:size()) == tostring(b:size()) and a:ne(b):sum():item() == 0
end

local function binomial_ok(count, N, p, what)
  local sd = math.sqrt(N * p * (1 - p))
  local ok = math.abs(count - N * p) <= 5 * sd + 1e-9
  assert(ok, ('%s: count %d, expected %.1f +- %.1f'):format(what, count, N * p, 5 * sd))
end

local W = { 0.3, 0.75, 0, 1.2, 0.15, 0.6 } -- sums to 3: probabilities W / 3
local function probs_of(w)
  local s, p = 0, {}
  for _, v in ipairs(w) do s = s + v end
  for i, v in ipairs(w) do p[i] = v / s end
  return p
end

describe('multinomial with replacement', function()
  it('draws each category with probability w / sum(w)', function()
    ember.manual_seed(11)
    local N = 20000
    for _, dtype in ipairs({ 'float32', 'float64', 'float16' }) do
      local s = ember.multinomial(ember.tensor(W, { dtype = dtype }), N, true)
      assert.are.same({ N }, { s:size(1) })
      assert.are.equal('int64', s:dtype())
      local c, p = counts(s, #W), probs_of(W)
      for i = 1, #W do binomial_ok(c[i], N, p[i], dtype .. ' category ' .. i) end
      assert.are.equal(0, c[3]) -- a zero weight is never drawn
    end
  end)

  it('samples each row of a 2-D input from its own weights', function()
    ember.manual_seed(12)
    local N = 4000
    local s = ember.tensor({ W, { 0, 0, 5, 0, 0, 0 }, { 1, 1, 1, 1, 1, 1 } }):multinomial(N, { replacement = true })
    assert.are.same({ 3, N }, { s:size(1), s:size(2) })
    local c1, p = counts(s:select(1, 1), 6), probs_of(W)
    for i = 1, 6 do binomial_ok(c1[i], N, p[i], 'row 1 category ' .. i) end
    assert.are.same({ 0, 0, N, 0, 0, 0 }, counts(s:select(1, 2), 6))
    local c3 = counts(s:select(1, 3), 6)
    for i = 1, 6 do binomial_ok(c3[i], N, 1 / 6, 'row 3 category ' .. i) end
  end)

  it('takes strided and expanded weights as they read', function()
    local base = ember.tensor({ { 1, 0 }, { 0, 1 }, { 1, 0 } }):t() -- [[1, 0, 1], [0, 1, 0]]
    ember.manual_seed(3)
    local s = base:multinomial(50, true)
    assert.are.same({ 0, 50, 0 }, counts(s:select(1, 2), 3))
    assert.are.equal(0, counts(s:select(1, 1), 3)[2])
    local e = ember.tensor({ 0, 2, 0 }):expand(4, 3)
    assert.are.same({ 0, 40, 0 }, counts(e:multinomial(10, true), 3))
  end)
end)

describe('multinomial without replacement', function()
  it('gives distinct indices with nonzero weights, first and second draws as expected', function()
    ember.manual_seed(13)
    local R = 6000
    local s = ember.multinomial(ember.tensor(W):expand(R, #W), 3) -- replacement defaults to false
    assert.are.same({ R, 3 }, { s:size(1), s:size(2) })
    local rows = s:totable()
    local first, second = {}, {}
    for i = 1, #W do first[i], second[i] = 0, 0 end
    for _, row in ipairs(rows) do
      assert.is_true(row[1] ~= row[2] and row[2] ~= row[3] and row[1] ~= row[3])
      for _, v in ipairs(row) do assert.are_not.equal(3, v) end
      first[row[1]] = first[row[1]] + 1
      second[row[2]] = second[row[2]] + 1
    end
    local p = probs_of(W)
    for j = 1, #W do
      binomial_ok(first[j], R, p[j], 'first draw ' .. j)
      local q = 0 -- P(second = j) = sum_{i ~= j} p_i p_j / (1 - p_i)
      for i = 1, #W do if i ~= j then q = q + p[i] * p[j] / (1 - p[i]) end end
      binomial_ok(second[j], R, q, 'second draw ' .. j)
    end
  end)

  it('draws every nonzero category once when n is their count', function()
    ember.manual_seed(14)
    local s = ember.tensor({ 5, 0, 1, 2, 0, 7 }):multinomial(4)
    local seen = {}
    for i = 1, 4 do seen[s[i]] = true end
    assert.are.same({ [1] = true, [3] = true, [4] = true, [6] = true }, seen)
  end)
end)

describe('multinomial and the generator', function()
  it('repeats under manual_seed and differs without it', function()
    local p = ember.rand(3, 50)
    for _, repl in ipairs({ true, false }) do
      ember.manual_seed(99)
      local a = ember.multinomial(p, 10, repl)
      local b = ember.multinomial(p, 10, repl)
      ember.manual_seed(99)
      local c = ember.multinomial(p, 10, repl)
      assert.is_true(equal(a, c))
      assert.is_false(equal(a, b))
    end
  end)

  it('advances the stream by one word per draw, or per weight without replacement', function()
    local p = ember.rand(3, 50)
    ember.manual_seed(5)
    ember.multinomial(p, 7, true)
    assert.are.equal(math.ceil(3 * 7 / 4), ember.get_rng_state().offset)
    ember.manual_seed(5)
    ember.multinomial(p, 7, false)
    assert.are.equal(math.ceil(3 * 50 / 4), ember.get_rng_state().offset)
  end)
end)

describe('multinomial errors', function()
  local function fails(pattern, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
  end
  local M = ember.multinomial
  it('refuses bad weights, naming the row and position counting from 1', function()
    fails('got -1 at row 2, position 3', M, ember.tensor({ { 1, 1, 1 }, { 1, 1, -1 } }), 1, true)
    fails('got inf at row 1, position 1', M, ember.tensor({ math.huge, 1 }), 1)
    fails('got nan at row 1, position 2', M, ember.tensor({ 1, 0 / 0 }), 1)
    fails('the weights of row 2 (counting from 1) are all zero', M, ember.tensor({ { 1, 2 }, { 0, 0 } }), 1, true)
    fails('sum to inf in float32', M, ember.tensor({ 3e38, 3e38 }), 1, true)
    fails('cannot draw 3 samples without replacement from row 1 (counting from 1), which has 2 nonzero weights',
      M, ember.tensor({ 1, 0, 1 }), 3)
  end)
  it('refuses bad arguments', function()
    fails('cannot draw 4 samples without replacement from 3 categories', M, ember.tensor({ 1, 1, 1 }), 4)
    fails('expected a number of samples >= 1, got 0', M, ember.tensor({ 1, 1 }), 0)
    fails('expected a number of samples >= 1, got -2', M, ember.tensor({ 1, 1 }), -2, true)
    fails('expected an integer number of samples', M, ember.tensor({ 1, 1 }), 1.5)
    fails('expected weights of 1 or 2 dimensions, got 3', M, ember.ones(2, 2, 2), 1)
    fails('expected weights of 1 or 2 dimensions, got 0', M, ember.tensor(1), 1)
    fails('expected floating point weights, got int64', M, ember.tensor({ 1, 2 }, { dtype = 'int64' }), 1)
    fails('expected at least one category, got 0', M, ember.ones(2, 0), 1)
    fails("unknown option replace (did you mean replacement?", M, ember.ones(3), 1, { replace = true })
    fails('expected replacement to be a boolean', M, ember.ones(3), 1, { replacement = 1 })
    fails('expected a tensor of weights', M, { 1, 2 }, 1)
  end)
  it('gives [0, n] for no rows', function()
    local s = ember.multinomial(ember.ones(0, 4), 3, true)
    assert.are.same({ 0, 3 }, { s:size(1), s:size(2) })
  end)
end)

-- ---- Vulkan (lavapipe) against the CPU -------------------------------------------------------
local VK = require('vk_helpers').open('multinomial on vulkan')
if not VK then return end
local V = VK.V

describe('multinomial on ' .. V, function()
  local function both(p, n, repl)
    ember.manual_seed(2026)
    local a = ember.multinomial(p, n, repl)
    local sa = ember.get_rng_state()
    ember.manual_seed(2026)
    local b = ember.multinomial(p:to(V), n, repl)
    assert.are.same(sa, ember.get_rng_state())
    assert.are.equal(V, b:device())
    return a, b:to('cpu')
  end

  -- Without replacement the keys' logarithms round differently on the two devices, so two
  -- keys within that rounding may come out in either order: a difference must be such a
  -- swap of neighbours (or the last draw, whose rival was the next key), and rare.
  local function ties_only(a, b, what)
    a, b = a:dim() == 1 and { a:totable() } or a:totable(), b:dim() == 1 and { b:totable() } or b:totable()
    local diffs, total = 0, 0
    for r = 1, #a do
      local n = #a[r]
      for c = 1, n do
        total = total + 1
        if a[r][c] ~= b[r][c] then
          diffs = diffs + 1
          local swap = (c < n and a[r][c] == b[r][c + 1] and a[r][c + 1] == b[r][c])
            or (c > 1 and a[r][c] == b[r][c - 1] and a[r][c - 1] == b[r][c]) or c == n
          assert(swap, ('%s: row %d draw %d: %d on the CPU, %d on the device'):format(what, r, c,
            a[r][c], b[r][c]))
        end
      end
    end
    assert(diffs <= math.max(2, total / 100), what .. ': ' .. diffs .. ' draws differ')
  end

  it('draws the CPU indices from the same seed', function()
    ember.manual_seed(1)
    local cases = {
      { ember.rand(5, 1000), 300, true }, { ember.rand(5, 1000), 300, false },
      { ember.rand(2, 20000), 40, true }, { ember.rand(2, 20000), 40, false }, -- several chunks
      { ember.rand(3, 7):half(), 9, true }, { ember.tensor(W), 6000, true },
      { ember.rand(7, 3):t(), 2, false }, { ember.tensor(W), 5, false },
      { ember.rand(2, 20000), 1000, false },
      { ember.rand(1, 1000), 20000, true }, -- a row's draws over several workgroups
    }
    for i, c in ipairs(cases) do
      local a, b = both(c[1], c[2], c[3])
      if c[3] then
        assert.is_true(equal(a, b), 'case ' .. i)
      else
        ties_only(a, b, 'case ' .. i)
      end
    end
  end)

  it('reports bad weights at the next synchronization, then carries on', function()
    local function deferred(pattern, w, n, repl)
      local s = ember.multinomial(ember.tensor(w):to(V), n, repl) -- queued: no error yet
      local ok, err = pcall(function() return s:to('cpu') end)
      assert.is_false(ok)
      assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
      assert.is_truthy(tostring(err):find('reported at its next synchronization', 1, true))
    end
    deferred('got -1 at row 2, position 3', { { 1, 1, 1 }, { 1, 1, -1 } }, 1, true)
    deferred('got nan at row 1, position 2', { 1, 0 / 0 }, 1, true)
    deferred('got inf at row 1, position 1', { math.huge, 1 }, 1, false)
    deferred('the weights of row 2 (counting from 1) are all zero', { { 1, 2 }, { 0, 0 } }, 1, true)
    deferred('sum to inf in float32', { 3e38, 3e38 }, 1, true)
    deferred('cannot draw 3 samples without replacement from row 1 (counting from 1), which has 2 nonzero weights',
      { 1, 0, 1 }, 3, false)
    -- the report was cleared: the device works on
    local s = ember.multinomial(ember.tensor({ 0, 1 }):to(V), 3, true)
    assert.are.same({ 2, 2, 2 }, s:totable())
  end)

  it('does not wait for the device', function()
    local p = ember.rand(4, 100):to(V)
    ember.synchronize(V)
    local before = ember.device(V):info().host_waits
    for _ = 1, 5 do
      ember.multinomial(p, 3, true)
      ember.multinomial(p, 3, false)
    end
    assert.are.equal(before, ember.device(V):info().host_waits)
  end)

  it('refuses float64 weights', function()
    local ok, err = pcall(ember.multinomial, ember.ones(3, { dtype = 'float64' }):to(V), 1)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('not implemented on ' .. V .. ' for float64', 1, true), tostring(err))
  end)
end)
