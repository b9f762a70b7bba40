-- ember.data.sampler: DistributedSampler, the share of a dataset one process of a data-parallel
-- job reads each epoch (PyTorch's torch.utils.data.DistributedSampler, in Lua).
--
--   local sampler = ember.data.DistributedSampler(ds, {shuffle = true, seed = 0})
--   local loader = ember.data.DataLoader(ds, {batch_size = 32, sampler = sampler})
--
-- Order. Epoch e's global order is the permutation DataLoader{shuffle = true, seed = seed}
-- draws for epoch e (Philox keyed by the seed at offset (e - 1) * 2^32), or 1..n without
-- shuffle; it depends on (seed, e) only, so every rank draws the same one without talking.
-- Rank r (0-based) takes the positions r + 1, r + 1 + W, r + 1 + 2W, ... of it (W processes),
-- as PyTorch does. So with W ranks of batch b, step k's W batches together are exactly the
-- global positions k*W*b + 1 .. (k+1)*W*b: the batch one process of batch W*b would see.
--
-- Padding. Unless drop_last, the order is padded to a multiple of W by repeating its first
-- entries (PyTorch's padding), so every rank gets the same number of samples; with drop_last
-- the tail that does not fill a round is dropped.
--
-- Position. The sampler's place in an epoch is the number of samples of the global order the
-- whole job has consumed (`position`), not a per-rank batch count: a checkpoint taken at W
-- ranks resumes at W' ranks from the same sample. A resumed epoch shards what is left of the
-- order (positions position+1 .. n) over the W' ranks the same way, padding that remainder.
-- state()/load_state() carry {seed, epoch, position}; the DataLoader fills in the position
-- from the batches it has yielded (DataLoader:state()).
local class = require 'ember.data.class'
local creation = require 'ember.creation'
local epoch_order = require 'ember.data.epoch_order'
local index_ops = require 'ember.ops.index'

local DistributedSampler = class.class('DistributedSampler')


local function is_int(v) return type(v) == 'number' and v == math.floor(v) and v == v end

local function check_int(fn, what, v, min, max, level)
  if not is_int(v) or v < min or (max and v > max) then
    error(('%s: expected %s to be an integer %s, got %s'):format(fn, what,
      max and ('in %d..%d'):format(min, max) or ('>= ' .. min), tostring(v)), level or 3)
  end
  return v
end

-- The world size and rank to default to: the job's when ember.distributed is initialized,
-- else one process (so a script using the sampler runs unchanged without MPI).
local function job_defaults()
  local ok, dist = pcall(require, 'ember.distributed')
  if ok and type(dist) == 'table' and dist.is_initialized and dist.is_initialized() then
    return dist.world_size(), dist.rank()
  end
  return 1, 0
end

local options = { shuffle = true, seed = true, drop_last = true, num_replicas = true, rank = true }

function DistributedSampler:init(ds, opts)
  if (type(ds) ~= 'table' and type(ds) ~= 'userdata') or type(ds.size) ~= 'function' then
    error('DistributedSampler: expected a dataset with size(), got ' .. type(ds), 3)
  end
  opts = require('ember.util.names').check_options('DistributedSampler', opts, options, 3)
  for _, k in ipairs({ 'shuffle', 'drop_last' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
      error(('DistributedSampler: expected %s to be a boolean, got %s'):format(k, type(opts[k])), 3)
    end
  end
  local world, rank = job_defaults()
  if opts.num_replicas ~= nil then
    world = check_int('DistributedSampler', 'num_replicas', opts.num_replicas, 1)
  end
  if opts.rank ~= nil then rank = check_int('DistributedSampler', 'rank', opts.rank, 0) end
  if rank >= world then
    error(('DistributedSampler: expected rank (0-based) to be in 0..%d for num_replicas %d, got %d')
      :format(world - 1, world, rank), 3)
  end
  self.dataset = ds
  self.num_replicas, self.rank = world, rank
  if opts.shuffle == nil then self.shuffle = true else self.shuffle = opts.shuffle end
  self.drop_last = opts.drop_last or false
  -- Every rank must draw the same order, so the default seed is fixed (0, as PyTorch's).
  self.seed = check_int('DistributedSampler', 'seed', opts.seed or 0, 0, 2 ^ 53)
  self.epoch = 1
  self.position = 0
end

function DistributedSampler:__tostring()
  return ('DistributedSampler(rank %d of %d, %d samples, shuffle=%s, epoch %d)'):format(self.rank,
    self.num_replicas, self:num_samples(), tostring(self.shuffle), self.epoch)
end

local function dataset_size(ds)
  local n = ds:size()
  if not is_int(n) or n < 0 then
    error('DistributedSampler: dataset size() returned ' .. tostring(n) ..
      ', expected an integer >= 0', 4)
  end
  return n
end

-- set_epoch(e): the next iteration reads epoch e (1-based) from its start. A DataLoader moves
-- to the next epoch by itself after each one; calling this as PyTorch scripts do is harmless.
function DistributedSampler:set_epoch(epoch)
  self.epoch = check_int('set_epoch', 'epoch', epoch, 1, 2 ^ 32)
  self.position = 0
end

-- The global order of an epoch: an int64 tensor of the n 1-based dataset indices.
function DistributedSampler:global_order(epoch)
  epoch = epoch or self.epoch
  local n = dataset_size(self.dataset)
  return epoch_order('DistributedSampler', n, self.shuffle, self.seed, epoch)
end

-- How many of the global order's remaining entries the W ranks read together, from position.
local function round_total(left, world, drop_last)
  if drop_last then return math.floor(left / world) * world end
  return math.ceil(left / world) * world
end

-- The samples this rank reads in the epoch from `position` (default: the sampler's own).
function DistributedSampler:num_samples(position)
  local n = dataset_size(self.dataset)
  local left = math.max(n - (position or self.position), 0)
  return round_total(left, self.num_replicas, self.drop_last) / self.num_replicas
end

-- This rank's indices for epoch `epoch` from global position `position` (defaults: the
-- sampler's): an int64 tensor of 1-based dataset indices.
function DistributedSampler:indices(epoch, position)
  epoch = epoch or self.epoch
  position = position or self.position
  local order = self:global_order(epoch)
  local n, world = order:size(1), self.num_replicas
  local left = math.max(n - position, 0)
  local total = round_total(left, world, self.drop_last)
  if total == 0 then return creation.empty({ 0 }, { dtype = 'int64' }) end
  local rest = order:narrow(1, position + 1, left)
  if total < left then
    rest = rest:narrow(1, 1, total)
  elseif total > left then -- repeat the remainder from its start until it fills the round
    local parts, have = { rest }, left
    while have < total do
      local take = math.min(left, total - have)
      parts[#parts + 1] = rest:narrow(1, 1, take)
      have = have + take
    end
    rest = index_ops.cat(parts, 1)
  end
  return rest:contiguous():view(total / world, world):select(2, self.rank + 1):contiguous()
end

-- The global position after this rank has read `taken` samples of an epoch begun at
-- `position` (all ranks read in step), and the epoch it belongs to: a finished epoch is the
-- start of the next one.
function DistributedSampler:position_after(epoch, position, taken)
  local per_rank = self:num_samples(position)
  if taken >= per_rank then return epoch + 1, 0 end
  local n = dataset_size(self.dataset)
  return epoch, math.min(position + taken * self.num_replicas, n)
end

-- state([taken]) = {seed, epoch, position}: where the job is, after this rank has read `taken`
-- samples of the current epoch (default 0). load_state(s) resumes there, at any world size.
function DistributedSampler:state(taken)
  local epoch, position = self:position_after(self.epoch, self.position, taken or 0)
  return { seed = self.seed, epoch = epoch, position = position }
end

function DistributedSampler:load_state(s)
  if type(s) ~= 'table' then
    error('load_state: expected a table {seed=, epoch=, position=} from state(), got ' .. type(s), 2)
  end
  if s.seed ~= nil then self.seed = check_int('load_state', 'seed', s.seed, 0, 2 ^ 53) end
  self.epoch = check_int('load_state', 'epoch', s.epoch, 1, 2 ^ 32)
  local position = check_int('load_state', 'position', s.position or 0, 0)
  local n = dataset_size(self.dataset)
  if position > n then
    error(('load_state: position %d is past the dataset\'s %d samples'):format(position, n), 2)
  end
  if position == n and n > 0 then self.epoch, position = self.epoch + 1, 0 end
  self.position = position
end

return { DistributedSampler = DistributedSampler }
