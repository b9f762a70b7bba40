-- Benchmark: attention's batched products on the CPU, over the strided [B, H, T, hd] views of
-- one [B, T, 3C] tensor (nanoGPT's q, k, v split), in float32 and bfloat16, against the same
-- products on contiguous copies of the operands (3-D bmm). Each product is one call of the
-- gemm slot (ops/linalg.c hands it both batch dims); the float32 kernel runs the batch as one
-- parallel loop on Ember's packed AVX-512 product where the CPU has AVX-512, and the bfloat16
-- one on cpu/gemm_bf16.c. Medians of alternating samples.
--
-- Usage: ember tests/bench/matmul_batched.lua [reps [threads]]
local B = dofile('tests/bench/bench.lua')
local reps = tonumber(arg and arg[1]) or 15
if arg and arg[2] then ember.set_num_threads(tonumber(arg[2])) end

local Bn, T, Hn, hd = 8, 128, 6, 64
print(('\n== Attention products on [%d, %d, %d, %d] views, %d threads, median of %d samples'):format(
  Bn, Hn, T, hd, ember.get_num_threads(), reps))
B.row('%-10s %-22s %10s %10s', 'dtype', 'product', 'ms', 'GFLOP/s')
for _, dt in ipairs({ 'float32', 'bfloat16' }) do
  local x = ember.randn(Bn, T, 3 * Hn * hd):to(dt)
  local w = x:view(Bn, T, 3, Hn, hd)
  local q, k, v = w:select(3, 1):transpose(2, 3), w:select(3, 2):transpose(2, 3),
    w:select(3, 3):transpose(2, 3)
  local kt = k:transpose(-2, -1)
  local att = q:matmul(kt)
  local qc, ktc = q:contiguous():view(Bn * Hn, T, hd), kt:contiguous():view(Bn * Hn, hd, T)
  local cases = {
    { 'q @ k^T (views)', function() local r = q:matmul(kt) end },
    { 'att @ v (views)', function() local r = att:matmul(v) end },
    { 'q @ k^T (bmm, copies)', function() local r = ember.bmm(qc, ktc) end },
  }
  local samples = {}
  for i, c in ipairs(cases) do c[2]() samples[i] = {} end
  for r = 1, reps do
    for i, c in ipairs(cases) do
      local t0 = B.now()
      c[2]()
      samples[i][r] = B.now() - t0
    end
  end
  local flops = 2 * Bn * Hn * T * T * hd
  for i, c in ipairs(cases) do
    local t = B.median(samples[i])
    B.row('%-10s %-22s %10.3f %10.1f', dt, c[1], t * 1e3, flops / t / 1e9)
  end
end
