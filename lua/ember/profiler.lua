-- ember.profiler: where the time and memory of a run go, per op, like torch.profiler.
--
--   ember.profiler.profile({activities = {'cpu', 'vulkan'}, record_shapes = true,
--                           profile_memory = true, with_stack = true,
--                           schedule = {wait = 1, warmup = 1, active = 3},
--                           on_trace_ready = function(prof) ... end}, function(prof)
--     for step = 1, 10 do train_step(); prof:step() end
--   end)
--
-- The recording is the runtime's (runtime/src/profiler, em_profiler_* in ember.h): every
-- op's kernel call, every backward node and every range, per thread, with the GPU time of
-- each Vulkan dispatch charged to the op that recorded it. This file adds the Lua side:
-- options, the schedule, module and user ranges, the call sites (with_stack), and reading
-- the events back; profiler/averages.lua makes the key_averages table and profiler/trace.lua
-- the Chrome trace. docs/profiling.md is the guide, docs/api/profiler.md the reference.
local ffi = require 'ffi'
local core = require 'ember.core'
local names = require 'ember.util.names'
local state = require 'ember.profiler.state'
local modules = require 'ember.profiler.modules'
local C = core.C

local M = {}

local KIND = { [0] = 'op', [1] = 'range', [2] = 'kernel' }
local ACTIVITIES = { cpu = true, vulkan = true }

-- ---- call sites (with_stack) ----------------------------------------------------------------
-- A line hook tells the runtime the user's current file:line whenever it changes; lines of
-- Ember's own modules are skipped, so an op made inside Ember (a layer's forward) carries the
-- user's line that called Ember. The hook runs only while with_stack records, and LuaJIT
-- interprets instead of running compiled traces while a line hook is set: with_stack costs
-- much more than the rest, as in PyTorch.
local ember_prefix = '@' .. (debug.getinfo(1, 'S').source:match('^@(.*)profiler%.lua$') or '\0')
local getinfo = debug.getinfo
local last_source, last_line, last_internal

local function line_hook(_, line)
  local info = getinfo(2, 'S')
  local source = info.source
  if source ~= last_source then
    last_source = source
    last_internal = source:sub(1, #ember_prefix) == ember_prefix or info.what == 'C'
    last_line = nil
  end
  if last_internal or line == last_line then return end
  last_line = line
  C.em_profiler_set_site(info.short_src .. ':' .. line)
end

local saved_hook -- the hook in place before with_stack's (a coverage tool's), put back after

local function hooks_on(with_stack)
  state.recording = true
  state.call = modules.call
  state.backward = modules.backward
  if with_stack then
    last_source, last_line = nil, nil
    saved_hook = { debug.gethook() }
    jit.flush()
    debug.sethook(line_hook, 'l')
  end
end

local function hooks_off(with_stack)
  state.recording = false
  modules.reset()
  if with_stack then
    if saved_hook and saved_hook[1] then debug.sethook(saved_hook[1], saved_hook[2], saved_hook[3])
    else debug.sethook() end
    saved_hook = nil
  end
end

-- ---- the runtime's events as Lua rows ---------------------------------------------------------
local ev = ffi.new('em_profiler_event')
local function str(p) return p ~= nil and ffi.string(p) or nil end

-- Every event of the profile just stopped: 1-based rows with times in microseconds from the
-- profile's start; parent and op are row numbers (nil at the top / for none).
local function read_events(t0)
  local n = tonumber(C.em_profiler_event_count())
  if n < 0 then core.raise(2) end
  local rows = {}
  for i = 0, n - 1 do
    core.check(C.em_profiler_event_get(i, ev))
    rows[i + 1] = {
      name = ffi.string(ev.name), kind = KIND[ev.kind], shapes = str(ev.shapes),
      site = str(ev.site), device = ev.device >= 0 and core.device_name(ev.device) or nil,
      thread = ev.thread, depth = ev.depth,
      parent = ev.parent >= 0 and tonumber(ev.parent) + 1 or nil,
      op = ev.op >= 0 and tonumber(ev.op) + 1 or nil,
      start = tonumber(ev.start_ns - t0) / 1e3, duration = tonumber(ev.end_ns - ev.start_ns) / 1e3,
      self = tonumber(ev.self_ns) / 1e3,
      alloc = tonumber(ev.alloc_bytes), freed = tonumber(ev.free_bytes),
      self_alloc = tonumber(ev.self_alloc_bytes), self_freed = tonumber(ev.self_free_bytes),
      device_alloc = tonumber(ev.device_alloc_bytes), device_freed = tonumber(ev.device_free_bytes),
      self_device_alloc = tonumber(ev.self_device_alloc_bytes),
      self_device_freed = tonumber(ev.self_device_free_bytes),
      gpu = tonumber(ev.gpu_ns) / 1e3, self_gpu = tonumber(ev.self_gpu_ns) / 1e3,
    }
  end
  return rows
end

-- ---- the profile object ---------------------------------------------------------------------
local Profile = {}
Profile.__index = function(_, k)
  local v = Profile[k]
  if v == nil and not (type(k) == 'string' and k:sub(1, 1) == '_') then
    local list = {}
    for name, f in pairs(Profile) do
      if type(f) == 'function' and name:sub(1, 1) ~= '_' then list[#list + 1] = name end
    end
    error(('profiler: no method %s%s'):format(tostring(k), names.hint(tostring(k), list)), 2)
  end
  return v
end
Profile.__tostring = function(p)
  return ('ember.profiler profile (%s, %d events)'):format(p._mode and 'recording' or 'stopped',
    p._events and #p._events or 0)
end

local function check_schedule(s)
  names.check_options('profiler.profile: schedule', s, { 'wait', 'warmup', 'active', 'repeat',
    'skip_first' }, 3)
  local out = {}
  for _, k in ipairs({ 'wait', 'warmup', 'active', 'repeat', 'skip_first' }) do
    local v = s[k] == nil and (k == 'active' and 1 or 0) or s[k]
    if type(v) ~= 'number' or v < 0 or v % 1 ~= 0 then
      error(('profiler.profile: schedule.%s: expected a whole number >= 0, got %s'):format(k,
        tostring(s[k])), 4)
    end
    out[k] = v
  end
  if out.active < 1 then
    error('profiler.profile: schedule.active: expected at least 1 step, got ' .. out.active, 4)
  end
  return out
end

local function new_profile(opts)
  opts = names.check_options('profiler.profile', opts, { 'activities', 'record_shapes',
    'profile_memory', 'with_stack', 'schedule', 'on_trace_ready' }, 3)
  local acts = opts.activities or { 'cpu', 'vulkan' }
  if type(acts) ~= 'table' then
    error('profiler.profile: activities: expected a list such as {\'cpu\', \'vulkan\'}, got '
      .. type(acts), 3)
  end
  local set = {}
  for i, a in ipairs(acts) do
    if not ACTIVITIES[a] then
      error(("profiler.profile: activities[%d]: unknown activity %s%s; expected 'cpu' or 'vulkan'")
        :format(i, tostring(a), names.hint(tostring(a), { 'cpu', 'vulkan' })), 3)
    end
    set[a] = true
  end
  if opts.on_trace_ready ~= nil and type(opts.on_trace_ready) ~= 'function' then
    error('profiler.profile: on_trace_ready: expected a function, got ' .. type(opts.on_trace_ready), 3)
  end
  if opts.schedule ~= nil and type(opts.schedule) ~= 'table' then
    error('profiler.profile: schedule: expected a table {wait=, warmup=, active=, repeat=}, got '
      .. type(opts.schedule), 3)
  end
  for _, k in ipairs({ 'record_shapes', 'profile_memory', 'with_stack' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
      error(('profiler.profile: %s: expected a boolean, got %s'):format(k, type(opts[k])), 3)
    end
  end
  return setmetatable({
    _activities = set,
    _options = ffi.new('em_profiler_options', {
      record_shapes = opts.record_shapes and 1 or 0,
      profile_memory = opts.profile_memory and 1 or 0,
      gpu = set.vulkan and 1 or 0,
    }),
    _with_stack = opts.with_stack == true,
    _schedule = opts.schedule and check_schedule(opts.schedule) or nil,
    _on_trace_ready = opts.on_trace_ready,
    _step = 0,       -- the step being run (0-based, as PyTorch counts)
    _cycles = 0,     -- traces handed to on_trace_ready
    _events = nil,
    _mode = nil,     -- 'warmup' or 'active' while recording
  }, Profile)
end

-- What the schedule says of step n: 'skip', 'wait', 'warmup', 'active' or 'done', and the
-- cycle it belongs to.
local function phase(s, n)
  if s == nil then return 'active', 0 end
  if n < s.skip_first then return 'skip', -1 end
  n = n - s.skip_first
  local len = s.wait + s.warmup + s.active
  local cycle = math.floor(n / len)
  if s['repeat'] > 0 and cycle >= s['repeat'] then return 'done', cycle end
  local k = n % len
  if k < s.wait then return 'wait', cycle end
  if k < s.wait + s.warmup then return 'warmup', cycle end
  return 'active', cycle
end

local function start_recording(p, mode)
  if C.em_profiler_enabled() ~= 0 then
    error('profiler: another profile is already recording', 4)
  end
  core.check(C.em_profiler_start(p._options))
  p._mode = mode
  hooks_on(p._with_stack)
  C.em_profiler_range_push('ProfilerStep#' .. p._step)
end

-- Stops; the events are kept (a trace) or dropped (warmup).
local function stop_recording(p, keep)
  C.em_profiler_range_pop() -- the step's range ends before stop waits for the GPU
  hooks_off(p._with_stack)
  p._mode = nil
  local rc = C.em_profiler_stop()
  if not keep then return core.check(rc) end
  core.check(rc)
  -- times count from the first event of the trace
  local n = tonumber(C.em_profiler_event_count())
  local t0
  for i = 0, n - 1 do
    core.check(C.em_profiler_event_get(i, ev))
    if t0 == nil or ev.start_ns < t0 then t0 = ev.start_ns end
  end
  p._events = read_events(t0 or 0)
  local dropped = tonumber(C.em_profiler_dropped())
  if dropped > 0 then
    io.stderr:write(('ember.profiler: %d events were dropped (the buffers are full); profile '
      .. 'fewer steps\n'):format(dropped))
  end
end

local function trace_ready(p)
  stop_recording(p, true)
  p._cycles = p._cycles + 1
  if p._on_trace_ready then p._on_trace_ready(p) end
end

-- Moves from the step before (its phase and cycle) to the one now, as the schedule says:
-- warmup records and drops what it recorded, the end of an active stretch hands the trace over.
local function enter(p, before, bcycle, now, ncycle)
  if p._mode == 'active' and (now ~= 'active' or ncycle ~= bcycle) then trace_ready(p) end
  if now == 'warmup' or now == 'active' then
    if p._mode == now then -- the stretch goes on: the next step's range
      C.em_profiler_range_pop()
      C.em_profiler_range_push('ProfilerStep#' .. p._step)
    else
      if p._mode then stop_recording(p, false) end
      start_recording(p, now)
    end
  elseif p._mode then
    stop_recording(p, false)
  end
end

-- Marks the end of a step (a training iteration): the schedule advances.
function Profile:step()
  if not self._started then error('profiler: step: the profile is not running', 2) end
  local before, bcycle = phase(self._schedule, self._step)
  self._step = self._step + 1
  local now, ncycle = phase(self._schedule, self._step)
  enter(self, before, bcycle, now, ncycle)
end

-- Starts recording (the form without a function: prof:start() ... prof:stop()).
function Profile:start()
  if self._started then error('profiler: this profile has already been started', 2) end
  local now, cycle = phase(self._schedule, self._step)
  enter(self, 'none', -2, now, cycle) -- (raises while another profile records)
  self._started = true
  return self
end

-- Stops; in the middle of an active stretch the trace is handed over as at its end.
function Profile:stop()
  if not self._started then error('profiler: this profile has not been started', 2) end
  self._started = false
  if self._mode == 'active' then trace_ready(self)
  elseif self._mode then stop_recording(self, false) end
  return self
end

-- The events of the last trace: rows {name=, kind='op'|'range'|'kernel', start=, duration=,
-- self=, shapes=, site=, device=, thread=, parent=, op=, alloc=, freed=, device_alloc=,
-- device_freed= (and self_ forms), gpu=, self_gpu=}, times in microseconds from the trace's
-- start, bytes of host memory and of other devices' memory.
function Profile:events()
  if self._events == nil then
    error('profiler: no trace yet (it is ready once the profile stops, or an active stretch '
      .. 'of its schedule ends)', 2)
  end
  return self._events
end

function Profile:key_averages(opts)
  opts = names.check_options('profiler.key_averages', opts, { 'group_by_input_shape',
    'group_by_stack_n' }, 2)
  local events, kernels = self:events(), false
  for _, e in ipairs(events) do kernels = kernels or e.kind == 'kernel' end
  -- Vulkan columns when GPU time was asked for and some device gave it
  return require('ember.profiler.averages').compute(events, opts,
    self._activities.vulkan and kernels)
end

function Profile:export_chrome_trace(path)
  if type(path) ~= 'string' then
    error('profiler.export_chrome_trace: expected a file path, got ' .. type(path), 2)
  end
  return require('ember.profiler.trace').write(path, self:events())
end

-- ---- module functions -----------------------------------------------------------------------

-- profile(opts, fn): runs fn(prof) under the profiler and returns prof; profile(opts) returns
-- a profile to start and stop by hand.
function M.profile(opts, fn)
  if fn ~= nil and type(fn) ~= 'function' then
    error('profiler.profile: expected a function to run as argument 2, got ' .. type(fn), 2)
  end
  local p = new_profile(opts)
  if fn == nil then return p end
  p:start()
  local ok, err = pcall(fn, p)
  if not ok then
    if p._mode then -- the error is the one to report: the profile is dropped
      hooks_off(p._with_stack)
      p._mode = nil
      C.em_profiler_stop()
    end
    p._started = false
    error(err, 0)
  end
  p:stop()
  return p
end

-- record(name, fn, ...): runs fn(...) as a range named name; returns what fn returns.
function M.record(name, fn, ...)
  if type(name) ~= 'string' then
    error('profiler.record: expected a name as argument 1, got ' .. type(name), 2)
  end
  if type(fn) ~= 'function' then
    error('profiler.record: expected a function as argument 2, got ' .. type(fn), 2)
  end
  if not state.recording then return fn(...) end
  C.em_profiler_range_push(name)
  local r = { pcall(fn, ...) }
  C.em_profiler_range_pop()
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, table.maxn(r))
end

-- Whether a profile is recording now.
function M.is_recording() return C.em_profiler_enabled() ~= 0 end

return M
