-- F.scaled_dot_product_attention on a Vulkan GPU: correctness against the CPU (the plain
-- kernels and the tensor-core forward), then speed against PyTorch CUDA's
-- scaled_dot_product_attention (tests/gpu/torch_attention.py, run from here when python3 can
-- import torch).
--   ember tests/gpu/attention.lua [device] [check]
-- The benchmark: causal attention alone, head dim 64: the nanoGPT shape (batch 64, 6 heads,
-- T = 256) and batch 8, 16 heads, T = 1024 and 4096,
-- float16 / bfloat16 / float32, forward and forward+backward, median of timed runs after a
-- warm-up. FLOP convention (FlashAttention's): the causal forward counts 4 B H T^2 D / 2 (two
-- products, half the scores), the backward 2.5 times that, so forward+backward 3.5 times.
-- Lines, one fact each:
--   PASS|FAIL <what>: max error ...
--   ember attention <dtype> <path> T=<T> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s
--   torch attention <dtype> T=<T> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s   (torch_attention.py)
--   ratio <dtype> T=<T> fwd|fwdbwd <ember/torch speed>
-- <path>: "cm2" (the coopmat2 forward and backward where they run: float16, bfloat16), "coop"
-- (EMBER_VK_ATTENTION_CM2=0: the subgroup-scope tensor-core forward, float16), "plain" (both off).
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local F = require('ember.nn').functional
local sdpa = F.scaled_dot_product_attention
local dev = ember.device(arg[1] or 'vulkan').name
local check_only = arg[2] == 'check'
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
ember.zeros(1):to(dev)
info = ember.device(dev):info()
print('tensor cores: ' .. tostring(info.tensor_cores))

local function set_path(path)
  if path == 'plain' then ffi.C.setenv('EMBER_VK_ATTENTION_COOP', '0', 1)
  else ffi.C.unsetenv('EMBER_VK_ATTENTION_COOP') end
  if path == 'cm2' then ffi.C.unsetenv('EMBER_VK_ATTENTION_CM2')
  else ffi.C.setenv('EMBER_VK_ATTENTION_CM2', '0', 1) end
end

-- ---- correctness --------------------------------------------------------------------------
local passed, failed = 0, 0
local tol = { float32 = 2e-4, float16 = 1e-2, bfloat16 = 6e-2 }
local function maxerr(a, b) return (a:to('cpu'):float() - b:to('cpu'):float()):abs():max():item() end

-- One case: Vulkan (dtype) against the CPU's float32 on the same rounded values, forward and
-- the three gradients.
local function case(what, dt, B, Hq, Hkv, L, S, E, opts)
  opts = opts or {}
  local q = (ember.rand({ B, Hq, L, E }) * 2 - 1):to(dt)
  local k = (ember.rand({ B, Hkv, S, E }) * 2 - 1):to(dt)
  local v = (ember.rand({ B, Hkv, S, E }) * 2 - 1):to(dt)
  local g = (ember.rand({ B, Hq, L, E }) * 2 - 1):to(dt)
  local cq, ck, cv = q:float():requires_grad_(), k:float():requires_grad_(), v:float():requires_grad_()
  local vq, vk, vv = q:to(dev):requires_grad_(), k:to(dev):requires_grad_(), v:to(dev):requires_grad_()
  local vo_opts = {}
  for n, x in pairs(opts) do vo_opts[n] = ember.is_tensor(x) and x:to(dev) or x end
  ember.manual_seed(5)
  local co = sdpa(cq, ck, cv, opts)
  ember.manual_seed(5)
  local vo = sdpa(vq, vk, vv, vo_opts)
  co:backward(g:float())
  vo:backward(g:to(dev))
  local errs = { maxerr(vo, co), maxerr(vq.grad, cq.grad), maxerr(vk.grad, ck.grad),
    maxerr(vv.grad, cv.grad) }
  local ok = errs[1] <= tol[dt] and errs[2] <= 4 * tol[dt] and errs[3] <= 4 * tol[dt] and
    errs[4] <= 4 * tol[dt]
  if ok then passed = passed + 1 else failed = failed + 1 end
  print(('%s %s %s: max error out %.3g, gq %.3g, gk %.3g, gv %.3g'):format(ok and 'PASS' or 'FAIL',
    what, dt, errs[1], errs[2], errs[3], errs[4]))
end

for _, path in ipairs({ 'cm2', 'coop', 'plain' }) do
  set_path(path)
  for _, dt in ipairs({ 'float16', 'bfloat16', 'float32' }) do
    if path == 'cm2' or dt == 'float16' then
      local p = path .. ' '
      case(p .. 'B2 H4 T200 D64', dt, 2, 4, 4, 200, 200, 64)
      case(p .. 'causal L130 S200 D64', dt, 1, 2, 2, 130, 200, 64, { is_causal = true })
      case(p .. 'causal D32 gqa', dt, 2, 4, 2, 150, 150, 32, { is_causal = true, enable_gqa = true })
      case(p .. 'bool mask D16', dt, 1, 2, 2, 70, 90, 16, { attn_mask = ember.rand({ 70, 90 }):gt(0.3) })
      case(p .. 'dropout D64', dt, 1, 2, 2, 100, 120, 64, { dropout_p = 0.2 })
      case(p .. 'D40 (plain)', dt, 1, 2, 2, 65, 70, 40)
      case(p .. 'causal D128 T300', dt, 1, 2, 2, 300, 300, 128, { is_causal = true })
      case(p .. 'additive mask D64', dt, 2, 2, 2, 64, 128, 64, { attn_mask = ember.randn({ 2, 1, 64, 128 }) })
    end
  end
end
set_path('cm2')
print(('check: %d passed, %d failed'):format(passed, failed))
if check_only then return end

-- ---- speed --------------------------------------------------------------------------------
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  local w0 = ember.clock()
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.3
  local s = {}
  for i = 1, reps do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end

local D = 64
local shapes = { { 64, 6, 256 }, { 8, 16, 1024 }, { 8, 16, 4096 } }  -- B, H, T
local results = {}
for _, dt in ipairs({ 'float16', 'bfloat16', 'float32' }) do
  for _, shape in ipairs(shapes) do
    local B, Hh, T = shape[1], shape[2], shape[3]
    local function mk() return ((ember.rand({ B, Hh, T, D }) * 2 - 1):to(dt)):to(dev) end
    local q, k, v, g = mk(), mk(), mk(), mk()
    local flops = 4 * B * Hh * T * T * D * 0.5
    local reps = T >= 4096 and 5 or 10
    local paths = dt == 'float16' and { 'cm2', 'coop', 'plain' } or dt == 'bfloat16' and { 'cm2', 'plain' } or { 'plain' }
    for _, path in ipairs(paths) do
      set_path(path)
      local tf = time(function() sdpa(q, k, v, { is_causal = true }) end, reps)
      local lq, lk, lv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
      local tb = time(function()
        lq.grad, lk.grad, lv.grad = nil, nil, nil
        sdpa(lq, lk, lv, { is_causal = true }):backward(g)
      end, reps)
      print(('ember attention %s %s T=%d fwd %.3f ms %.2f TFLOP/s'):format(dt, path, T, tf * 1e3, flops / tf / 1e12))
      print(('ember attention %s %s T=%d fwdbwd %.3f ms %.2f TFLOP/s'):format(dt, path, T, tb * 1e3, 3.5 * flops / tb / 1e12))
      if path == paths[1] then results[dt .. ' T=' .. T .. ' fwd'], results[dt .. ' T=' .. T .. ' fwdbwd'] = tf, tb end
    end
    set_path('cm2')
  end
end

local ok_torch = os.execute('python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null')
if ok_torch == 0 or ok_torch == true then
  local p = io.popen('python3 tests/gpu/torch_attention.py 2>&1')
  for line in p:lines() do
    print(line)
    local dt, T, kind, ms = line:match('^torch attention (%S+) T=(%d+) (%S+) ([%d.]+) ms')
    if dt and results[dt .. ' T=' .. T .. ' ' .. kind] then
      print(('ratio %s T=%s %s %.2f'):format(dt, T, kind, (tonumber(ms) / 1e3) / results[dt .. ' T=' .. T .. ' ' .. kind]))
    end
  end
  p:close()
else
  print('torch: not available (no ratios)')
end
