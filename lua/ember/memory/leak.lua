-- ember.memory.leak_check: runs a function repeatedly, releases garbage after each run, and
-- reports whether live memory grows, with the sites that made what stayed live. History is
-- recorded during the measured runs (ember.memory.history), so the sites are exact lines.
local ffi = require 'ffi'
local core = require 'ember.core'
local names = require 'ember.util.names'
local history = require 'ember.memory.history'
local C = core.C

local M = {}
local human = history.human

local OPTIONS = { 'iterations', 'warmup', 'tolerance', 'device', 'raise', 'top' }

local function count_arg(opts, key, default, min)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= math.floor(v) or v < min then
    error(('memory.leak_check: expected %s to be an integer >= %d, got %s'):format(key, min,
      tostring(v)), 3)
  end
  return v
end

local census_buf = ffi.new('em_memory_census')
-- Live storages and their bytes on the devices in ids.
local function live(ids)
  local blocks, bytes = 0, 0
  for _, id in ipairs(ids) do
    core.check(C.em_memory_census_get(id, census_buf))
    for k = 0, C.EM_MEMORY_CLASSES - 1 do
      blocks = blocks + tonumber(census_buf.classes[k].live_blocks)
      bytes = bytes + tonumber(census_buf.classes[k].live_bytes)
    end
  end
  return blocks, bytes
end

local report_mt = {}
report_mt.__index = report_mt

function report_mt.__tostring(r)
  local out = {}
  local head = r.ok and 'no leak' or 'leak'
  local per = r.storages_per_iteration
  out[1] = ('memory.leak_check: %s: live memory on %s grew by %s per iteration (%s storage%s per '
    .. 'iteration) over %d iteration%s; tolerance %s per iteration'):format(head, r.device,
    human(r.bytes_per_iteration), ('%g'):format(per), per == 1 and '' or 's', r.iterations,
    r.iterations == 1 and '' or 's', human(r.tolerance))
  if #r.sites > 0 then
    out[#out + 1] = '  storages that outlived the run after the one that made them, by site:'
    for _, s in ipairs(r.sites) do
      local e = s.entries[1]
      out[#out + 1] = ('  %10s  %4d x  %s%s  (largest %s %s on %s)'):format(human(s.bytes),
        s.count, s.site, s.op and (' ' .. s.op) or '', e.dtype, history.shape_str(e.shape),
        e.device)
    end
  end
  return table.concat(out, '\n')
end

-- leak_check(fn, {iterations = 5, warmup = 1, tolerance = 0, device = all, raise = false,
-- top = 5}) -> report. fn(i) runs `warmup` times unmeasured (lazily made state settles), then
-- `iterations` times with history recorded and garbage released after each. Leaks when the
-- live bytes grow by more than `tolerance` bytes per iteration or, with tolerance 0, when the
-- count of live storages grows.
function M.leak_check(fn, opts)
  local mt = getmetatable(fn)
  if type(fn) ~= 'function' and not (mt and mt.__call) then
    error('memory.leak_check: expected a function to run, got ' .. type(fn), 2)
  end
  opts = names.check_options('memory.leak_check', opts, OPTIONS, 2)
  local iterations = count_arg(opts, 'iterations', 5, 1)
  local warmup = count_arg(opts, 'warmup', 1, 0)
  local top = count_arg(opts, 'top', 5, 0)
  local tolerance = opts.tolerance or 0
  if type(tolerance) ~= 'number' or tolerance < 0 then
    error('memory.leak_check: expected tolerance to be bytes per iteration >= 0, got '
      .. tostring(opts.tolerance), 2)
  end
  if opts.raise ~= nil and type(opts.raise) ~= 'boolean' then
    error('memory.leak_check: expected raise to be true or false, got ' .. tostring(opts.raise), 2)
  end
  local ids, device_label, filter = {}, 'all devices', -1
  if opts.device ~= nil then
    filter = core.device_id(opts.device, 'memory.leak_check')
    ids[1], device_label = filter, core.device_name(filter)
  else
    for i = 0, C.em_device_count() - 1 do ids[#ids + 1] = i end
  end

  for i = 1, warmup do fn(i) end
  core.collect()
  local base_blocks, base_bytes = live(ids)
  local was = history.record_history(true)
  local starts = {} -- the first history id of each measured run
  local series = {}
  local ok, err = pcall(function()
    for i = 1, iterations do
      starts[i] = tonumber(C.em_memory_history_next_id())
      fn(warmup + i)
      core.collect()
      local _, bytes = live(ids)
      series[i] = bytes
    end
  end)
  if not was then history.record_history(false) end
  if not ok then error(err, 0) end -- fn's own error, as it was raised

  local blocks, bytes = live(ids)
  local report = setmetatable({
    iterations = iterations, warmup = warmup, tolerance = tolerance, device = device_label,
    baseline_bytes = base_bytes, live_bytes = series,
    growth_bytes = bytes - base_bytes, growth_storages = blocks - base_blocks,
    bytes_per_iteration = (bytes - base_bytes) / iterations,
    storages_per_iteration = (blocks - base_blocks) / iterations,
  }, report_mt)
  report.ok = report.bytes_per_iteration <= tolerance and
    (tolerance > 0 or report.growth_storages <= 0)
  -- The suspects: storages that outlived the run after the one that made them. What the last
  -- run made and still holds (the latest gradients, a returned loss) is the loop's working
  -- set, which the next run would replace; with one run there is nothing to compare with.
  local last = iterations > 1 and starts[iterations] or math.huge
  local suspects = {}
  for _, e in ipairs(history.entries(filter, starts[1])) do
    if e.id < last then suspects[#suspects + 1] = e end
  end
  local sites = history.by_site(suspects)
  report.sites = {}
  for i = 1, math.min(top, #sites) do report.sites[i] = sites[i] end
  if opts.raise and not report.ok then error(tostring(report), 2) end
  return report
end

return M
