-- ember.profiler.modules: module calls as profiler ranges named by the module tree.
--
-- While the profiler records, nn.Module's __call comes here (profiler/state.lua). A module
-- called from inside another module's call is named by its parent's name and its own name in
-- the parent (`GPT.blocks.3.attn`); a module called at the top is named by its class. The
-- forward runs between em_profiler_range_push and pop, so its ops nest under the range.
local core = require 'ember.core'
local C = core.C

local M = {}
local stack = {} -- {module, name} of the calls open now
local depth = 0

-- The name a child has in its parent's list of submodules, or its class.
local function child_name(parent, m)
  local names = rawget(parent, '_modules')
  if names then
    for _, n in ipairs(names) do
      if parent[n] == m then return n end
    end
  end
  return m.__name or 'Module'
end

local function pop(ok, ...)
  depth = depth - 1
  C.em_profiler_range_pop()
  if not ok then error((...), 0) end
  return ...
end

-- f(self, ...) is the call the module would have made (hooks.call with its forward).
function M.call(self, f, ...)
  local name
  if depth == 0 then
    name = self.__name or 'Module'
  else
    local parent = stack[depth]
    name = parent[2] .. '.' .. child_name(parent[1], self)
  end
  depth = depth + 1
  stack[depth] = stack[depth] or {}
  stack[depth][1], stack[depth][2] = self, name
  C.em_profiler_range_push(name)
  return pop(pcall(f, ...))
end

-- Forgets open calls (a profile stopped inside one).
function M.reset()
  depth = 0
end

return M
