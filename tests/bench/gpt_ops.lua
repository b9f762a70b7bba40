-- Benchmark: the CPU kernels of a GPT training step at its shapes (batch 8, block 128, width
-- 256, 4 heads, 4 layers, 65-token vocabulary), each op alone, forward and forward+backward,
-- against the same ops in PyTorch (tests/bench/torch_gpt_ops.py, best of 1 and 2 threads).
-- The attention kernel and the whole step have their own benchmarks.
-- usage: ember tests/bench/gpt_ops.lua [filter]   (runs the cases whose name contains filter)
local B = dofile('tests/bench/bench.lua')
local nn, F = ember.nn, ember.nn.functional
local filter = arg and arg[1]
-- EMBER_BENCH_CLOCK=cpu times by process CPU time instead of the wall clock: steadier while
-- other processes share the cores, meaningful with one thread (ember.set_num_threads(1)).
local cpu_clock = os.getenv('EMBER_BENCH_CLOCK') == 'cpu'
if cpu_clock then B.now = os.clock end

ember.manual_seed(0)
local Bt, T, D, V = 8, 128, 256, 65
local N = Bt * T

local function leaf(...)
  local x = ember.randn(...)
  x.requires_grad = true
  return x
end

-- Each case: name, and a function returning (forward closure, output-gradient or nil).
-- A case with a gradient is also timed as forward + backward.
local cases = {}
local function case(name, make) cases[#cases + 1] = { name = name, make = make } end

case('add residual [8,128,256]', function()
  local a, b = leaf(Bt, T, D), leaf(Bt, T, D)
  return function() return a + b end, ember.randn(Bt, T, D)
end)
case('layer_norm [1024,256]', function()
  local x, w, b = leaf(N, D), leaf(D), leaf(D)
  return function() return F.layer_norm(x, D, w, b) end, ember.randn(N, D)
end)
case('gelu [8,128,1024]', function()
  local x = leaf(Bt, T, 4 * D)
  return function() return x:gelu() end, ember.randn(Bt, T, 4 * D)
end)
case('softmax [1024,65]', function()
  local x = leaf(N, V)
  return function() return x:softmax(-1) end, ember.randn(N, V)
end)
case('log_softmax [1024,65]', function()
  local x = leaf(N, V)
  return function() return x:log_softmax(-1) end, ember.randn(N, V)
end)
case('cross_entropy [1024,65]', function()
  local x = leaf(N, V)
  local y = ember.randint(1, V + 1, { N }, { dtype = 'int64' })
  return function() return F.cross_entropy(x, y) end, ember.ones({})
end)
local function linear_case(name, din, dout)
  case(name, function()
    local lin = nn.Linear(din, dout)
    local x = leaf(Bt, T, din)
    return function() return lin(x) end, ember.randn(Bt, T, dout)
  end)
end
linear_case('linear qkv 256->768', D, 3 * D)
linear_case('linear proj 256->256', D, D)
linear_case('linear fc 256->1024', D, 4 * D)
linear_case('linear fc2 1024->256', 4 * D, D)
linear_case('linear head 256->65', D, V)
case('embedding [65,256][8,128]', function()
  local w = leaf(V, D)
  local idx = ember.randint(1, V + 1, { Bt, T }, { dtype = 'int64' })
  return function() return F.embedding(idx, w) end, ember.randn(Bt, T, D)
end)
case('dropout 0.1 [8,128,256]', function()
  local x = leaf(Bt, T, D)
  return function() return F.dropout(x, 0.1, true) end, ember.randn(Bt, T, D)
end)
case('adamw step (GPT params)', function()
  local shapes = { { V, D }, { T, D } }
  for _ = 1, 4 do
    for _, s in ipairs({ { D }, { D }, { 3 * D, D }, { 3 * D }, { D, D }, { D }, { D }, { D },
      { 4 * D, D }, { 4 * D }, { D, 4 * D }, { D } }) do shapes[#shapes + 1] = s end
  end
  for _, s in ipairs({ { D }, { D }, { V, D } }) do shapes[#shapes + 1] = s end
  local params = {}
  for i, s in ipairs(shapes) do
    params[i] = leaf(s)
    params[i].grad = ember.randn(s)
  end
  local opt = ember.optim.AdamW(params, { lr = 1e-3 })
  return function() opt:step() end, nil
end)

-- Seconds per call: enough inner calls for ~0.1 s per sample, median of 5.
local function time(f)
  f()
  local t0 = B.now()
  f()
  local per = math.max(B.now() - t0, 1e-7)
  return B.time(f, math.max(1, math.floor(0.1 / per)), 5)
end

local function torch_times()
  local best, version = {}, nil
  for _, threads in ipairs(cpu_clock and { 1 } or { 1, 2 }) do
    local env = threads == 1 and 'OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1'
      or 'OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE'
    local p = io.popen(('%s /usr/bin/python3 tests/bench/torch_gpt_ops.py %d "%s" 2>/dev/null')
      :format(env, threads, filter or ''))
    for line in p:lines() do
      local v = line:match('^torch (%S+)')
      if v then version = v end
      local name, s = line:match('^(.-)\t(%S+)$')
      if name then best[name] = math.min(best[name] or math.huge, tonumber(s)) end
    end
    p:close()
  end
  return best, version
end

print(('\n== GPT step kernels (batch 8, block 128, width 256), %d threads for Ember'):format(
  ember.get_num_threads()))
local ref, version = torch_times()
B.row('%-30s %10s %10s %8s %10s %10s %8s', 'op', 'fwd us', 'torch', 'speed', 'f+b us',
  'torch', 'speed')
for _, c in ipairs(cases) do
  if not filter or c.name:find(filter, 1, true) then
    local fwd, g = c.make()
    local tf = time(fwd)
    local tb
    if g then tb = time(function() fwd():backward(g) end) end
    local rf, rb = ref[c.name .. ' fwd'], ref[c.name .. ' f+b']
    local function cell(t) return t and ('%10.1f'):format(t * 1e6) or ('%10s'):format('-') end
    local function ratio(e, r) return (e and r) and ('%7.2fx'):format(r / e) or ('%8s'):format('-') end
    print(('%-30s %s %s %s %s %s %s'):format(c.name, cell(tf), cell(rf), ratio(tf, rf), cell(tb),
      cell(rb), ratio(tb, rb)))
    ember.memory.collect()
  end
end
if not version then print('pytorch: not available (make bench installs python3-torch)') end
print('speed: PyTorch time / Ember time (above 1: Ember is faster); PyTorch ' .. tostring(version))
