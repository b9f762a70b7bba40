-- ember.memory.history: where live storages were made. record_history(true) turns on the
-- runtime's registry of new storages (runtime/src/memory/history.c) and gives it a site
-- function: a Lua callback that walks the stack of the call that is allocating and interns
-- it as a traceback. snapshot() lists the live storages of the registry, by_site() groups
-- them by the first line of the user's code that made them.
--
-- The callback is an FFI callback, and LuaJIT forbids those from FFI calls that compiled code
-- made, so recording turns the JIT compiler off (and flushes its traces) until it stops; off,
-- nothing of this runs (docs/design.md, "Memory history").
local ffi = require 'ffi'
local core = require 'ember.core'
local names = require 'ember.util.names'
local C = core.C

local M = {}

-- The state lives in the registry, not in this module: busted loads Ember's modules afresh
-- for each spec file, and the callback of the first load must keep writing where later loads
-- read.
local reg = debug.getregistry()
local S = reg.ember_memory_history
if S == nil then
  S = { keys = {}, sites = {}, n = 0 }
  reg.ember_memory_history = S
end

-- Frames under Ember's own Lua folder (and C frames) are not the user's code.
local ember_prefix = '@' ..
  (debug.getinfo(1, 'S').source:match('^@(.*)memory/history%.lua$') or '\0')
local MAX_FRAMES = 24

-- One line of the traceback, as debug.traceback writes it.
local function frame_line(info)
  local where = info.currentline and info.currentline > 0
    and (info.short_src .. ':' .. info.currentline) or info.short_src
  local name
  if info.name then
    name = " in function '" .. info.name .. "'"
  elseif info.what == 'main' then
    name = ' in main chunk'
  else
    name = ' in function <' .. info.short_src .. ':' .. (info.linedefined or 0) .. '>'
  end
  return where .. ':' .. name
end

-- The site of the allocation now under way: walks the stack above the callback, builds a
-- traceback like debug.traceback's and interns it; returns its id (1, 2, ...).
local function capture(from)
  local lines, site, op = {}, nil, nil
  local level = from
  while #lines < MAX_FRAMES do
    local info = debug.getinfo(level, 'Sln')
    if info == nil then break end
    local internal = info.what == 'C' or info.source:sub(1, #ember_prefix) == ember_prefix
    if site == nil and not internal then site = info.short_src .. ':' .. (info.currentline or 0) end
    -- the runtime function that allocated, as Lua called it (C.em_conv2d -> conv2d)
    if level == from and info.what == 'C' and info.name and info.name:match('^em_') then
      op = info.name:sub(4)
    end
    lines[#lines + 1] = frame_line(info)
    level = level + 1
  end
  local key = table.concat(lines, '\n\t')
  local id = S.keys[key]
  if id == nil then
    S.n = S.n + 1
    id = S.n
    S.keys[key] = id
    S.sites[id] = { site = site or '?', op = op, traceback = 'stack traceback:\n\t' .. key }
  end
  return id
end

-- The site function the runtime calls. The collector is stopped while it runs: a finalizer
-- could release a tensor whose raw pointer the C function that is allocating still uses.
local function site_fn()
  collectgarbage('stop')
  -- levels seen from capture: 1 capture, 2 pcall, 3 site_fn, 4 the C function that allocates
  -- (as the Lua code that called it named it), 5 that Lua code
  local ok, id = pcall(capture, 4)
  collectgarbage('restart')
  return ok and id or 0
end

local function callback()
  if S.callback == nil then S.callback = ffi.cast('em_memory_site_fn', site_fn) end
  return S.callback
end

function M.is_recording() return C.em_memory_history_enabled() ~= 0 end

-- record_history(on): starts (true) or stops (false) recording where new storages are made;
-- returns whether it was on.
function M.record_history(on, ...)
  if type(on) ~= 'boolean' then
    error('memory.record_history: expected true or false, got ' .. tostring(on), 2)
  end
  if select('#', ...) > 0 then
    error(('memory.record_history: expected one argument (true or false), got %d'):format(
      1 + select('#', ...)), 2)
  end
  local was = M.is_recording()
  if on and not was then
    S.jit_was_on = jit.status()
    jit.off()
    jit.flush()
    C.em_memory_set_site_fn(callback(), nil)
    C.em_memory_record_history(1)
  elseif not on and was then
    C.em_memory_record_history(0)
    C.em_memory_set_site_fn(nil, nil)
    if S.jit_was_on then jit.on() end
  end
  return was
end

-- The site table of an id: {site = 'file:line', traceback = '...'}, or nil (0: unknown, made
-- on another thread).
function M.site(id) return S.sites[id] end

local function dtype_name(id) return core.dtype_names[id] end

local function entry_of(b)
  local shape = {}
  for i = 0, b.ndim - 1 do shape[i + 1] = tonumber(b.sizes[i]) end
  local site = S.sites[b.site]
  return {
    id = tonumber(b.id),
    bytes = tonumber(b.bytes),
    dtype = dtype_name(b.dtype),
    shape = shape,
    device = core.device_name(b.device),
    site = site and site.site or nil,
    op = site and site.op or nil,
    traceback = site and site.traceback or nil,
  }
end

local snapshot_mt = {}
snapshot_mt.__index = snapshot_mt

-- The device ids to look at: one, or every registered device.
local function device_ids(device, fn)
  if device ~= nil then return { core.device_id(device, fn) } end
  local ids = {}
  for i = 0, C.em_device_count() - 1 do ids[#ids + 1] = i end
  return ids
end

local census_buf = ffi.new('em_memory_census')
local function live_on(id)
  core.check(C.em_memory_census_get(id, census_buf))
  local blocks, bytes = 0, 0
  for k = 0, C.EM_MEMORY_CLASSES - 1 do
    blocks = blocks + tonumber(census_buf.classes[k].live_blocks)
    bytes = bytes + tonumber(census_buf.classes[k].live_bytes)
  end
  return blocks, bytes
end

-- entries(device_id or -1, min_id): the registry's live entries (ids >= min_id), unsorted.
function M.entries(id, min_id)
  local n = tonumber(C.em_memory_history_count(id))
  local buf = ffi.new('em_memory_block[?]', n + 1)
  local got = tonumber(C.em_memory_history_get(id, buf, n + 1))
  local list = {}
  for i = 0, got - 1 do
    if buf[i].id >= (min_id or 0) then list[#list + 1] = entry_of(buf[i]) end
  end
  return list
end

local function by_bytes(a, b)
  if a.bytes ~= b.bytes then return a.bytes > b.bytes end
  return (a.id or 0) < (b.id or 0)
end

-- snapshot([device]): the live storages (of one device, or all) that were made while recording
-- was on, largest first: {id=, bytes=, dtype=, shape=, device=, site=, traceback=}. Garbage
-- tensors are released first. Storages made while it was off are counted per device in
-- snap.untracked[device] = {blocks=, bytes=}.
function M.snapshot(device)
  local ids = device_ids(device, 'memory.snapshot')
  core.collect()
  local snap = setmetatable({ untracked = {}, recording = M.is_recording() }, snapshot_mt)
  for _, id in ipairs(ids) do
    local list = M.entries(id)
    local blocks, bytes = live_on(id)
    for _, e in ipairs(list) do
      snap[#snap + 1] = e
      blocks, bytes = blocks - 1, bytes - e.bytes
    end
    if blocks > 0 then snap.untracked[core.device_name(id)] = { blocks = blocks, bytes = bytes } end
  end
  table.sort(snap, by_bytes)
  return snap
end

-- by_site(list): groups entries by site (the user's line) and the runtime function that
-- allocated, largest total first: {site=, op=, traceback=, bytes=, count=, entries={...}},
-- with the traceback of the group's largest entry. Entries without a site (made on another
-- thread) group under '(unknown site)'.
function M.by_site(list)
  local groups, order = {}, {}
  local sorted = {}
  for i, e in ipairs(list) do sorted[i] = e end
  table.sort(sorted, by_bytes) -- each group's entries largest first
  for _, e in ipairs(sorted) do
    local key = (e.site or '(unknown site)') .. '\0' .. (e.op or '')
    local g = groups[key]
    if g == nil then
      g = { site = e.site or '(unknown site)', op = e.op, traceback = e.traceback, bytes = 0,
            count = 0, entries = {} }
      groups[key] = g
      order[#order + 1] = g
    end
    g.bytes = g.bytes + e.bytes
    g.count = g.count + 1
    g.entries[#g.entries + 1] = e
  end
  table.sort(order, function(a, b)
    if a.bytes ~= b.bytes then return a.bytes > b.bytes end
    if a.site ~= b.site then return a.site < b.site end
    return (a.op or '') < (b.op or '')
  end)
  return order
end
snapshot_mt.by_site = M.by_site

local function human(b)
  local units = { 'B', 'KiB', 'MiB', 'GiB', 'TiB' }
  local u = 1
  while math.abs(b) >= 1024 and u < #units do b, u = b / 1024, u + 1 end
  if u == 1 then return ('%.0f B'):format(b) end
  return ('%.1f %s'):format(b, units[u])
end
M.human = human

local function shape_str(shape) return '[' .. table.concat(shape, ',') .. ']' end
M.shape_str = shape_str

-- format(snap, {limit=, traceback=}): the snapshot as text, grouped by site.
function M.format(snap, opts)
  opts = names.check_options('memory.print_snapshot', opts, { 'limit', 'traceback' }, 2)
  local limit = opts.limit or 20
  local out = {}
  local total = 0
  for _, e in ipairs(snap) do total = total + e.bytes end
  out[#out + 1] = ('%d storage%s made while recording, %s'):format(#snap, #snap == 1 and '' or 's',
    human(total))
  local groups = M.by_site(snap)
  for i, g in ipairs(groups) do
    if i > limit then
      local more = #groups - limit
      out[#out + 1] = ('  ... %d more site%s'):format(more, more == 1 and '' or 's')
      break
    end
    local first = g.entries[1]
    out[#out + 1] = ('%10s  %4d x  %s%s  (largest %s %s on %s)'):format(human(g.bytes), g.count,
      g.site, g.op and (' ' .. g.op) or '', first.dtype, shape_str(first.shape), first.device)
    if opts.traceback and g.traceback then
      out[#out + 1] = '        ' .. g.traceback:gsub('\n', '\n        ')
    end
  end
  local devices = {}
  for d in pairs(snap.untracked or {}) do devices[#devices + 1] = d end
  table.sort(devices)
  for _, d in ipairs(devices) do
    local u = snap.untracked[d]
    out[#out + 1] = ('%10s  %4d x  (made while recording was off, on %s)'):format(human(u.bytes),
      u.blocks, d)
  end
  return table.concat(out, '\n')
end
snapshot_mt.__tostring = function(snap) return M.format(snap) end
snapshot_mt.format = M.format

return M
