-- Quantized Linear on a Vulkan GPU (vk_quant_matmul.c): correctness against the CPU, then the
-- matrix-vector product (batch 1) of a 4096 x 4096 weight in GB/s of weight read against the
-- GPU's copy bandwidth (an ember copy of 1 GiB, read plus write, in the same run), and batch 64
-- in effective TFLOP/s against PyTorch's fp16 matmul of the dense weight (tests/gpu/torch_quant.py,
-- run from here when python3 can import torch).
--   ember tests/gpu/quant.lua [device] [smoke]
-- "smoke" runs small sizes and no PyTorch (to try the script on a CPU driver such as lavapipe).
-- Formats: QUANT_FORMATS (default "q8_0 q4_0 q4_k"). Q8_0, Q4_0, Q4_K and Q6_K are timed on both
-- matrix-vector kernels where the device has packed int8 dot products ("dot" and "plain",
-- EMBER_VK_QUANT_DOT=1/0), else "plain" only.
--
-- The weight is 4096 x 4096 (9.4 MB in Q4_0): smaller than an H100's 50 MB L2 cache, so every
-- timed batch cycles through enough distinct copies of it (256 MB in all) that each product
-- reads its weight from memory, as token generation through a whole model does.
--
-- Output, one fact per line:
--   PASS|FAIL <what>: ...
--   ember copy <GB/s> GB/s (read plus write)
--   ember quant <fmt> <path> m=1 <us> us <GB/s> GB/s weight read, <ratio> of copy (goal >= 0.7); wall ...
--   ember quant <fmt> tile|auto|matvec m=64 <ms> ms <TFLOP/s> TFLOP/s; wall ...   (tile: the
--     float32 kernel; auto: tensor cores where the device has them; matvec: 8 passes of the
--     matrix-vector kernel, integer path where it applies)
-- The first figures are GPU time (Vulkan timestamps of the quantized kernels, best of 3 runs),
-- the "wall" ones host time around a synchronized batch of products.
--   torch ...                                      (from torch_quant.py)
--   ratio <fmt> tile|auto|matvec m=64 <ember/torch fp16>
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local Q = ember.quant
local dev = ember.device(arg[1] or 'vulkan').name
local smoke = arg[2] == 'smoke'
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
local N, K, B = 4096, 4096, 64
if smoke then N, K, B = 520, 512, 16 end
local formats = {}
for f in (os.getenv('QUANT_FORMATS') or 'q8_0 q4_0 q4_k'):gmatch('%S+') do formats[#formats + 1] = f end

local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  local w0 = ember.clock() -- warm up: an idle GPU raises its clocks only under load
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.25
  local s = {}
  for i = 1, reps do
    collectgarbage()
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end

-- Seconds of GPU time per product (Vulkan timestamps, through the profiler): the kernels of
-- `calls` products run by f, the activation's int8 quantization included. The wall-clock
-- figures (time) also count the host's recording of each dispatch, which a 3 us product on a
-- fast GPU can wait for.
local function quant_kernel(name) return name:match('^quant_') ~= nil and name ~= 'quant_dequant' end
local function gpu_time(f, calls)
  local best
  for _ = 1, 3 do
    local prof = ember.profiler.profile({}, f)
    local us = 0
    for _, r in ipairs(prof:key_averages().rows) do
      if quant_kernel(r.key) then us = us + r.self_vulkan_time_total end
    end
    best = best and math.min(best, us) or us
  end
  return best / 1e6 / calls
end

-- ---- copy bandwidth ---------------------------------------------------------------------------
local cn = smoke and 4 * 1024 * 1024 or 256 * 1024 * 1024
local src = ember.rand(cn / 16):to(dev):repeat_tensor(16)
local dst = ember.empty({ cn }, { device = dev })
local cs = time(function() dst:copy_(src) end, 9)
local copy_bw = 2 * cn * 4 / cs
print(('ember copy %.1f GB/s (read plus write, %d MiB)'):format(copy_bw / 1e9, cn * 4 / 2 ^ 20))
src, dst = nil, nil
collectgarbage()

-- ---- correctness ------------------------------------------------------------------------------
local passed, failed = 0, 0
local function check(what, got, x, w)
  local want = x:double():matmul(w:double():t())
  local g = got:cpu():double()
  local err = (g - want):abs():max():item()
  local scale = x:double():abs():matmul(w:double():abs():t()):max():item()
  -- the integer path quantizes x to int8 per 32: about 0.4% of the block's largest |x|
  local ok = err <= 5e-3 * scale
  if ok then passed = passed + 1 else failed = failed + 1 end
  print(('%s %s: max |diff| %.3g of %.3g'):format(ok and 'PASS' or 'FAIL', what, err, scale))
end

local function setenv(k, v)
  if v then ffi.C.setenv(k, v, 1) else ffi.C.unsetenv(k) end
end
local dot_env = os.getenv('EMBER_VK_QUANT_DOT')
local function paths(fmt)
  local INT = { q8_0 = true, q4_0 = true, q4_k = true, q6_k = true }
  if not INT[fmt] then return { 'plain' } end
  setenv('EMBER_VK_QUANT_DOT', '1')
  local ok = pcall(Q.linear, ember.zeros({ 1, 256 }):to(dev),
    Q.quantize(ember.zeros({ 1, 256 }), { format = fmt }):to(dev))
  setenv('EMBER_VK_QUANT_DOT', dot_env)
  return ok and { 'dot', 'plain' } or { 'plain' }
end
local function set_path(p) setenv('EMBER_VK_QUANT_DOT', p == 'dot' and '1' or '0') end
-- the batched kernels: "tile" the float32 one (EMBER_VK_QUANT_COOP=0), "auto" the default
-- (float16 tensor cores where the device runs its float16 matmul there; else the same kernel),
-- "matvec" the matrix-vector kernel in chunks of 8 rows (EMBER_VK_QUANT_MATVEC_MAX=64: which
-- kernel should take batches of 9 to 64 is a measurement's call)
local BATCH_PATHS = { 'tile', 'auto', 'matvec' }
local coop_env, mv_env = os.getenv('EMBER_VK_QUANT_COOP'), os.getenv('EMBER_VK_QUANT_MATVEC_MAX')
local function set_batch(p)
  setenv('EMBER_VK_QUANT_COOP', p == 'tile' and '0' or coop_env)
  setenv('EMBER_VK_QUANT_MATVEC_MAX', p == 'matvec' and '64' or '8')
end
ember.zeros(1):to(dev)
print('tensor cores: ' .. tostring(ember.device(dev):info().tensor_cores))

ember.manual_seed(1)
local results = {}
for _, fmt in ipairs(formats) do
  local w = ember.rand(N, K) * 2 - 1
  local q = Q.quantize(w, { format = fmt })
  local wd = q:dequantize()
  local g = q:to(dev)
  local fpaths = paths(fmt)
  for _, p in ipairs(fpaths) do
    set_path(p)
    for _, m in ipairs({ 1, 3 }) do
      local x = ember.rand(m, K) * 2 - 1
      check(('%s %s m=%d n=%d k=%d'):format(fmt, p, m, N, K), Q.linear(x:to(dev), g), x, wd)
    end
  end
  setenv('EMBER_VK_QUANT_DOT', dot_env)  -- the batches' matvec path: integer where it applies
  for _, bp in ipairs(BATCH_PATHS) do
    set_batch(bp)
    local x = ember.rand(B, K) * 2 - 1
    check(('%s %s m=%d n=%d k=%d'):format(fmt, bp, B, N, K), Q.linear(x:to(dev), g), x, wd)
  end
  set_batch('auto')
  -- distinct copies of the weight, 256 MB in all (smoke: 2), so that products read memory
  local copies = { g }
  local want = smoke and 2 or math.max(2, math.ceil(256e6 / q:nbytes()))
  for i = 2, want do copies[i] = q:to(dev) end
  local x1 = (ember.rand(1, K) * 2 - 1):to(dev)
  local xb = (ember.rand(B, K) * 2 - 1):to(dev)
  local function over_copies(x) return function() for i = 1, #copies do local y = Q.linear(x, copies[i]) end end end
  for _, p in ipairs(fpaths) do
    set_path(p)
    local s = time(over_copies(x1), 7) / #copies
    local gs = gpu_time(over_copies(x1), #copies)
    local bw, gbw = q:nbytes() / s, q:nbytes() / gs
    results[fmt .. ' ' .. p .. ' m=1'] = gbw
    print(('ember quant %s %s m=1 %.1f us %.1f GB/s weight read, %.3f of copy (goal >= 0.7); '
      .. 'wall %.1f us %.1f GB/s'):format(fmt, p, gs * 1e6, gbw / 1e9, gbw / copy_bw, s * 1e6, bw / 1e9))
  end
  setenv('EMBER_VK_QUANT_DOT', dot_env)
  for _, bp in ipairs(BATCH_PATHS) do
    set_batch(bp)
    local s = time(over_copies(xb), 5) / #copies
    local gs = gpu_time(over_copies(xb), #copies)
    local tf = 2 * B * N * K / gs / 1e12
    results[fmt .. ' ' .. bp .. ' m=' .. B] = tf
    print(('ember quant %s %s m=%d %.3f ms %.2f TFLOP/s; wall %.3f ms %.2f TFLOP/s'):format(fmt, bp, B,
      gs * 1e3, tf, s * 1e3, 2 * B * N * K / s / 1e12))
  end
  set_batch('auto')
  copies, g, q = nil, nil, nil
  collectgarbage()
end
setenv('EMBER_VK_QUANT_DOT', dot_env)
print(('check: %d passed, %d failed'):format(passed, failed))
if smoke then os.exit(failed == 0 and 0 or 1) end

local p = io.popen(('python3 tests/gpu/torch_quant.py %d %d %d 2>&1'):format(N, K, B))
local out = p:read('*a')
p:close()
io.write(out)
local ref = tonumber(out:match('torch matmul float16 m=' .. B .. ' %S+ ms (%S+) TFLOP/s'))
for _, fmt in ipairs(formats) do
  for _, bp in ipairs(BATCH_PATHS) do
    local tf = results[fmt .. ' ' .. bp .. ' m=' .. B]
    if ref and tf then print(('ratio %s %s m=%d %.3f of torch fp16 dense'):format(fmt, bp, B, tf / ref)) end
  end
end
os.exit(failed == 0 and 0 or 1)
