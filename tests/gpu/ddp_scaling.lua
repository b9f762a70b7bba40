-- Data-parallel scaling of Ember on GPUs (issue: weak scaling, docs/performance.md), one model
-- per run; tests/gpu/ddp_scaling.sh runs it at 1, 2 and 4 GPUs with PyTorch DDP alongside.
--   mpirun -np N ember tests/gpu/ddp_scaling.lua <gpt|cnn> [device] [smoke] [precision]
-- Without mpirun it times one process without DDP: the baseline of the efficiency.
--
--   gpt        nanoGPT's char config (tests/gpu/gpt.lua): batch 64 of 256 tokens per GPU,
--              6 layers, 6 heads, width 384, AdamW; random tokens (each rank its own)
--   cnn        the Fashion-MNIST CNN (ember.models 'cnn') at batch 256 per GPU, Adam
-- (The all-reduce bandwidth is tests/gpu/dist_bench.lua's, which ddp_scaling.sh runs after.)
-- device: the devices' kind (default auto: rank r takes GPU number local_rank); smoke: tiny
-- sizes, to try the script on the CPU (device cpu).
--
-- Output (rank 0), one fact per line:
--   ember ddp <model> <precision> gpus <N> <samples/s> samples/s <ms> ms/step   (N with DDP)
--   ember single <model> <precision> <samples/s> samples/s <ms> ms/step         (no mpirun)
-- A step is zero_grad, forward, loss, backward (with the gradient all-reduce), optimizer step;
-- 10 warm-up steps, then the median of 5 runs of 20 steps, each run ended by a synchronization
-- of the device and a barrier (so it counts the slowest rank).
local G = require 'ember.models.gpt'
local B = dofile('tests/bench/bench.lua')

local what = arg[1]
local kind = arg[2] or 'auto'
local smoke = arg[3] == 'smoke'
local precision = arg[4] or 'fp32'
if what ~= 'gpt' and what ~= 'cnn' then
  error("ddp_scaling.lua: expected gpt or cnn, got '" .. tostring(what) .. "'", 0)
end

local dist = os.getenv('OMPI_COMM_WORLD_SIZE') and ember.distributed
local dev, world, rank
if dist then
  dist.init({ device = kind })
  dev, world, rank = dist.device(), dist.world_size(), dist.rank()
else
  dev, world, rank = ember.device(kind).name, 1, 0
end
local function sync()
  ember.synchronize(dev)
  if dist then dist.barrier() end
end
local function say(...) if rank == 0 then print(...) io.stdout:flush() end end

-- ---- training steps -----------------------------------------------------------------------
local function gpt_job()
  local c = smoke and { batch = 4, block = 32, n_layer = 2, n_head = 2, n_embd = 32 }
    or { batch = 64, block = 256, n_layer = 6, n_head = 6, n_embd = 384 }
  ember.manual_seed(1)
  local model = G.GPT { vocab_size = 65, block_size = c.block, n_layer = c.n_layer,
    n_head = c.n_head, n_embd = c.n_embd }:to(dev)
  local net = dist and ember.nn.DistributedDataParallel(model, { bucket_mb = tonumber(os.getenv('EMBER_DDP_BUCKET_MB') or '25') }) or model
  local opt = G.optimizer(model, { lr = 1e-3, weight_decay = 0.1 })
  ember.manual_seed(100 + rank)
  local x = ember.randint(1, 66, { c.batch, c.block }):to(dev)
  local y = ember.randint(1, 66, { c.batch, c.block }):to(dev)
  return c.batch, opt, function() return model:loss(x, y) end, net
end

local function cnn_job()
  local batch = smoke and 16 or 256
  ember.manual_seed(1)
  local model = require('ember.models').build('cnn'):to(dev)
  local net = dist and ember.nn.DistributedDataParallel(model, { bucket_mb = tonumber(os.getenv('EMBER_DDP_BUCKET_MB') or '25') }) or model
  local opt = ember.optim.Adam(model:parameters(), { lr = 1e-3 })
  local criterion = ember.nn.CrossEntropyLoss()
  ember.manual_seed(100 + rank)
  local x = ember.randn(batch, 1, 28, 28):to(dev)
  local y = ember.randint(1, 11, { batch }):to(dev)
  return batch, opt, function() return criterion(net(x), y) end, net
end

local function time_steps(job)
  local batch, opt, loss_of = job()
  local recipe = require('ember.precision').new(precision, dev)
  local function step()
    opt:zero_grad()
    recipe:step(recipe:forward(loss_of), opt)
  end
  for _ = 1, smoke and 3 or 10 do step() end
  sync()
  local runs = {}
  for r = 1, smoke and 2 or 5 do
    local t0 = B.now()
    for _ = 1, smoke and 2 or 20 do step() end
    sync()
    runs[r] = (B.now() - t0) / (smoke and 2 or 20)
  end
  local s = B.median(runs)
  if dist then
    say(('ember ddp %s %s gpus %d %.1f samples/s %.3f ms/step'):format(what, precision, world,
      world * batch / s, s * 1e3))
  else
    say(('ember single %s %s %.1f samples/s %.3f ms/step'):format(what, precision, batch / s, s * 1e3))
  end
end

time_steps(what == 'gpt' and gpt_job or cnn_job)
if dist then dist.finalize() end
