-- A GPT on a GPU: nanoGPT's char config (batch 64, block 256, 6 layers, 6 heads, width 384,
-- vocabulary 65, dropout 0, AdamW; ember.models.gpt) on random token ids, against PyTorch CUDA
-- in the same run (tests/gpu/torch_gpt.py: fp32 with SDPA, and bf16 autocast with SDPA, its
-- usual recipe; run from here when python3 can import torch).
--   ember tests/gpu/gpt.lua [device] [smoke]
-- "smoke": a tiny config and no PyTorch, to try the script anywhere (the CPU, lavapipe).
--
-- Output, one fact per line:
--   ember gpt step <fp32|bf16|fp16> <ms> ms        median of 5 runs of 10 steps (3 warm-up),
--                                                   one synchronization at the end of each run
--   ember gpt generate <n> tokens <tok/s> tokens/s batch 1, key/value cache, a one-character
--                                                   prompt, each token sampled (temperature 0.8,
--                                                   top-k 40) and read back; median of 3 runs
--   torch ...                                      the same from torch_gpt.py
--   ratio step <ember precision> vs <torch recipe> <torch ms / ember ms>   (>1: Ember faster)
--   ratio generate <ember tok/s / torch tok/s>
local G = require 'ember.models.gpt'
local B = dofile('tests/bench/bench.lua')

local dev = ember.device(arg[1] or 'vulkan').name
local smoke = arg[2] == 'smoke'
if arg[2] and not smoke then error("gpt.lua: expected 'smoke' or nothing, got '" .. arg[2] .. "'", 0) end
local c = smoke and { batch = 4, block_size = 32, n_layer = 2, n_head = 2, n_embd = 32 }
  or { batch = 64, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384 }
local tokens = math.min(200, c.block_size - 1)
local info = dev ~= 'cpu' and ember.device(dev):info() or { description = 'cpu' }
print(('device: %s (%s); B%d T%d L%d H%d C%d'):format(dev, info.description or '', c.batch,
  c.block_size, c.n_layer, c.n_head, c.n_embd))

local function model_of()
  ember.manual_seed(1)
  return G.GPT { vocab_size = 65, block_size = c.block_size, n_layer = c.n_layer,
    n_head = c.n_head, n_embd = c.n_embd }:to(dev)
end

local function step_time(precision)
  local model = model_of()
  local opt = G.optimizer(model, { lr = 1e-3, weight_decay = 0.1 })
  local recipe = require('ember.precision').new(precision, dev)
  local x = ember.randint(1, 66, { c.batch, c.block_size }):to(dev)
  local y = ember.randint(1, 66, { c.batch, c.block_size }):to(dev)
  local function step()
    opt:zero_grad()
    recipe:step(recipe:forward(function() return model:loss(x, y) end), opt)
  end
  for _ = 1, 3 do step() end
  ember.synchronize(dev)
  local runs = {}
  for r = 1, 5 do
    local t0 = B.now()
    for _ = 1, 10 do step() end
    ember.synchronize(dev)
    runs[r] = (B.now() - t0) / 10
  end
  return B.median(runs)
end

local function generate_rate()
  local model = model_of()
  local rates = {}
  for r = 1, 4 do
    ember.manual_seed(r)
    ember.synchronize(dev)
    local t0 = B.now()
    local ids = G.generate(model, { 1 }, tokens, { temperature = 0.8, top_k = 40 })
    if r > 1 then rates[#rates + 1] = #ids / (B.now() - t0) end -- the first run warms up
  end
  return B.median(rates)
end

local ember_ms = {}
for _, p in ipairs({ 'fp32', 'bf16', 'fp16' }) do
  local ok, s = pcall(step_time, p)
  if ok then
    ember_ms[p] = s * 1e3
    print(('ember gpt step %s %.3f ms'):format(p, s * 1e3))
  else
    print(('ember gpt step %s failed: %s'):format(p, tostring(s)))
  end
  io.stdout:flush()
end
local ok, rate = pcall(generate_rate)
if ok then print(('ember gpt generate %d tokens %.1f tokens/s'):format(tokens, rate))
else print('ember gpt generate failed: ' .. tostring(rate)) rate = nil end
io.stdout:flush()

if smoke then return end
if not os.execute('python3 -c "import torch" 2>/dev/null') then
  print('(no PyTorch for python3: no reference)')
  return
end
local p = io.popen('python3 tests/gpu/torch_gpt.py --tokens ' .. tokens .. ' 2>&1')
local out = p:read('*a')
p:close()
io.write(out)
local torch_ms = {}
for name, ms in out:gmatch('torch gpt step (%S+) (%S+) ms') do torch_ms[name] = tonumber(ms) end
for _, e in ipairs({ 'fp32', 'bf16', 'fp16' }) do
  for _, t in ipairs({ 'fp32-sdpa', 'bf16-sdpa' }) do
    if ember_ms[e] and torch_ms[t] then
      print(('ratio step %s vs %s %.3f'):format(e, t, torch_ms[t] / ember_ms[e]))
    end
  end
end
local torch_rate = tonumber(out:match('torch gpt generate %d+ tokens (%S+) tokens/s'))
if rate and torch_rate then print(('ratio generate %.3f'):format(rate / torch_rate)) end
