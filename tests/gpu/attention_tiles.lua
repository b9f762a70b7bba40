-- Tile tuning for the coopmat2 attention kernels (runtime/src/vulkan/vk_attention_cm2.c):
-- times the forward and forward+backward of causal bfloat16 attention (head dim 64) at the
-- nanoGPT shape (64, 6, 256) and at (8, 16, 4096) for each tile setting given as
-- "BR,BC" (EMBER_VK_ATTENTION_CM2_FWD / _DQ / _DKDV), median of timed runs.
--   ember tests/gpu/attention_tiles.lua [dtype] [fwd|dq|dkdv] [tile ...]
-- Lines: tiles <kernel> <tile> <dtype> T=<T> fwd|fwdbwd <ms> ms
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local F = require('ember.nn').functional
local dt = arg[1] or 'bfloat16'
local which = arg[2] or 'fwd'
local tiles = {}
for i = 3, #arg do tiles[#tiles + 1] = arg[i] end
if #tiles == 0 then tiles = { '64,64' } end
local dev = 'vulkan'

local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  local w0 = ember.clock()
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.2
  local s = {}
  for i = 1, reps do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end

local env = 'EMBER_VK_ATTENTION_CM2_' .. which:upper()
for _, shape in ipairs({ { 64, 6, 256 }, { 8, 16, 4096 } }) do
  local B, H, T = shape[1], shape[2], shape[3]
  local function mk() return ((ember.rand({ B, H, T, 64 }) * 2 - 1):to(dt)):to(dev) end
  local q, k, v, g = mk(), mk(), mk(), mk()
  local ref
  for _, t in ipairs(tiles) do
    ffi.C.setenv(env, t, 1)
    local tf = time(function() F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end, 7)
    local lq, lk, lv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
    local function step()
      lq.grad, lk.grad, lv.grad = nil, nil, nil
      F.scaled_dot_product_attention(lq, lk, lv, { is_causal = true }):backward(g)
    end
    local tb = time(step, 7)
    step()
    local grads = { lq.grad:float(), lk.grad:float(), lv.grad:float() }
    local err = 0
    if ref then
      for i = 1, 3 do err = math.max(err, (grads[i] - ref[i]):abs():max():item()) end
    else
      ref = grads
    end
    print(('tiles %s %s %s T=%d fwd %.3f ms fwdbwd %.3f ms (grads vs first tile: %.3g)'):format(
      which, t, dt, T, tf * 1e3, tb * 1e3, err))
  end
  ffi.C.unsetenv(env)
end
