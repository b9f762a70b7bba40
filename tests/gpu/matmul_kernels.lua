-- The float16 tensor-core kernels' own GPU time, free of the host: run with EMBER_VK_PROFILE=1,
-- which times every dispatch with GPU timestamps and prints a table per kernel at exit.
--   EMBER_VK_PROFILE=1 ember tests/gpu/matmul_kernels.lua [n] [reps] [dtype]
-- Each kernel (cm2, khr, the tiled one; for bfloat16 cm2, whose bfloat16 module is
-- matmul_cm2_bf16, and the tiled one) multiplies the same n x n operands (float16 unless dtype
-- says bfloat16) `reps` times;
-- the table's mean per module is that kernel's time per product (TFLOP/s = 2 n^3 / mean). The
-- wall time per product, synchronized after each, is printed too: a gap between the two is
-- time the host adds (allocation, submission), not the kernel's.
local ffi = require 'ffi'
ffi.cdef 'int setenv(const char *name, const char *value, int overwrite);'
local n, reps, dt = tonumber(arg[1]) or 4096, tonumber(arg[2]) or 12, arg[3] or 'float16'
local a = (ember.rand(n, n) - 0.5):to(dt):to('vulkan')
local b = (ember.rand(n, n) - 0.5):to(dt):to('vulkan')
for _, path in ipairs(dt == 'bfloat16' and { 'cm2', '0' } or { 'cm2', 'khr', '0' }) do
  ffi.C.setenv('EMBER_VK_COOPMAT', path, 1)
  local c = a:matmul(b) -- warm-up: pipelines, clocks
  c = nil
  ember.synchronize()
  collectgarbage()
  local times = {}
  for i = 1, reps do
    local t0 = ember.clock()
    c = a:matmul(b)
    ember.synchronize()
    times[i] = ember.clock() - t0
    c = nil
    collectgarbage()
  end
  table.sort(times)
  local s = times[math.floor((reps + 1) / 2)]
  print(('wall %s %s n=%d %.3f ms %.1f TFLOP/s'):format(dt, path == '0' and 'tiled' or path, n,
    s * 1e3, 2 * n ^ 3 / s / 1e12))
end
