-- ember.distributed, run as real MPI jobs: `mpirun -np 2 --oversubscribe ember <script>` for the
-- scripts in tests/distributed/ (collectives against local references on the CPU and Vulkan,
-- async handles, argument errors; a rank that raises; a collective that times out), `ember run`,
-- and init's message when libmpi cannot be loaded. Needs Open MPI's mpirun (openmpi-bin, which
-- scripts/install-deps.sh installs); without it the MPI jobs are reported pending, not passed.
local J = require 'mpi_job'
local BIN, q, sh, has, mpirun, contains, tmpdir, MPI_ENV =
  J.BIN, J.q, J.sh, J.has, J.mpirun, J.contains, J.tmpdir, J.MPI_ENV

describe('ember.distributed', function()
  it('init says what to install when libmpi cannot be loaded', function()
    local out, rc = sh(('env EMBER_MPI_LIB=/nonexistent/libmpi.so.40 %s -e %s'):format(
      q(BIN), q('ember.distributed.init()')))
    assert.are.equal(1, rc)
    assert.is_truthy(contains(out, 'ember.distributed.init: MPI not found: install openmpi-bin ' ..
      'and libopenmpi-dev (Debian)'), out)
  end)

  it('raises clear errors before init', function()
    local out, rc = sh(('%s -e %s'):format(q(BIN), q([[
      local dist = ember.distributed
      assert(not dist.is_initialized())
      for _, f in ipairs({ 'rank', 'world_size', 'local_rank', 'device', 'barrier', 'finalize' }) do
        local ok, err = pcall(dist[f])
        assert(not ok and err:find('not initialized', 1, true), f .. ': ' .. tostring(err))
      end
      local ok, err = pcall(dist.all_reduce, ember.ones(2))
      assert(not ok and err:find('all_reduce: ember.distributed is not initialized', 1, true), err)
      ok, err = pcall(dist.init, { backend = 'nccl' })
      assert(not ok and err:find("backend must be 'mpi', got nccl", 1, true), err)
      ok, err = pcall(dist.init, { timeout = -1 })
      assert(not ok and err:find('timeout must be a positive number', 1, true), err)
      print('ok')]])))
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, 'ok'), out)
  end)

  if not has('mpirun') then
    it('runs MPI jobs', function()
      pending('mpirun not found: install openmpi-bin (scripts/install-deps.sh does) to run them')
    end)
    return
  end

  it('a process started without mpirun is a world of one', function()
    local out, rc = sh(('%s timeout 120 %s -e %s'):format(MPI_ENV, q(BIN), q([[
      local dist = ember.distributed
      dist.init({ device = 'cpu' })
      local t = ember.tensor({ 1, 2, 3 })
      dist.all_reduce(t, { op = 'avg' })
      local g = dist.all_gather(t)
      print(dist.rank(), dist.world_size(), dist.local_rank(), t:sum():item(), g:size(1))]])))
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, '0\t1\t0\t6\t1'), out)
  end)

  it('collectives match local references for every dtype, size and layout, CPU and Vulkan', function()
    -- 1000-byte chunks: device tensors go through several chunks, overlapped
    local out, rc = mpirun('collectives.lua', 'EMBER_DIST_CHUNK_BYTES=1000')
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, 'rank 0: ') and contains(out, 'rank 1: '), out)
    local n0 = tonumber(out:match('rank 0: (%d+) checks passed'))
    local n1 = tonumber(out:match('rank 1: (%d+) checks passed'))
    assert.is_truthy(n0 and n0 > 1000 and n0 == n1, out)
  end)

  it('a rank that raises ends the job with its rank and message, non-zero', function()
    local out, rc = mpirun('raise.lua')
    assert.are_not.equal(0, rc)
    assert.are_not.equal(124, rc) -- not the guard's timeout: the job ended by itself
    assert.is_truthy(contains(out, 'ember: rank 1: tests/distributed/raise.lua:8: deliberate ' ..
      'failure on rank 1'), out)
    assert.is_falsy(contains(out, 'rank 0 got past'), out)
  end)

  it('a collective whose peer never comes fails after the timeout instead of hanging', function()
    local out, rc = mpirun('timeout.lua')
    assert.are_not.equal(0, rc)
    assert.are_not.equal(124, rc)
    assert.is_truthy(contains(out, 'ember: rank 0: ') and
      contains(out, 'all_reduce: timed out after 1 s waiting for the other ranks'), out)
    assert.is_falsy(contains(out, 'rank 1 was not stopped'), out)
  end)

  it("MPI's errors come back as Ember errors naming the collective", function()
    local out, rc = mpirun('mismatch.lua')
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find('rank 0: [^\n]*mismatch%.lua:8: all_reduce: MPI error: MPI_ERR_'), out)
  end)

  it('ember run --nproc starts the script under mpirun with its arguments', function()
    local script = tmpdir .. '/ranks.lua'
    local f = assert(io.open(script, 'w'))
    f:write([[
      local dist = ember.distributed
      dist.init({ device = 'cpu' })
      local t = ember.tensor({ dist.rank() + 1 })
      dist.all_reduce(t)
      -- the host's cores are shared between its 2 processes
      local info = require('ffi').new('em_runtime_info')
      require('ember.core').C.em_runtime_info_get(info)
      assert(ember.get_num_threads() == math.max(1, math.floor(info.cpu_cores / 2)),
        'threads: ' .. ember.get_num_threads())
      print(('rank %d of %d, local %d: %s, sum %g'):format(dist.rank(), dist.world_size(),
        dist.local_rank(), table.concat({ ... }, ' '), t:item()))
    ]])
    f:close()
    local out, rc = sh(('%s timeout 120 %s run --nproc 2 --oversubscribe %s a "b c"'):format(
      MPI_ENV, q(BIN), q(script)))
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, 'rank 0 of 2, local 0: a b c, sum 3'), out)
    assert.is_truthy(contains(out, 'rank 1 of 2, local 1: a b c, sum 3'), out)
    -- the command it runs, and its errors
    out, rc = sh(('env EMBER_RUN_PRINT=1 %s run -n 3 -H h1:2,h2:2 %s x'):format(q(BIN), q(script)))
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find('mpirun %-np 3 %-%-bind%-to none %-%-map%-by slot %-H h1:2,h2:2 .* %-x EMBER_RUN_PRINT .*ember ' ..
      script:gsub('%p', '%%%0') .. ' x'), out)
    assert.is_falsy(contains(out, '--oversubscribe'), out)
    out, rc = sh(('%s run --nprocs 2 %s'):format(q(BIN), q(script)))
    assert.are.equal(2, rc)
    assert.is_truthy(contains(out, 'ember run: unknown option --nprocs'), out)
    out, rc = sh(('env PATH=/nonexistent %s run -n 2 %s'):format(q(BIN), q(script)))
    assert.are.equal(2, rc)
    assert.is_truthy(contains(out, 'ember run: mpirun not found on PATH: install openmpi-bin'), out)
  end)
end)
