-- nn.DistributedDataParallel and DistributedSampler in real MPI jobs: `mpirun -np 2
-- --oversubscribe ember <script>` for tests/distributed/ddp_equivalence.lua (2 ranks of batch 32
-- against one process of batch 64: float32 SGD, no_sync accumulation, fp16 with GradScaler and
-- clipping; a parameter unused on one rank; on Vulkan too, shortened) and ddp_resume.lua (a checkpoint of 2 ranks resumed
-- by one process, against an uninterrupted run). The reference of each is computed inside the
-- job by one process without ember.distributed. Without mpirun the jobs are reported pending.
local J = require 'mpi_job'
local BIN, q, sh, has, mpirun, contains, tmpdir = J.BIN, J.q, J.sh, J.has, J.mpirun, J.contains, J.tmpdir

describe('nn.DistributedDataParallel under mpirun', function()
  if not has('mpirun') then
    it('runs MPI jobs', function()
      pending('mpirun not found: install openmpi-bin (scripts/install-deps.sh does) to run them')
    end)
    return
  end

  it('2 ranks of batch 32 end with the parameters of 1 process of batch 64', function()
    local out, rc = mpirun('ddp_equivalence.lua')
    assert.are.equal(0, rc, out)
    for _, case in ipairs({ 'ok fp32 SGD: 2 ranks', 'ok no_sync accumulation: 2 ranks',
      'ok fp16 GradScaler clip: 2 ranks', 'ok a parameter unused on some ranks',
      'ok find_unused_parameters' }) do
      assert.is_truthy(contains(out, case), out)
    end
  end)

  it('the same on Vulkan (lavapipe in CI): float32, 2 steps', function()
    local out, rc = mpirun('ddp_equivalence.lua vulkan quick')
    assert.are.equal(0, rc, out)
    if contains(out, 'no Vulkan device') then
      pending('no Vulkan device')
      return
    end
    assert.is_truthy(contains(out, 'ok fp32 SGD: 2 ranks on vulkan'), out)
    assert.is_truthy(contains(out, 'ok a parameter unused on some ranks'), out)
  end)

  it('a checkpoint of 2 ranks resumes in 1 process as if never interrupted', function()
    local out, rc = mpirun('ddp_resume.lua save ' .. q(tmpdir))
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, 'saved after 2 steps at 2 ranks, data position 128 of epoch 1'), out)
    out, rc = sh(('env -u EMBER_DEVICE %s tests/distributed/ddp_resume.lua resume %s'):format(q(BIN),
      q(tmpdir)))
    assert.are.equal(0, rc, out)
    assert.is_truthy(contains(out, 'ok resume at 1 ranks'), out)
  end)
end)
