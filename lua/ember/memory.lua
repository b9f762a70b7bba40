-- ember.memory: memory statistics and limits per device, and the thread count.
local ffi = require 'ffi'
local core = require 'ember.core'
local C = core.C

local M = {}
local stats_buf = ffi.new('em_memory_stats')

-- stats([device]) -> {allocated=, reserved=, cached=, peak=, num_allocs=, limit=} in bytes.
function M.stats(device)
  local id = core.device_id(device, 'memory.stats')
  core.check(C.em_memory_stats_get(id, stats_buf))
  local s = stats_buf
  -- the device's own figures (total memory, and the budget VK_EXT_memory_budget reports)
  local info = package.loaded['ember.device'] and require('ember.device').device(id):info() or {}
  return {
    device = core.device_name(id),
    total = info.memory,
    budget = info.budget,
    allocated = tonumber(s.allocated),
    reserved = tonumber(s.reserved),
    cached = tonumber(s.reserved - s.allocated),
    peak = tonumber(s.peak),
    num_allocs = tonumber(s.num_allocs),
    limit = tonumber(s.limit),
  }
end

-- Releases garbage tensors first, so the figures and the cache reflect live tensors only.
function M.empty_cache(device)
  core.collect()
  core.check(C.em_memory_empty_cache(core.device_id(device, 'memory.empty_cache')))
end

function M.set_limit(device, bytes)
  if bytes == nil and type(device) == 'number' then device, bytes = nil, device end
  if type(bytes) ~= 'number' then
    error('memory.set_limit: expected a limit in bytes (0 for none), got ' .. type(bytes), 2)
  end
  core.check(C.em_memory_set_limit(core.device_id(device, 'memory.set_limit'), bytes))
end

-- set_fraction([device,] f): a limit of f times the device's memory (0 < f <= 1).
function M.set_fraction(device, f)
  if f == nil and type(device) == 'number' then device, f = nil, device end
  if type(f) ~= 'number' or f <= 0 or f > 1 then
    error('memory.set_fraction: expected a fraction in (0, 1], got ' .. tostring(f), 2)
  end
  local id = core.device_id(device, 'memory.set_fraction')
  local total = require('ember.device').device(id):info().memory
  if not total then error('memory.set_fraction: ' .. core.device_name(id) .. ' does not report its memory size', 2) end
  core.check(C.em_memory_set_limit(id, math.floor(total * f)))
end

function M.reset_peak(device)
  core.check(C.em_memory_reset_peak(core.device_id(device, 'memory.reset_peak')))
end

-- Releases the memory of tensors Lua no longer references (a full collection and a sweep).
M.collect = core.collect

-- Debugging: a report by size class, where live storages were made, and a leak check
-- (lua/ember/memory/*.lua, runtime/src/memory/). Loaded on first use: every module loaded at
-- start-up grows the Lua heap that each full collection walks (one per 16384 tensors).
local function lazy(module, name)
  return function(...) return require(module)[name](...) end
end
M.census = lazy('ember.memory.summary', 'census')
M.summary = lazy('ember.memory.summary', 'summary')
M.record_history = lazy('ember.memory.history', 'record_history')
M.snapshot = lazy('ember.memory.history', 'snapshot')
M.by_site = lazy('ember.memory.history', 'by_site')
M.leak_check = lazy('ember.memory.leak', 'leak_check')
-- print_snapshot([snap or device], {limit=, traceback=}): prints a snapshot grouped by site.
function M.print_snapshot(snap, opts)
  local history = require 'ember.memory.history'
  if type(snap) ~= 'table' then snap = history.snapshot(snap) end
  print(history.format(snap, opts))
end

return M
