-- Benchmark: bfloat16 convolutions on the CPU against float32 (issue: bf16 must be the faster).
--
-- The Fashion-MNIST CNN's two layers at batch 64 (conv1: 1 -> 32 channels, 28x28; conv2:
-- 32 -> 64 channels, 14x14; both 5x5, padding 2), each of the three products a training step
-- runs: forward, input gradient (conv_transpose2d; conv1's is never needed in training but is
-- timed anyway) and weight gradient (conv2d_weight). float32 (Ember's AVX-512 kernels) against
-- bfloat16 on each path of cpu/conv_bf16.c: the best the CPU has (AMX, else AVX-512 BF16),
-- AVX-512 BF16 forced, and the portable path (EMBER_CPU_BF16=0: widen, float32 conv, round).
-- Samples of all variants alternate, so load from other processes hits them alike; each
-- figure is the median; ratios are against float32 in the same run (> 1: faster).
--
-- Usage: ember tests/bench/conv_bf16.lua [reps [threads]]
local ffi = require 'ffi'
local B = dofile('tests/bench/bench.lua')
local F = ember.nn.functional
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')

local reps = tonumber(arg and arg[1]) or 9
if arg and arg[2] then ember.set_num_threads(tonumber(arg[2])) end
local layers = { { 'conv1', 1, 32, 28 }, { 'conv2', 32, 64, 14 } }
local variants = {
  { name = 'float32', dtype = 'float32' },
  { name = 'bf16 best', dtype = 'bfloat16', env = '1' },
  { name = 'bf16 avx512', dtype = 'bfloat16', env = 'avx512' },
  { name = 'bf16 portable', dtype = 'bfloat16', env = '0' },
}

print(('\n== CPU conv2d, bfloat16 against float32: batch 64, %d threads, median of %d samples'):format(
  ember.get_num_threads(), reps))
B.row('%-7s %-8s %-14s %10s %10s %10s', 'layer', 'product', 'variant', 'ms', 'GFLOP/s', 'vs fp32')
local o = { padding = 2 }
for _, l in ipairs(layers) do
  local name, C, M, S = l[1], l[2], l[3], l[4]
  local x32, w32, b32 = ember.randn(64, C, S, S), ember.randn(M, C, 5, 5), ember.randn(M)
  local gy32 = ember.randn(64, M, S, S)
  local flops = 2 * 64 * M * C * 25 * S * S
  for _, product in ipairs({ 'forward', 'input', 'weight' }) do
    local ops = {}
    for i, v in ipairs(variants) do
      local x, w, b, gy = x32:to(v.dtype), w32:to(v.dtype), b32:to(v.dtype), gy32:to(v.dtype)
      if product == 'forward' then ops[i] = function() return F.conv2d(x, w, b, o) end
      elseif product == 'input' then ops[i] = function() return F.conv_transpose2d(gy, w, nil, o) end
      else ops[i] = function() return F.conv2d_weight(x, { M, C, 5, 5 }, gy, o) end end
    end
    local samples = {}
    for i = 1, #variants do samples[i] = {} end
    local function sample(i)
      local v = variants[i]
      if v.env then ffi.C.setenv('EMBER_CPU_BF16', v.env, 1) else ffi.C.unsetenv('EMBER_CPU_BF16') end
      local t0 = B.now()
      for _ = 1, 3 do ops[i]() end
      return (B.now() - t0) / 3
    end
    for i = 1, #variants do sample(i) end -- warm-up
    for r = 1, reps do
      for i = 1, #variants do samples[i][r] = sample(i) end
    end
    ffi.C.unsetenv('EMBER_CPU_BF16')
    local base = B.median(samples[1])
    for i, v in ipairs(variants) do
      local t = B.median(samples[i])
      B.row('%-7s %-8s %-14s %10.3f %10.1f %10.2f', name, product, v.name, t * 1e3, flops / t / 1e9,
        base / t)
    end
  end
end
print('(vs fp32: float32 time / this time in the same run; > 1 is faster than float32)')
