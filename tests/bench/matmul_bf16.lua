-- Benchmark: bfloat16 matmul on the CPU against float32 (issue: bf16 must be the faster one).
--
-- For square n = 256, 512, 1024 and a Linear-like [64 x 784] @ [784 x 256] (also as x @ w:t(),
-- the weight stored [256, 784] as nn.Linear keeps it), times em_matmul in
-- float32 (OpenBLAS sgemm) and in bfloat16 on each path of cpu/gemm_bf16.c: the best the CPU
-- has (AMX, else AVX-512 BF16), AVX-512 BF16 forced, and the portable path (EMBER_CPU_BF16=0:
-- convert to float32, sgemm, round back). Samples of all variants alternate, so load from other
-- processes hits them alike; each figure is the median. Ratios are against float32 in the same
-- run (> 1: faster than float32).
--
-- Usage: ember tests/bench/matmul_bf16.lua [reps [threads]]
local ffi = require 'ffi'
local B = dofile('tests/bench/bench.lua')
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')

local reps = tonumber(arg and arg[1]) or 15
if arg and arg[2] then ember.set_num_threads(tonumber(arg[2])) end
-- { M, K, N, transposed }: transposed multiplies x @ w:t() with w [N, K], as nn.Linear does
local shapes = { { 256, 256, 256 }, { 512, 512, 512 }, { 1024, 1024, 1024 }, { 64, 784, 256 },
  { 64, 784, 256, true } }
local variants = {
  { name = 'float32', dtype = 'float32' },
  { name = 'bf16 best', dtype = 'bfloat16', env = '1' },
  { name = 'bf16 avx512', dtype = 'bfloat16', env = 'avx512' },
  { name = 'bf16 portable', dtype = 'bfloat16', env = '0' },
}

print(('\n== CPU matmul, bfloat16 against float32: %d threads, median of %d samples'):format(
  ember.get_num_threads(), reps))
B.row('%-22s %-14s %10s %10s %10s', 'M x K x N', 'variant', 'ms', 'GFLOP/s', 'vs fp32')
for _, s in ipairs(shapes) do
  local M, K, N = s[1], s[2], s[3]
  local a32, b32 = ember.randn(M, K), s[4] and ember.randn(N, K) or ember.randn(K, N)
  local ops = {}
  for i, v in ipairs(variants) do
    local a, b = a32:to(v.dtype), b32:to(v.dtype)
    if s[4] then b = b:t() end
    ops[i] = function() local c = a:matmul(b) end
  end
  local flops = 2 * M * N * K
  local inner = math.max(1, math.floor(2e9 / flops / 8))
  local samples = {}
  for i = 1, #variants do samples[i] = {} end
  local function sample(i)
    local v = variants[i]
    if v.env then ffi.C.setenv('EMBER_CPU_BF16', v.env, 1) else ffi.C.unsetenv('EMBER_CPU_BF16') end
    local t0 = B.now()
    for _ = 1, inner do ops[i]() end
    return (B.now() - t0) / inner
  end
  for i = 1, #variants do sample(i) end -- warm-up
  for r = 1, reps do
    for i = 1, #variants do samples[i][r] = sample(i) end
  end
  ffi.C.unsetenv('EMBER_CPU_BF16')
  local base = B.median(samples[1])
  for i, v in ipairs(variants) do
    local t = B.median(samples[i])
    B.row('%-22s %-14s %10.3f %10.1f %10.2f', ('%dx%dx%d%s'):format(M, K, N, s[4] and ' w:t()' or ''), v.name, t * 1e3,
      flops / t / 1e9, base / t)
  end
end
print('(vs fp32: float32 time / this time in the same run; > 1 is faster than float32)')
