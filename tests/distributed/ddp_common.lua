-- ddp_common: what the DDP tests under mpirun share: a synthetic classification set, a small
-- seeded model, the training loop (the same code at any number of processes) and the
-- comparison of parameters. The reference of every test is this loop run by one process
-- without ember.distributed, on the global batch: DDP must reproduce it.
package.path = 'lua/?.lua;lua/?/init.lua;tests/distributed/?.lua;' .. package.path
local ember = require 'ember'
local nn, data = ember.nn, ember.data

local M = {}

M.N, M.FEATURES, M.CLASSES = 200, 12, 4
M.device = 'cpu' -- where the models train (a test may set another)

-- The data set: the same on every process (seeded).
function M.dataset()
  local saved = ember.get_rng_state()
  ember.manual_seed(123)
  local x = ember.randn(M.N, M.FEATURES)
  local y = ember.randint(1, M.CLASSES + 1, { M.N }, { dtype = 'int64' })
  ember.set_rng_state(saved)
  return data.TensorDataset(x, y)
end

-- The model, from seed: rank 0's weights are what DDP broadcasts, so the other ranks build
-- theirs from another seed (the broadcast must make them equal).
function M.model(seed)
  ember.manual_seed(seed)
  return nn.Sequential():add(nn.Linear(M.FEATURES, 16)):add(nn.Tanh())
    :add(nn.Linear(16, 16)):add(nn.ReLU()):add(nn.Linear(16, M.CLASSES)):to(M.device)
end

-- A loader over the shard of rank `rank` of `world` (world 1: the whole set).
function M.loader(ds, batch, world, rank)
  return data.DataLoader(ds, { batch_size = batch,
    sampler = data.DistributedSampler(ds, { num_replicas = world, rank = rank, seed = 7 }) })
end

-- Trains `steps` steps (crossing epochs) from the loader; opts.accumulate splits each batch in
-- two micro-batches (the first under no_sync when net is a DDP); opts.precision and opts.clip
-- as ember.precision's recipe. Returns the number of steps run.
function M.train(net, opt, loader, steps, opts)
  opts = opts or {}
  local criterion = nn.CrossEntropyLoss()
  local recipe = require('ember.precision').new(opts.precision or 'fp32', M.device)
  local done = 0
  while done < steps do
    for x, y in loader:iter() do
      x, y = x:to(M.device), y:to(M.device)
      opt:zero_grad()
      if opts.accumulate then
        local h = math.floor(x:size(1) / 2)
        local function micro(a, len)
          local loss = criterion(net(x:narrow(1, a, len)), y:narrow(1, a, len)) * (len / x:size(1))
          loss:backward()
        end
        if net.no_sync then net:no_sync(micro, 1, h) else micro(1, h) end
        micro(h + 1, x:size(1) - h)
        opt:step()
      else
        local loss = recipe:forward(function() return criterion(net(x), y) end)
        recipe:step(loss, opt, opts.clip and { clip = opts.clip, params = net:parameters() })
      end
      done = done + 1
      if done == steps then break end
    end
  end
  return done
end

-- Largest relative difference between two lists of parameters.
function M.max_diff(a, b)
  local worst = 0
  for i = 1, #a do
    local d = (a[i]:detach() - b[i]:detach()):abs():max():item()
    local s = b[i]:detach():abs():max():item()
    worst = math.max(worst, d / math.max(s, 1e-6))
  end
  return worst
end

-- Raises (naming the test and the rank) unless the parameters match within tol.
function M.check(name, got, want, tol, rank)
  local d = M.max_diff(got, want)
  if not (d <= tol) then
    error(('%s: rank %d: parameters differ from the one-process reference by %.3g (tolerance %g)')
      :format(name, rank, d, tol), 0)
  end
  return d
end

-- The parameters of every rank must be bitwise equal (they apply the same averaged gradient).
function M.check_same_on_ranks(name, params)
  local dist = ember.distributed
  for i, p in ipairs(params) do
    local mine = p:detach():contiguous()
    local all = dist.all_gather(mine)
    local spread = (all - mine:unsqueeze(1)):abs():max():item()
    if spread ~= 0 then
      error(('%s: rank %d: parameter %d differs across ranks by %g'):format(name, dist.rank(), i,
        spread), 0)
    end
  end
end

return M
