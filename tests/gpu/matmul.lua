-- Matrix products on a Vulkan GPU: correctness against the CPU, then speed against PyTorch
-- CUDA (tests/gpu/torch_matmul.py, run from here when python3 can import torch).
--   ember tests/gpu/matmul.lua [device] [quick|smoke]
-- "quick" skips n = 8192 in the benchmark; "smoke" runs small sizes only and no PyTorch (to try
-- the script on a CPU driver such as lavapipe).
--
-- Output, one fact per line, for grep and diff:
--   PASS|FAIL <what>: ...                  one line per correctness check
--   check: <n> passed, <n> failed
--   ember matmul <dtype> <path> n=<n> <ms> ms <TFLOP/s> TFLOP/s
--   torch matmul <dtype> n=<n> <ms> ms <TFLOP/s> TFLOP/s     (from torch_matmul.py)
--   ratio <dtype> <path> n=<n> <ember/torch>                  (goal: >= 0.7 for float32)
-- <path>: "tiled" forces kernels/matmul.comp (EMBER_VK_COOPMAT=0); "auto" is the default
-- choice, which for float16 is kernels/coopmat/matmul_coop.comp (tensor cores) where the build
-- and the device have cooperative matrices (the "coop:" line says whether the device lists
-- them; then the float16 "auto" and "tiled" timings differ).
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local dev = ember.device(arg[1] or 'vulkan').name
local quick = arg[2] == 'quick' or arg[2] == 'smoke'
local smoke = arg[2] == 'smoke'
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
print(('coop: device lists cooperative matrices: %s; float16 arithmetic: %s'):format(
  tostring(info.features.cooperative_matrix == true), tostring(info.features.float16 == true)))

local function set_coop(on)
  if on then ffi.C.unsetenv('EMBER_VK_COOPMAT') else ffi.C.setenv('EMBER_VK_COOPMAT', '0', 1) end
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

ember.manual_seed(1)
-- (the last: enough 128 x 256 tiles for the cooperative-matrix kernel's wide variant, with
-- edges in M, N and K)
local sizes = { { 64, 64, 64 }, { 257, 129, 300 }, { 1024, 1024, 1024 }, { 4096, 256, 512 },
  { 1000, 1030, 77 }, { 2100, 4100, 40 } }
if smoke then sizes = { { 64, 64, 64 }, { 257, 129, 100 }, { 130, 150, 77 } } end
local dtypes = { 'float32', 'float16', 'bfloat16' }
if info.features.float64 then dtypes[#dtypes + 1] = 'float64' end
for _, coop in ipairs({ true, false }) do
  set_coop(coop)
  for _, dt in ipairs(dtypes) do
    if coop or dt == 'float16' then -- only float16 has two paths
      local path = (dt == 'float16' and coop) and 'auto' or 'tiled'
      for _, s in ipairs(sizes) do
        local M, N, K = s[1], s[2], s[3]
        local a, b = rand(dt, { M, K }), rand(dt, { K, N })
        local at, bt = rand(dt, { K, M }), rand(dt, { N, K })
        local va, vb, vat, vbt = a:to(dev), b:to(dev), at:to(dev), bt:to(dev)
        local tag = ('%s %s %dx%dx%d'):format(dt, path, M, N, K)
        check(tag .. ' a @ b', va:matmul(vb), a:matmul(b), K)
        check(tag .. ' a:t() @ b:t()', vat:t():matmul(vbt:t()), at:t():matmul(bt:t()), K)
        check(tag .. ' a @ b:t() (linear)', va:matmul(vbt:t()), a:matmul(bt:t()), K)
        local c = rand(dt, { M, N })
        check(tag .. ' addmm beta=0.5 alpha=2',
          ember.addmm(c:to(dev), va, vb, { beta = 0.5, alpha = 2 }),
          ember.addmm(c, a, b, { beta = 0.5, alpha = 2 }), K)
      end
      local a, b = rand(dt, { 6, 130, 96 }), rand(dt, { 96, 200 })
      check(('%s %s batched 6x130x96 @ shared 96x200'):format(dt, path),
        a:to(dev):matmul(b:to(dev)), a:matmul(b), 96)
    end
  end
end
set_coop(true)
print(('check: %d passed, %d failed'):format(passed, failed))

-- ---- speed ----------------------------------------------------------------------------------
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  -- warm up for a quarter second at least: an idle GPU raises its clocks only under load (the
  -- first size timed otherwise runs slow)
  local w0 = ember.clock()
  repeat f(); f(); ember.synchronize(dev) until ember.clock() - w0 > 0.25
  local s = {}
  for i = 1, reps do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end

local results = {}
local ns = smoke and { 128, 256 } or quick and { 1024, 4096 } or { 1024, 4096, 8192 }
for _, run in ipairs({ { 'float32', 'tiled', true }, { 'float16', 'auto', true },
  { 'float16', 'tiled', false }, { 'bfloat16', 'tiled', true } }) do
  local dt, path = run[1], run[2]
  set_coop(run[3])
  for _, n in ipairs(ns) do
    local a = (ember.rand(n, n) - 0.5):to(dt):to(dev)
    local b = (ember.rand(n, n) - 0.5):to(dt):to(dev)
    local reps = n <= 1024 and 50 or n <= 4096 and 10 or 5
    local s = time(function() local c = a:matmul(b) end, reps)
    local tflops = 2 * n ^ 3 / s / 1e12
    results[dt .. ' ' .. path .. ' ' .. n] = tflops
    io.stdout:flush()
    print(('ember matmul %s %s n=%d %.3f ms %.2f TFLOP/s'):format(dt, path, n, s * 1e3, tflops))
    a, b = nil, nil
    collectgarbage()
  end
end
set_coop(true)

if smoke then os.exit(failed == 0 and 0 or 1) end
local p = io.popen('python3 tests/gpu/torch_matmul.py ' .. (quick and 'quick' or '') .. ' 2>&1')
local out = p:read('*a')
p:close()
io.write(out)
for key, mine in pairs(results) do
  local dt, path, n = key:match('(%S+) (%S+) (%S+)')
  local ref = tonumber(out:match('torch matmul ' .. dt .. ' n=' .. n .. ' %S+ ms (%S+) TFLOP/s'))
  if ref then print(('ratio %s %s n=%s %.3f'):format(dt, path, n, mine / ref)) end
end
os.exit(failed == 0 and 0 or 1)
