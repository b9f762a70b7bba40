-- ember.host: the Lua half of the C bridge (runtime/include/ember_lua.h, runtime/lua_host/).
-- A C program that hosts Lua hands tensors in and takes them back through these functions,
-- which the bridge keeps in the registry; scripts have no use for them.
local ffi = require 'ffi'
local core = require 'ember.core'

local C = core.C
local M = {}

local tensor_ptr = ffi.typeof('em_tensor *')
local slot_ptr = ffi.typeof('em_tensor **')

-- push(pointer): the tensor behind a C em_tensor * (a light userdata), as a Lua tensor that
-- holds a reference of its own: the C caller keeps (and releases) its reference.
function M.push(pointer)
  return core.own(C.em_retain(ffi.cast(tensor_ptr, pointer)))
end

-- What a value is, for the bridge's "expected an ember tensor, got ..." message.
local function describe(value)
  local t = type(value)
  if t == 'cdata' then return 'a ' .. tostring(ffi.typeof(value)):gsub('^ctype', 'cdata') end
  if t == 'nil' then return 'nil' end
  if t == 'userdata' or t == 'table' then
    local mt = getmetatable(value)
    if type(mt) == 'table' and type(mt.__typename) == 'string' then
      return 'a ' .. t .. ' (' .. mt.__typename .. ')'
    end
  end
  return (t:match('^[aeiou]') and 'an ' or 'a ') .. t
end

-- take(value, slot): when value is a tensor, writes a new reference to it into the C slot (a
-- light userdata pointing at an em_tensor *) and returns nothing; else returns what the value
-- is instead, and the slot stays NULL.
function M.take(value, slot)
  if not ffi.istype(core.tensor_ct, value) then return describe(value) end
  if value.ptr == nil then return 'a tensor that was already freed' end
  ffi.cast(slot_ptr, slot)[0] = C.em_retain(value.ptr)
  return nil
end

-- The bridge passes the address of em_last_error_kind as the host process links it. Lua's
-- binding must have the same function, or Ember's Lua layer runs a second copy of the runtime
-- that cannot share tensors with the host's.
function M.check_library(expected)
  local bound = ffi.cast('void *', C.em_last_error_kind)
  if bound ~= ffi.cast('void *', expected) then
    error('the ember Lua package loaded a libember other than the one linked into this ' ..
          'program (libember.a linked without exporting its functions: link libember.so, ' ..
          'or all of libember.a with -rdynamic; docs/embedding.md, "The Lua bridge")', 0)
  end
end

return M
