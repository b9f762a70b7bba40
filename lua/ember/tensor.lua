-- ember.tensor: the tensor metatype. Methods live in one table that the op modules
-- (ember.ops.*) extend; indexing follows Torch7 (1-based, x[i], x[{{1,2}, 3}]).
local ffi = require 'ffi'
local core = require 'ember.core'
local C, own, check, cdim = core.C, core.own, core.check, core.cdim

local M = {}
local methods = {}
M.methods = methods

local function is_tensor(x) return ffi.istype(core.tensor_ct, x) end
M.is_tensor = is_tensor

-- ---- geometry -------------------------------------------------------------------------------
function methods.dim(x) return x.ptr.ndim end
methods.nDimension = methods.dim
methods.ndimension = methods.dim
function methods.numel(x) return tonumber(C.em_numel(x.ptr)) end
methods.nElement = methods.numel

function methods.size(x, d)
  if d then
    local n = x.ptr.ndim
    local i = d > 0 and d or n + d + 1
    if i < 1 or i > n then
      error(('size: dimension %d out of range for a %d-d tensor'):format(d, n), 2)
    end
    return tonumber(x.ptr.sizes[i - 1])
  end
  local s = setmetatable({}, core.Size)
  for i = 0, x.ptr.ndim - 1 do s[i + 1] = tonumber(x.ptr.sizes[i]) end
  return s
end
methods.shape = methods.size

function methods.stride(x, d)
  if d then
    local n = x.ptr.ndim
    local i = d > 0 and d or n + d + 1
    if i < 1 or i > n then
      error(('stride: dimension %d out of range for a %d-d tensor'):format(d, n), 2)
    end
    return tonumber(x.ptr.strides[i - 1])
  end
  local s = {}
  for i = 0, x.ptr.ndim - 1 do s[i + 1] = tonumber(x.ptr.strides[i]) end
  return s
end

function methods.storage_offset(x) return tonumber(x.ptr.offset) end
function methods.is_contiguous(x) return C.em_is_contiguous(x.ptr) ~= 0 end
function methods.dtype(x) return core.dtype_names[x.ptr.dtype_id] end
function methods.device(x) return core.device_name(x.ptr.device_id) end
function methods.is_floating_point(x) return C.em_dtype_is_floating(x.ptr.dtype_id) ~= 0 end
function methods.element_size(x) return tonumber(C.em_dtype_size(x.ptr.dtype_id)) end

-- ---- views ----------------------------------------------------------------------------------
function methods.view(x, ...)
  local n, sizes = core.parse_sizes('view', ...)
  return own(C.em_view(x.ptr, n, sizes))
end

function methods.reshape(x, ...)
  local n, sizes = core.parse_sizes('reshape', ...)
  return own(C.em_reshape(x.ptr, n, sizes), C.em_reshape, x.ptr, n, sizes)
end

function methods.view_as(x, other) return methods.view(x, other:size()) end
function methods.reshape_as(x, other) return methods.reshape(x, other:size()) end

-- A Lua dimension (1-based; negative counts from the end) of a tensor with n dimensions, as
-- C's dim. Checked here so that errors name the dimension the way the caller wrote it.
local function ldim(d, n, fn)
  if type(d) ~= 'number' or d ~= math.floor(d) then
    error(('%s: expected an integer dimension, got %s'):format(fn, tostring(d)), 3)
  end
  if d == 0 then error(fn .. ': dimensions are 1-based in Lua; got 0', 3) end
  local m = n > 0 and n or 1 -- a scalar accepts 1 and -1, as PyTorch's accept 0 and -1
  if d > m or d < -m then
    error(('%s: dimension %d out of range for a %d-d tensor'):format(fn, d, n), 3)
  end
  return d > 0 and d - 1 or d
end

local function check_integer(fn, what, v) core.int_arg(fn, what, v, 3) end

local function dim_size(x, d) return tonumber(x.ptr.sizes[d < 0 and x.ptr.ndim + d or d]) end

-- narrow(dim, start, length): length elements from start (1-based; negative from the end).
function methods.narrow(x, dim, start, length)
  local d = ldim(dim, x.ptr.ndim, 'narrow')
  check_integer('narrow', 'start', start)
  check_integer('narrow', 'length', length)
  if start == 0 then error('narrow: indices are 1-based in Lua; got 0', 2) end
  if x.ptr.ndim == 0 then return own(C.em_narrow(x.ptr, d, 0, length)) end -- C's 0-d error
  local n = dim_size(x, d)
  local s = start > 0 and start - 1 or n + start
  if s < 0 or s > n or length < 0 or s + length > n then
    error(('narrow: start %d and length %d are out of range for dimension %d of size %d'):format(
      start, length, dim, n), 2)
  end
  return own(C.em_narrow(x.ptr, d, s, length))
end

function methods.select(x, dim, index)
  local d = ldim(dim, x.ptr.ndim, 'select')
  check_integer('select', 'index', index)
  if index == 0 then error('select: indices are 1-based in Lua; got 0', 2) end
  if x.ptr.ndim == 0 then return own(C.em_select(x.ptr, d, 0)) end -- C's 0-d error
  local n = dim_size(x, d)
  if index > n or index < -n then
    error(('select: index %d is out of range for dimension %d of size %d'):format(index, dim, n), 2)
  end
  return own(C.em_select(x.ptr, d, index > 0 and index - 1 or index))
end

-- slice(dim, start, stop, step): 1-based, inclusive stop, as Torch7 ranges.
function methods.slice(x, dim, start, stop, step)
  local d = ldim(dim, x.ptr.ndim, 'slice')
  local size = x.ptr.ndim > 0 and dim_size(x, d) or 1
  start = start or 1
  stop = stop or size
  step = step or 1
  check_integer('slice', 'start', start)
  check_integer('slice', 'stop', stop)
  check_integer('slice', 'step', step)
  if start == 0 or stop == 0 then error('slice: indices are 1-based in Lua; got 0', 2) end
  if start < 0 then start = size + start + 1 end
  if stop < 0 then stop = size + stop + 1 end
  return own(C.em_slice(x.ptr, d, start - 1, stop, step))
end

function methods.transpose(x, d0, d1)
  local n = x.ptr.ndim
  return own(C.em_transpose(x.ptr, ldim(d0 or 1, n, 'transpose'), ldim(d1 or 2, n, 'transpose')))
end
function methods.t(x) return own(C.em_t(x.ptr)) end

local dims_buf = ffi.new('int[8]')
local function parse_dims(fn, ...)
  local first = select(1, ...)
  local list = type(first) == 'table' and first or { ... }
  if #list > 8 then error(fn .. ': expected at most 8 dimensions', 3) end
  for i = 1, #list do dims_buf[i - 1] = cdim(list[i], fn) end
  return #list, dims_buf
end
M.parse_dims = parse_dims

function methods.permute(x, ...)
  local first = select(1, ...)
  local list = type(first) == 'table' and first or { ... }
  for i = 1, #list do ldim(list[i], x.ptr.ndim, 'permute') end
  local n, dims = parse_dims('permute', ...)
  return own(C.em_permute(x.ptr, n, dims))
end

function methods.expand(x, ...)
  local n, sizes = core.parse_sizes('expand', ...)
  return own(C.em_expand(x.ptr, n, sizes))
end
function methods.expand_as(x, other) return methods.expand(x, other:size()) end

function methods.squeeze(x, dim)
  if dim == nil then return own(C.em_squeeze_all(x.ptr)) end
  return own(C.em_squeeze(x.ptr, ldim(dim, x.ptr.ndim, 'squeeze')))
end

function methods.unsqueeze(x, dim)
  -- dim is a position in the result (1 .. ndim + 1); -1 appends.
  if x.ptr.ndim >= 8 then return own(C.em_unsqueeze(x.ptr, 0)) end -- C's "at most 8" error
  return own(C.em_unsqueeze(x.ptr, ldim(dim, x.ptr.ndim + 1, 'unsqueeze')))
end

function methods.unfold(x, dim, size, step)
  local d = ldim(dim, x.ptr.ndim, 'unfold')
  check_integer('unfold', 'size', size)
  check_integer('unfold', 'step', step)
  return own(C.em_unfold(x.ptr, d, size, step))
end

function methods.flatten(x, start_dim, end_dim)
  local n = x.ptr.ndim
  start_dim, end_dim = start_dim or 1, end_dim or -1
  local s, e = ldim(start_dim, n, 'flatten'), ldim(end_dim, n, 'flatten')
  if n > 0 and (s < 0 and n + s or s) > (e < 0 and n + e or e) then
    error(('flatten: start_dim %d comes after end_dim %d'):format(start_dim, end_dim), 2)
  end
  return own(C.em_flatten(x.ptr, s, e))
end

function methods.contiguous(x) return own(C.em_contiguous(x.ptr), C.em_contiguous, x.ptr) end
function methods.clone(x) return own(C.em_clone(x.ptr), C.em_clone, x.ptr) end

-- ---- copies, casts, reads -------------------------------------------------------------------
-- to(dtype), to(device), to(device, dtype), to{dtype=..., device=...}, to(other_tensor)
function methods.to(x, a, b)
  local dtype, device
  if is_tensor(a) then
    dtype, device = a.ptr.dtype_id, a.ptr.device_id
  elseif type(a) == 'table' then
    require('ember.util.names').check_options('to', a, { 'dtype', 'device' })
    dtype, device = a.dtype, a.device
  else
    for _, v in ipairs({ a, b }) do
      if v ~= nil then
        if core.dtype_of_cast[v] or C.em_dtype_from_name(tostring(v)) >= 0 then dtype = v
        elseif type(v) == 'string' and C.em_device_parse(v) < 0 then
          C.em_clear_error()
          error(("to: unknown dtype or device '%s'"):format(v), 2)
        else device = v end
      end
    end
    C.em_clear_error()
  end
  local r = x
  if device ~= nil then
    local id = core.device_id(device, 'to')
    if id ~= r.ptr.device_id then r = own(C.em_to_device(r.ptr, id), C.em_to_device, r.ptr, id) end
  end
  if dtype ~= nil then
    local id = core.dtype_id(dtype, 'to')
    if id ~= r.ptr.dtype_id then r = own(C.em_to_dtype(r.ptr, id), C.em_to_dtype, r.ptr, id) end
  end
  return r
end

function methods.type(x, dtype)
  if dtype == nil then return core.dtype_names[x.ptr.dtype_id] end
  return methods.to(x, dtype)
end

-- The casts double as dtypes, as PyTorch's torch.float, torch.long ... are dtypes:
-- {dtype = ember.long} is {dtype = 'int64'} (core.dtype_id reads core.dtype_of_cast).
for name, dt in pairs({ float = 'float32', double = 'float64', half = 'float16',
  bfloat16 = 'bfloat16', long = 'int64', int = 'int32', short = 'int16', char = 'int8',
  byte = 'uint8', bool = 'bool' }) do
  methods[name] = function(x) return methods.to(x, dt) end
  core.dtype_of_cast[methods[name]] = dt
end
function methods.cpu(x) return methods.to(x, 'cpu') end

-- x:pin_memory([device]): a copy of the CPU tensor x in pinned memory of a GPU (`device`, else
-- the default device when it is a GPU, else the best Vulkan device): copies from it to that
-- GPU are one transfer, without a staging copy and without waiting (docs/devices.md). As
-- with PyTorch's non_blocking copies, do not write to it until the device has taken the data
-- (ember.synchronize()). x itself when it is pinned for that device already.
function methods.pin_memory(x, device)
  if x.ptr.device_id ~= 0 then
    error(('pin_memory: expected a cpu tensor, got one on %s'):format(
      core.device_name(x.ptr.device_id)), 2)
  end
  local id
  if device ~= nil then
    id = core.device_id(device, 'pin_memory')
  else
    id = C.em_default_device()
    if id == 0 then id = core.device_id('vulkan', 'pin_memory') end
  end
  if C.em_pinned_device(x.ptr) == id then return x end
  local p = x.ptr
  local r = own(C.em_empty_pinned(p.ndim, p.sizes, p.dtype_id, id), C.em_empty_pinned, p.ndim,
    p.sizes, p.dtype_id, id)
  check(C.em_copy_(r.ptr, p))
  return r
end
-- Whether x's data is in pinned memory (x:pin_memory()).
function methods.is_pinned(x) return C.em_pinned_device(x.ptr) >= 0 end

local item_buf = ffi.new('double[1]')
local item_i64 = ffi.new('int64_t[1]')
function methods.item(x)
  if x.ptr.dtype_id == C.EM_BOOL then
    check(C.em_item(x.ptr, item_buf))
    return item_buf[0] ~= 0
  end
  check(C.em_item(x.ptr, item_buf))
  return item_buf[0]
end

function methods.item_int64(x)
  check(C.em_item_int64(x.ptr, item_i64))
  return item_i64[0]
end

-- Reads a contiguous CPU float64 copy: the buffer behind totable and printing.
function M.host_doubles(x)
  local h = x
  if h.ptr.device_id ~= 0 then h = methods.to(h, 'cpu') end
  if h.ptr.dtype_id ~= C.EM_FLOAT64 or C.em_is_contiguous(h.ptr) == 0 then
    h = own(C.em_to_dtype(h.ptr, C.EM_FLOAT64))
  end
  return ffi.cast('double*', C.em_data_ptr(h.ptr)), h
end

function methods.totable(x)
  local data, keep = M.host_doubles(x)
  local is_bool = x.ptr.dtype_id == C.EM_BOOL
  local function conv(v) if is_bool then return v ~= 0 end return v end
  if x.ptr.ndim == 0 then return conv(data[0]) end
  local pos = 0
  local function build(d)
    local t = {}
    local n = tonumber(x.ptr.sizes[d])
    if d == x.ptr.ndim - 1 then
      for i = 1, n do t[i] = conv(data[pos]); pos = pos + 1 end
    else
      for i = 1, n do t[i] = build(d + 1) end
    end
    return t
  end
  local r = build(0)
  local _ = keep
  return r
end

function methods.fill_(x, v)
  check(C.em_fill_(x.ptr, v))
  return x
end
function methods.zero_(x) check(C.em_zero_(x.ptr)); return x end
-- Torch7's names: x:fill(v) and x:zero() write into x and return it.
methods.fill, methods.zero = methods.fill_, methods.zero_

function methods.copy_(x, src)
  check(C.em_copy_(x.ptr, src.ptr))
  return x
end

function methods.data_ptr(x)
  local p = C.em_data_ptr(x.ptr)
  if p == nil then core.raise(2) end
  return p
end

function methods.is_same_storage(x, y) return C.em_same_storage(x.ptr, y.ptr) ~= 0 end

-- ---- indexing -------------------------------------------------------------------------------
-- x[i]: select along the first dim (a Lua number for a 1-D tensor). x[{a, {b, c}, ...}]: one
-- entry per dim: a number selects, {first, last[, step]} slices (inclusive, Torch7 style), {}
-- or ':' keeps the whole dim.
local function index_view(x, key)
  if type(key) == 'number' then
    local v = methods.select(x, 1, key)
    return v
  end
  if is_tensor(key) then
    if key.ptr.dtype_id == C.EM_BOOL then return methods.masked_select(x, key) end
    return methods.index_select(x, 1, key)
  end
  if type(key) ~= 'table' then
    error('index: expected a number, a table of ranges or a tensor, got ' .. type(key), 3)
  end
  if #key > x.ptr.ndim then
    error(('index: %d indices for a %d-d tensor'):format(#key, x.ptr.ndim), 3)
  end
  local r, dim = x, 1
  for i = 1, #key do
    local k = key[i]
    if type(k) == 'number' then
      r = methods.select(r, dim, k)
    elseif k == ':' or (type(k) == 'table' and #k == 0) then
      dim = dim + 1
    elseif type(k) == 'table' then
      r = methods.slice(r, dim, k[1], k[2] or k[1], k[3])
      dim = dim + 1
    else
      error('index: unsupported index entry ' .. tostring(k), 3)
    end
  end
  return r
end

local mt = {}
M.mt = mt


-- Properties read and written like fields (x.grad, x.requires_grad): ember.autograd fills these.
local getters, setters = {}, {}
M.getters, M.setters = getters, setters

mt.__index = function(x, k)
  local m = methods[k]
  if m ~= nil then return m end
  local get = getters[k]
  if get ~= nil then return get(x) end
  if type(k) == 'number' then
    local v = index_view(x, k)
    if v.ptr.ndim == 0 then return methods.item(v) end
    return v
  end
  if type(k) == 'table' or is_tensor(k) then
    return index_view(x, k)
  end
  M.no_such_method(k, 2)
end

-- x.nosuch, x:nosuch(): an error at the user's line that suggests close method names, as the
-- REPL's ?name does.
function M.no_such_method(k, level)
  local names = {}
  for n in pairs(methods) do names[#names + 1] = n end
  for n in pairs(getters) do names[#names + 1] = n end
  error(("tensor: no method or field '%s'%s"):format(tostring(k),
    require('ember.util.names').hint(tostring(k), names)), level + 1)
end

mt.__newindex = function(x, k, v)
  if type(k) == 'string' then
    local set = setters[k]
    if set == nil then error('tensor: cannot set field ' .. k, 2) end
    return set(x, v)
  end
  if is_tensor(k) then
    if k.ptr.dtype_id == C.EM_BOOL then -- x[mask] = number
      if is_tensor(v) then
        if v:numel() ~= 1 then
          error('index: assigning a tensor through a bool mask is not supported; use ' ..
            'ember.where(mask, values, x) or masked_fill with a number', 2)
        end
        v = v:item()
      end
      if type(v) == 'boolean' then v = v and 1 or 0 end
      check(C.em_masked_fill_(x.ptr, k.ptr, v))
      return
    end
    -- x[indices] = v: rows along the first dim (1-based indices, as index_select)
    if is_tensor(v) then
      local rows = {}
      for d = 1, x.ptr.ndim do rows[d] = d == 1 and k:numel() or tonumber(x.ptr.sizes[d - 1]) end
      methods.index_copy_(x, 1, k, v:expand(rows))
    else
      methods.index_fill_(x, 1, k, v)
    end
    return
  end
  local view = index_view(x, k)
  if is_tensor(v) then check(C.em_copy_(view.ptr, v.ptr)) else check(C.em_fill_(view.ptr, v)) end
end

mt.__len = function(x) return x.ptr.ndim > 0 and tonumber(x.ptr.sizes[0]) or 0 end

return M
