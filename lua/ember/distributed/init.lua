-- ember.distributed: collectives across processes over MPI (docs/distributed.md,
-- docs/api/distributed.md). The C side (runtime/src/distributed/) loads Open MPI at run time
-- and runs every MPI call on one communication thread; this module checks the Lua arguments,
-- picks each process's device and wraps the C work handles.
--   init{backend='mpi', device=, timeout=}   rank() world_size() local_rank() device()
--   all_reduce(t, {op=, async=})  broadcast(t, root, {async=})  all_gather(t, {out=, async=})
--   reduce_scatter(t, {op=, out=, async=})  barrier({async=})  finalize()
-- Ranks are 0-based, as in MPI and PyTorch.
local ffi = require 'ffi'
local core = require 'ember.core'
local names = require 'ember.util.names'
local C = core.C

local M = {}

local chosen_device -- the device name init chose, or nil

local ops = { sum = C.EM_DIST_SUM, avg = C.EM_DIST_AVG, max = C.EM_DIST_MAX, min = C.EM_DIST_MIN }
local op_list = { 'sum', 'avg', 'max', 'min' }

local function is_tensor(x) return ffi.istype(core.tensor_ct, x) end

local function check_tensor(fn, t, what)
  if not is_tensor(t) then
    error(('%s: %s must be a tensor, got %s'):format(fn, what or 't', type(t)), 3)
  end
end

local function op_id(fn, op)
  if op == nil then return ops.sum end
  local id = ops[op]
  if id == nil then
    error(("%s: unknown op %s (expected 'sum', 'avg', 'max' or 'min')%s"):format(
      fn, type(op) == 'string' and "'" .. op .. "'" or tostring(op),
      type(op) == 'string' and names.hint(op, op_list) or ''), 3)
  end
  return id
end

-- ---- work handles ----------------------------------------------------------------------------
-- h:wait() finishes the collective and returns its result; h:is_completed() says, without
-- blocking, whether the transfer is done. A handle dropped without wait() waits when collected.
local Work = {}
Work.__index = Work

local function work(fn, p, result)
  if p == nil then core.raise(3) end
  return setmetatable({ _p = ffi.gc(p, C.em_dist_work_free), _result = result, _fn = fn }, Work)
end

function Work:wait()
  if C.em_dist_wait(self._p) ~= 0 then core.raise(2) end
  return self._result
end

function Work:is_completed() return C.em_dist_is_completed(self._p) ~= 0 end

Work.__tostring = function(self)
  return ('ember.distributed work (%s, %s)'):format(self._fn,
    self:is_completed() and 'completed' or 'in flight')
end

-- Runs a C collective: a handle with async, else the result after waiting.
local function finish(fn, p, result, async)
  local h = work(fn, p, result)
  if async then return h end
  local rc = C.em_dist_wait(h._p)
  if rc ~= 0 then
    local msg = ffi.string(C.em_last_error())
    C.em_dist_work_free(ffi.gc(h._p, nil))
    h._p = nil
    error(msg, 3)
  end
  C.em_dist_work_free(ffi.gc(h._p, nil))
  return result
end

-- ---- set-up ----------------------------------------------------------------------------------

-- The Vulkan devices, as ids, in order: GPUs only, or every one (software drivers too).
local function vulkan_ids(gpus_only)
  local info = ffi.new('em_device_info')
  local ids = {}
  for id = 1, C.em_device_count() - 1 do
    if C.em_device_info_get(id, info) == 0 and
        not (gpus_only and info.type == C.EM_DEVICE_SOFTWARE_GPU) then
      ids[#ids + 1] = id
    end
  end
  return ids
end

-- The device this process takes: 'auto' is GPU number local_rank (modulo the GPUs), else the
-- CPU; 'vulkan' the same among every Vulkan device (lavapipe included); a name is that device.
local function pick_device(spec, local_rank)
  if spec == 'auto' or spec == 'vulkan' then
    local ids = vulkan_ids(spec == 'auto')
    if #ids == 0 then
      if spec == 'auto' then return 0 end
      error('ember.distributed.init: device \'vulkan\': no Vulkan device found', 4)
    end
    return ids[local_rank % #ids + 1]
  end
  local id = C.em_device_parse(spec)
  if id < 0 then
    error('ember.distributed.init: device: ' .. ffi.string(C.em_last_error()), 4)
  end
  return id
end

-- The processes on one host share its cores: each gets cores / processes CPU threads (at least
-- 1), unless OMP_NUM_THREADS says otherwise, as torchrun does (it sets 1). N processes each
-- running OpenMP on every core would oversubscribe the host N times.
local function share_cores()
  if os.getenv('OMP_NUM_THREADS') then return end
  local local_size = tonumber(os.getenv('OMPI_COMM_WORLD_LOCAL_SIZE') or '')
  if not local_size or local_size <= 1 then return end
  local info = ffi.new('em_runtime_info')
  if C.em_runtime_info_get(info) ~= 0 then return end
  C.em_set_num_threads(math.max(1, math.floor(info.cpu_cores / local_size)))
end

function M.init(opts)
  opts = names.check_options('ember.distributed.init', opts, { 'backend', 'device', 'timeout' })
  local backend = opts.backend or 'mpi'
  if backend ~= 'mpi' then
    error(("ember.distributed.init: backend must be 'mpi', got %s"):format(tostring(backend)), 2)
  end
  local device = opts.device
  if device == nil then
    local env = os.getenv('EMBER_DEVICE')
    device = (env and env ~= '') and env or 'auto'
  end
  if type(device) ~= 'string' then
    error(('ember.distributed.init: device must be a string (\'auto\', \'cpu\', \'vulkan\', ' ..
      '\'vulkan:N\'), got %s'):format(type(device)), 2)
  end
  local timeout = opts.timeout or tonumber(os.getenv('EMBER_DIST_TIMEOUT') or '') or 1800
  if type(timeout) ~= 'number' or not (timeout > 0) then
    error(('ember.distributed.init: timeout must be a positive number of seconds, got %s')
      :format(tostring(timeout)), 2)
  end
  if C.em_dist_init(timeout) ~= 0 then core.raise(2) end
  share_cores()
  local id = pick_device(device, C.em_dist_local_rank())
  require('ember.device').set_default_device(id)
  chosen_device = core.device_name(id)
end

function M.is_initialized() return C.em_dist_is_initialized() ~= 0 end

local function get(fn, cfn)
  local v = cfn()
  if v < 0 then core.raise(3) end
  return v
end
function M.rank() return get('rank', C.em_dist_rank) end
function M.world_size() return get('world_size', C.em_dist_world_size) end
function M.local_rank() return get('local_rank', C.em_dist_local_rank) end

-- The device init chose for this process ('cpu', 'vulkan:N').
function M.device()
  if not chosen_device then
    error('ember.distributed.device: ember.distributed is not initialized (call ' ..
      'ember.distributed.init first)', 2)
  end
  return chosen_device
end

function M.finalize()
  if C.em_dist_finalize() ~= 0 then core.raise(2) end
  chosen_device = nil
end

-- ---- collectives -----------------------------------------------------------------------------

function M.all_reduce(t, opts)
  local fn = 'all_reduce'
  check_tensor(fn, t)
  opts = names.check_options(fn, opts, { 'op', 'async' })
  local op = op_id(fn, opts.op)
  return finish(fn, C.em_dist_all_reduce(t.ptr, op), t, opts.async)
end

function M.broadcast(t, root, opts)
  local fn = 'broadcast'
  check_tensor(fn, t)
  if type(root) == 'table' and opts == nil then
    error('broadcast: root must be a rank number (0-based), got a table: ' ..
      'broadcast(t, root, opts)', 2)
  end
  root = root or 0
  if type(root) ~= 'number' or root ~= math.floor(root) then
    error(('broadcast: root must be a rank number (0-based), got %s'):format(tostring(root)), 2)
  end
  opts = names.check_options(fn, opts, { 'async' })
  return finish(fn, C.em_dist_broadcast(t.ptr, root), t, opts.async)
end

-- A new tensor of t's dtype and device with the given sizes, or opts.out after checking it is
-- a tensor (C checks its sizes).
local function output(fn, t, out, sizes)
  if out ~= nil then
    check_tensor(fn, out, 'out')
    return out
  end
  local cs = ffi.new('int64_t[?]', math.max(#sizes, 1), sizes)
  return core.own(C.em_empty(#sizes, cs, t.ptr.dtype_id, t.ptr.device_id))
end

-- all_gather's `out` as a list of world_size tensors (PyTorch's tensor_list): each gets its
-- rank's part of the gathered tensor, when the gather finishes.
local function gather_into_list(fn, t, list, async)
  local ws = M.world_size()
  if #list ~= ws then
    error(('%s: out must be a tensor or a list of world_size (%d) tensors, got a list of %d')
      :format(fn, ws, #list), 3)
  end
  for i = 1, ws do check_tensor(fn, list[i], ('out[%d]'):format(i)) end
  local h = M.all_gather(t, { async = true })
  local function scatter()
    local all = h:wait()
    for i = 1, ws do list[i]:copy_(all[i]) end
    return list
  end
  if not async then return scatter() end
  local done
  return setmetatable({
    wait = function() done = done or scatter() return done end,
    is_completed = function() return done ~= nil or h:is_completed() end,
  }, { __tostring = function() return 'ember.distributed work (all_gather into a list)' end })
end

function M.all_gather(t, opts)
  local fn = 'all_gather'
  check_tensor(fn, t)
  opts = names.check_options(fn, opts, { 'out', 'async' })
  if type(opts.out) == 'table' then return gather_into_list(fn, t, opts.out, opts.async) end
  local p = t.ptr
  local sizes = { M.world_size() }
  for d = 0, p.ndim - 1 do sizes[#sizes + 1] = p.sizes[d] end
  local out = output(fn, t, opts.out, sizes)
  return finish(fn, C.em_dist_all_gather(p, out.ptr), out, opts.async)
end

function M.reduce_scatter(t, opts)
  local fn = 'reduce_scatter'
  check_tensor(fn, t)
  opts = names.check_options(fn, opts, { 'op', 'out', 'async' })
  local op = op_id(fn, opts.op)
  local p, ws = t.ptr, M.world_size()
  if p.ndim == 0 then error('reduce_scatter: t must have at least one dimension', 2) end
  if p.sizes[0] % ws ~= 0 then
    error(('reduce_scatter: t:size(1) (%d) must divide evenly by the world size (%d)'):format(
      tonumber(p.sizes[0]), ws), 2)
  end
  local sizes = { tonumber(p.sizes[0]) / ws }
  for d = 1, p.ndim - 1 do sizes[#sizes + 1] = p.sizes[d] end
  local out = output(fn, t, opts.out, sizes)
  return finish(fn, C.em_dist_reduce_scatter(p, out.ptr, op), out, opts.async)
end

function M.barrier(opts)
  opts = names.check_options('barrier', opts, { 'async' })
  return finish('barrier', C.em_dist_barrier(), nil, opts.async)
end

return M
