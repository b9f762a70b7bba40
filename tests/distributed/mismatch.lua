-- Run by tests/lua/distributed_spec.lua under mpirun -np 2: the ranks all_reduce tensors of
-- different sizes (3 and 5 elements). MPI's error handler is set to return errors, so the rank
-- whose buffer is too small gets MPI's error as an Ember error naming the collective, instead
-- of MPI aborting the job or the process crashing.
local dist = ember.distributed
dist.init({ device = 'cpu', timeout = 20 })
local n = dist.rank() == 0 and 3 or 5
local ok, err = pcall(dist.all_reduce, ember.ones(n))
print(('rank %d: %s'):format(dist.rank(), ok and 'no error' or tostring(err)))
