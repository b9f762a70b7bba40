-- F.scaled_dot_product_attention on Vulkan (runtime/src/vulkan/vk_attention.c, the fused kernels
-- of kernels/attention/) against the CPU's kernel, forward and backward: random inputs, strided
-- views ([B, T, H, E] tensors transposed to [B, H, T, E]), broadcast masks (boolean and
-- additive, with fully masked rows), causal with L ~= S, grouped-query heads, empty L or S,
-- dropout (the same Philox mask on both devices: same outputs and gradients), and float16 /
-- bfloat16 inputs against the CPU's float32 result of the same rounded values. Shapes cross the
-- kernels' 64-row, 64-key and 64-column blocks while staying small for lavapipe. On the GPU
-- machine the same spec checks the tensor-core kernels (tests/gpu/attention.lua runs it).
local VK = require('vk_helpers').open('vulkan attention')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local F = require('ember.nn').functional
local sdpa = F.scaled_dot_product_attention

-- Sums over up to a hundred keys in another order than the CPU's; 16-bit outputs round once.
local tol = { float32 = { 2e-4, 2e-5 }, float16 = { 8e-3, 2e-3 }, bfloat16 = { 5e-2, 1.5e-2 } }

local function data(shape, lo, hi)
  for _, n in ipairs(shape) do if n == 0 then return ember.zeros(shape) end end
  return VK.data('float32', shape, lo or -1, hi or 1)
end

-- A value and its copy on Vulkan, both leaves requiring grad; dtype applied to both.
local function pair(t, dtype)
  t = t:to(dtype)
  return t:clone():requires_grad_(), VK.on(t):requires_grad_()
end

local function close(got, want, what, dt)
  local t = tol[dt]
  H.assert_close(got:to('cpu'):float(), want:float():totable(), t[1], t[2], what)
end

-- Runs attention on both devices (make() gives q, k, v on the CPU: float32, maybe strided
-- views of them) and compares the outputs and the three gradients. dtype: the inputs' dtype on
-- Vulkan; the CPU computes float32 on the same (rounded) values. opts.attn_mask stays on the
-- CPU here and is copied for Vulkan. seed: reseed before each device's call (dropout).
local function compare(what, make, opts, dtype, seed)
  dtype = dtype or 'float32'
  local q, k, v = make()
  local cq, vq = pair(q, dtype)
  local ck, vk = pair(k, dtype)
  local cv, vv = pair(v, dtype)
  local ref = {}
  for name, x in pairs(opts or {}) do ref[name] = x end
  local dev = {}
  for name, x in pairs(ref) do dev[name] = ember.is_tensor(x) and VK.on(x) or x end
  local function f32(t) return t:detach():float():requires_grad_() end
  if dtype ~= 'float32' then cq, ck, cv = f32(cq), f32(ck), f32(cv) end
  if seed then ember.manual_seed(seed) end
  local co = sdpa(cq, ck, cv, ref)
  if seed then ember.manual_seed(seed) end
  local vo = sdpa(vq, vk, vv, dev)
  assert.are.equal(dtype, vo:dtype(), what)
  close(vo, co, what .. ': out', dtype)
  local g = data(co:size())
  co:backward(g)
  vo:backward(VK.on(g:to(dtype)))
  close(vq.grad, cq.grad, what .. ': grad q', dtype)
  close(vk.grad, ck.grad, what .. ': grad k', dtype)
  close(vv.grad, cv.grad, what .. ': grad v', dtype)
end

local function plain(B, Hq, Hkv, L, S, E, Ev)
  return function() return data({ B, Hq, L, E }), data({ B, Hkv, S, E }), data({ B, Hkv, S, Ev }) end
end

-- q, k, v as transposed views of [B, T, H, E] tensors.
local function strided(B, Hq, Hkv, L, S, E, Ev)
  return function()
    return data({ B, L, Hq, E }):transpose(2, 3), data({ B, S, Hkv, E }):transpose(2, 3),
      data({ B, S, Hkv, Ev }):transpose(2, 3)
  end
end

describe('vulkan attention (' .. V .. ')', function()
  it('matches the CPU on random inputs, across tiles, odd head dims', function()
    compare('small', plain(2, 2, 2, 5, 7, 8, 8))
    compare('tiles', plain(1, 2, 2, 70, 100, 40, 24))
    compare('wide heads', plain(1, 1, 1, 33, 40, 72, 80))
  end)

  it('reads strided views and runs causal with L ~= S', function()
    compare('strided', strided(2, 3, 3, 37, 45, 16, 16))
    compare('causal L < S', plain(1, 2, 2, 40, 70, 16, 16), { is_causal = true })
    compare('causal L > S, strided', strided(1, 2, 2, 90, 33, 24, 8), { is_causal = true })
  end)

  it('broadcasts boolean and additive masks, with fully masked rows', function()
    local L, S = 66, 35
    local bm = data({ L, S }):gt(-0.6)
    bm:narrow(1, 3, 1):fill_(false) -- a fully masked row: out 0, gradients 0
    compare('bool mask [L, S]', plain(2, 2, 2, L, S, 16, 16), { attn_mask = bm })
    local am = data({ 2, 1, L, S }, -2, 2)
    am:narrow(1, 1, 1):narrow(3, 5, 1):fill_(-math.huge)
    compare('additive mask [B, 1, L, S]', plain(2, 3, 3, L, S, 8, 12), { attn_mask = am })
    compare('additive mask [S] on strided', strided(1, 2, 2, 20, S, 16, 16),
      { attn_mask = data({ S }, -1, 1) })
  end)

  it('groups query heads (enable_gqa)', function()
    compare('gqa 4/2', plain(2, 4, 2, 30, 41, 16, 16), { enable_gqa = true })
    compare('gqa 6/1 causal', plain(1, 6, 1, 45, 45, 8, 8), { enable_gqa = true, is_causal = true })
  end)

  it('handles empty L or S', function()
    compare('L = 0', plain(1, 2, 2, 0, 9, 8, 8))
    compare('S = 0', plain(1, 2, 2, 9, 0, 8, 8))
  end)

  it('draws the same dropout mask as the CPU', function()
    compare('dropout', plain(2, 2, 2, 37, 70, 16, 16), { dropout_p = 0.3 }, nil, 1234)
    compare('dropout causal gqa', plain(1, 4, 2, 65, 65, 8, 8),
      { dropout_p = 0.5, is_causal = true, enable_gqa = true }, nil, 77)
  end)

  it('takes float16 and bfloat16 inputs (float32 inside)', function()
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      compare(dt, plain(1, 2, 2, 70, 66, 16, 16), nil, dt)
      compare(dt .. ' strided causal', strided(1, 2, 2, 33, 40, 8, 8), { is_causal = true }, dt)
      compare(dt .. ' mask gqa', plain(1, 4, 2, 20, 30, 16, 8),
        { attn_mask = data({ 20, 30 }):gt(-0.5), enable_gqa = true }, dt)
    end
  end)

  it('refuses float64 with a clear error', function()
    local q = VK.on(data({ 1, 1, 4, 8 }):double())
    if VK.has_f64 then
      local ok, err = pcall(sdpa, q, q, q)
      assert.is_false(ok)
      assert.matches('not implemented on ' .. V .. ' for float64', tostring(err), 1, true)
    end
  end)
end)
