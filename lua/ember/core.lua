-- ember.core: the FFI binding and the helpers every other module uses: loading libember,
-- turning C errors into Lua errors, owning tensor handles, and parsing dtypes, devices,
-- dimensions and sizes.
local ffi = require 'ffi'

ffi.cdef(require 'ember.cdef')

local core = {}

-- libember is found in-process when running under the `ember` program (it links the library
-- and exports its symbols); otherwise through EMBER_LIB, the build folder next to lua/, or the
-- system's library path.
local function load_library()
  local ok = pcall(function() return ffi.C.em_last_error end)
  if ok then return ffi.C end
  local candidates = {}
  if os.getenv('EMBER_LIB') then candidates[#candidates + 1] = os.getenv('EMBER_LIB') end
  local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
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
-- the tensor operators. The handle's __gc (set in ember.tensor) releases the reference.
ffi.cdef('typedef struct em_handle { em_tensor *ptr; } em_handle;')
local tensor_ct = ffi.typeof('em_handle')
core.tensor_ct = tensor_ct

-- Raises the runtime's last error at the caller of the Ember function that failed.
function core.raise(level)
  error(ffi.string(C.em_last_error()), (level or 1) + 1)
end

-- Lua's collector cannot see the memory behind tensor handles, so it is paced by what the
-- runtime allocated since the last collection.
local pressure_limit = 256 * 1024 * 1024
local function pace_gc()
  if C.em_alloc_pressure() > pressure_limit then
    collectgarbage()
    C.em_alloc_pressure_reset()
  end
end
core.pace_gc = pace_gc

-- Takes ownership of a new tensor reference returned by C. When C returned NULL because memory
-- ran out, collects garbage (dropping unreachable tensors) and retries the call once. (The
-- runtime cannot call back into Lua itself: a callback from a JIT-compiled FFI call is not
-- allowed by LuaJIT.)
function core.own(p, retry_fn, ...)
  if p == nil then
    if retry_fn and C.em_last_error_kind() == C.EM_ERR_OOM then
      collectgarbage()
      collectgarbage()
      C.em_alloc_pressure_reset()
      p = retry_fn(...)
    end
    if p == nil then core.raise(2) end
  end
  pace_gc()
  return tensor_ct(p)
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
  return tensor_ct(p)
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

function core.dtype_id(d, fn)
  if d == nil then return nil end
  if type(d) == 'number' then return d end
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
