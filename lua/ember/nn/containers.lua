-- ember.nn containers: Sequential (with Torch7's :add), ModuleList and ModuleDict.
--
-- Sequential and ModuleList are lists: `blocks[i]` (1-based, negative from the end), `#blocks`,
-- `ipairs(blocks)` and `blocks[i] = m` work as on a Lua array, while their children keep
-- PyTorch's 0-based names ("0", "1", ...), so state_dict keys are PyTorch's
-- ("blocks.0.attn.weight") and weights convert by name.
--
-- Why the children live in the table's array part: LuaJIT follows Lua 5.1 (it is not built
-- with LUAJIT_ENABLE_LUA52COMPAT), so on a table `#t` ignores __len and `ipairs(t)` ignores
-- __ipairs and reads raw slots 1, 2, .... A module must stay a table (the Module API is built
-- on plain fields), so the list's children are stored at self[1..n] and nowhere else: a child's
-- name ("0", or "conv" when added under a name) maps to its slot through self._positions, and
-- the class's __index resolves names through that map. Since the slots are the only copy,
-- `blocks[i] = m` (a raw write when slot i exists) replaces the child everywhere at once:
-- forward, parameters(), state_dict() and printing all read through the name.
local Module = require 'ember.nn.module'

local M = {}

local function is_module(m)
  return type(m) == 'table' and getmetatable(m) ~= nil and rawget(m, '_modules') ~= nil
end

local function count(self) return #rawget(self, '_modules') end

-- The slot of a numeric index i (1-based; -1 is the last), or an error at the user's line.
local function slot(self, i, level)
  local n = count(self)
  if type(i) == 'number' and i == math.floor(i) then
    local k = i < 0 and n + i + 1 or i
    if k >= 1 and k <= n then return k end
  end
  error(('%s: index %s is out of range (%d modules; indices are 1-based, negative from the end)')
    :format(rawget(getmetatable(self), '__name') or 'list', tostring(i), n), level + 1)
end

-- The instance __index of a list class: numbers are positions, child names go through
-- _positions, everything else is the class's (methods, class fields).
local function list_index(cls)
  return function(self, k)
    if type(k) == 'number' then return rawget(self, slot(self, k, 2)) end
    local pos = rawget(self, '_positions')
    local p = pos and pos[k]
    if p then return rawget(self, p) end
    return cls[k]
  end
end

-- Writes that reach __newindex: a number past the end appends (n + 1 only), a negative index or
-- a child's name replaces that child, anything else is an ordinary field.
local function list_newindex(self, k, v)
  if type(k) == 'number' then
    if k == count(self) + 1 then return self:add_module(tostring(count(self)), v) end
    local i = slot(self, k, 2)
    if not is_module(v) then
      error(('%s: expected a module at index %d, got %s'):format(getmetatable(self).__name, k, type(v)), 2)
    end
    return rawset(self, i, v)
  end
  local pos = rawget(self, '_positions')
  local p = pos and pos[k]
  if p then
    if not is_module(v) then
      error(('%s: expected a module for %s, got %s'):format(getmetatable(self).__name, k, type(v)), 2)
    end
    return rawset(self, p, v)
  end
  rawset(self, k, v)
end

-- A child is registered by Module.add_module (names, order), then moved from its named field
-- into its slot.
local function list_add_module(self, name, m)
  if not is_module(m) then
    error(('add_module: expected a module for %s, got %s'):format(tostring(name), type(m)), 2)
  end
  name = tostring(name)
  Module.add_module(self, name, m)
  rawset(self, name, nil)
  local pos = rawget(self, '_positions')
  if not pos then
    pos = {}
    rawset(self, '_positions', pos)
  end
  if not pos[name] then
    for i, n in ipairs(self._modules) do
      if n == name then pos[name] = i end
    end
  end
  rawset(self, pos[name], m)
  return m
end

-- A list class; its subclasses (Sequential:extend('MyNet')) keep the list lookups.
local function list_class(name)
  local cls = Module:extend(name)
  cls.__index = list_index(cls)
  cls.__newindex = list_newindex
  cls.add_module = list_add_module
  cls.extend = function(parent, sub_name)
    local sub = Module.extend(parent, sub_name)
    sub.__index = list_index(sub)
    return sub
  end
  -- get(i): Torch7's name for blocks[i]
  cls.get = function(self, i) return rawget(self, slot(self, i, 2)) end
  cls.size = count
  cls.__len = count -- used only where LuaJIT is built with Lua 5.2 compatibility
  -- for i, m in blocks:ipairs() (the same as ipairs(blocks))
  cls.ipairs = function(self) return ipairs(self) end
  return cls
end

-- Sequential(m1, m2, ...) or Sequential():add(m1):add(m2). Children are named 0, 1, ...
local Sequential = list_class('Sequential')
function Sequential:__init(...)
  local args = { ... }
  for i = 1, select('#', ...) do
    if not is_module(args[i]) then
      error(('Sequential: expected a module as argument %d, got %s'):format(i, type(args[i])), 3)
    end
    self:add(args[i])
  end
end
function Sequential:add(m)
  if not is_module(m) then error(('Sequential:add: expected a module, got %s'):format(type(m)), 2) end
  self:add_module(tostring(count(self)), m)
  return self
end
Sequential.append = Sequential.add
function Sequential:forward(x, ...)
  for i = 1, count(self) do x = rawget(self, i)(x, ...) end
  return x
end
M.Sequential = Sequential

-- ModuleList({m1, m2}): an indexable list of modules, registered as children 0, 1, ...
local ModuleList = list_class('ModuleList')
function ModuleList:__init(list)
  if list ~= nil and type(list) ~= 'table' then
    error(('ModuleList: expected a table of modules, got %s'):format(type(list)), 3)
  end
  for i, m in ipairs(list or {}) do
    if not is_module(m) then
      error(('ModuleList: expected a module at index %d, got %s'):format(i, type(m)), 3)
    end
    self:append(m)
  end
end
function ModuleList:append(m)
  if not is_module(m) then error(('ModuleList:append: expected a module, got %s'):format(type(m)), 2) end
  self:add_module(tostring(count(self)), m)
  return self
end
function ModuleList:forward()
  error('ModuleList: a list has no forward; call its modules', 2)
end
M.ModuleList = ModuleList

-- ModuleDict({name = m, ...}): children by name, kept in sorted-name order.
local ModuleDict = Module:extend('ModuleDict')
function ModuleDict:__init(dict)
  local names = {}
  for k in pairs(dict or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do self:add_module(k, dict[k]) end
end
function ModuleDict:set(name, m) return self:add_module(name, m) end
function ModuleDict:get(name) return self[name] end
function ModuleDict:keys()
  local r = {}
  for i, n in ipairs(self._modules) do r[i] = n end
  return r
end
function ModuleDict:forward()
  error('ModuleDict: a dict has no forward; call its modules', 2)
end
M.ModuleDict = ModuleDict

return M
