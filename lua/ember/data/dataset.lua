-- ember.data.dataset: Dataset (the interface every data source follows) and TensorDataset.
--
-- A dataset has ds:size() (also #ds) samples and ds:get(i) returns sample i, 1-based, as in
-- Torch7. A sample is one value or several (`return x, y`): a tuple, which a DataLoader
-- batches position by position.
local class = require 'ember.data.class'
local tensor = require 'ember.tensor'

local is_tensor = tensor.is_tensor

local M = {}

-- ---- Dataset --------------------------------------------------------------------------------
local Dataset = class.class('Dataset')
M.Dataset = Dataset

-- Dataset{size = f, get = g}: a dataset from functions, without a subclass.
function Dataset:init(impl)
  if impl == nil then return end
  if type(impl) ~= 'table' then
    error('Dataset: expected a table {size = function, get = function}, got ' .. type(impl), 3)
  end
  for k, v in pairs(impl) do self[k] = v end
end

function Dataset:size()
  error(self.__name .. ': size() is not defined; define size and get in your Dataset', 2)
end

function Dataset:get()
  error(self.__name .. ': get(i) is not defined; define size and get in your Dataset', 2)
end

function Dataset:__tostring()
  local ok, n = pcall(self.size, self)
  return ('%s(%s samples)'):format(self.__name, ok and tostring(n) or '?')
end

-- ---- TensorDataset --------------------------------------------------------------------------
-- TensorDataset(t1, t2, ...) or TensorDataset{t1, t2, ...}: sample i is (t1[i], t2[i], ...),
-- rows along dimension 1. DataLoader workers gather batches of these in C threads.
local TensorDataset = Dataset:extend('TensorDataset')
M.TensorDataset = TensorDataset

function TensorDataset:init(first, ...)
  local list
  if type(first) == 'table' and not is_tensor(first) then list = first else list = { first, ... } end
  if #list == 0 or list[1] == nil then
    error('TensorDataset: expected at least one tensor', 3)
  end
  local n
  for k, t in ipairs(list) do
    if not is_tensor(t) then
      error(('TensorDataset: argument %d is a %s, expected a tensor'):format(k, type(t)), 3)
    end
    if t:dim() == 0 then
      error(('TensorDataset: tensor %d is 0-dim; samples are rows along dimension 1'):format(k), 3)
    end
    if n == nil then
      n = t:size(1)
    elseif t:size(1) ~= n then
      error(('TensorDataset: tensor %d has %d rows, tensor 1 has %d'):format(k, t:size(1), n), 3)
    end
  end
  self.tensors = list
  self.n = n
end

function TensorDataset:size() return self.n end

function TensorDataset:get(i)
  if type(i) ~= 'number' or i ~= math.floor(i) or i < 1 or i > self.n then
    error(('TensorDataset: index %s is out of range 1..%d'):format(tostring(i), self.n), 2)
  end
  local ts = self.tensors
  if #ts == 1 then return ts[1]:select(1, i) end
  local out = {}
  for k = 1, #ts do out[k] = ts[k]:select(1, i) end
  return unpack(out, 1, #ts)
end

return M
