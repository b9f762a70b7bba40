-- Benchmark: one GPT training step on the CPU (zero_grad, forward, cross-entropy loss,
-- backward, AdamW step; ember.models.gpt, nanoGPT's model) against the same step in PyTorch
-- (tests/bench/torch_gpt_step.py) at its best of 1 and 2 threads, in one run. Median step times
-- on random token ids, for the issue's two configs:
--   small: batch 8, block 128, 4 layers, 4 heads, width 256, vocabulary 65 (goal >= 1.3x)
--   tiny:  batch 4, block 64, 2 layers, 4 heads, width 128, vocabulary 65
-- Each side also reports its process's CPU time per step (os.clock, Python's process_time) over
-- the timed runs: on a machine shared with other work the wall times swing, the CPU times much
-- less, and at 1 thread their ratio is the kernels' and the overhead's alone.
-- usage: ember tests/bench/gpt_step.lua [small|tiny ...] [--no-torch] [--threads N]
local B = dofile('tests/bench/bench.lua')
local G = require 'ember.models.gpt'

local configs = {
  small = { batch = 8, block_size = 128, n_layer = 4, n_head = 4, n_embd = 256, goal = '>= 1.3' },
  tiny = { batch = 4, block_size = 64, n_layer = 2, n_head = 4, n_embd = 128, goal = '' },
}

local names, with_torch = {}, true
local args, i = arg or {}, 1
while i <= #args do
  local a = args[i]
  if a == '--no-torch' then with_torch = false
  elseif a == '--threads' and tonumber(args[i + 1]) then
    ember.set_num_threads(tonumber(args[i + 1]))
    i = i + 1
  elseif configs[a] then names[#names + 1] = a
  else error(("gpt_step.lua: expected small, tiny, --no-torch or --threads N, got '%s'"):format(a), 0) end
  i = i + 1
end
if #names == 0 then names = { 'small', 'tiny' } end

local function ember_step_time(c)
  ember.manual_seed(0)
  local model = G.GPT { vocab_size = 65, block_size = c.block_size, n_layer = c.n_layer,
    n_head = c.n_head, n_embd = c.n_embd }
  local opt = G.optimizer(model, { lr = 1e-3, weight_decay = 0.1 })
  local x = ember.randint(1, 66, { c.batch, c.block_size })
  local y = ember.randint(1, 66, { c.batch, c.block_size })
  local function step()
    opt:zero_grad()
    model:loss(x, y):backward()
    opt:step()
  end
  local t0 = B.now()
  for _ = 1, 3 do step() end
  local per = (B.now() - t0) / 3
  local inner = math.max(1, math.floor(0.3 / math.max(per, 1e-7)))
  local c0 = os.clock()
  local wall = B.time(step, inner, 7)
  return wall, (os.clock() - c0) / (7 * inner + math.max(1, math.floor(inner / 4)))
end

local function torch_step_time(name)
  local per, cpu = {}, {}
  for _, threads in ipairs({ 1, 2 }) do
    local env = threads == 1 and 'OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1'
      or 'OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE'
    local p = io.popen(('%s /usr/bin/python3 tests/bench/torch_gpt_step.py %s %d 2>/dev/null'):format(
      env, name, threads))
    local out = p:read('*a')
    p:close()
    local wall, c = out:match('torch %S+ (%S+) (%S+)')
    per[threads], cpu[threads] = tonumber(wall), tonumber(c)
    if not per[threads] then return nil end
  end
  return math.min(per[1], per[2]), per, cpu
end

print(('\n== GPT training step on the CPU (ms, median), %d threads for Ember'):format(
  ember.get_num_threads()))
B.row('%-40s %10s %14s %8s %8s', 'config', 'ember', 'pytorch best', 'ratio', 'goal')
for _, name in ipairs(names) do
  local c = configs[name]
  local label = ('%s: B%d T%d L%d H%d C%d'):format(name, c.batch, c.block_size, c.n_layer, c.n_head, c.n_embd)
  local ok, s, cpu = pcall(ember_step_time, c)
  if not ok then
    B.row('%-40s %s', label, 'failed: ' .. tostring(s))
  else
    local ref, per, tcpu
    if with_torch then ref, per, tcpu = torch_step_time(name) end
    B.row('%-40s %10.2f %14s %8s %8s', label, s * 1e3, ref and ('%.2f'):format(ref * 1e3) or 'n/a',
      ref and ('%.2fx'):format(ref / s) or '', c.goal)
    if per then B.row('%-40s %10s %14s', '', '', ('1t %.2f, 2t %.2f'):format(per[1] * 1e3, per[2] * 1e3)) end
    local threads = ember.get_num_threads()
    B.row('%-40s %10.2f %14s %8s', ('  CPU time per step, ember %d thread%s'):format(threads,
      threads == 1 and '' or 's'), cpu * 1e3,
      tcpu and ('%.2f'):format((tcpu[threads] or tcpu[2]) * 1e3) or 'n/a',
      tcpu and ('%.2fx'):format((tcpu[threads] or tcpu[2]) / cpu) or '')
  end
end
