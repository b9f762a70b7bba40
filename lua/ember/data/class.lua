-- ember.data.class: the small class system behind Dataset and DataLoader.
--
-- Instances are userdata proxies (newproxy) rather than tables because LuaJIT follows Lua 5.1,
-- where `#t` on a table ignores __len: `#dataset` and `#loader` work only on userdata. Each
-- instance keeps its fields in a plain table whose lookups fall back to the class, then to its
-- parents, so subclasses and instance fields behave as with ordinary table objects:
--
--   local Squares = ember.data.Dataset:extend('Squares')
--   function Squares:init(n) self.n = n end
--   function Squares:size() return self.n end
--   function Squares:get(i) return i * i end
--   local ds = Squares(10); print(#ds, ds:get(3))   --> 10  9
local M = {}

local class_of = setmetatable({}, { __mode = 'k' })

local function new_instance(cls, ...)
  local fields = setmetatable({}, { __index = cls })
  local obj = newproxy(true)
  local mt = getmetatable(obj)
  mt.__index = fields
  mt.__newindex = fields
  mt.__len = function(o) return o:size() end
  mt.__tostring = function(o)
    if cls.__tostring then return cls.__tostring(o) end
    return cls.__name
  end
  class_of[obj] = cls
  if obj.init then obj:init(...) end
  return obj
end

-- A new class named `name`, inheriting from `parent` (a class or nil).
function M.class(name, parent)
  local cls = { __name = name, __parent = parent }
  cls.extend = function(self, sub_name) return M.class(sub_name or (name .. '*'), self) end
  return setmetatable(cls, { __index = parent, __call = new_instance })
end

-- Whether obj is an instance of cls or of one of its subclasses.
function M.is_instance(obj, cls)
  local c = class_of[obj]
  while c do
    if c == cls then return true end
    c = c.__parent
  end
  return false
end

-- The class an instance was made from, or nil for anything else.
function M.class_of(obj) return class_of[obj] end

return M
