-- ember.data.collate: turning a list of samples into a batch (PyTorch's default_collate).
--
--   tensors            -> stacked along a new first dimension ([B, ...])
--   numbers            -> a 1-D tensor: int64 when all are integers, else float64
--   booleans           -> a 1-D bool tensor
--   strings            -> the list of strings
--   tables             -> a table of the same keys, each field collated on its own
--                         (lists of {x, y} become {X, Y}, records {image=, label=} likewise)
local tensor = require 'ember.tensor'
local index = require 'ember.ops.index'
local creation = require 'ember.creation'

local is_tensor = tensor.is_tensor

local M = {}

local function kind(v)
  if is_tensor(v) then return 'tensor' end
  return type(v)
end

local function fail(path, msg)
  error(('collate: %s%s'):format(path ~= '' and path .. ': ' or '', msg), 0)
end

local function collate(samples, path)
  local first = samples[1]
  local k = kind(first)
  for j = 2, #samples do
    local kj = kind(samples[j])
    if kj ~= k then
      fail(path, ('sample %d is a %s, sample 1 is a %s'):format(j, kj, k))
    end
  end
  if k == 'tensor' then
    local shape = first:size()
    for j = 2, #samples do
      if samples[j]:size() ~= shape then
        fail(path, ('sample %d has shape %s, sample 1 has %s'):format(j,
          tostring(samples[j]:size()), tostring(shape)))
      end
    end
    return index.stack(samples, 1)
  elseif k == 'number' then
    local integral = true
    for j = 1, #samples do
      local v = samples[j]
      if v ~= math.floor(v) or v ~= v or math.abs(v) >= 2 ^ 53 then integral = false; break end
    end
    return creation.tensor(samples, { dtype = integral and 'int64' or 'float64' })
  elseif k == 'boolean' then
    return creation.tensor(samples, { dtype = 'bool' })
  elseif k == 'string' then
    local out = {}
    for j = 1, #samples do out[j] = samples[j] end
    return out
  elseif k == 'table' then
    local out = {}
    for key in pairs(first) do
      local column = {}
      for j = 1, #samples do
        local v = samples[j][key]
        if v == nil then fail(path, ('sample %d has no field %s'):format(j, tostring(key))) end
        column[j] = v
      end
      out[key] = collate(column, path == '' and tostring(key) or path .. '.' .. tostring(key))
    end
    return out
  end
  fail(path, 'cannot batch samples of type ' .. k)
end

-- default(samples): samples is a list of single-valued samples.
function M.default(samples)
  if #samples == 0 then error('collate: expected at least one sample', 2) end
  return collate(samples, '')
end

-- Tuples (samples of several values) collate position by position: returns one batch per
-- position. tuples[j] is {n = arity, v1, v2, ...}.
function M.tuples(tuples, arity)
  local out = {}
  for p = 1, arity do
    local column = {}
    for j = 1, #tuples do
      local v = tuples[j][p]
      if v == nil then fail('#' .. p, ('sample %d has nil at this position'):format(j)) end
      column[j] = v
    end
    out[p] = collate(column, '#' .. p)
  end
  return unpack(out, 1, arity)
end

return M
