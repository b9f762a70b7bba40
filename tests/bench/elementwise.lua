-- Benchmark: large elementwise add and mul, as bandwidth (bytes read + written per second),
-- against PyTorch on this CPU and against a plain memcpy. Goal: at least 0.9 of memcpy.
local ffi = require 'ffi'
local B = dofile('tests/bench/bench.lua')
ffi.cdef 'void *memcpy(void *dst, const void *src, size_t n);'

local n = 16 * 1024 * 1024 -- 64 MiB per float32 array: far beyond the caches
local a = ember.rand(n) + 0.5
local b = ember.rand(n) + 0.5
local src, dst = ember.rand(n), ember.empty(n)
local bytes = n * 4

local reps = 9
local memcpy_s = B.time(function() ffi.C.memcpy(dst:data_ptr(), src:data_ptr(), bytes) end, 3, reps)
local memcpy_bw = 2 * bytes / memcpy_s

print(('\n== Large elementwise ops: %d float32 elements (%d MiB per array), %d threads'):format(
  n, bytes / 2 ^ 20, ember.get_num_threads()))
B.row('%-22s %10s %12s %14s %14s', 'op', 'ms', 'GB/s', 'vs memcpy', 'vs pytorch')
B.row('%-22s %10.2f %12.2f %14s %14s', 'memcpy', memcpy_s * 1e3, memcpy_bw / 1e9, '1.00', '')
for _, op in ipairs({ 'add', 'mul' }) do
  local f = op == 'add' and function() local c = a + b end or function() local c = a * b end
  local s = B.time(f, 3, reps)
  local bw = 3 * bytes / s
  local torch_s = B.torch(op, tostring(n))
  B.row('%-22s %10.2f %12.2f %14.3f %14s', 'ember ' .. op, s * 1e3, bw / 1e9, bw / memcpy_bw,
    torch_s and ('%.3f'):format(torch_s / s) or 'n/a')
  if torch_s then
    B.row('%-22s %10.2f %12.2f %14.3f %14s', 'pytorch ' .. op, torch_s * 1e3,
      3 * bytes / torch_s / 1e9, 3 * bytes / torch_s / memcpy_bw, '1.00')
  end
end
print('(vs memcpy: bandwidth ratio, goal >= 0.9; vs pytorch: speed ratio, > 1 is faster)')
