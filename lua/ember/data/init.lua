-- ember.data: datasets, the DataLoader, and readers for data files (docs/api/data.md).
--
--   ember.data.Dataset, TensorDataset, DataLoader, DistributedSampler, collate
--   ember.data.read_idx(path), read_npy(path), write_npy(path, x), read_csv(path, opts),
--   set_gzip_limit(bytes), gzip_limit()
--
-- The readers are C (runtime/src/io); they give CPU tensors and read .gz files transparently.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local dataset = require 'ember.data.dataset'
local loader = require 'ember.data.loader'
local collate = require 'ember.data.collate'
local sampler = require 'ember.data.sampler'

local C, own, check = core.C, core.own, core.check

local M = {
  Dataset = dataset.Dataset,
  TensorDataset = dataset.TensorDataset,
  DataLoader = loader.DataLoader,
  DistributedSampler = sampler.DistributedSampler,
  collate = collate.default,
}

local function check_path(fn, path)
  if type(path) ~= 'string' then
    error(('%s: expected a file path, got %s'):format(fn, type(path)), 3)
  end
end

-- set_gzip_limit(bytes) / gzip_limit(): the most bytes one .gz file may decompress to, for
-- every reader (default 4 GiB); a larger file is an error that names the limit.
local function check_limit(fn, v)
  if type(v) ~= 'number' or v ~= v or v < 1 or v ~= math.floor(v) or v >= 2 ^ 63 then
    error(('%s: expected gzip_limit to be a whole number of bytes >= 1, got %s')
      :format(fn, tostring(v)), 4)
  end
end
function M.set_gzip_limit(bytes)
  check_limit('set_gzip_limit', bytes)
  check(C.em_set_gzip_limit(bytes))
end
function M.gzip_limit() return tonumber(C.em_gzip_limit()) end

-- Runs a reader under opts.gzip_limit (when given), restoring the previous limit after.
local function with_limit(fn, limit, f, ...)
  if limit == nil then return f(...) end
  check_limit(fn, limit)
  local was = C.em_gzip_limit()
  C.em_set_gzip_limit(limit)
  local ok, r = pcall(f, ...)
  C.em_set_gzip_limit(was)
  if not ok then error(r, 0) end
  return r
end

local function check_opts(fn, opts, allowed)
  return require('ember.util.names').check_options(fn, opts, allowed, 3)
end

-- read_idx(path [, {gzip_limit = bytes}]): an IDX file (MNIST family), .gz or not, as a tensor
-- of its element type.
function M.read_idx(path, opts)
  check_path('read_idx', path)
  opts = check_opts('read_idx', opts, { gzip_limit = true })
  return with_limit('read_idx', opts.gzip_limit, function()
    return own(C.em_read_idx(path), C.em_read_idx, path)
  end)
end

-- read_npy(path [, {gzip_limit = bytes}]): a NumPy .npy file as a tensor.
function M.read_npy(path, opts)
  check_path('read_npy', path)
  opts = check_opts('read_npy', opts, { gzip_limit = true })
  return with_limit('read_npy', opts.gzip_limit, function()
    return own(C.em_read_npy(path), C.em_read_npy, path)
  end)
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
  opts = check_opts('read_csv', opts, { delimiter = true, header = true, dtype = true,
                                        gzip_limit = true })
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
  return with_limit('read_csv', opts.gzip_limit, function()
    return own(C.em_read_csv(path, code, skip, dtype), C.em_read_csv, path, code, skip, dtype)
  end)
end

return M
