-- ember.autocast: mixed precision regions (docs/amp.md). Autocast is runtime state in C, a
-- per-thread stack of regions, like grad mode: the ops consult it themselves, so nothing here
-- knows which ops run in 16 bits. This module opens and closes regions, and lets ops composed
-- in Lua (nn.Linear, the losses written with other ops) apply the runtime's policy table to
-- their inputs, as the C ops do at their entry.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C = core.C

local M = {}

-- PyTorch's defaults: bfloat16 on the CPU, float16 on GPUs.
local default_dtype = { cpu = 'bfloat16', vulkan = 'float16' }

-- The region's device kind, dtype id and enabled flag from the options table.
local function parse(fn, opts, level)
  level = level + 1
  if opts == nil then opts = {} end
  if type(opts) ~= 'table' then
    error(('%s: expected an options table {device=, dtype=, enabled=}, got %s'):format(fn,
      type(opts)), level)
  end
  require('ember.util.names').check_options(fn, opts, { 'device', 'dtype', 'enabled' }, level)
  local device = opts.device
  if device == nil then device = core.device_name(C.em_default_device()) end
  if type(device) == 'table' and device.id then device = core.device_name(device.id) end
  if type(device) ~= 'string' then
    error(("%s: expected device 'cpu' or 'vulkan', got %s"):format(fn, type(device)), level)
  end
  local kind = device:match('^(%a+)')
  local dtype = opts.dtype
  if dtype == nil then dtype = default_dtype[kind] or 'bfloat16' end
  if type(dtype) ~= 'string' then
    error(("%s: expected dtype 'float16' or 'bfloat16', got %s"):format(fn, type(dtype)), level)
  end
  local enabled = opts.enabled
  if enabled == nil then enabled = true end
  if type(enabled) ~= 'boolean' then
    error(('%s: expected enabled to be a boolean, got %s'):format(fn, type(enabled)), level)
  end
  return device, core.dtype_id(dtype, fn), enabled
end

local function push(fn, opts, level)
  local device, dtype, enabled = parse(fn, opts, level + 1)
  if C.em_autocast_push(device, dtype, enabled and 1 or 0) ~= 0 then
    error(ffi.string(C.em_last_error()), level + 1)
  end
end

-- autocast(opts, f, ...) runs f(...) in an autocast region and returns f's results. The region
-- is closed even when f raises (the error is raised again). opts: device ('cpu', 'vulkan' or a
-- device name such as 'vulkan:0', which stands for its kind; default: the default device's
-- kind), dtype ('float16' or 'bfloat16'; default bfloat16 on the CPU, float16 on Vulkan),
-- enabled (default true; false turns autocast off inside an enclosing region).
function M.autocast(opts, f, ...)
  if type(f) ~= 'function' and type(opts) == 'function' then
    error('autocast: expected autocast(opts, f, ...), got the function first', 2)
  end
  if type(f) ~= 'function' then
    error('autocast: expected a function to run, got ' .. type(f), 2)
  end
  push('autocast', opts, 2)
  local depth = C.em_autocast_depth()
  local results = { pcall(f, ...) }
  -- Close what f left open too, so that an error inside nested enter/exit pairs cannot leak
  -- regions past this one.
  while C.em_autocast_depth() >= depth do C.em_autocast_pop() end
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

-- autocast_enter(opts) / autocast_exit(): the same region as a pair of calls, for loops that
-- cannot be one function. Every enter needs its exit.
function M.autocast_enter(opts) push('autocast_enter', opts, 2) end
function M.autocast_exit()
  if C.em_autocast_pop() ~= 0 then error(ffi.string(C.em_last_error()), 2) end
end

-- is_autocast_enabled([device]) -> true and the dtype ('float16' / 'bfloat16'), or false:
-- whether ops on that kind of device (default: the default device's) autocast now.
local dtype_out = ffi.new('em_dtype[1]')
function M.is_autocast_enabled(device)
  if device == nil then device = core.device_name(C.em_default_device()) end
  if type(device) == 'table' and device.id then device = core.device_name(device.id) end
  local on = C.em_autocast_enabled(tostring(device), dtype_out)
  if on < 0 then error('is_' .. ffi.string(C.em_last_error()), 2) end
  if on == 0 then return false end
  return true, core.dtype_names[tonumber(dtype_out[0])]
end

-- autocast_inputs(op, a, b, ...) -> a', b', ...: the tensors an op composed in Lua should use,
-- from the runtime's table entry for op (PyTorch's name: 'linear', 'mse_loss', ...). Outside a
-- region, or for non-tensors (nil, numbers), the arguments come back as they are.
local max_inputs = 8
local ins = ffi.new('em_tensor*[?]', max_inputs)
local outs = ffi.new('em_tensor*[?]', max_inputs)
function M.autocast_inputs(op, ...)
  if C.em_autocast_depth() == 0 then return ... end -- no region: nothing to apply
  local n = select('#', ...)
  if n > max_inputs then
    error(('autocast_inputs: at most %d tensors, got %d'):format(max_inputs, n), 2)
  end
  local args = { ... }
  for i = 1, n do
    local a = args[i]
    ins[i - 1] = tensor.is_tensor(a) and a.ptr or nil
  end
  local rc = C.em_autocast_inputs(op, n, ins, outs)
  for i = 0, n - 1 do ins[i] = nil end
  if rc ~= 0 then error(ffi.string(C.em_last_error()), 2) end
  for i = 1, n do
    local p = outs[i - 1]
    outs[i - 1] = nil
    if p ~= nil then
      if p == args[i].ptr then C.em_release(p) else args[i] = core.own(p) end
    end
  end
  return unpack(args, 1, n)
end

return M
