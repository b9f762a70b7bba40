-- Shared by the specs that run real MPI jobs (distributed_spec, ddp_mpi_spec): a shell runner
-- that returns output and exit status, and `mpirun -np 2 --oversubscribe ember <script>` with the
-- environment CI needs. Open MPI refuses to run as root without the first two variables (CI
-- runs as root). The third keeps its shared-memory transport off cross-process reads (CMA),
-- which containers without the ptrace capability refuse ("Read -1, expected ..."): plain
-- copies through shared memory instead.
local M = {}

M.BIN = os.getenv('EMBER_BIN') or 'build/ember'

function M.q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local q = M.q

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute('mkdir -p ' .. q(tmpdir)) == 0)
M.tmpdir = tmpdir

function M.read_file(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('*a')
  f:close()
  return s
end

-- Runs a shell command (stdout and stderr together); returns the output and the exit status.
-- Callers wrap jobs in `timeout`, which guards the suite against a hang (a failure, not a
-- measurement).
function M.sh(cmd)
  local out = tmpdir .. '/out'
  os.execute(('%s > %s 2>&1; echo $? > %s/rc'):format(cmd, q(out), q(tmpdir)))
  return M.read_file(out), tonumber(M.read_file(tmpdir .. '/rc'))
end

function M.has(cmd)
  return os.execute('command -v ' .. cmd .. ' > /dev/null 2>&1') == 0
end

M.MPI_ENV = 'env -u EMBER_DEVICE OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ' ..
  'OMPI_MCA_btl_vader_single_copy_mechanism=none'

-- mpirun -np 2 of tests/distributed/<script> (its arguments may follow in the same string),
-- with extra environment assignments env ('A=1 B=2') if given.
function M.mpirun(script, env)
  return M.sh(('%s %s timeout 120 mpirun -np 2 --oversubscribe %s tests/distributed/%s'):format(
    M.MPI_ENV, env or '', q(M.BIN), script))
end

function M.contains(s, needle) return s:find(needle, 1, true) ~= nil end

return M
