-- ember.memory.summary: a device's memory by size class (runtime/src/memory/census.c), as a
-- table (census) and as a report to print (summary), in the manner of PyTorch's
-- torch.cuda.memory_summary.
local ffi = require 'ffi'
local core = require 'ember.core'
local history = require 'ember.memory.history'
local C = core.C

local M = {}
local human = history.human

local census_buf = ffi.new('em_memory_census')
local stats_buf = ffi.new('em_memory_stats')

-- census([device]) -> {device=, classes={...}, live_blocks=, live_bytes=, cached_blocks=,
-- cached_bytes=, largest_free=, fragmentation=, segments=, segment_bytes=}. classes lists the
-- non-empty size classes, smallest first: {min=, max=, live_blocks=, live_bytes=,
-- cached_blocks=, cached_bytes=}, sizes in [min, max) bytes (the first class, [0, 2), also
-- holds empty storages).
function M.census(device)
  local id = core.device_id(device, 'memory.census')
  core.check(C.em_memory_census_get(id, census_buf))
  local c = census_buf
  local r = {
    device = core.device_name(id), classes = {},
    live_blocks = 0, live_bytes = 0, cached_blocks = 0, cached_bytes = 0,
    largest_free = tonumber(c.largest_free),
    segments = tonumber(c.segments), segment_bytes = tonumber(c.segment_bytes),
  }
  for k = 0, C.EM_MEMORY_CLASSES - 1 do
    local k_ = c.classes[k]
    local row = {
      min = k == 0 and 0 or 2 ^ k, max = 2 ^ (k + 1),
      live_blocks = tonumber(k_.live_blocks), live_bytes = tonumber(k_.live_bytes),
      cached_blocks = tonumber(k_.cached_blocks), cached_bytes = tonumber(k_.cached_bytes),
    }
    if row.live_blocks ~= 0 or row.cached_blocks ~= 0 then r.classes[#r.classes + 1] = row end
    r.live_blocks = r.live_blocks + row.live_blocks
    r.live_bytes = r.live_bytes + row.live_bytes
    r.cached_blocks = r.cached_blocks + row.cached_blocks
    r.cached_bytes = r.cached_bytes + row.cached_bytes
  end
  -- How much of the cache cannot serve one request whole: 0 when it is one block (or empty),
  -- near 1 when it is many small pieces.
  r.fragmentation = r.cached_bytes > 0 and 1 - r.largest_free / r.cached_bytes or 0
  return r
end

local function class_label(row)
  local function short(b)
    local s = human(b)
    return (s:gsub('%.0 ', ' '))
  end
  return short(row.min) .. ' - ' .. short(row.max)
end

local function pct(x) return ('%.1f%%'):format(100 * x) end

-- summary([device]) -> a report: allocated, cached, reserved, peak and limit, the count of
-- live storages and of allocations, the largest cached block and the fragmentation, then one
-- row per size class.
function M.summary(device)
  local id = core.device_id(device, 'memory.summary')
  core.check(C.em_memory_stats_get(id, stats_buf))
  local s = stats_buf
  local allocated, reserved = tonumber(s.allocated), tonumber(s.reserved)
  local limit = tonumber(s.limit)
  local c = M.census(id)
  local rule = string.rep('=', 78)
  local thin = string.rep('-', 78)
  local out = {
    rule,
    ('Ember memory summary: %s'):format(c.device),
    thin,
    ('%-28s %14s   %-28s %s'):format('allocated (live storages)', human(allocated),
      'peak allocated', human(tonumber(s.peak))),
    ('%-28s %14s   %-28s %s'):format('cached (free for reuse)', human(reserved - allocated),
      'limit', limit > 0 and human(limit) or 'none'),
    ('%-28s %14s   %-28s %d'):format('reserved', human(reserved), 'allocations served',
      tonumber(s.num_allocs)),
    ('%-28s %14d   %-28s %d'):format('live storages', c.live_blocks, 'cached blocks',
      c.cached_blocks),
    ('%-28s %14s   %-28s %s'):format('largest cached block', human(c.largest_free),
      'fragmentation', pct(c.fragmentation)),
  }
  if c.segments > 0 then
    out[#out + 1] = ('%-28s %14d   %-28s %s'):format('segments (slabs)', c.segments,
      'segment bytes', human(c.segment_bytes))
  end
  -- On Vulkan, reserved - allocated also holds the rounding of live blocks to the device's
  -- alignment, which no free range shows.
  local rounding = reserved - allocated - c.cached_bytes
  if rounding ~= 0 then
    out[#out + 1] = ('%-28s %14s'):format('alignment rounding', human(rounding))
  end
  out[#out + 1] = thin
  out[#out + 1] = ('%-22s %10s %14s %10s %14s'):format('size class', 'live', 'live bytes',
    'cached', 'cached bytes')
  out[#out + 1] = thin
  for _, row in ipairs(c.classes) do
    out[#out + 1] = ('%-22s %10d %14s %10d %14s'):format(class_label(row), row.live_blocks,
      human(row.live_bytes), row.cached_blocks, human(row.cached_bytes))
  end
  if #c.classes == 0 then out[#out + 1] = '(no live storages and nothing cached)' end
  out[#out + 1] = thin
  out[#out + 1] = ('%-22s %10d %14s %10d %14s'):format('total', c.live_blocks,
    human(c.live_bytes), c.cached_blocks, human(c.cached_bytes))
  out[#out + 1] = rule
  return table.concat(out, '\n')
end

return M
