-- ember.util.as_op: errors of a composed function in its own name. Functions composed from
-- other ops (take from index_select, cdist from sub and norm, ...) would otherwise report
-- "index_select: index 13 is out of bounds ..." to a user who called take. wrap(fn, f) returns
-- f with any "<op>: message" error it raises renamed "<fn>: message", the position (the
-- user's line) kept.
local M = {}

local function rethrow(fn, err)
  local msg = tostring(err)
  local pos, rest = msg:match('^(.-:%d+: )[%w_%.]+: (.*)$')
  if pos then error(pos .. fn .. ': ' .. rest, 0) end
  rest = msg:match('^[%w_%.]+: (.*)$')
  if rest then error(fn .. ': ' .. rest, 0) end
  error(err, 0)
end

local function pass(fn, ok, ...)
  if ok then return ... end
  rethrow(fn, (...))
end

function M.wrap(fn, f)
  return function(...) return pass(fn, pcall(f, ...)) end
end

-- Wraps t[name] for each name of the list that t holds.
function M.wrap_all(t, names)
  for _, name in ipairs(names) do
    if t[name] then t[name] = M.wrap(name, t[name]) end
  end
end

return M
