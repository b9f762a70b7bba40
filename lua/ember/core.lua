-- ember.core: the FFI binding and the helpers every other module uses: loading libember,
-- turning C errors into Lua errors, owning tensor handles, and parsing dtypes, devices,
-- dimensions and sizes.
local ffi = require 'ffi'

ffi.cdef(require 'ember.cdef')

local core = {}

local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'

-- An installed package has ember/installed.lua (written by `cmake --install`, absent from the
-- source tree): the installed library and docs, as paths relative to this folder.
do
  local chunk = loadfile(here .. '/installed.lua')
  if chunk then
    local info = chunk()
    core.installed = { library = here .. '/' .. info.library, docs = here .. '/' .. info.docs }
  end
end

-- libember is found in-process when running under the `ember` program (it links the library
-- and exports its symbols); otherwise through EMBER_LIB, the library installed with this
-- package, the build folder next to lua/, or the system's library path.
local function load_library()
  local ok = pcall(function() return ffi.C.em_last_error end)
  if ok then return ffi.C end
  local candidates = {}
  if os.getenv('EMBER_LIB') then candidates[#candidates + 1] = os.getenv('EMBER_LIB') end
  if core.installed then candidates[#candidates + 1] = core.installed.library end
  candidates[#candidates + 1] = here .. '/../../build/libember.so'
  candidates[#candidates + 1] = 'ember'
  local errors = {}
  for _, path in ipairs(candidates) do
    local lib_ok, lib = pcall(ffi.load, path)
    if lib_ok then return lib end
    errors[#errors + 1] = tostring(lib)
  end
  error('ember: cannot load libember (' .. table.concat(errors, '; ') .. ')')
end

local C = load_library()
core.C = C
core.ffi = ffi

-- A Lua tensor is a handle holding one reference. It is a struct, not a bare em_tensor*,
-- because LuaJIT gives pointers built-in arithmetic (p + 1, p - q, p < q) that would shadow
-- the tensor operators.
ffi.cdef('typedef struct em_handle { em_tensor *ptr; } em_handle;')
local tensor_ct = ffi.typeof('em_handle')
local tensor_ptr_ct = ffi.typeof('em_tensor *')
core.tensor_ct = tensor_ct

-- A GPU reports a bad index of an indexing op (index_select ... embedding) at its next
-- synchronization, so the report reaches whichever call synchronized (item, to('cpu'), ...)
-- instead of the op's own wrapper, which would have put its C terms (0-based indices and
-- dimensions) into Lua's. Such reports are put into Lua's terms here, as the CPU's are there.
local function lua_terms(msg)
  if not msg:find('reported at its next synchronization', 1, true) then return msg end
  -- a class index of cross_entropy / nll_loss: Lua's classes are 1-based, as the CPU's report
  local cls, k = msg:gsub('class index (%-?%d+) %(0%-based%)', function(i)
    return 'class index ' .. (tonumber(i) + 1)
  end, 1)
  if k > 0 then return cls end
  local head, n = msg:gsub('index (%-?%d+) is out of (%a+)', function(i, what)
    return 'index ' .. (tonumber(i) + 1) .. ' is out of ' .. what
  end, 1)
  if n == 0 or msg:find('class index', 1, true) then return msg end
  return (head:gsub('for dimension (%d+) with size', function(d)
    return 'for dimension ' .. (tonumber(d) + 1) .. ' with size'
  end, 1))
end
core.lua_terms = lua_terms

-- Error positions point at the user's code, never at Ember's own Lua files: user_level(level)
-- turns error()'s level, as seen from its caller, into the level of the first frame above it
-- that is neither one of Ember's modules (files under the folder of this one) nor a C
-- function. A C error found in a module (a chain of wrappers, a layer's forward) thus reports
-- the line that called Ember, and a user's callback run by Ember (a module's forward) reports
-- its own line. C frames are passed too: in pcall(function() return ember.f(x) end) the tail
-- call leaves only pcall between f and the line that made the call.
local ember_prefix = '@' .. (debug.getinfo(1, 'S').source:match('^@(.*)core%.lua$') or '\0')
local function internal(info)
  return info.what == 'C' or info.source:sub(1, #ember_prefix) == ember_prefix
end
function core.user_level(level)
  local l = (level or 1) + 1 -- as seen from here
  local info = debug.getinfo(l, 'S')
  while info ~= nil and internal(info) do
    l = l + 1
    info = debug.getinfo(l, 'S')
  end
  if info == nil then return level or 1 end -- called from Ember alone (no user frame)
  return l - 1
end
local user_level = core.user_level

-- error() for Ember's modules: the position is the user's line (see user_level). Level 0 (no
-- position) and non-string messages are passed on as they are.
local lua_error = error
function core.error(msg, level)
  if level == 0 or type(msg) ~= 'string' then lua_error(msg, level == 0 and 0 or 2) end
  lua_error(msg, user_level((level or 1) + 1))
end
local error = core.error

-- Every other ember.* module is loaded with core.error as its `error` (its environment is a
-- table that holds only that and reads and writes all else through _G), so that the fixed
-- levels their checks pass to error() cannot point into Ember when a call goes through a few
-- of its layers (a module's forward, a wrapper): the position is always the caller's line.
-- Modules stay ordinary files found on package.path; this searcher only runs before Lua's
-- own file searcher for names under "ember.".
local module_env = setmetatable({ error = core.error }, { __index = _G, __newindex = _G })
local function ember_searcher(name)
  if name:sub(1, 6) ~= 'ember.' or not package.searchpath then return nil end
  local path = package.searchpath(name, package.path)
  if path == nil then return nil end -- Lua's searchers say where they looked
  local chunk, err = loadfile(path)
  if chunk == nil then lua_error(err, 0) end
  return setfenv(chunk, module_env)
end
-- Once per process, should Ember's modules be loaded again (busted's insulation).
if not debug.getregistry().ember_searcher then
  debug.getregistry().ember_searcher = ember_searcher
  table.insert(package.loaders, 2, ember_searcher)
end

-- Raises the runtime's last error at the user's line that called the Ember function.
function core.raise(level)
  error(lua_terms(ffi.string(C.em_last_error())), user_level((level or 1) + 1))
end

-- ---- handle lifetime ------------------------------------------------------------------------
-- A LuaJIT finalizer costs about 250 ns per object, more than a whole small op. So a new handle
-- gets no finalizer: it goes into a weak-valued "young" table, with its pointer kept in a C
-- array. After each garbage-collection cycle (a sentinel's __gc tells us), a sweep releases the
-- pointers whose handles were collected, and gives the survivors (long-lived tensors: weights,
-- datasets) an ordinary finalizer. See docs/design.md.
local young = setmetatable({}, { __mode = 'v' })
local young_cap = 4096
local young_ptrs = ffi.new('em_tensor*[?]', young_cap)
local young_n = 0
local cycle_done = false

local function finalize_handle(h)
  local p = h.ptr
  if p ~= nil then
    h.ptr = nil
    C.em_release(p)
  end
end

local function arm_sentinel()
  local s = newproxy(true)
  getmetatable(s).__gc = function()
    cycle_done = true
    arm_sentinel()
  end
end
arm_sentinel()

local function sweep()
  cycle_done = false
  for i = 1, young_n do
    local h = young[i]
    if h == nil then
      C.em_release(young_ptrs[i - 1])
    else
      ffi.gc(h, finalize_handle)
      young[i] = nil
    end
    young_ptrs[i - 1] = nil
  end
  young_n = 0
end

-- Lua's collector cannot see the memory behind tensor handles, so it is also paced by what the
-- runtime allocated since the last collection.
-- The limit follows the live memory: garbage may grow to half of what is live (at least
-- 32 MiB) before a collection returns it. Fresh memory costs a page fault per 4 KiB on first
-- touch, so reusing freed blocks soon matters more than the collection, whose cost follows
-- the (small) Lua heap.
local pressure_floor = 32 * 1024 * 1024
local pressure_limit = pressure_floor

-- Tensors are allocation too: once young_limit handles wait for a sweep, the collector is made
-- to finish. While the Lua heap is small, one full collection does it: its cost follows the
-- heap (about 1 MiB for a typical program), so over 16384 handles it is a few dozen
-- instructions per tensor, where stepping the collector after every op past 4096 handles cost
-- about 700 (docs/performance.md). A larger heap (2 MiB and up, where a full collection per
-- 16384 tensors would cost more than the steps) is stepped after every op instead.
local young_limit = 16384
local full_collect_kb = 2048
local function collect_young()
  if collectgarbage('count') < full_collect_kb then
    collectgarbage()
    sweep()
  else
    collectgarbage('step', 0)
  end
end

-- Releases what the collector has found dead now (a full collection, then a sweep).
-- A device runs the work recorded so far meanwhile. One full cycle is enough: it clears the
-- weak entries of dead young handles (the sweep releases those) and runs the finalizers of
-- dead old ones.
function core.collect()
  C.em_flush(-1)
  collectgarbage()
  sweep()
  C.em_alloc_pressure_reset()
  pressure_limit = math.max(pressure_floor, tonumber(C.em_alloc_live()) / 2)
end

-- When the Lua state closes, every handle still young is released.
core.closer = newproxy(true)
getmetatable(core.closer).__gc = function()
  for i = 1, young_n do
    local h = young[i]
    if h ~= nil then h.ptr = nil end
    C.em_release(young_ptrs[i - 1])
  end
  young_n = 0
end

local function track(p)
  local h = tensor_ct(p)
  if young_n == young_cap then
    local bigger = ffi.new('em_tensor*[?]', young_cap * 2)
    ffi.copy(bigger, young_ptrs, young_cap * ffi.sizeof('em_tensor*'))
    young_ptrs, young_cap = bigger, young_cap * 2
  end
  young_ptrs[young_n] = p
  young_n = young_n + 1
  young[young_n] = h
  return h
end

-- Makes handle h hold the tensor that handle src holds (one more reference), releasing its old
-- one: module:to() moves parameters this way, so that references to them stay valid.
function core.replace(h, src)
  for i = 1, young_n do
    if young[i] == h then -- a young handle: take it out of the young table first
      young[i] = nil
      young_ptrs[i - 1] = nil
      ffi.gc(h, finalize_handle)
      break
    end
  end
  local old = h.ptr
  h.ptr = C.em_retain(src.ptr)
  C.em_release(old)
end



-- Takes ownership of a new tensor reference returned by C. When C returned NULL because memory
-- ran out, releases what is garbage and retries the call once. (The runtime cannot call back
-- into Lua itself: LuaJIT forbids callbacks from FFI calls made by compiled code.)
function core.own(p, retry_fn, ...)
  if p == nil then
    if retry_fn and C.em_last_error_kind() == C.EM_ERR_OOM then
      -- The retry's arguments are raw pointers: the handles behind them may be reachable only
      -- from a frame a tail call discarded, so hold a reference across the collection.
      local n = select('#', ...)
      local args = { ... }
      for i = 1, n do
        if ffi.istype(tensor_ptr_ct, args[i]) then C.em_retain(args[i]) end
      end
      core.collect()
      p = retry_fn(unpack(args, 1, n))
      for i = 1, n do
        if ffi.istype(tensor_ptr_ct, args[i]) then C.em_release(args[i]) end
      end
    end
    if p == nil then core.raise(2) end
  end
  if cycle_done then
    sweep()
  elseif young_n >= young_limit then
    collect_young()
  end
  if C.em_alloc_pressure() > pressure_limit then
    local h = track(p)
    core.collect()
    return h
  end
  return track(p)
end

-- Raises unless a status-returning call succeeded.
function core.check(rc)
  if rc ~= 0 then core.raise(2) end
end

-- Out-parameters for functions that return several tensors.
local out_slots = ffi.new('em_tensor*[3]')
core.out_slots = out_slots
function core.take_out(i)
  local p = out_slots[i]
  out_slots[i] = nil
  if p == nil then return nil end
  return core.own(p)
end

-- ---- dtypes ---------------------------------------------------------------------------------
local dtype_ids = {}
local dtype_names = {}
for i = 0, C.EM_NUM_DTYPES - 1 do
  local name = ffi.string(C.em_dtype_name(i))
  dtype_ids[name] = i
  dtype_names[i] = name
end
core.dtype_names = dtype_names

-- The cast methods (x:long() ...) as dtypes: {dtype = ember.long}; tensor.lua fills it. One
-- table per process (in the registry, weak keys): a test runner that loads Ember's modules
-- again (busted's insulation) leaves tensors on the first load's metatable, whose `to` must
-- also know the later loads' casts.
do
  local reg = debug.getregistry()
  reg.ember_dtype_of_cast = reg.ember_dtype_of_cast or setmetatable({}, { __mode = 'k' })
  core.dtype_of_cast = reg.ember_dtype_of_cast
end

function core.dtype_id(d, fn)
  if d == nil then return nil end
  if type(d) == 'number' then return d end
  if core.dtype_of_cast[d] then return dtype_ids[core.dtype_of_cast[d]] end
  if type(d) ~= 'string' then
    error(("%sexpected a dtype name such as 'float32', got %s"):format(fn and fn .. ': ' or '',
      type(d)), 3)
  end
  local id = dtype_ids[d]
  if id then return id end
  id = C.em_dtype_from_name(tostring(d))
  if id < 0 then error((fn and fn .. ': ' or '') .. ffi.string(C.em_last_error()), 3) end
  return id
end

core.default_dtype = C.EM_FLOAT32

-- ---- devices --------------------------------------------------------------------------------
function core.device_id(d, fn)
  if d == nil then return C.em_default_device() end
  if type(d) == 'number' then return d end
  if type(d) == 'table' and d.id then return d.id end
  local id = C.em_device_parse(tostring(d))
  if id < 0 then error((fn and fn .. ': ' or '') .. ffi.string(C.em_last_error()), 3) end
  return id
end

function core.device_name(id)
  return ffi.string(C.em_device_name(id))
end

-- ---- dimensions -----------------------------------------------------------------------------
-- Lua dims are 1-based; negative dims count from the end (-1 is the last). C is 0-based.
function core.cdim(d, fn)
  if type(d) ~= 'number' or d ~= math.floor(d) then
    error((fn or 'ember') .. ': expected an integer dimension, got ' .. tostring(d), 3)
  end
  if d > 0 then return d - 1 end
  if d == 0 then
    error((fn or 'ember') .. ': dimensions are 1-based in Lua; got 0', 3)
  end
  return d
end

-- The one check of an integer argument (a size, an index, a count): a Lua number that is
-- whole, finite and inside int64, else an error naming fn, what and the value, at `level` (as
-- error's, seen from the caller of int_arg). Returns v.
function core.int_arg(fn, what, v, level)
  if type(v) ~= 'number' or v ~= math.floor(v) or v >= 2 ^ 63 or v < -2 ^ 63 then
    local shown = type(v) == 'number' and (v ~= v and 'nan' or tostring(v)) or type(v)
    error(('%s: expected an integer %s, got %s'):format(fn, what, shown), (level or 1) + 1)
  end
  return v
end
local int_arg = core.int_arg

-- Parses sizes given as numbers or as one table: f(3, 4), f({3, 4}), f(x:size()). Returns the
-- count, an int64_t[8] array, and the first argument after the sizes.
local size_buf = ffi.new('int64_t[8]')
function core.parse_sizes(fn, ...)
  local first = select(1, ...)
  local n, nargs = 0, select('#', ...)
  local rest_index
  if type(first) == 'table' and (first[1] ~= nil or next(first) == nil or getmetatable(first) == core.Size) then
    for i = 1, #first do
      local s = first[i]
      if type(s) ~= 'number' then
        error(fn .. ': expected sizes as numbers, got ' .. type(s), 3)
      end
      int_arg(fn, 'size', s, 3)
      n = n + 1
      if n > 8 then error(fn .. ': expected at most 8 dimensions, got ' .. #first, 3) end
      size_buf[n - 1] = s
    end
    rest_index = 2
  else
    rest_index = 1
    for i = 1, nargs do
      local s = select(i, ...)
      if type(s) ~= 'number' then break end
      int_arg(fn, 'size', s, 3)
      n = n + 1
      if n > 8 then error(fn .. ': expected at most 8 dimensions', 3) end
      size_buf[n - 1] = s
      rest_index = i + 1
    end
  end
  return n, size_buf, select(rest_index, ...)
end

-- A size list that prints like [3, 4] and compares by value.
local Size = {}
Size.__index = Size
Size.__tostring = function(s) return '[' .. table.concat(s, ', ') .. ']' end
Size.__eq = function(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end
core.Size = Size

return core
