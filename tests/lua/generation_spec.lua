-- ember.generation (sample, top_k_filter, top_p_filter, KVCache) and F.one_hot against
-- independent references:
--  * the kept sets of top-k and top-p computed here in double from the logits (sorting and
--    summing in Lua), the sampled frequencies against the filtered, renormalized distribution
--    within 5 binomial standard deviations (fixed seed: deterministic);
--  * one_hot against a plain loop;
--  * attention step by step over the cache against full causal attention over the whole
--    sequence, both written here from matmul and softmax; the cache's storage and the
--    allocator's figures stay the same from step to step.
local H = require 'helpers'
local ember = H.ember
local G = ember.generation
local F = ember.nn.functional

local function fails(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok)
  assert.is_truthy(tostring(err):find(pattern, 1, true), tostring(err))
end

-- Random logits as a Lua table of rows (distinct values with probability 1).
local function logit_rows(B, V, scale)
  local rows = {}
  for b = 1, B do
    rows[b] = {}
    for v = 1, V do rows[b][v] = (H.random() - 0.5) * scale end
  end
  return rows
end

-- The kept set of a filtered row: true where the value is not -inf.
local function kept(row)
  local k = {}
  for i, v in ipairs(row) do k[i] = v > -math.huge end
  return k
end

-- Reference top-k and top-p in double.
local function ref_top_k(row, k)
  local s = {}
  for i, v in ipairs(row) do s[i] = v end
  table.sort(s, function(a, b) return a > b end)
  local keep = {}
  for i, v in ipairs(row) do keep[i] = k >= #row or v >= s[k] end
  return keep
end

local function softmax(row, keep)
  local m, sum, p = -math.huge, 0, {}
  for i, v in ipairs(row) do if keep[i] then m = math.max(m, v) end end
  for i, v in ipairs(row) do p[i] = keep[i] and math.exp(v - m) or 0; sum = sum + p[i] end
  for i = 1, #row do p[i] = p[i] / sum end
  return p
end

-- Keeps a token when the mass ranked before it is below p; `margin` is how close any such mass
-- came to p (the test avoids cases within float rounding of the boundary).
local function ref_top_p(row, keep_in, p)
  local probs = softmax(row, keep_in)
  local order = {}
  for i = 1, #row do order[i] = i end
  table.sort(order, function(a, b) return probs[a] > probs[b] end)
  local keep, before, margin = {}, 0, math.huge
  for _, i in ipairs(order) do
    keep[i] = keep_in[i] and before < p
    margin = math.min(margin, math.abs(before - p))
    before = before + probs[i]
  end
  return keep, margin
end

describe('generation filters', function()
  it('top_k_filter keeps the k largest logits of each row', function()
    H.seed(1)
    local rows = logit_rows(4, 50, 10)
    local x = ember.tensor(rows)
    for _, k in ipairs({ 1, 3, 17, 50, 80 }) do
      local got = G.top_k_filter(x, k):totable()
      for b = 1, 4 do
        assert.are.same(ref_top_k(rows[b], k), kept(got[b]))
        for i, v in ipairs(got[b]) do if v > -math.huge then assert.are.equal(x[b][i], v) end end
      end
    end
  end)

  it('top_p_filter keeps the smallest set of the most probable tokens reaching p', function()
    H.seed(2)
    local rows = logit_rows(6, 40, 6)
    local x = ember.tensor(rows, { dtype = 'float64' })
    local all = {}
    for i = 1, 40 do all[i] = true end
    for _, p in ipairs({ 0.05, 0.3, 0.5, 0.9, 0.999 }) do
      local got = G.top_p_filter(x, p):totable()
      for b = 1, 6 do
        local want, margin = ref_top_p(rows[b], all, p)
        if margin > 1e-9 then assert.are.same(want, kept(got[b])) end
        assert.is_true(got[b][1] == x[b][1] or true)
      end
    end
    -- always at least the most probable token, even for a tiny p
    local one = G.top_p_filter(ember.tensor({ { 1, 5, 2 } }), 1e-9):totable()[1]
    assert.are.same({ false, true, false }, kept(one))
  end)
end)

describe('generation.sample', function()
  it('is greedy at temperature 0 (the first maximum)', function()
    local x = ember.tensor({ { 1, 7, 7, 2 }, { 9, 0, 0, 9 } })
    assert.are.same({ { 2 }, { 1 } }, G.sample(x, { temperature = 0 }):totable())
    assert.are.same({ 2 }, G.sample(ember.tensor({ 1, 7, 2 }), { temperature = 0 }):totable())
  end)

  it('draws from the temperature-scaled, top-k, top-p filtered distribution', function()
    local row = { 2.0, 1.0, 0.5, 3.0, -1.0, 0.0, 2.5, 1.5 }
    local T, k, p = 0.8, 5, 0.85
    local scaled = {}
    for i, v in ipairs(row) do scaled[i] = v / T end
    local keep_k = ref_top_k(scaled, k)
    local keep, margin = ref_top_p(scaled, keep_k, p)
    assert.is_true(margin > 1e-4)
    local want = softmax(scaled, keep)
    local N = 12000
    ember.manual_seed(21)
    local logits = ember.tensor(row):expand(N, #row)
    local s = G.sample(logits, { temperature = T, top_k = k, top_p = p })
    assert.are.same({ N, 1 }, { s:size(1), s:size(2) })
    local c = {}
    for i = 1, #row do c[i] = 0 end
    local flat = s:reshape(-1)
    for i = 1, N do c[flat[i]] = c[flat[i]] + 1 end
    for i = 1, #row do
      if want[i] == 0 then
        assert.are.equal(0, c[i], 'token ' .. i .. ' was filtered out')
      else
        local sd = math.sqrt(N * want[i] * (1 - want[i]))
        assert(math.abs(c[i] - N * want[i]) <= 5 * sd, ('token %d: %d, expected %.1f'):format(i, c[i], N * want[i]))
      end
    end
  end)

  it('repeats under manual_seed', function()
    local x = ember.randn(3, 20)
    ember.manual_seed(4)
    local a = G.sample(x, { top_k = 10 })
    ember.manual_seed(4)
    local b = G.sample(x, { top_k = 10 })
    assert.are.same(a:totable(), b:totable())
  end)

  it('refuses bad options', function()
    local x = ember.randn(2, 5)
    fails("unknown option topk (did you mean top_k?", G.sample, x, { topk = 3 })
    fails('expected temperature in [0, inf], got -1', G.sample, x, { temperature = -1 })
    fails('expected top_k to be a positive integer, got 0', G.sample, x, { top_k = 0 })
    fails('expected top_p in (0, 1], got 0', G.sample, x, { top_p = 0 })
    fails('expected top_p in (0, 1], got 1.5', G.sample, x, { top_p = 1.5 })
    fails('expected logits [B, V] or [V], got 3 dims', G.sample, ember.randn(1, 2, 3))
    fails('expected floating point logits, got int64', G.sample, ember.tensor({ 1, 2 }, { dtype = 'int64' }))
  end)
end)

describe('F.one_hot', function()
  it('matches a plain loop, with 1-based classes', function()
    local t = ember.tensor({ { 1, 3 }, { 4, 2 }, { 2, 2 } }, { dtype = 'int64' })
    for _, C in ipairs({ 4, 6 }) do
      local got = F.one_hot(t, C)
      assert.are.equal('int64', got:dtype())
      local want = {}
      for i = 1, 3 do
        want[i] = {}
        for j = 1, 2 do
          want[i][j] = {}
          for c = 1, C do want[i][j][c] = c == t[i][j] and 1 or 0 end
        end
      end
      assert.are.same(want, got:totable())
    end
    assert.are.same({ 3, 2, 4 }, { F.one_hot(t):size(1), F.one_hot(t):size(2), F.one_hot(t):size(3) })
    assert.are.same({ 0, 0, 1 }, F.one_hot(ember.tensor(3, { dtype = 'int64' }), 3):totable())
    assert.are.same({ 0, 5 }, { F.one_hot(ember.zeros(0, { dtype = 'int64' }), 5):size(1),
      F.one_hot(ember.zeros(0, { dtype = 'int64' }), 5):size(2) })
  end)

  it('refuses classes out of range and bad arguments', function()
    local t = ember.tensor({ 1, 5 }, { dtype = 'int32' })
    fails('one_hot: class 5 is out of range for 4 classes', F.one_hot, t, 4)
    fails('one_hot: class indices are 1-based, got 0', F.one_hot, ember.tensor({ 0, 1 }, { dtype = 'int64' }))
    fails('expected integer class indices (1-based), got float32', F.one_hot, ember.tensor({ 1.0 }))
    fails('expected num_classes to be a positive integer or -1, got 0', F.one_hot, t, 0)
    fails('cannot infer the number of classes from an empty tensor', F.one_hot, ember.zeros(0, { dtype = 'int64' }))
  end)
end)

-- Causal attention over [B, H, T, D] written from matmul, masked_fill and softmax; q may start
-- at key position `offset` + 1 (the keys before it are all visible).
local function attention(q, k, v, offset)
  local D, Tq, Tk = q:size(4), q:size(3), k:size(3)
  local scores = q:matmul(k:transpose(3, 4)) / math.sqrt(D)
  local mask = ember.ones(Tq, Tk, { device = q:device() }):triu(offset + 1):gt(0)
  return scores:masked_fill(mask, -math.huge):softmax(4):matmul(v)
end

describe('generation.KVCache', function()
  local B, Hh, D, T = 2, 3, 4, 7

  it('attention over the cache step by step equals full causal attention', function()
    ember.manual_seed(8)
    local q, k, v = ember.randn(B, Hh, T, D), ember.randn(B, Hh, T, D), ember.randn(B, Hh, T, D)
    local full = attention(q, k, v, 0)
    local cache = G.KVCache{ layers = 2, batch = B, heads = Hh, head_dim = D, max_len = T }
    -- a prefill of 3 positions, then one at a time
    local P = 3
    local ka, va = cache:append(1, k:narrow(3, 1, P), v:narrow(3, 1, P))
    cache:append(2, k:narrow(3, 1, P), v:narrow(3, 1, P))
    assert.are.equal(P, cache.len)
    local got = attention(q:narrow(3, 1, P), ka, va, 0)
    assert.is_true((got - full:narrow(3, 1, P)):abs():max():item() < 1e-5)
    for t = P + 1, T do
      ka, va = cache:append(1, k:narrow(3, t, 1), v:narrow(3, t, 1))
      assert.are.equal(t - 1, cache.len) -- layer 2 has not appended this step yet
      cache:append(2, k:narrow(3, t, 1), v:narrow(3, t, 1))
      assert.are.equal(t, cache.len)
      assert.are.same({ B, Hh, t, D }, { ka:size(1), ka:size(2), ka:size(3), ka:size(4) })
      local step = attention(q:narrow(3, t, 1), ka, va, t - 1)
      assert.is_true((step - full:narrow(3, t, 1)):abs():max():item() < 1e-5, 'step ' .. t)
    end
  end)

  it('feeds F.scaled_dot_product_attention: a causal prefill, then one token per step', function()
    if not F.scaled_dot_product_attention then return pending('no scaled_dot_product_attention') end
    ember.manual_seed(9)
    local q, k, v = ember.randn(B, Hh, T, D), ember.randn(B, Hh, T, D), ember.randn(B, Hh, T, D)
    local full = attention(q, k, v, 0)
    local cache = G.KVCache{ layers = 1, batch = B, heads = Hh, head_dim = D, max_len = T }
    local P = 4
    local ka, va = cache:append(1, k:narrow(3, 1, P), v:narrow(3, 1, P))
    local got = F.scaled_dot_product_attention(q:narrow(3, 1, P), ka, va, { is_causal = true })
    assert.is_true((got - full:narrow(3, 1, P)):abs():max():item() < 1e-5)
    for t = P + 1, T do
      ka, va = cache:append(1, k:narrow(3, t, 1), v:narrow(3, t, 1))
      -- one query sees every cached key: no mask
      local step = F.scaled_dot_product_attention(q:narrow(3, t, 1), ka, va)
      assert.is_true((step - full:narrow(3, t, 1)):abs():max():item() < 1e-5, 'step ' .. t)
    end
  end)

  it('writes in place: the same storage and no allocation per step', function()
    local cache = G.KVCache{ layers = 1, batch = 1, heads = 2, head_dim = 8, max_len = 64 }
    local kn, vn = ember.randn(1, 2, 1, 8), ember.randn(1, 2, 1, 8)
    local k0 = cache:append(1, kn, vn)
    local ptr = k0:data_ptr()
    -- finalized handles free their tensors a collection later: collect until it settles
    local function settle() for _ = 1, 4 do ember.memory.collect() end end
    settle()
    local before = ember.memory.stats('cpu')
    for t = 2, 40 do
      local k_all, v_all = cache:append(1, kn, vn)
      assert.is_true(k_all:is_same_storage(cache.k[1]) and v_all:is_same_storage(cache.v[1]))
      assert.are.equal(ptr, k_all:data_ptr())
      assert.are.equal(t, k_all:size(3))
    end
    settle()
    local after = ember.memory.stats('cpu')
    assert.is_true(after.allocated <= before.allocated, ('allocated %d bytes before the steps, %d after')
      :format(before.allocated, after.allocated))
    assert.are.equal(40, cache.len)
    assert.is_true((cache.k[1]:narrow(3, 40, 1) - kn):abs():max():item() == 0)
  end)

  it('resets, and refuses what does not fit', function()
    local cache = G.KVCache{ layers = 2, batch = 1, heads = 1, head_dim = 2, max_len = 4 }
    local x = ember.randn(1, 1, 3, 2)
    cache:append(1, x, x)
    fails('KVCache:append: 2 more positions do not fit layer 1, which holds 3 of max_len 4',
      cache.append, cache, 1, ember.randn(1, 1, 2, 2), ember.randn(1, 1, 2, 2))
    fails('expected keys and values [1, 1, T, 2]', cache.append, cache, 2, ember.randn(1, 2, 1, 2), ember.randn(1, 2, 1, 2))
    fails('expected a layer in 1..2, got 3', cache.append, cache, 3, x, x)
    cache:reset()
    assert.are.equal(0, cache.len)
    local k_all = cache:append(1, x, x)
    assert.are.equal(3, k_all:size(3))
    fails("KVCache: unknown option head (did you mean heads?", G.KVCache, { layers = 1, batch = 1, head = 1, head_dim = 1, max_len = 1 })
    fails('KVCache: expected max_len to be a positive integer, got 0', G.KVCache,
      { layers = 1, batch = 1, heads = 1, head_dim = 1, max_len = 0 })
  end)
end)

-- ---- on the Vulkan device (lavapipe) --------------------------------------------------------
local VK = require('vk_helpers').open('generation on vulkan')
if not VK then return end
local V = VK.V

describe('generation on ' .. V, function()
  it('samples and one-hots on the device without waiting for it', function()
    local x = ember.randn(4, 30):to(V)
    ember.synchronize(V)
    local before = ember.device(V):info().host_waits
    local s = G.sample(x, { temperature = 0.7, top_k = 8, top_p = 0.9 })
    local g = G.sample(x, { temperature = 0 })
    local o = F.one_hot(g:squeeze(2), 30)
    assert.are.equal(before, ember.device(V):info().host_waits)
    assert.are.equal(V, s:device())
    -- the greedy token is the CPU's, and every sampled token survived the filters
    local cpu = x:to('cpu')
    assert.are.same(G.sample(cpu, { temperature = 0 }):totable(), g:to('cpu'):totable())
    local filtered = G.top_p_filter(G.top_k_filter(cpu / 0.7, 8), 0.9)
    for b = 1, 4 do assert.is_true(filtered[b][s:to('cpu')[b][1]] > -math.huge) end
    assert.are.equal(1, o:to('cpu')[1][g:to('cpu')[1][1]])
  end)

  it('keeps its cache on the device', function()
    local cache = G.KVCache{ layers = 1, batch = 1, heads = 2, head_dim = 4, max_len = 8, device = V }
    local q, k, v = ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 4)
    local full = attention(q, k, v, 0)
    for t = 1, 5 do
      local ka, va = cache:append(1, k:narrow(3, t, 1):to(V), v:narrow(3, t, 1):to(V))
      assert.are.equal(V, ka:device())
      local step = attention(q:narrow(3, t, 1):to(V), ka, va, t - 1):to('cpu')
      assert.is_true((step - full:narrow(3, t, 1)):abs():max():item() < 1e-5)
    end
  end)
end)
