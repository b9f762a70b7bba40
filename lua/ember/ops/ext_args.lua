-- ember.ops.ext_args: the argument checks the composed ops (index_ext, linalg_ext, shape_ext)
-- share. Each raises at the caller of the op that called it (the levels assume the op calls
-- these directly), naming the op.
local tensor = require 'ember.tensor'
local is_tensor = tensor.is_tensor

local A = {}

function A.fail(fn, msg) error(fn .. ': ' .. msg, 3) end

function A.need_tensor(fn, x, what)
  if not is_tensor(x) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what or 'the input', type(x)), 4)
  end
end

-- An integer (index) tensor.
function A.need_index(fn, i, what)
  if not is_tensor(i) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what or 'the input', type(i)), 4)
  end
  if i:is_floating_point() or i:dtype() == 'bool' then
    error(('%s: expected an integer tensor for %s, got %s'):format(fn, what, i:dtype()), 4)
  end
end

-- A Lua dimension of an n-d tensor as a positive 1-based dim (scalars accept 1 and -1).
function A.pdim(fn, d, n, what)
  if type(d) ~= 'number' or d ~= math.floor(d) then
    error(('%s: expected an integer %s, got %s'):format(fn, what or 'dimension', tostring(d)), 4)
  end
  if d == 0 then error(fn .. ': dimensions are 1-based in Lua; got 0', 4) end
  local m = math.max(n, 1)
  if d > m or d < -m then
    error(('%s: dimension %d out of range for a %d-d tensor'):format(fn, d, n), 4)
  end
  return d > 0 and d or m + d + 1
end

-- The product of t[from..to].
function A.prod(t, from, to)
  local p = 1
  for i = from or 1, to or #t do p = p * t[i] end
  return p
end

-- The first position of v in list, or nil.
function A.index_of(list, v)
  for i, x in ipairs(list) do if x == v then return i end end
end

return A
