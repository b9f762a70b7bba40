-- ember.nn.args: the argument checks the layer modules share (rnn.lua, transformer.lua), so
-- every layer words its errors the same way: "<fn>: expected <what> to be ..., got ...".
-- `level` is error()'s level as seen from the caller of the check.

local M = {}

-- An options table whose keys are all in `allowed` (a set or a list); nil gives {}. The one
-- check every options table goes through (ember.util.names), re-exported for the layers.
function M.options(fn, opts, allowed, level)
  return require('ember.util.names').check_options(fn, opts, allowed, level + 1)
end

-- A set of the list's values.
function M.set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

function M.positive_int(fn, what, v, level)
  if type(v) ~= 'number' or v < 1 or v ~= math.floor(v) then
    error(('%s: expected %s to be a positive integer, got %s'):format(fn, what, tostring(v)),
      level + 1)
  end
  return v
end

function M.boolean(fn, what, v, default, level)
  if v == nil then return default end
  if type(v) ~= 'boolean' then
    error(('%s: expected %s to be a boolean, got %s'):format(fn, what, tostring(v)), level + 1)
  end
  return v
end

return M
