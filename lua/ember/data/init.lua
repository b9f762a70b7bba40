-- ember.data: datasets, the DataLoader, and readers for data files (docs/api/data.md).
--
--   ember.data.Dataset, TensorDataset, DataLoader, collate
--   ember.data.read_idx(path), read_npy(path), write_npy(path, x), read_csv(path, opts)
--
-- The readers are C (runtime/src/io); they give CPU tensors and read .gz files transparently.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local dataset = require 'ember.data.dataset'
local loader = require 'ember.data.loader'
local collate = require 'ember.data.collate'

local C, own, check = core.C, core.own, core.check

local M = {
  Dataset = dataset.Dataset,
  TensorDataset = dataset.TensorDataset,
  DataLoader = loader.DataLoader,
  collate = collate.default,
}

local function check_path(fn, path)
  if type(path) ~= 'string' then
    error(('%s: expected a file path, got %s'):format(fn, type(path)), 3)
  end
end

-- read_idx(path): an IDX file (MNIST family), .gz or not, as a tensor of its element type.
function M.read_idx(path)
  check_path('read_idx', path)
  return own(C.em_read_idx(path), C.em_read_idx, path)
end

-- read_npy(path): a NumPy .npy file as a tensor.
function M.read_npy(path)
  check_path('read_npy', path)
  return own(C.em_read_npy(path), C.em_read_npy, path)
end

-- write_npy(path, x): x as a .npy file NumPy reads (np.load), written atomically.
function M.write_npy(path, x)
  check_path('write_npy', path)
  if not tensor.is_tensor(x) then
    error('write_npy: expected a tensor, got ' .. type(x), 2)
  end
  check(C.em_write_npy(path, x.ptr))
end

-- read_csv(path [, {delimiter = ',', header = false, dtype = 'float32'}]): a numeric CSV file as
-- a [rows, columns] tensor. header = true skips the first line.
function M.read_csv(path, opts)
  check_path('read_csv', path)
  if opts ~= nil and type(opts) ~= 'table' then
    error('read_csv: expected an options table, got ' .. type(opts), 2)
  end
  opts = require('ember.util.names').check_options('read_csv', opts,
    { 'delimiter', 'header', 'dtype' })
  local delim = opts.delimiter or ','
  if type(delim) ~= 'string' or #delim ~= 1 then
    error('read_csv: expected a one-character delimiter, got ' .. tostring(delim), 2)
  end
  if opts.header ~= nil and type(opts.header) ~= 'boolean' then
    error('read_csv: expected header to be a boolean, got ' .. type(opts.header), 2)
  end
  local dtype = core.dtype_id(opts.dtype or 'float32', 'read_csv')
  local skip = opts.header and 1 or 0
  local code = delim:byte()
  return own(C.em_read_csv(path, code, skip, dtype), C.em_read_csv, path, code, skip, dtype)
end

return M
