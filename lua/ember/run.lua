-- ember.run: `ember run --nproc N script.lua [args...]`, a thin wrapper over Open MPI's mpirun
-- (docs/distributed.md). It replaces itself (exec) with
--   mpirun -np N --bind-to none --map-by slot [--oversubscribe] [-H hosts] [--hostfile file]
--          [-x EMBER_...]
--          [--allow-run-as-root] <this ember program> script.lua args...
-- so signals, output and the exit status are mpirun's own. The script calls
-- ember.distributed.init() as under a plain `mpirun -np N ember script.lua`.
--   --oversubscribe: only when asked (more processes than cores is slow, and usually a mistake
--     outside tests).
--   As root, Open MPI refuses to start without --allow-run-as-root: `ember run` passes it (the
--     user running ember as root has already chosen; containers commonly run as root).
--   EMBER_* variables set here are forwarded (-x) to every process, remote hosts included.
--   EMBER_MPIRUN names the mpirun to use (default: mpirun on PATH).
local ffi = require 'ffi'

local M = {}

local usage = [[
usage: ember run [options] script.lua [args...]
  --nproc N, -n N      processes to start (default 1)
  -H, --hosts LIST     hosts and slots, as mpirun's -H: host1:4,host2:4
  --hostfile FILE      mpirun's host file
  --oversubscribe      allow more processes than cores (tests on small machines)
  --mpirun-arg ARG     pass ARG to mpirun (repeatable)
  -h, --help           print this help
Runs `mpirun -np N <ember> script.lua args...` (EMBER_MPIRUN names another mpirun).]]

ffi.cdef [[
int execv(const char *path, char *const argv[]);
long readlink(const char *path, char *buf, size_t size);
unsigned int getuid(void);
char *strerror(int errnum);
]]

local function fail(msg)
  io.stderr:write('ember run: ', msg, '\n')
  os.exit(2)
end

local function find_on_path(name)
  if name:find('/', 1, true) then return name end
  for dir in (os.getenv('PATH') or ''):gmatch('[^:]+') do
    local path = dir .. '/' .. name
    local f = io.open(path, 'r')
    if f then
      f:close()
      return path
    end
  end
  return nil
end

local function self_exe()
  local buf = ffi.new('char[4096]')
  local n = ffi.C.readlink('/proc/self/exe', buf, 4095)
  if n <= 0 then return arg and arg[-1] or 'ember' end
  return ffi.string(buf, n)
end

-- Parses the arguments; returns the mpirun command line (a list) or nil after printing help.
function M.command(args)
  local nproc, hosts, hostfile, over, extra = 1, nil, nil, false, {}
  local i = 1
  local function value(opt)
    i = i + 1
    if args[i] == nil then fail(opt .. ' needs a value (ember run --help)') end
    return args[i]
  end
  while i <= #args do
    local a = args[i]
    local key, inline = a:match('^(%-%-[%w-]+)=(.*)$')
    if key then a = key; table.insert(args, i + 1, inline) end
    if a == '-h' or a == '--help' then
      print(usage)
      return nil
    elseif a == '--nproc' or a == '-n' or a == '-np' then
      nproc = tonumber(value(a))
      if not nproc or nproc < 1 or nproc ~= math.floor(nproc) then
        fail(a .. ' must be a positive integer, got ' .. tostring(args[i]))
      end
    elseif a == '-H' or a == '--hosts' then
      hosts = value(a)
    elseif a == '--hostfile' then
      hostfile = value(a)
    elseif a == '--oversubscribe' then
      over = true
    elseif a == '--mpirun-arg' then
      extra[#extra + 1] = value(a)
    elseif a:sub(1, 1) == '-' then
      fail(('unknown option %s (ember run --help lists the options)'):format(a))
    else
      break
    end
    i = i + 1
  end
  if args[i] == nil then fail('no script given (usage: ember run --nproc N script.lua [args...])') end
  local mpirun_name = os.getenv('EMBER_MPIRUN') or 'mpirun'
  local mpirun = find_on_path(mpirun_name)
  if not mpirun then
    fail(('%s not found on PATH: install openmpi-bin (Debian), or set EMBER_MPIRUN'):format(mpirun_name))
  end
  -- no binding to cores (Open MPI binds each of 1-2 processes to one core by default, which
  -- leaves a process's CPU threads one core), one process per slot in host order: Horovod's
  -- horovodrun passes the same
  local cmd = { mpirun, '-np', tostring(nproc), '--bind-to', 'none', '--map-by', 'slot' }
  if over then cmd[#cmd + 1] = '--oversubscribe' end
  if hosts then cmd[#cmd + 1] = '-H'; cmd[#cmd + 1] = hosts end
  if hostfile then cmd[#cmd + 1] = '--hostfile'; cmd[#cmd + 1] = hostfile end
  if ffi.C.getuid() == 0 then cmd[#cmd + 1] = '--allow-run-as-root' end
  -- EMBER_* settings reach every process, also on other hosts
  local env = io.popen('env')
  if env then
    for line in env:lines() do
      local name = line:match('^(EMBER_[%w_]*)=')
      -- (not the runner's own re-exec marker: each process tunes OpenMP itself)
      if name and name ~= 'EMBER_OPENMP_TUNED' then cmd[#cmd + 1] = '-x'; cmd[#cmd + 1] = name end
    end
    env:close()
  end
  for _, e in ipairs(extra) do cmd[#cmd + 1] = e end
  cmd[#cmd + 1] = self_exe()
  for j = i, #args do cmd[#cmd + 1] = args[j] end
  return cmd
end

function M.main(args)
  local cmd = M.command(args or {})
  if not cmd then return end
  if os.getenv('EMBER_RUN_PRINT') == '1' then -- shows the command instead (tests, debugging)
    print(table.concat(cmd, ' '))
    return
  end
  io.stdout:flush()
  local argv = ffi.new('char *[?]', #cmd + 1)
  local keep = {}
  for j, s in ipairs(cmd) do
    keep[j] = ffi.new('char[?]', #s + 1, s)
    argv[j - 1] = keep[j]
  end
  argv[#cmd] = nil
  ffi.C.execv(cmd[1], argv)
  fail(('cannot run %s: %s'):format(cmd[1], ffi.string(ffi.C.strerror(ffi.errno()))))
end

return M
