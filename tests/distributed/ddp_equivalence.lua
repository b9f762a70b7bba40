-- ddp_equivalence: under `mpirun -np W ember tests/distributed/ddp_equivalence.lua`, W ranks of batch
-- 64/W trained through nn.DistributedDataParallel must end with the parameters of one process
-- trained on batch 64 (same seeds, same data order through DistributedSampler), to float32
-- tolerance, and equal to each other bitwise. Three recipes: SGD with momentum in float32;
-- gradient accumulation over two micro-batches with the first under no_sync; float16 autocast
-- with GradScaler and clip_grad_norm_ (the clip must see the averaged gradients). Each rank
-- builds its model from its own seed, so the wrap-time broadcast is tested too. Last, a
-- parameter used on rank 0 only must not hang the step and gets the average with zeros.
-- An argument names the device (default cpu; `vulkan` takes a Vulkan device, lavapipe too); a
-- second, `quick`, runs only the float32 case for 2 steps (CI's Vulkan run).
package.path = 'tests/distributed/?.lua;' .. package.path
local T = require 'ddp_common'
local ember = require 'ember'
local nn, optim, dist = ember.nn, ember.optim, ember.distributed

if arg[1] == 'vulkan' then
  local found = false
  for _, d in ipairs(ember.devices()) do
    if d.name:match('^vulkan') and not d.error then found = true end
  end
  if not found then print('no Vulkan device') return end
end
dist.init({ device = arg[1] or 'cpu' })
T.device = dist.device()
local world, rank = dist.world_size(), dist.rank()
local quick = arg[2] == 'quick'
local GLOBAL, STEPS = 64, quick and 2 or 5
assert(GLOBAL % world == 0, 'the world size must divide 64')
local ds = T.dataset()

local cases = {
  { name = 'fp32 SGD', tol = 2e-5, opt = function(p) return optim.SGD(p, { lr = 0.1, momentum = 0.9 }) end },
  { name = 'no_sync accumulation', tol = 2e-5, accumulate = true,
    opt = function(p) return optim.Adam(p, { lr = 0.01 }) end },
  { name = 'fp16 GradScaler clip', tol = 2e-3, precision = 'fp16', clip = 0.05,
    opt = function(p) return optim.SGD(p, { lr = 0.2 }) end },
}

if quick then cases = { cases[1] } end
for _, c in ipairs(cases) do
  local opts = { accumulate = c.accumulate, precision = c.precision, clip = c.clip }
  -- the reference: one process, the global batch, no ember.distributed
  local ref = T.model(1)
  T.train(ref, c.opt(ref:parameters()), T.loader(ds, GLOBAL, 1, 0), STEPS, opts)
  -- the job: this rank's shard, its own initial weights, DDP
  local ddp = nn.DistributedDataParallel(T.model(1 + rank), { bucket_mb = 0.001 })
  T.train(ddp, c.opt(ddp:parameters()), T.loader(ds, GLOBAL / world, world, rank), STEPS, opts)
  T.check_same_on_ranks(c.name, ddp:parameters())
  local d = T.check(c.name, ddp:parameters(), ref:parameters(), c.tol, rank)
  if rank == 0 then print(('ok %s: %d ranks on %s, largest relative difference %.2g'):format(c.name, world, T.device, d)) end
  ddp:remove()
end

-- A parameter used on rank 0 only: no hang, and its gradient is the average with zeros elsewhere.
do
  local a, b = nn.Linear(3, 2):to(T.device), nn.Linear(3, 2):to(T.device)
  local ddp = nn.DistributedDataParallel(nn.Sequential():add(a):add(b), { bucket_mb = 1e-5 })
  local x = ember.ones(1, 3, { device = T.device })
  local loss = a(x):sum()
  if rank == 0 then loss = loss + b(x):sum() end
  loss:backward()
  local ga, gb = a.weight.grad:min():item(), b.weight.grad:max():item()
  if ga ~= 1 or math.abs(gb - 1 / world) > 1e-7 or b.weight.grad:min():item() ~= gb then
    error(('unused parameter: rank %d: gradients %g and %g, expected 1 and %g'):format(rank, ga,
      gb, 1 / world), 0)
  end
  if rank == 0 then print('ok a parameter unused on some ranks') end
  ddp:remove()
  -- with find_unused_parameters, one no rank used keeps a nil gradient; the others as before
  local c = nn.Linear(3, 2):to(T.device)
  a.weight.grad, a.bias.grad, b.weight.grad, b.bias.grad = nil, nil, nil, nil
  ddp = nn.DistributedDataParallel(nn.Sequential():add(a):add(b):add(c),
    { bucket_mb = 1e-5, find_unused_parameters = true })
  loss = a(x):sum()
  if rank == 0 then loss = loss + b(x):sum() end
  loss:backward()
  if c.weight.grad ~= nil or c.bias.grad ~= nil or
      math.abs(b.weight.grad:max():item() - 1 / world) > 1e-7 then
    error(('find_unused_parameters: rank %d: a gradient for the unused parameter, or a wrong ' ..
      'average'):format(rank), 0)
  end
  if rank == 0 then print('ok find_unused_parameters') end
  ddp:remove()
end
dist.finalize()
