-- ember.creation: functions that make tensors: tensor, zeros, ones, full, empty, arange,
-- linspace, eye and the _like forms. Options tables take dtype and device.
local ffi = require 'ffi'
local core = require 'ember.core'
local C, own = core.C, core.own

local M = {}

-- The keys every creation function's options table may hold (requires_grad: the new tensor is
-- a leaf that requires grad, as PyTorch's requires_grad=True).
local OPTION_KEYS = { 'dtype', 'device', 'requires_grad' }

-- t, made a leaf that requires grad when opts say so.
local function leaf(t, opts)
  if type(opts) == 'table' and opts.requires_grad ~= nil then
    if type(opts.requires_grad) ~= 'boolean' then
      error('expected requires_grad to be a boolean, got ' .. type(opts.requires_grad), 3)
    end
    t:requires_grad_(opts.requires_grad)
  end
  return t
end
M.leaf = leaf

local function options(opts, fn)
  if opts ~= nil and type(opts) ~= 'table' then
    error(fn .. ': expected an options table {dtype=..., device=...}, got ' .. type(opts), 3)
  end
  opts = require('ember.util.names').check_options(fn, opts, OPTION_KEYS, 3)
  local d = opts.dtype
  if d ~= nil and type(d) ~= 'string' and type(d) ~= 'number' and not core.dtype_of_cast[d] then
    error(("%s: expected a dtype name such as 'float32', got %s"):format(fn, type(d)), 3)
  end
  return core.dtype_id(d, fn) or core.default_dtype, core.device_id(opts.device, fn)
end
M.options = options

-- Whether every value is a whole number: creation from such arguments gives int64, as PyTorch
-- gives for Python ints (a Lua number cannot tell 5 from 5.0, so 5.0 counts as whole too).
local function whole(...)
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    if v ~= math.floor(v) or v ~= v then return false end
  end
  return true
end

local function make(fn, cfun)
  return function(...)
    local n, sizes, opts = core.parse_sizes(fn, ...)
    local dtype, device = options(opts, fn)
    return leaf(own(cfun(n, sizes, dtype, device), cfun, n, sizes, dtype, device), opts)
  end
end

M.empty = make('empty', C.em_empty)
M.zeros = make('zeros', C.em_zeros)
M.ones = make('ones', C.em_ones)

-- full(sizes, value [, opts]): unless opts.dtype says, a boolean value makes a bool tensor, a
-- whole number an int64 one (as PyTorch's full with an int) and any other number one of the
-- default dtype.
function M.full(size, value, opts)
  if type(value) ~= 'number' and type(value) ~= 'boolean' then
    error('full: expected a fill value, got ' .. type(value), 2)
  end
  local is_bool = type(value) == 'boolean'
  if is_bool then value = value and 1 or 0 end
  local n, sizes = core.parse_sizes('full', size)
  local dtype, device = options(opts, 'full')
  if opts == nil or opts.dtype == nil then
    if is_bool then dtype = C.EM_BOOL elseif whole(value) then dtype = C.EM_INT64 end
  end
  return leaf(own(C.em_full(n, sizes, value, dtype, device), C.em_full, n, sizes, value, dtype,
    device), opts)
end

-- Nested tables give the shape; numbers and booleans the values.
local function infer_shape(data, shape, depth)
  if type(data) ~= 'table' then return end
  shape[depth] = #data
  if #data > 0 then infer_shape(data[1], shape, depth + 1) end
end

function M.tensor(data, opts)
  if type(opts) ~= 'table' and opts ~= nil then
    error('tensor: expected an options table, got ' .. type(opts), 2)
  end
  opts = require('ember.util.names').check_options('tensor', opts, OPTION_KEYS)
  local default = core.default_dtype
  if type(data) == 'number' or type(data) == 'boolean' then
    local v = data
    if type(v) == 'boolean' then v = v and 1 or 0; default = C.EM_BOOL end
    local dtype = core.dtype_id(opts.dtype, 'tensor') or default
    return leaf(own(C.em_scalar_tensor(v, dtype, core.device_id(opts.device, 'tensor'), 0)), opts)
  end
  if type(data) ~= 'table' then
    error('tensor: expected a number or a nested table of numbers, got ' .. type(data), 2)
  end
  local shape = {}
  infer_shape(data, shape, 1)
  if #shape > 8 then error('tensor: expected at most 8 dimensions, got ' .. #shape, 2) end
  local count = 1
  for i = 1, #shape do count = count * shape[i] end
  local buf = ffi.new('double[?]', math.max(count, 1))
  local pos, saw_bool, saw_number = 0, false, false
  local function fill(t, depth, path)
    if #t ~= shape[depth] then
      error(('tensor: ragged nested table: expected %d elements at %s, got %d'):format(
        shape[depth], path, #t), 4)
    end
    for i = 1, #t do
      local v = t[i]
      if depth == #shape then
        if type(v) == 'boolean' then saw_bool = true; v = v and 1 or 0
        elseif type(v) == 'number' then saw_number = true end
        if type(v) ~= 'number' then
          error(('tensor: expected a number at %s[%d], got %s'):format(path, i, type(v)), 5)
        end
        buf[pos] = v
        pos = pos + 1
      else
        if type(v) ~= 'table' then
          error(('tensor: ragged nested table: expected a table at %s[%d], got %s'):format(
            path, i, type(v)), 5)
        end
        fill(v, depth + 1, path .. '[' .. i .. ']')
      end
    end
  end
  if #shape > 0 and shape[1] > 0 then fill(data, 1, 'data') end
  if saw_bool and not saw_number then default = C.EM_BOOL end -- {true, 2} is numeric
  local dtype = core.dtype_id(opts.dtype, 'tensor') or default
  local sizes = ffi.new('int64_t[8]', shape)
  return leaf(own(C.em_from_buffer(buf, C.EM_FLOAT64, #shape, sizes, dtype,
    core.device_id(opts.device, 'tensor'))), opts)
end

-- arange(end), arange(start, end), arange(start, end, step), each with an optional options
-- table. The end is exclusive, as in PyTorch. Whole-number arguments give int64 unless
-- opts.dtype says otherwise; integer dtypes truncate start, end and step first, as PyTorch.
function M.arange(a, b, c, d)
  local args, opts = { a, b, c, d }, nil
  for i = 4, 1, -1 do
    if type(args[i]) == 'table' then opts = args[i]; args[i] = nil; break end
  end
  local start, stop, step
  if args[2] == nil then start, stop, step = 0, args[1], 1
  else start, stop, step = args[1], args[2], args[3] or 1 end
  if type(start) ~= 'number' or type(stop) ~= 'number' or type(step) ~= 'number' then
    error('arange: expected numbers for start, end and step', 2)
  end
  local dtype, device = options(opts, 'arange')
  if (opts == nil or opts.dtype == nil) and whole(start, stop, step) then dtype = C.EM_INT64 end
  return leaf(own(C.em_arange(start, stop, step, dtype, device)), opts)
end

local function check_integer(fn, what, v) core.int_arg(fn, what, v, 3) end

-- linspace(start, end [, steps = 100] [, opts]): both ends included and exact.
function M.linspace(start, stop, steps, opts)
  if type(steps) == 'table' then opts, steps = steps, nil end
  if type(start) ~= 'number' or type(stop) ~= 'number' then
    error('linspace: expected numbers for start and end', 2)
  end
  steps = steps or 100
  check_integer('linspace', 'number of steps', steps)
  local dtype, device = options(opts, 'linspace')
  return leaf(own(C.em_linspace(start, stop, steps, dtype, device)), opts)
end

-- eye(n [, m] [, opts]): ones on the diagonal of an n x m (default n x n) matrix.
function M.eye(n, m, opts)
  if type(m) == 'table' then opts, m = m, nil end
  check_integer('eye', 'n', n)
  if m ~= nil then
    check_integer('eye', 'm', m)
    if m < 0 then error(('eye: expected m >= 0, got %d'):format(m), 2) end
  end
  local dtype, device = options(opts, 'eye')
  return leaf(own(C.em_eye(n, m or -1, dtype, device)), opts)
end

-- The _like forms take the shape, dtype and device of x unless opts says otherwise.
local function like_opts(x, opts, fn)
  opts = require('ember.util.names').check_options(fn, opts, OPTION_KEYS, 3)
  return { dtype = opts.dtype or x.ptr.dtype_id, device = opts.device or x.ptr.device_id,
    requires_grad = opts.requires_grad }
end
function M.empty_like(x, opts) return M.empty(x:size(), like_opts(x, opts, 'empty_like')) end
function M.zeros_like(x, opts) return M.zeros(x:size(), like_opts(x, opts, 'zeros_like')) end
function M.ones_like(x, opts) return M.ones(x:size(), like_opts(x, opts, 'ones_like')) end
function M.full_like(x, v, opts) return M.full(x:size(), v, like_opts(x, opts, 'full_like')) end

return M
