-- ember.nn.named_args: the argument convention of the functions and modules that follow
-- PyTorch's signatures (activation_ext, loss_ext, functional_ext, conv3d): PyTorch's
-- positional arguments, or named ones in a trailing options table, checked against the names.
local tensor = require 'ember.tensor'
local args = require 'ember.nn.args'

-- PyTorch's positional arguments (names in order), and/or one table of named options last (a
-- table without an array part): f(x, 2, {beta = 3}). Unknown or repeated names raise.
local function named(fn, names, ...)
  local n = select('#', ...)
  local a = { ... }
  local last = a[n]
  local o = {}
  if n >= 1 and type(last) == 'table' and not tensor.is_tensor(last) and last[1] == nil
      and next(last) ~= nil or (n == 1 and type(last) == 'table' and next(last) == nil) then
    args.options(fn, last, args.set(names), 3)
    for k, v in pairs(last) do o[k] = v end
    n = n - 1
  end
  if n > #names then
    error(('%s: expected at most %d arguments after the input, got %d'):format(fn, #names, n), 3)
  end
  for i = 1, n do
    if a[i] ~= nil then
      if o[names[i]] ~= nil then
        error(('%s: %s given both by position and by name'):format(fn, names[i]), 3)
      end
      o[names[i]] = a[i]
    end
  end
  return o
end

return named
