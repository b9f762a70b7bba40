-- Indexing and sorting on a Vulkan GPU: correctness against the CPU at sizes the lavapipe specs
-- do not reach (a GPU's larger shared memory takes other sort chunk sizes), then speed against
-- PyTorch CUDA (tests/gpu/torch_index.py, run from here when python3 can import torch).
--   ember tests/gpu/index.lua [device] [smoke]
-- "smoke" runs small sizes and no PyTorch (to try the script on a CPU driver such as lavapipe).
-- Output, one fact per line:
--   PASS|FAIL <what>                          one line per correctness check (exact)
--   check: <n> passed, <n> failed
--   ember <case> <ms> ms                      median of 9, synchronized
--   torch <case> <ms> ms                      (from torch_index.py)
--   ratio <case> <torch/ember>                (above 1: Ember is faster)
local ember = ember or require 'ember'
local dev = ember.device(arg[1] or 'vulkan').name
local smoke = arg[2] == 'smoke'
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
local function on(t) return t:to(dev) end

local passed, failed = 0, 0
-- Exact agreement, NaN equal to NaN.
local function check(what, got, want)
  got, want = got:to('cpu'), want:to('cpu')
  local ok = got:dtype() == want:dtype() and got:numel() == want:numel()
  if ok and got:numel() > 0 then
    if got:dtype() == 'bool' then
      ok = got:eq(want):all():item()
    else
      local a, b = got:double(), want:double()
      local both = a:isnan():logical_and(b:isnan())
      ok = ember.where(both, ember.zeros(1):double(), (a - b):abs()):max():item() == 0
    end
  end
  if ok then passed = passed + 1 else failed = failed + 1 end
  print((ok and 'PASS ' or 'FAIL ') .. what)
end

-- Values with ties and NaN (floats), so stability and NaN order show in the indices.
local function sortable(dtype, shape)
  local x = ember.randn(unpack(shape)):mul(5):floor()
  if dtype:find('float') then x = x:masked_fill(ember.rand(unpack(shape)):lt(0.05), 0 / 0) end
  return x:to(dtype)
end

local S = smoke and 0.05 or 1
local lens = smoke and { 5, 129, 4097 } or { 5, 100, 129, 1000, 4096, 4097, 10000, 100003 }
for _, n in ipairs(lens) do
  for _, dt in ipairs({ 'float32', 'int64', 'float16', 'float64' }) do
    local x = sortable(dt, { 3, n })
    for _, desc in ipairs({ false, true }) do
      local _, wi = x:sort(2, desc)
      local _, gi = on(x):sort(2, desc)
      check(('sort %s n=%d%s'):format(dt, n, desc and ' desc' or ''), gi, wi)
    end
  end
end
local x = sortable('float32', { math.floor(20000 * S), 3 })
check('sort dim 1', select(2, on(x):sort(1)), select(2, x:sort(1)))
local u = ember.randn(math.floor(200000 * S)):mul(100):floor()
check('unique', on(u):unique(), u:unique())
local t = ember.randn(8, math.floor(50257 * S))
check('topk', select(2, on(t):topk(50, 2)), select(2, t:topk(50, 2)))
local m = ember.rand(64, math.floor(300000 * S)):lt(0.3)
check('nonzero', on(m):nonzero(), m:nonzero())
local W = ember.randn(5000, 768)
local idx = ember.rand(math.floor(16384 * S)):mul(5000):floor():long():add(1)
check('index_select rows', on(W):index_select(1, on(idx)), W:index_select(1, idx))
local G = ember.randn(idx:numel(), 768)
for _, dt in ipairs({ 'float32', 'float16', 'bfloat16', 'float64', 'int64', 'int32' }) do
  local g, w = G:to(dt), ember.zeros(5000, 768):to(dt)
  check('index_add ' .. dt, on(w):index_add(1, on(idx), on(g)), w:index_add(1, idx, g))
end
local s1 = ember.randn(math.floor(1000000 * S))
local i1 = ember.rand(s1:numel()):mul(3000):floor():long():add(1)
check('index_copy 1-D', on(ember.zeros(3000)):index_copy(1, on(i1), on(s1)),
  ember.zeros(3000):index_copy(1, i1, s1))
check('scatter_add 1-D', on(ember.zeros(3000)):scatter_add(1, on(i1), on(s1)),
  ember.zeros(3000):scatter_add(1, i1, s1))
local gi = ember.rand(4096, 100):mul(1000):floor():long():add(1)
local gx = ember.randn(4096, 1000)
check('gather', on(gx):gather(2, on(gi)), gx:gather(2, gi))
print(('check: %d passed, %d failed'):format(passed, failed))

-- Speed. The C calls skip the Lua layer's 1-based index conversion (one more kernel); the
-- definitions' host bounds check (a wait for the device) is included, as a user sees it.
local C = ember.C
local function median(s) table.sort(s) return s[math.floor((#s + 1) / 2)] end
local results = {}
local function time(name, f)
  f()
  ember.synchronize(dev)
  local s = {}
  for i = 1, 9 do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  results[name] = median(s) * 1e3
  print(('ember %-36s %9.3f ms'):format(name, results[name]))
end
local function free(p) C.em_release(p) end
local N = smoke and 100000 or 16000000
local a1 = on(ember.randn(N / 16))
time('sort_1M', function() local _ = a1:sort() end)
local a16 = on(ember.randn(N))
time('sort_16M', function() local _ = a16:sort() end)
local a2 = on(ember.randn(smoke and 64 or 4096, 1000))
time('argsort_4096x1000', function() local _ = a2:argsort(2) end)
local a3 = on(ember.randn(smoke and 1000 or 100000, 16))
time('argsort_100000x16', function() local _ = a3:argsort(2) end)
local a4 = on(ember.randn(smoke and 2 or 64, 50257))
time('topk50_64x50257', function() local _ = a4:topk(50, 2) end)
local R, T = smoke and 5000 or 50257, smoke and 1024 or 16384
local Wv = on(ember.randn(R, 768))
local iv = on(ember.rand(T):mul(R):floor():long())
time('index_select_50257x768_16384', function() free(C.em_index_select(Wv.ptr, 0, iv.ptr)) end)
local Gv, Z = on(ember.randn(T, 768)), on(ember.zeros(R, 768))
time('index_add_50257x768_16384', function() C.em_index_add_(Z.ptr, 0, iv.ptr, Gv.ptr, 1.0) end)
local big = on(ember.rand(N):lt(0.5))
time('nonzero_16M', function() local _ = big:nonzero() end)
local s1v = on(ember.randn(N / 16))
local i1v = on(ember.rand(N / 16):mul(N / 16):floor():long())
local Z1 = on(ember.zeros(N / 16))
time('index_copy_1M', function() C.em_index_copy_(Z1.ptr, 0, i1v.ptr, s1v.ptr) end)

if smoke then return end
local p = io.popen('python3 tests/gpu/torch_index.py 2>&1')
local out = p:read('*a')
p:close()
io.write(out)
for name, ms in pairs(results) do
  local ref = tonumber(out:match('torch ' .. name .. '%s+(%S+) ms'))
  if ref then print(('ratio %-36s %.3f'):format(name, ref / ms)) end
end
