-- sampler_spec: DistributedSampler without MPI (num_replicas and rank given) and the
-- DataLoader's use of it.
--
-- The shards are checked against a reference built here in plain Lua from the global order
-- (the permutation a shuffled DataLoader of the same seed draws): rank r takes positions
-- r+1, r+1+W, ... of the order padded by repeating its head. Disjointness, coverage, the
-- per-epoch reshuffle and resuming at another number of ranks follow from that reference and
-- are checked directly too.
local H = require 'tests.lua.helpers'
local ember = H.ember
local data = ember.data

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = (s[v] or 0) + 1 end
  return s
end

-- Reference shard: positions rank+1, rank+1+W, ... of order[from..] padded PyTorch's way.
local function ref_shard(order, from, world, rank, drop_last)
  local rest = {}
  for i = from + 1, #order do rest[#rest + 1] = order[i] end
  local total = drop_last and math.floor(#rest / world) * world or math.ceil(#rest / world) * world
  local padded = {}
  for i = 1, total do padded[i] = rest[(i - 1) % #rest + 1] end
  local out = {}
  for i = rank + 1, total, world do out[#out + 1] = padded[i] end
  return out
end

local function dataset(n)
  return data.TensorDataset(ember.arange(1, n + 1, { dtype = 'int64' }))
end

describe('DistributedSampler', function()
  it('gives each rank a disjoint shard that covers the dataset, as the reference', function()
    local n, world = 23, 4
    local ds = dataset(n)
    local seen = {}
    local order = data.DistributedSampler(ds, { num_replicas = world, rank = 0, seed = 7 })
      :global_order(1):totable()
    local count = 0
    for rank = 0, world - 1 do
      local s = data.DistributedSampler(ds, { num_replicas = world, rank = rank, seed = 7 })
      local idx = s:indices():totable()
      assert.are.same(ref_shard(order, 0, world, rank, false), idx)
      assert.are.equal(6, #idx) -- ceil(23 / 4)
      assert.are.equal(6, s:num_samples())
      for _, i in ipairs(idx) do seen[#seen + 1] = i end
      count = count + #idx
    end
    -- 24 entries: each of the 23 samples once, and the first of the order once more (padding)
    local s = set_of(seen)
    for i = 1, n do assert.is_truthy(s[i], 'sample ' .. i .. ' missing') end
    assert.are.equal(24, count)
    assert.are.equal(2, s[order[1]])
  end)

  it('drops the tail with drop_last, leaving the shards disjoint', function()
    local ds = dataset(23)
    local seen = {}
    for rank = 0, 3 do
      local s = data.DistributedSampler(ds, { num_replicas = 4, rank = rank, drop_last = true })
      local idx = s:indices():totable()
      assert.are.equal(5, #idx)
      for _, i in ipairs(idx) do
        assert.is_nil(seen[i], 'sample ' .. i .. ' given twice')
        seen[i] = true
      end
    end
  end)

  it('matches the order of a shuffled DataLoader of the same seed at one rank', function()
    local ds = dataset(50)
    local s = data.DistributedSampler(ds, { num_replicas = 1, rank = 0, seed = 11 })
    local dl = data.DataLoader(ds, { shuffle = true, seed = 11 })
    for epoch = 1, 2 do
      assert.are.same(dl:order(epoch):totable(), s:indices(epoch):totable())
    end
  end)

  it('is deterministic and reshuffles per epoch', function()
    local ds = dataset(40)
    local a = data.DistributedSampler(ds, { num_replicas = 2, rank = 1, seed = 3 })
    local b = data.DistributedSampler(ds, { num_replicas = 2, rank = 1, seed = 3 })
    ember.manual_seed(99) -- the global generator plays no part
    local e1 = a:indices():totable()
    assert.are.same(e1, b:indices():totable())
    a:set_epoch(2)
    local e2 = a:indices():totable()
    assert.are_not.same(e1, e2)
    assert.are.same(set_of(ref_shard(a:global_order(2):totable(), 0, 2, 1, false)), set_of(e2))
    local plain = data.DistributedSampler(ds, { num_replicas = 2, rank = 1, shuffle = false })
    assert.are.same({ 2, 4, 6, 8 }, { unpack(plain:indices():totable(), 1, 4) })
  end)

  it('checks its options', function()
    local ds = dataset(4)
    assert.has_error(function() data.DistributedSampler(ds, { num_replicas = 2, rank = 2 }) end,
      'DistributedSampler: expected rank (0-based) to be in 0..1 for num_replicas 2, got 2')
    assert.has_error(function() data.DistributedSampler(ds, { shufle = true }) end)
    assert.has_error(function() data.DataLoader(ds, { shuffle = true,
      sampler = data.DistributedSampler(ds) }) end)
  end)
end)

describe('DataLoader with a DistributedSampler', function()
  local function batches(loader)
    local out = {}
    for x in loader:iter() do out[#out + 1] = x:totable() end
    return out
  end

  it('reads the rank shard, and together the ranks read what one loader of their sum reads', function()
    local ds = dataset(64)
    local one = data.DataLoader(ds, { batch_size = 8,
      sampler = data.DistributedSampler(ds, { num_replicas = 1, rank = 0, seed = 5 }) })
    local whole = batches(one)
    local parts = {}
    for rank = 0, 1 do
      parts[rank] = batches(data.DataLoader(ds, { batch_size = 4,
        sampler = data.DistributedSampler(ds, { num_replicas = 2, rank = rank, seed = 5 }) }))
    end
    assert.are.equal(8, #whole)
    for k = 1, 8 do
      local both = { unpack(parts[0][k]) }
      for _, v in ipairs(parts[1][k]) do both[#both + 1] = v end
      assert.are.same(set_of(whole[k]), set_of(both))
    end
  end)

  it('moves the sampler to the next epoch after each', function()
    local ds = dataset(16)
    local s = data.DistributedSampler(ds, { num_replicas = 2, rank = 0, seed = 1 })
    local dl = data.DataLoader(ds, { batch_size = 4, sampler = s })
    assert.are.equal(2, #dl)
    local e1, e2 = batches(dl), batches(dl)
    assert.are.same(s:indices(1):narrow(1, 1, 4):totable(), e1[1])
    assert.are.same(s:indices(2):narrow(1, 1, 4):totable(), e2[1])
  end)

  it('resumes at another number of ranks from the global position', function()
    -- An uninterrupted run at 1 rank, batch 8; the job at 2 ranks (batch 4 each) stops after
    -- 3 steps; its state resumes at 1 rank and must give the uninterrupted run's batches 4..
    local n = 61
    local ds = dataset(n)
    local full = batches(data.DataLoader(ds, { batch_size = 8,
      sampler = data.DistributedSampler(ds, { num_replicas = 1, rank = 0, seed = 9 }) }))
    local dl = data.DataLoader(ds, { batch_size = 4,
      sampler = data.DistributedSampler(ds, { num_replicas = 2, rank = 0, seed = 9 }) })
    local it, k = dl:iter(), 0
    while k < 3 do it(); k = k + 1 end
    local st = dl:state()
    assert.are.same({ seed = 9, epoch = 1, batch = 0, position = 24 }, st)
    local again = data.DataLoader(ds, { batch_size = 8,
      sampler = data.DistributedSampler(ds, { num_replicas = 1, rank = 0, seed = 0 }) })
    again:load_state(st)
    local rest = batches(again)
    assert.are.equal(#full - 3, #rest)
    for i = 1, #rest do assert.are.same(full[i + 3], rest[i]) end
    -- and the next epoch is the uninterrupted run's second
    assert.are.same(again.sampler:indices(2):narrow(1, 1, 8):totable(), batches(again)[1])
  end)

  it('records the next epoch once an epoch is read to its end', function()
    local ds = dataset(10)
    local dl = data.DataLoader(ds, { batch_size = 4,
      sampler = data.DistributedSampler(ds, { num_replicas = 2, rank = 1 }) })
    local it = dl:iter()
    it(); it()
    assert.are.same({ seed = 0, epoch = 2, batch = 0, position = 0 }, dl:state())
  end)
end)
