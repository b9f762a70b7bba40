-- ember.nn containers: Sequential (with Torch7's :add), ModuleList and ModuleDict.
local Module = require 'ember.nn.module'

local M = {}

-- Sequential(m1, m2, ...) or Sequential():add(m1):add(m2). Children are named 1, 2, ...
local Sequential = Module:extend('Sequential')
function Sequential:__init(...)
  for _, m in ipairs({ ... }) do self:add(m) end
end
function Sequential:add(m)
  self:add_module(tostring(#self._modules + 1), m)
  return self
end
function Sequential:get(i) return self[tostring(i)] end
function Sequential:size() return #self._modules end
Sequential.__len = Sequential.size
function Sequential:forward(x, ...)
  for _, name in ipairs(self._modules) do x = self[name](x, ...) end
  return x
end
M.Sequential = Sequential

-- ModuleList({m1, m2}): an indexable list of modules, registered as children 1, 2, ...
local ModuleList = Module:extend('ModuleList')
function ModuleList:__init(list)
  for _, m in ipairs(list or {}) do self:append(m) end
end
function ModuleList:append(m)
  self:add_module(tostring(#self._modules + 1), m)
  return self
end
function ModuleList:get(i) return self[tostring(i)] end
function ModuleList:size() return #self._modules end
ModuleList.__len = ModuleList.size
function ModuleList:ipairs()
  local i = 0
  return function()
    i = i + 1
    local m = self[tostring(i)]
    if m then return i, m end
  end
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
