-- Benchmark: training throughput (samples per second) of the issue's models against the same
-- models in PyTorch on this CPU, in one run. PyTorch's best of 1 and 2 threads is the reference.
-- A step is zero_grad, forward, cross-entropy loss, backward and an SGD step.
local B = dofile('tests/bench/bench.lua')
local nn = ember.nn

local function build(kind)
  if kind == 'mlp' then return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), { 784 } end
  if kind == 'tiny' then return nn.Sequential(nn.Linear(10, 10)), { 10 } end
  return nn.Sequential(
    nn.Conv2d(1, 32, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10)),
    { 1, 28, 28 }
end

local function torch_ref(kind, batch, precision)
  local best, per = nil, {}
  for _, threads in ipairs({ 1, 2 }) do
    local env = threads == 1 and 'OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1'
      or 'OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE'
    local p = io.popen(('%s /usr/bin/python3 tests/bench/torch_train_ref.py %s %d %d %s 2>/dev/null')
      :format(env, kind, batch, threads, precision or 'fp32'))
    local out = p:read('*a')
    p:close()
    local rate = tonumber(out:match('torch %S+ (%S+)'))
    if not rate then return nil end
    per[threads] = rate
    best = math.max(best or 0, rate)
  end
  return best, per
end

local function ember_rate(kind, batch, precision)
  ember.manual_seed(0)
  local model, shape = build(kind)
  local recipe = require('ember.precision').new(precision or 'fp32', 'cpu')
  local opt = ember.optim.SGD(model:parameters(), { lr = 0.01 })
  local dims = { batch }
  for _, s in ipairs(shape) do dims[#dims + 1] = s end
  local x = ember.randn(dims)
  local y = ember.randint(1, 11, { batch }, { dtype = 'int64' })
  local F = nn.functional
  local function step()
    opt:zero_grad()
    local loss = recipe:forward(function() return F.cross_entropy(model(x), y) end)
    recipe:step(loss, opt)
  end
  local t0 = B.now()
  for _ = 1, 3 do step() end
  local per = (B.now() - t0) / 3
  local inner = math.max(1, math.floor(0.3 / math.max(per, 1e-7)))
  local s = B.time(step, inner, 7)
  return batch / s, s
end

print(('\n== Training throughput (samples/s), %d threads for Ember'):format(ember.get_num_threads()))
B.row('%-22s %14s %14s %12s %10s', 'model, batch', 'ember', 'pytorch best', 'ratio', 'goal')
local cases = {
  { 'mlp', 64, '>= 1.5' }, { 'mlp', 1, '>= 4' }, { 'cnn', 64, '>= 1.3' }, { 'tiny', 1, '>= 10' },
}
for _, c in ipairs(cases) do
  local kind, batch, goal = c[1], c[2], c[3]
  local ok, rate, step_s = pcall(ember_rate, kind, batch)
  if not ok then
    B.row('%-22s %s', kind .. ', ' .. batch, 'failed: ' .. tostring(rate))
  else
    local ref, per = torch_ref(kind, batch)
    B.row('%-22s %14.0f %14s %12s %10s', ('%s, %d'):format(kind, batch), rate,
      ref and ('%.0f'):format(ref) or 'n/a', ref and ('%.2fx'):format(rate / ref) or '', goal)
    if per then
      B.row('%-22s %14s %14s', '', ('%.1f us/step'):format(step_s * 1e6),
        ('1t %.0f, 2t %.0f'):format(per[1], per[2]))
    end
  end
end

-- Mixed precision on the CPU: bfloat16 autocast (float32 parameters) against Ember's float32
-- step and against PyTorch's CPU bfloat16 autocast, each PyTorch at its best of 1 and 2 threads.
print('\n== bfloat16 autocast training (samples/s)')
B.row('%-22s %14s %14s %12s %14s %10s', 'model, batch', 'ember bf16', 'ember fp32', 'bf16/fp32',
  'pytorch bf16', 'ratio')
for _, c in ipairs({ { 'mlp', 64 }, { 'cnn', 64 } }) do
  local kind, batch = c[1], c[2]
  local ok, rate = pcall(ember_rate, kind, batch, 'bf16')
  local ok32, rate32 = pcall(ember_rate, kind, batch, 'fp32')
  if not (ok and ok32) then
    B.row('%-22s %s', kind .. ', ' .. batch, 'failed: ' .. tostring(ok and rate32 or rate))
  else
    local ref = torch_ref(kind, batch, 'bf16')
    B.row('%-22s %14.0f %14.0f %12s %14s %10s', ('%s, %d'):format(kind, batch), rate, rate32,
      ('%.2fx'):format(rate / rate32), ref and ('%.0f'):format(ref) or 'n/a',
      ref and ('%.2fx'):format(rate / ref) or '')
  end
end
