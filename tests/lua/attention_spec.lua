-- F.scaled_dot_product_attention on the CPU, against independent references:
--  * a direct loop in Lua doubles (scores, masked softmax with fully masked rows giving 0,
--    weighted sum) for the forward;
--  * finite differences (ember.autograd.gradcheck, float64) and the gradients of the same
--    formula composed from matmul / softmax for the backward;
--  * statistics of the dropout mask, and gradchecks that reseed before every evaluation;
--  * the float32 result for float16 / bfloat16 inputs.
-- Sizes cross the kernel's 64-row tiles, and threads 1 and 2 cover both backward schedules.
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = require('ember.nn').functional
local R = require 'tests.lua.nn_ref'

local sdpa = F.scaled_dot_product_attention
local gradcheck = ember.autograd.gradcheck
local rnd, leaf, flat, check = R.rnd, R.leaf, R.flat, R.check

-- ---- the reference ----------------------------------------------------------------------------

local function shape_of(x) local s = x:size(); local t = {}; for i = 1, #s do t[i] = s[i] end; return t end

-- The mask's value at (batch index b, head h, row i, column j) of the broadcast shape, from a
-- tensor of any rank <= 4 that broadcasts to [B, H, L, S] (b, h, i, j 1-based): a number to
-- add, or -inf for a false boolean.
local function mask_fn(mask)
  if mask == nil then return function() return 0 end end
  local s, v = shape_of(mask), flat(mask:double())
  local isbool = mask:dtype() == 'bool'
  local n = #s
  return function(b, h, i, j)
    local idx, full = { b, h, i, j }, {}
    for d = 1, n do full[d] = s[d] == 1 and 1 or idx[4 - n + d] end
    local k = 0
    for d = 1, n do k = k * s[d] + (full[d] - 1) end
    local x = v[k + 1]
    if isbool then return x ~= 0 and 0 or -math.huge end
    return x
  end
end

-- q [B, Hq, L, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev] (4-D) -> flat [B, Hq, L, Ev].
local function reference(q, k, v, o)
  o = o or {}
  local qs, ks, vs = shape_of(q), shape_of(k), shape_of(v)
  local B, Hq, L, E = qs[1], qs[2], qs[3], qs[4]
  local Hkv, S, Ev = ks[2], ks[3], vs[4]
  local qf, kf, vf = flat(q:double()), flat(k:double()), flat(v:double())
  local scale = o.scale or 1 / math.sqrt(E)
  local m = mask_fn(o.attn_mask)
  local out = {}
  for b = 1, B do
    for h = 1, Hq do
      local kh = math.floor((h - 1) / (Hq / Hkv)) + 1
      for i = 1, L do
        local s, mx = {}, -math.huge
        for j = 1, S do
          local d = 0
          for e = 1, E do
            d = d + qf[(((b - 1) * Hq + h - 1) * L + i - 1) * E + e] * kf[(((b - 1) * Hkv + kh - 1) * S + j - 1) * E + e]
          end
          s[j] = d * scale + m(b, h, i, j)
          if o.is_causal and j > i then s[j] = -math.huge end
          if s[j] > mx then mx = s[j] end
        end
        local sum = 0
        for j = 1, S do s[j] = mx == -math.huge and 0 or math.exp(s[j] - mx); sum = sum + s[j] end
        for c = 1, Ev do
          local acc = 0
          for j = 1, S do acc = acc + s[j] * vf[(((b - 1) * Hkv + kh - 1) * S + j - 1) * Ev + c] end
          out[#out + 1] = sum > 0 and acc / sum or 0
        end
      end
    end
  end
  return out
end

-- The same formula from ember's own ops (for gradients): q k^T, mask, softmax, v. k and v are
-- repeated over the head groups; no row may be fully masked.
local function composed(q, k, v, o)
  o = o or {}
  local Hq, Hkv = q:size(-3), k:size(-3)
  if Hq ~= Hkv then
    local g = Hq / Hkv
    local function rep(t)
      local s = shape_of(t)
      local x = t:unsqueeze(-3):expand(s[1], s[2], g, s[3], s[4])
      return x:reshape(s[1], s[2] * g, s[3], s[4])
    end
    k, v = rep(k), rep(v)
  end
  local s = q:matmul(k:transpose(-1, -2)) * (o.scale or 1 / math.sqrt(q:size(-1)))
  if o.attn_mask then
    local m = o.attn_mask
    if m:dtype() == 'bool' then m = ember.zeros(m:size(), { dtype = 'float64' }):masked_fill(m:logical_not(), -math.huge) end
    s = s + m:double()
  end
  if o.is_causal then
    local L, S = q:size(-2), k:size(-2)
    s = s:masked_fill(ember.ones(L, S):triu(1):bool(), -math.huge)
  end
  return s:softmax(-1):matmul(v)
end

local function grads(out, ins, g)
  return ember.autograd.grad({ out }, ins, { grad_outputs = { g } })
end

local function close(a, b, tol, what)
  local d = (a:double() - b:double()):abs():max():item()
  assert(d <= tol, ('%s: max difference %g > %g'):format(what or '', d, tol))
end

-- ---- forward ----------------------------------------------------------------------------------

describe('scaled_dot_product_attention forward', function()
  it('matches the loop reference, with and without causal, across tiles', function()
    for _, c in ipairs({ { 2, 3, 5, 7, 4, 6 }, { 1, 2, 70, 130, 8, 5 }, { 1, 1, 130, 67, 3, 9 },
                         { 1, 1, 1, 1, 1, 1 } }) do
      H.seed(100)
      local B, Hh, L, S, E, Ev = unpack(c)
      local q, k, v = rnd({ B, Hh, L, E }), rnd({ B, Hh, S, E }), rnd({ B, Hh, S, Ev })
      for _, causal in ipairs({ false, true }) do
        local out = sdpa(q, k, v, { is_causal = causal })
        check(out, reference(q, k, v, { is_causal = causal }), { B, Hh, L, Ev }, 1e-12,
          ('%dx%d causal=%s'):format(L, S, tostring(causal)))
      end
    end
  end)

  it('takes float32 inputs with a float32 result', function()
    H.seed(101)
    local q, k, v = rnd({ 2, 2, 33, 16 }), rnd({ 2, 2, 65, 16 }), rnd({ 2, 2, 65, 8 })
    local out = sdpa(q:float(), k:float(), v:float(), { is_causal = true })
    assert.are.equal('float32', out:dtype())
    check(out, reference(q, k, v, { is_causal = true }), { 2, 2, 33, 8 }, 1e-5)
  end)

  it('broadcasts boolean and additive masks over batch and heads', function()
    H.seed(102)
    local B, Hh, L, S, E = 2, 3, 4, 5, 3
    local q, k, v = rnd({ B, Hh, L, E }), rnd({ B, Hh, S, E }), rnd({ B, Hh, S, E })
    local bm = ember.rand(L, S) :gt(0.3)
    bm[{ 2, {} }] = false -- a row with every key masked: zeros
    local masks = {
      bm, bm:view(1, 1, L, S), ember.rand(Hh, 1, S):gt(0.2), rnd({ L, S }), rnd({ B, 1, 1, S }),
      rnd({ Hh, L, 1 }):float(), rnd({ B, Hh, L, S }),
    }
    for i, m in ipairs(masks) do
      local out = sdpa(q, k, v, { attn_mask = m })
      check(out, reference(q, k, v, { attn_mask = m }), { B, Hh, L, E }, 1e-6, 'mask ' .. i)
    end
    -- a masked row gives zeros, also through the gradient
    local out = sdpa(q, k, v, { attn_mask = bm })
    assert.are.equal(0, out[{ {}, {}, 2, {} }]:abs():max():item())
  end)

  it('takes a scale, and rank 3 and rank 5 inputs', function()
    H.seed(103)
    local q, k, v = rnd({ 2, 3, 4, 5 }), rnd({ 2, 3, 6, 5 }), rnd({ 2, 3, 6, 2 })
    check(sdpa(q, k, v, { scale = 0.7 }), reference(q, k, v, { scale = 0.7 }), { 2, 3, 4, 2 }, 1e-12)
    local r3 = sdpa(q[1], k[1], v[1])
    check(r3, flat(sdpa(q, k, v)[1]), { 3, 4, 2 }, 1e-12, 'rank 3')
    local q5, k5, v5 = q:view(2, 1, 3, 4, 5), k:view(2, 1, 3, 6, 5), v:view(2, 1, 3, 6, 2)
    check(sdpa(q5, k5, v5), flat(sdpa(q, k, v)), { 2, 1, 3, 4, 2 }, 1e-12, 'rank 5')
    -- PyTorch's positional form
    local m = ember.rand(4, 6):gt(0.2)
    check(sdpa(q, k, v, m, 0, false, 0.3), reference(q, k, v, { attn_mask = m, scale = 0.3 }),
      { 2, 3, 4, 2 }, 1e-12, 'positional')
  end)

  it('aligns causal masks top-left when L ~= S', function()
    H.seed(104)
    for _, ls in ipairs({ { 3, 7 }, { 7, 3 }, { 65, 1 }, { 1, 65 } }) do
      local q, k, v = rnd({ 1, 2, ls[1], 4 }), rnd({ 1, 2, ls[2], 4 }), rnd({ 1, 2, ls[2], 3 })
      check(sdpa(q, k, v, { is_causal = true }), reference(q, k, v, { is_causal = true }),
        { 1, 2, ls[1], 3 }, 1e-12, ('causal %dx%d'):format(ls[1], ls[2]))
    end
  end)

  it('groups query heads over shared key/value heads (enable_gqa)', function()
    H.seed(105)
    local q, k, v = rnd({ 2, 6, 5, 4 }), rnd({ 2, 2, 7, 4 }), rnd({ 2, 2, 7, 3 })
    check(sdpa(q, k, v, { enable_gqa = true }), reference(q, k, v), { 2, 6, 5, 3 }, 1e-12)
    check(sdpa(q, k, v, { enable_gqa = true, is_causal = true }),
      reference(q, k, v, { is_causal = true }), { 2, 6, 5, 3 }, 1e-12, 'causal')
  end)

  it('reads strided views as they are (nanoGPT\'s [B, T, H, E] transposed)', function()
    H.seed(106)
    local B, T, Hh, E = 2, 70, 3, 4
    local qkv = rnd({ B, T, 3 * Hh * E })
    local q, k, v = qkv:narrow(3, 1, Hh * E), qkv:narrow(3, Hh * E + 1, Hh * E), qkv:narrow(3, 2 * Hh * E + 1, Hh * E)
    q, k, v = q:view(B, T, Hh, E):transpose(2, 3), k:view(B, T, Hh, E):transpose(2, 3), v:view(B, T, Hh, E):transpose(2, 3)
    assert.is_false(q:is_contiguous())
    local want = reference(q:contiguous(), k:contiguous(), v:contiguous(), { is_causal = true })
    check(sdpa(q, k, v, { is_causal = true }), want, { B, Hh, T, E }, 1e-12, 'transposed')
    -- a last dim that is not contiguous, and permuted batch dims
    local qt = q:contiguous():transpose(3, 4):contiguous():transpose(3, 4)
    check(sdpa(qt, k, v, { is_causal = true }), want, { B, Hh, T, E }, 1e-12, 'strided last dim')
    local kt = rnd({ Hh, B, T, E }):transpose(1, 2)
    local vt = rnd({ Hh, B, T, E }):transpose(1, 2)
    local q5 = q:contiguous():view(B, 1, Hh, T, E):expand(B, 2, Hh, T, E)
    local got = sdpa(q5:transpose(1, 2), kt:view(B, 1, Hh, T, E):expand(B, 2, Hh, T, E):transpose(1, 2),
      vt:view(B, 1, Hh, T, E):expand(B, 2, Hh, T, E):transpose(1, 2))
    local one = reference(q:contiguous(), kt:contiguous(), vt:contiguous())
    check(got[1], one, { B, Hh, T, E }, 1e-12, 'broadcast batch')
  end)

  it('handles zero-length queries and keys', function()
    H.seed(107)
    local q, k, v = leaf({ 2, 2, 0, 4 }), leaf({ 2, 2, 5, 4 }), leaf({ 2, 2, 5, 3 })
    local out = sdpa(q, k, v)
    assert.are.same({ 2, 2, 0, 3 }, shape_of(out))
    out:sum():backward()
    assert.are.equal(0, k.grad:abs():max():item())
    q, k, v = leaf({ 2, 2, 3, 4 }), leaf({ 2, 2, 0, 4 }), leaf({ 2, 2, 0, 3 })
    out = sdpa(q, k, v, { attn_mask = ember.ones(3, 0):bool() })
    assert.are.same({ 2, 2, 3, 3 }, shape_of(out))
    assert.are.equal(0, out:abs():max():item())
    out:sum():backward()
    assert.are.equal(0, q.grad:abs():max():item())
    assert.are.same({ 2, 2, 0, 4 }, shape_of(k.grad))
    -- zero features: scores are 0, the weights uniform
    local z = sdpa(ember.zeros(1, 1, 2, 0), ember.zeros(1, 1, 3, 0), ember.ones(1, 1, 3, 2))
    check(z, { 1, 1, 1, 1 }, { 1, 1, 2, 2 }, 1e-12, 'E = 0')
  end)
end)

-- ---- backward ---------------------------------------------------------------------------------

describe('scaled_dot_product_attention backward', function()
  it('gradchecks q, k and v with masks, causal and GQA', function()
    H.seed(200)
    local bm = ember.tensor({ { true, false, true, true }, { false, false, false, false },
                              { true, true, false, true } }):bool()
    local cases = {
      { {}, 2, 2 }, { { is_causal = true }, 2, 2 }, { { attn_mask = bm }, 2, 2 },
      { { attn_mask = rnd({ 2, 1, 4 }) }, 2, 2 }, { { scale = 0.4 }, 2, 2 },
      { { enable_gqa = true }, 4, 2 }, { { enable_gqa = true, is_causal = true }, 4, 1 },
    }
    for i, c in ipairs(cases) do
      local o, Hq, Hkv = c[1], c[2], c[3]
      local q, k, v = leaf({ 1, Hq, 3, 2 }), leaf({ 1, Hkv, 4, 2 }), leaf({ 1, Hkv, 4, 3 })
      local ok, err = pcall(gradcheck, function(a, b, cc) return sdpa(a, b, cc, o) end, { q, k, v })
      assert(ok, ('case %d: %s'):format(i, tostring(err)))
    end
    -- causal with L > S and L < S
    for _, ls in ipairs({ { 4, 2 }, { 2, 4 } }) do
      local q, k, v = leaf({ 1, 1, ls[1], 2 }), leaf({ 1, 1, ls[2], 2 }), leaf({ 1, 1, ls[2], 2 })
      assert(gradcheck(function(a, b, cc) return sdpa(a, b, cc, { is_causal = true }) end, { q, k, v }))
    end
  end)

  it('takes the plain float32 path (no AVX-512) to the same results', function()
    local ffi = require 'ffi'
    pcall(ffi.cdef, 'int setenv(const char *name, const char *value, int overwrite);')
    H.seed(204)
    local q, k, v = rnd({ 2, 2, 70, 8 }, 'float32'), rnd({ 2, 2, 90, 8 }, 'float32'), rnd({ 2, 2, 90, 5 }, 'float32')
    local g = rnd({ 2, 2, 70, 5 }, 'float32')
    local function run()
      local a, b, c = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local out = sdpa(a, b, c, { is_causal = true, attn_mask = nil })
      out:backward(g)
      return { out, a.grad, b.grad, c.grad }
    end
    local fast = run()
    ffi.C.setenv('EMBER_CPU_ATTENTION_PLAIN', '1', 1)
    local ok, plain = pcall(run)
    ffi.C.setenv('EMBER_CPU_ATTENTION_PLAIN', '0', 1)
    assert(ok, plain)
    for i = 1, 4 do close(fast[i], plain[i], 1e-5, 'result ' .. i) end
    check(plain[1], reference(q, k, v, { is_causal = true }), { 2, 2, 70, 5 }, 1e-5, 'plain output')
  end)

  it('matches the composed formula\'s gradients across tiles, on 1 and 2 threads', function()
    local threads = ember.memory.get_num_threads and ember.memory.get_num_threads() or nil
    for _, nt in ipairs({ 1, 2 }) do
      ember.set_num_threads(nt)
      for _, c in ipairs({ { 1, 2, 2, 70, 130, false }, { 2, 2, 2, 130, 70, true },
                           { 1, 4, 2, 65, 65, true }, { 3, 6, 3, 9, 9, false },
                           { 1, 2, 1, 150, 140, true } }) do -- big enough for two threads
        H.seed(201)
        local B, Hq, Hkv, L, S, causal = unpack(c)
        local E = L > 100 and 24 or 4 -- enough work for two threads: the two-pass backward
        local q, k, v = leaf({ B, Hq, L, E }), leaf({ B, Hkv, S, E }), leaf({ B, Hkv, S, 5 })
        local o = { is_causal = causal, enable_gqa = Hq ~= Hkv }
        local g = rnd({ B, Hq, L, 5 })
        local got = grads(sdpa(q, k, v, o), { q, k, v }, g)
        local want = grads(composed(q, k, v, o), { q, k, v }, g)
        for i = 1, 3 do close(got[i], want[i], 1e-12, ('threads %d, case %dx%d, grad %d'):format(nt, L, S, i)) end
      end
    end
    ember.set_num_threads(threads or 2)
  end)

  it('gradchecks strided inputs and a broadcast float mask', function()
    H.seed(202)
    local base = leaf({ 1, 3, 2, 2 })
    local m = rnd({ 3, 1 })
    assert(gradcheck(function(x)
      local q = x:transpose(2, 3) -- [1, 2, 3, 2]: heads from the sequence dim
      return sdpa(q, q, q, { attn_mask = m })
    end, { base }))
  end)

  it('refuses a gradient for the mask and double backward', function()
    H.seed(203)
    local q, k, v = leaf({ 1, 1, 2, 2 }), leaf({ 1, 1, 2, 2 }), leaf({ 1, 1, 2, 2 })
    local m = leaf({ 2, 2 })
    local ok, err = pcall(sdpa, q, k, v, { attn_mask = m })
    assert.is_false(ok)
    assert.matches('attn_mask is not supported', err)
    local out = sdpa(q, k, v):sum()
    ok, err = pcall(ember.autograd.grad, { out }, { q }, { create_graph = true })
    assert.is_false(ok)
    assert.matches('double backward', err)
  end)
end)

-- ---- dropout ----------------------------------------------------------------------------------

describe('scaled_dot_product_attention dropout', function()
  it('keeps about 1 - p of the weights, scaled by 1 / (1 - p)', function()
    -- q = 0: every weight is 1 / S; v = I shows the weights themselves.
    local B, Hh, L, S, p = 4, 4, 64, 64, 0.3
    ember.manual_seed(5)
    local q, k = ember.zeros(B, Hh, L, 8), ember.randn(B, Hh, S, 8)
    local v = ember.eye(S):view(1, 1, S, S):expand(B, Hh, S, S)
    local state = ember.get_rng_state()
    local before = state.offset
    local w = sdpa(q, k, v, { dropout_p = p })
    local after = ember.get_rng_state().offset
    assert.are.equal(math.ceil(B * Hh * L * S / 4), after - before)
    local kept = w:gt(0):double():mean():item()
    assert(math.abs(kept - (1 - p)) < 0.01, 'kept ' .. kept)
    local nz = w:masked_select(w:gt(0))
    close(nz, ember.full(nz:size(), 1 / (S * (1 - p))), 1e-6, 'scaled')
    -- the same generator state gives the same mask; p = 1 drops everything
    ember.set_rng_state(state)
    close(sdpa(q, k, v, { dropout_p = p }), w, 0, 'replay')
    assert.are.equal(0, sdpa(q, k, v, { dropout_p = 1 }):abs():max():item())
  end)

  it('gradchecks with the generator reseeded before each evaluation', function()
    H.seed(300)
    for _, o in ipairs({ { dropout_p = 0.4 }, { dropout_p = 0.5, is_causal = true } }) do
      local q, k, v = leaf({ 1, 2, 3, 2 }), leaf({ 1, 2, 4, 2 }), leaf({ 1, 2, 4, 3 })
      local f = function(a, b, c)
        ember.manual_seed(11)
        return sdpa(a, b, c, o)
      end
      assert(gradcheck(f, { q, k, v }))
    end
  end)
end)

-- ---- 16-bit inputs, autocast --------------------------------------------------------------------

describe('scaled_dot_product_attention in 16 bits', function()
  it('gives the float32 result rounded, with 16-bit gradients', function()
    H.seed(400)
    for _, c in ipairs({ { 'float16', 2e-3 }, { 'bfloat16', 2e-2 } }) do
      local q, k, v = rnd({ 2, 2, 9, 8 }, c[1]), rnd({ 2, 2, 11, 8 }, c[1]), rnd({ 2, 2, 11, 4 }, c[1])
      q:requires_grad_()
      local out = sdpa(q, k, v, { is_causal = true })
      assert.are.equal(c[1], out:dtype())
      close(out, sdpa(q:float(), k:float(), v:float(), { is_causal = true }), c[2], c[1])
      out:sum():backward()
      assert.are.equal(c[1], q.grad:dtype())
    end
  end)

  it('runs in the region\'s 16-bit dtype under autocast', function()
    H.seed(401)
    local q, k, v = rnd({ 1, 2, 5, 4 }, 'float32'), rnd({ 1, 2, 5, 4 }, 'float32'), rnd({ 1, 2, 5, 4 }, 'float32')
    local out = ember.autocast({ device = 'cpu', dtype = 'bfloat16' }, sdpa, q, k, v)
    assert.are.equal('bfloat16', out:dtype())
  end)
end)

-- ---- memory -------------------------------------------------------------------------------------

describe('scaled_dot_product_attention memory', function()
  it('stays far below the T^2 score matrix at T = 8192 (forward and backward)', function()
    local T = 8192
    ember.manual_seed(3)
    local q, k, v = ember.randn(1, 1, T, 4), ember.randn(1, 1, T, 4), ember.randn(1, 1, T, 4)
    q:requires_grad_(); k:requires_grad_(); v:requires_grad_()
    ember.memory.collect()
    ember.memory.reset_peak('cpu')
    local base = ember.memory.stats('cpu').allocated
    local out = sdpa(q, k, v, { is_causal = true })
    out:sum():backward()
    local peak = ember.memory.stats('cpu').peak - base
    local matrix = 4 * T * T
    assert(peak < matrix / 100, ('peak %d bytes against a %d-byte score matrix'):format(peak, matrix))
    assert.is_true(q.grad:isfinite():all():item())
  end)
end)

-- ---- errors ---------------------------------------------------------------------------------------

describe('scaled_dot_product_attention errors', function()
  local function fails(pattern, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok, 'expected an error matching ' .. pattern)
    assert.matches(pattern, err, 1, true)
  end
  local q, k, v = ember.randn(1, 2, 3, 4), ember.randn(1, 2, 5, 4), ember.randn(1, 2, 5, 6)

  it('names the argument and what it expected', function()
    fails('expected argument 2 (key) to be a tensor', sdpa, q, nil, v)
    fails('argument 1 (query) with at least 3 dims', sdpa, ember.randn(3, 4), ember.randn(5, 4), ember.randn(5, 4))
    fails('argument 1 (query) to be floating point', sdpa, q:long(), k, v)
    fails('query, key and value of one dtype', sdpa, q, k:double(), v)
    fails('query and key of one feature size', sdpa, q, ember.randn(1, 2, 5, 3), v)
    fails('key and value of one length', sdpa, q, k, ember.randn(1, 2, 4, 6))
    fails('same batch dims', sdpa, q, ember.randn(2, 2, 5, 4), ember.randn(2, 2, 5, 6))
    fails('one rank', sdpa, q, k[1], v)
    fails('pass enable_gqa', sdpa, ember.randn(1, 4, 3, 4), k, v)
    fails('a multiple of the key/value heads', sdpa, ember.randn(1, 3, 3, 4), k, v, { enable_gqa = true })
    fails('attn_mask or is_causal, not both', sdpa, q, k, v, { attn_mask = ember.ones(3, 5):bool(), is_causal = true })
    fails('attn_mask) to be boolean or floating point', sdpa, q, k, v, { attn_mask = ember.ones(3, 5):long() })
    fails('cannot broadcast', sdpa, q, k, v, { attn_mask = ember.ones(3, 4):bool() })
    fails('dropout_p between 0 and 1', sdpa, q, k, v, { dropout_p = 1.5 })
    fails('unknown option dropout', sdpa, q, k, v, { dropout = 0.1 })
    fails('is_causal to be a boolean', sdpa, q, k, v, { is_causal = 1 })
    fails('attn_mask to be a tensor', sdpa, q, k, v, { attn_mask = 'x' })
  end)

  it('raises at the caller\'s line', function()
    for _, f in ipairs({
      function() local r = sdpa(q, k, v, { dropout = 0.1 }) return r end,
      function() local r = sdpa(q, k, v, { is_causal = 1 }) return r end,
      function() local r = sdpa(q, 1, v) return r end,
      function() local r = sdpa(q, k, v, { dropout_p = 2 }) return r end,
    }) do
      local _, err = pcall(f)
      assert.matches('attention_spec.lua:%d+: scaled_dot_product_attention', err)
    end
  end)

  it('refuses tensors on different devices', function()
    local V = require('vk_helpers').V
    if not V then return end
    fails('expected all tensors on cpu, got ' .. V .. ' for argument 2', sdpa, q, k:to(V), v)
    fails('for argument 4', sdpa, q, k, v, { attn_mask = ember.ones(3, 5):bool():to(V) })
  end)
end)
