-- Matrix products on a Vulkan GPU: correctness against the CPU, then speed against PyTorch
-- CUDA (tests/gpu/torch_matmul.py, run from here when python3 can import torch).
--   ember tests/gpu/matmul.lua [device] [quick|smoke|check]
-- "quick" skips n = 8192 in the benchmark; "smoke" runs small sizes only and no PyTorch (to try
-- the script on a CPU driver such as lavapipe); "check" runs the correctness part only.
-- MATMUL_SWEEP="khr:2x2:4x4:32 cm2:128x256x32 ..." also times those tile configurations of
-- the tensor-core kernels (EMBER_VK_COOP_TILE, EMBER_VK_CM2_TILE; docs/devices.md), after
-- checking each on a few odd shapes. MATMUL_DTYPES="bfloat16 ..." checks and times those dtypes
-- only.
--
-- Output, one fact per line, for grep and diff:
--   tensor cores: <what the device reports>          (em_device_info.tensor_cores)
--   PASS|FAIL <what>: ...                  one line per correctness check
--   check: <n> passed, <n> failed
--   ember matmul <dtype> <path> n=<n> <ms> ms <TFLOP/s> TFLOP/s
--   torch matmul <dtype> n=<n> <ms> ms <TFLOP/s> TFLOP/s     (from torch_matmul.py)
--   ratio <dtype> <path> n=<n> <ember/torch>
-- <path>: "tiled" forces kernels/matmul.comp (EMBER_VK_COOPMAT=0); "cm2", "khr", "nv" force that
-- tensor-core kernel (EMBER_VK_COOPMAT=<path>; float16, and bfloat16 through "cm2" where the
-- device started its bfloat16 build, "cm2-bf16" in the report); "auto" is the default choice.
-- The nv kernel is enabled only in a process started with EMBER_VK_COOPMAT=nv: run the script
-- so to check it (it then checks and times "nv" instead of "cm2" and "khr").
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local dev = ember.device(arg[1] or 'vulkan').name
local mode = arg[2]
local quick = mode == 'quick' or mode == 'smoke'
local smoke = mode == 'smoke'
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
ember.zeros(1):to(dev) -- start the device: the report then says which kernels are enabled
info = ember.device(dev):info()
print('tensor cores: ' .. tostring(info.tensor_cores))

local function setenv(k, v)
  if v then ffi.C.setenv(k, v, 1) else ffi.C.unsetenv(k) end
end
local start_env = os.getenv('EMBER_VK_COOPMAT')
-- the float16 paths: every tensor-core kernel enabled on the device, and the tiled kernel
local paths = {}
local kernels = (info.tensor_cores or ''):match('^kernels:([^;]*)') or ''
for _, k in ipairs({ 'cm2', 'khr', 'nv' }) do
  if kernels:find(k, 1, true) then paths[#paths + 1] = k end
end
paths[#paths + 1] = 'tiled'
print('float16 paths: ' .. table.concat(paths, ' '))
-- the bfloat16 paths: cm2 where its bfloat16 build is enabled, and the tiled kernel
local bf16_paths = kernels:find('cm2-bf16', 1, true) and { 'cm2', 'tiled' } or { 'auto' }
print('bfloat16 paths: ' .. table.concat(bf16_paths, ' '))
local function set_path(path)
  if path == 'tiled' then setenv('EMBER_VK_COOPMAT', '0')
  elseif path == 'auto' then setenv('EMBER_VK_COOPMAT', start_env)
  else setenv('EMBER_VK_COOPMAT', path) end
end

-- ---- correctness ----------------------------------------------------------------------------
local passed, failed = 0, 0
local tol = { float32 = { 1e-4, 1e-5 }, float64 = { 1e-12, 1e-13 }, float16 = { 4e-3, 1e-4 },
  bfloat16 = { 2e-2, 1e-3 } }

-- Compared on the CPU (so only the product runs on the device): |got - want| <= rtol * |want|
-- + atol * sqrt(K) * 9, elementwise.
local function check(what, got, want, K)
  local ok, err = pcall(function()
    assert(got:device() == dev, 'the result is on ' .. got:device())
    local g, w = got:to('cpu'):double(), want:double()
    assert(tostring(g:size()) == tostring(w:size()), 'shape ' .. tostring(g:size()))
    if g:numel() == 0 then return end
    local t = tol[want:dtype()]
    local diff = (g - w):abs()
    local bound = w:abs() * t[1] + t[2] * math.sqrt(K + 1) * 9
    local bad = diff:gt(bound):sum():item()
    assert(bad == 0, ('%d of %d elements differ (max diff %g)'):format(bad, g:numel(),
      diff:max():item()))
  end)
  io.stdout:flush()
  if ok then passed = passed + 1; print('PASS ' .. what)
  else failed = failed + 1; print('FAIL ' .. what .. ': ' .. tostring(err)) end
end

local function rand(dtype, shape) return (ember.rand(shape) * 6 - 3):to(dtype) end

-- One set of products at M x N x K: layouts (row/column-major operands, a view with a row
-- stride wider than its row), alpha/beta.
local function products(dt, path, s, full)
  local M, N, K = s[1], s[2], s[3]
  local a, b = rand(dt, { M, K }), rand(dt, { K, N })
  local va, vb = a:to(dev), b:to(dev)
  local tag = ('%s %s %dx%dx%d'):format(dt, path, M, N, K)
  check(tag .. ' a @ b', va:matmul(vb), a:matmul(b), K)
  if not full then return end
  local at, bt = rand(dt, { K, M }), rand(dt, { N, K })
  local vat, vbt = at:to(dev), bt:to(dev)
  check(tag .. ' a:t() @ b:t()', vat:t():matmul(vbt:t()), at:t():matmul(bt:t()), K)
  check(tag .. ' a @ b:t() (linear)', va:matmul(vbt:t()), a:matmul(bt:t()), K)
  check(tag .. ' a:t() @ b', vat:t():matmul(vb), at:t():matmul(b), K)
  -- row strides wider than the rows (and not multiples of 8): a slice of wider matrices
  local wa, wb = rand(dt, { M, K + 3 }), rand(dt, { K, N + 5 })
  check(tag .. ' narrow(a) @ narrow(b)', wa:to(dev):narrow(2, 2, K):matmul(wb:to(dev):narrow(2, 4, N)),
    wa:narrow(2, 2, K):matmul(wb:narrow(2, 4, N)), K)
  local c = rand(dt, { M, N })
  check(tag .. ' addmm beta=0.5 alpha=2',
    ember.addmm(c:to(dev), va, vb, { beta = 0.5, alpha = 2 }),
    ember.addmm(c, a, b, { beta = 0.5, alpha = 2 }), K)
end

local function batches(dt, path)
  local a, b = rand(dt, { 6, 130, 96 }), rand(dt, { 96, 200 })
  check(('%s %s batched 6x130x96 @ shared 96x200'):format(dt, path), a:to(dev):matmul(b:to(dev)),
    a:matmul(b), 96)
  local x, y = rand(dt, { 3, 4, 100, 72 }), rand(dt, { 3, 4, 72, 136 })
  check(('%s %s batched 3x4x100x72 @ 3x4x72x136'):format(dt, path), x:to(dev):matmul(y:to(dev)),
    x:matmul(y), 72)
  local yt = rand(dt, { 3, 4, 136, 72 })
  check(('%s %s batched 3x4x100x72 @ (3x4x136x72):transpose'):format(dt, path),
    x:to(dev):matmul(yt:to(dev):transpose(3, 4)), x:matmul(yt:transpose(3, 4)), 72)
end

ember.manual_seed(1)
-- (edges in M, N and K; K not a multiple of any tile's slice; enough tiles for the large
-- tensor-core tiles)
local sizes = { { 64, 64, 64 }, { 257, 129, 300 }, { 1024, 1024, 1024 }, { 4096, 256, 512 },
  { 1000, 1030, 77 }, { 2100, 4100, 40 }, { 1000, 3000, 520 } }
if smoke then sizes = { { 64, 64, 64 }, { 257, 129, 100 }, { 130, 150, 77 } } end
local dtypes = { 'float32', 'float16', 'bfloat16' }
if info.features.float64 then dtypes[#dtypes + 1] = 'float64' end
local only = os.getenv('MATMUL_DTYPES')
local function wanted(dt) return only == nil or (' ' .. only .. ' '):find(' ' .. dt .. ' ', 1, true) end
for i = #dtypes, 1, -1 do
  if not wanted(dtypes[i]) then table.remove(dtypes, i) end
end
for _, dt in ipairs(dtypes) do
  local dpaths = dt == 'float16' and paths or dt == 'bfloat16' and bf16_paths or { 'auto' }
  for _, path in ipairs(dpaths) do
    set_path(path)
    -- (the tiled kernel, which the Vulkan specs check too, gets fewer sizes)
    local tc = path ~= 'tiled' and path ~= 'auto'
    for i, s in ipairs(sizes) do
      if tc or dt == 'float16' or smoke or i == 2 or i == 5 then products(dt, path, s, true) end
    end
    batches(dt, path)
  end
end
set_path('auto')

-- tile configurations to sweep: each checked on odd shapes first
local sweep = {}
for item in (os.getenv('MATMUL_SWEEP') or ''):gmatch('%S+') do
  local k, cfg = item:match('^(%w+):(.+)$')
  if k and kernels:find(k, 1, true) then
    sweep[#sweep + 1] = { k, cfg }
    local var = k == 'cm2' and 'EMBER_VK_CM2_TILE' or 'EMBER_VK_COOP_TILE'
    setenv(var, cfg)
    set_path(k)
    for _, s in ipairs({ { 257, 129, 300 }, { 1000, 1030, 77 }, { 1000, 3000, 520 } }) do
      products('float16', k .. '[' .. cfg .. ']', s, s[3] == 300)
    end
    batches('float16', k .. '[' .. cfg .. ']')
    setenv(var, nil)
  end
end
set_path('auto')
print(('check: %d passed, %d failed'):format(passed, failed))
if mode == 'check' then os.exit(failed == 0 and 0 or 1) end

-- ---- speed ----------------------------------------------------------------------------------
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
-- Seconds per product: `inner` products between synchronizations (so that a small product's
-- time is not the host's round trip), median of `reps` such runs.
local function time(f, reps, inner)
  -- warm up for a quarter second at least: an idle GPU raises its clocks only under load (the
  -- first size timed otherwise runs slow)
  local w0 = ember.clock()
  repeat f(); f(); ember.synchronize(dev) until ember.clock() - w0 > 0.25
  local s = {}
  for i = 1, reps do
    -- results of the last run go back to the cache first: without it a run could time the
    -- allocation of new device memory for its results (cm2 at n = 4096 then timed 54-76
    -- TFLOP/s in some runs against a kernel time of 255; tests/gpu/matmul_kernels.lua)
    collectgarbage()
    local t0 = ember.clock()
    for _ = 1, inner do f() end
    ember.synchronize(dev)
    s[i] = (ember.clock() - t0) / inner
  end
  return median(s)
end

local results = {}
local ns = smoke and { 128, 256 } or quick and { 1024, 4096 } or { 1024, 4096, 8192 }
local runs = { { 'float32', 'tiled' } }
for _, p in ipairs(paths) do runs[#runs + 1] = { 'float16', p } end
for _, p in ipairs(bf16_paths) do
  if p ~= 'auto' and p ~= 'tiled' then runs[#runs + 1] = { 'bfloat16', p } end
end
runs[#runs + 1] = { 'bfloat16', 'tiled' }
for _, s in ipairs(sweep) do runs[#runs + 1] = { 'float16', s[1], s[2] } end
for i = #runs, 1, -1 do
  if not wanted(runs[i][1]) then table.remove(runs, i) end
end
for _, run in ipairs(runs) do
  local dt, path, cfg = run[1], run[2], run[3]
  set_path(path)
  local var = path == 'cm2' and 'EMBER_VK_CM2_TILE' or 'EMBER_VK_COOP_TILE'
  if cfg then setenv(var, cfg) end
  for _, n in ipairs(ns) do
    local a = (ember.rand(n, n) - 0.5):to(dt):to(dev)
    local b = (ember.rand(n, n) - 0.5):to(dt):to(dev)
    local reps, inner = n <= 1024 and 20 or n <= 4096 and 10 or 5, n <= 1024 and 20 or n <= 4096 and 3 or 1
    local s = time(function() local c = a:matmul(b) end, reps, inner)
    local tflops = 2 * n ^ 3 / s / 1e12
    local name = path .. (cfg and '[' .. cfg .. ']' or '')
    results[dt .. ' ' .. name .. ' ' .. n] = tflops
    io.stdout:flush()
    print(('ember matmul %s %s n=%d %.3f ms %.2f TFLOP/s'):format(dt, name, n, s * 1e3, tflops))
    a, b = nil, nil
    collectgarbage()
  end
  if cfg then setenv(var, nil) end
end
set_path('auto')

if smoke then os.exit(failed == 0 and 0 or 1) end
local p = io.popen('python3 tests/gpu/torch_matmul.py ' .. (quick and 'quick' or '') .. ' 2>&1')
local out = p:read('*a')
p:close()
io.write(out)
local keys = {}
for key in pairs(results) do keys[#keys + 1] = key end
table.sort(keys)
for _, key in ipairs(keys) do
  local dt, path, n = key:match('(%S+) (%S+) (%S+)')
  local ref = tonumber(out:match('torch matmul ' .. dt .. ' n=' .. n .. ' %S+ ms (%S+) TFLOP/s'))
  if ref then print(('ratio %s %s n=%s %.3f'):format(dt, path, n, results[key] / ref)) end
end
os.exit(failed == 0 and 0 or 1)
