-- ddp_resume: a checkpoint written by a data-parallel job resumes at another number of
-- processes. `ember tests/distributed/ddp_resume.lua save DIR` (under mpirun -np W) trains 2 steps of
-- batch 64/W per rank with Adam and has rank 0 save the model, the optimizer state and the
-- loader's position; `ember tests/distributed/ddp_resume.lua resume DIR` (under mpirun -np W', or
-- alone) loads it, trains on to step 7 (into the second epoch) and compares the parameters
-- with one process trained 7 steps without interruption.
package.path = 'tests/distributed/?.lua;' .. package.path
local T = require 'ddp_common'
local ember = require 'ember'
local nn, optim, dist = ember.nn, ember.optim, ember.distributed

local mode, dir = arg[1], arg[2]
assert((mode == 'save' or mode == 'resume') and dir, 'usage: ddp_resume.lua save|resume DIR')
local path = dir .. '/ddp_resume.safetensors'
local GLOBAL, SAVED, TOTAL = 64, 2, 7

local under_mpi = (tonumber(os.getenv('OMPI_COMM_WORLD_SIZE') or '') or 0) >= 1
if under_mpi then dist.init({ device = 'cpu' }) end
local world = under_mpi and dist.world_size() or 1
local rank = under_mpi and dist.rank() or 0
local ds = T.dataset()
local function adam(params) return optim.Adam(params, { lr = 0.01 }) end

local model = T.model(1 + rank)
local net = under_mpi and nn.DistributedDataParallel(model) or model
local opt = adam(net:parameters())
local loader = T.loader(ds, GLOBAL / world, world, rank)

if mode == 'save' then
  T.train(net, opt, loader, SAVED)
  local ckpt = { model = net:state_dict(), optimizer = opt:state_dict(), loader = loader:state() }
  if under_mpi then net:save_checkpoint(path, ckpt) else ember.save(path, ckpt) end
  if rank == 0 then
    print(('saved after %d steps at %d ranks, data position %d of epoch %d'):format(SAVED, world,
      ckpt.loader.position, ckpt.loader.epoch))
  end
else
  local ckpt = ember.load(path)
  net:load_state_dict(ckpt.model)
  opt:load_state_dict(ckpt.optimizer)
  loader:load_state(ckpt.loader)
  T.train(net, opt, loader, TOTAL - SAVED)
  local ref = T.model(1)
  T.train(ref, adam(ref:parameters()), T.loader(ds, GLOBAL, 1, 0), TOTAL)
  local d = T.check('resume', net:parameters(), ref:parameters(), 2e-5, rank)
  if rank == 0 then
    print(('ok resume at %d ranks: largest relative difference %.2g'):format(world, d))
  end
end
if under_mpi then dist.finalize() end
