-- ember.nn.args: the argument checks the layer modules share (rnn.lua, transformer.lua), so
-- every layer words its errors the same way: "<fn>: expected <what> to be ..., got ...".
-- `level` is error()'s level as seen from the caller of the check.
local tensor = require 'ember.tensor'

local M = {}

-- An options table whose keys are all in `allowed` (a set); nil gives {}.
function M.options(fn, opts, allowed, level)
  if opts == nil then return {} end
  if type(opts) ~= 'table' or tensor.is_tensor(opts) then
    error(('%s: expected a table of options, got %s'):format(fn, type(opts)), level + 1)
  end
  for k in pairs(opts) do
    if not allowed[k] then
      local names = {}
      for n in pairs(allowed) do names[#names + 1] = n end
      table.sort(names)
      error(('%s: unknown option %s (expected one of %s)'):format(fn, tostring(k),
        table.concat(names, ', ')), level + 1)
    end
  end
  return opts
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
