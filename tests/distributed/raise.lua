-- Run by tests/lua/distributed_spec.lua under mpirun: rank 1 raises while rank 0 waits in a
-- collective that rank 1 never joins. The `ember` runner must print the error with the rank and
-- end the whole job (MPI_Abort), so mpirun exits non-zero instead of rank 0 waiting forever
-- (the timeout here is far longer than the spec lets the job run).
local dist = ember.distributed
dist.init({ device = 'cpu', timeout = 600 })
if dist.rank() == 1 then
  error('deliberate failure on rank 1')
end
dist.all_reduce(ember.ones(3))
print('rank 0 got past the collective: the job did not end')
