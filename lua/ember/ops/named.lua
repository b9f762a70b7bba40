-- ember.ops.named: errors raised inside a composed function name the function the user
-- called, not the op that found the problem ("hypot: shapes [2,3] and [4] cannot broadcast",
-- not "ge: ..."). Used by math_ext.lua, reduce_ext.lua and search.lua on their public
-- functions; the position stays the user's line (core.error).
local M = {}

local function pack(...) return select('#', ...), { ... } end

function M.named(name, f)
  return function(...)
    local n, r = pack(pcall(f, ...))
    if r[1] then return unpack(r, 2, n) end
    local msg = r[2]
    if type(msg) == 'string' then
      local rest = msg:match('^.-:%d+: [%w_%.]+: (.*)$') or msg:match('^[%w_%.]+: (.*)$')
      if rest then error(name .. ': ' .. rest, 2) end
    end
    error(msg, 0)
  end
end

-- Wraps methods[name] (and M[name] when present) for each name of the list.
function M.wrap(names, methods, module)
  for _, name in ipairs(names) do
    methods[name] = M.named(name, methods[name])
    if module and module[name] ~= nil then module[name] = methods[name] end
  end
end

return M
