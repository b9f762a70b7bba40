-- Run by tests/lua/distributed_spec.lua under mpirun: rank 1 never joins rank 0's collective
-- (it sleeps until the job ends). Rank 0's wait must fail after the 1 s timeout with a message
-- naming the collective, instead of hanging; rank 0 then raises it, which ends the job.
local dist = ember.distributed
dist.init({ device = 'cpu', timeout = 1 })
if dist.rank() == 1 then
  for _ = 1, 600 do os.execute('sleep 0.1') end -- ended by rank 0's abort long before
  error('rank 1 was not stopped')
end
local ok, err = pcall(dist.all_reduce, ember.ones(3))
assert(not ok, 'all_reduce without a peer returned')
print('rank 0 caught: ' .. tostring(err))
local ok2, err2 = pcall(dist.barrier)
assert(not ok2 and tostring(err2):find('earlier collective timed out', 1, true), tostring(err2))
error(err, 0)
