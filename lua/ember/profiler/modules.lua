-- ember.profiler.modules: module calls as profiler ranges named by the module tree.
--
-- While the profiler records, nn.Module's __call comes here (profiler/state.lua) and runs the
-- forward between em_profiler_range_push and pop, so its ops nest under the range. The name
-- is the module's path from the root of its tree, the root named by its class:
-- GPT.transformer.h.0.attn, Sequential.0. add_module notes each child's parent and name when
-- the model is built, so the path does not depend on how the forward was reached (a model's
-- loss method calling its forward, a container's children called in a loop).
local core = require 'ember.core'
local state = require 'ember.profiler.state'
local C = core.C

local M = {}
local paths = setmetatable({}, { __mode = 'k' }) -- module -> path, for this profile

local function path_of(m)
  local p = paths[m]
  if p then return p end
  local parts, cur, seen = {}, m, {}
  while state.parent_of[cur] ~= nil and not seen[cur] do
    seen[cur] = true
    parts[#parts + 1] = state.name_in_parent[cur]
    cur = state.parent_of[cur]
  end
  parts[#parts + 1] = cur.__name or 'Module'
  for i = 1, math.floor(#parts / 2) do
    parts[i], parts[#parts + 1 - i] = parts[#parts + 1 - i], parts[i]
  end
  p = table.concat(parts, '.')
  paths[m] = p
  return p
end

local function pop(ok, ...)
  C.em_profiler_range_pop()
  if not ok then error((...), 0) end
  return ...
end

-- f(...) is the call the module would have made (hooks.call with its forward).
function M.call(self, f, ...)
  C.em_profiler_range_push(path_of(self))
  return pop(pcall(f, ...))
end

-- Torch7's module:backward(input, gradOutput) as a range "<path>.backward".
function M.backward(self, input, gradOutput)
  C.em_profiler_range_push(path_of(self) .. '.backward')
  rawset(self, '_profiled_backward', true)
  local function done(ok, ...)
    rawset(self, '_profiled_backward', nil)
    return pop(ok, ...)
  end
  return done(pcall(self.backward, self, input, gradOutput))
end

-- Forgets the paths (a module may have moved since).
function M.reset()
  for k in pairs(paths) do paths[k] = nil end
end

return M
