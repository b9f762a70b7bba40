-- Benchmark: scaled_dot_product_attention on the CPU against the same attention composed from
-- unfused ops (q @ k^T * scale, masked_fill of the causal mask, softmax, @ v), float32, on
-- nanoGPT-style [B, H, T, hd] views of one [B, T, 3C] tensor. Forward alone, and forward plus
-- backward (q, k, v require grad). Medians of alternating samples.
--
-- Usage: ember tests/bench/attention.lua [reps [threads [B H T hd]]]
local B = dofile('tests/bench/bench.lua')
local F = ember.nn.functional
local reps = tonumber(arg and arg[1]) or 15
if arg and arg[2] then ember.set_num_threads(tonumber(arg[2])) end
local Bn, Hn, T, hd = tonumber(arg and arg[3]) or 8, tonumber(arg and arg[4]) or 4,
  tonumber(arg and arg[5]) or 128, tonumber(arg and arg[6]) or 64

print(('\n== Attention, causal, [%d, %d, %d, %d] float32, %d threads, median of %d samples'):format(
  Bn, Hn, T, hd, ember.get_num_threads(), reps))
B.row('%-28s %10s %10s %8s', 'case', 'fused ms', 'unfused ms', 'ratio')

ember.manual_seed(1)
local x = ember.randn(Bn, T, 3 * Hn * hd)
local causal = ember.ones(T, T):triu(1):bool()
local scale = 1 / math.sqrt(hd)

local function qkv(grad)
  local xx = grad and x:clone():requires_grad_() or x
  local w = xx:view(Bn, T, 3, Hn, hd)
  return xx, w:select(3, 1):transpose(2, 3), w:select(3, 2):transpose(2, 3),
    w:select(3, 3):transpose(2, 3)
end

local function fused(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end
local function unfused(q, k, v)
  local att = q:matmul(k:transpose(-2, -1)) * scale
  att = att:masked_fill(causal, -math.huge):softmax(-1)
  return att:matmul(v)
end

local g = ember.randn(Bn, Hn, T, hd)
local cases = {}
for _, impl in ipairs({ { 'fused', fused }, { 'unfused', unfused } }) do
  local f = impl[2]
  cases[#cases + 1] = { 'forward', impl[1], function()
    local _, q, k, v = qkv(false)
    local r = f(q, k, v)
  end }
  cases[#cases + 1] = { 'forward + backward', impl[1], function()
    local xx, q, k, v = qkv(true)
    f(q, k, v):backward(g)
    local r = xx.grad
  end }
end
local samples = {}
for i, c in ipairs(cases) do c[3]() c[3]() samples[i] = {} end
for r = 1, reps do
  for i, c in ipairs(cases) do
    local t0 = B.now()
    c[3]()
    samples[i][r] = B.now() - t0
  end
end
local t = {}
for i, c in ipairs(cases) do t[c[1] .. '/' .. c[2]] = B.median(samples[i]) end
for _, what in ipairs({ 'forward', 'forward + backward' }) do
  local a, b = t[what .. '/fused'], t[what .. '/unfused']
  B.row('%-28s %10.3f %10.3f %8.2f', what, a * 1e3, b * 1e3, b / a)
end
