-- ember.data.epoch_order: the sample order of one epoch, shared by DataLoader and
-- DistributedSampler so that one process with the sampler reads exactly the order a shuffled
-- DataLoader with the same seed reads.
--
--   epoch_order(fn, n, shuffle, seed, epoch) -> an int64 tensor of the n 1-based indices
--
-- Shuffled, the order is randperm(n) from the Philox stream at (seed, (epoch - 1) * 2^32),
-- with the caller's generator state restored afterwards. randperm(n) draws n / 2 blocks, so
-- an epoch's stride of 2^32 blocks holds up to 2^33 samples. fn names the caller in errors.
local random = require 'ember.random'
local creation = require 'ember.creation'

local EPOCH_STRIDE = 2 ^ 32

return function(fn, n, shuffle, seed, epoch)
  if not shuffle then return creation.arange(1, n + 1, { dtype = 'int64' }) end
  if n >= 2 ^ 33 then error(fn .. ': shuffle supports up to 2^33 samples', 3) end
  local saved = random.get_rng_state()
  random.set_rng_state({ seed = seed, offset = (epoch - 1) * EPOCH_STRIDE })
  local ok, perm = pcall(random.randperm, n)
  random.set_rng_state(saved)
  if not ok then error(perm, 0) end
  return perm
end
