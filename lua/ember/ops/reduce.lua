-- ember.ops.reduce: reductions (sum, mean, prod, amax, amin, all, any, logsumexp, var, std,
-- norm), max/min with indices, argmax/argmin, cumulative sums and products, softmax and
-- log_softmax, as methods and as ember.* functions.
--
-- The calling convention is PyTorch's with Torch7's 1-based dims: x:sum() reduces everything
-- to a 0-d tensor, x:sum(dim [, keepdim]) takes a dim or a table of dims. Index results
-- (max/min along a dim, argmax, argmin) are 1-based int64 tensors: C returns 0-based indices
-- and this module adds 1.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local function need_tensor(fn, x)
  if not is_tensor(x) then error(fn .. ': expected a tensor, got ' .. type(x), 3) end
end

-- A Lua dim (1-based, or negative from the end) to C's, checked here so that messages speak
-- of the dims the caller wrote. A 0-d tensor accepts 1 and -1, as PyTorch's accepts 0 and -1.
-- level: the caller's stack level for error positions (default: two calls above here).
local function to_cdim(fn, d, ndim, level)
  level = level or 4
  if type(d) ~= 'number' or d ~= math.floor(d) then
    error(fn .. ': expected an integer dimension, got ' .. tostring(d), level)
  end
  if d == 0 then error(fn .. ': dimensions are 1-based in Lua; got 0', level) end
  local n = ndim > 0 and ndim or 1
  if d > n or d < -n then
    error(('%s: dimension %d out of range for a %d-d tensor'):format(fn, d, ndim), level)
  end
  return d > 0 and d - 1 or d
end

-- dim: nil (every dim), a number, or a table of numbers. Returns the count and an int[8].
local dims_buf = ffi.new('int[8]')
local function parse_dims(fn, x, dim)
  if dim == nil then return 0, dims_buf end
  local ndim = x.ptr.ndim
  if type(dim) == 'number' then
    dims_buf[0] = to_cdim(fn, dim, ndim)
    return 1, dims_buf
  end
  if type(dim) ~= 'table' then
    error(fn .. ': expected a dimension or a table of dimensions, got ' .. type(dim), 3)
  end
  if #dim > 8 then error(fn .. ': expected at most 8 dimensions, got ' .. #dim, 3) end
  local seen = {}
  for i = 1, #dim do
    local c = to_cdim(fn, dim[i], ndim)
    local pos = c < 0 and c + math.max(ndim, 1) or c
    if seen[pos] then
      error(('%s: dimension %d appears more than once in %s'):format(fn, pos + 1,
        '{' .. table.concat(dim, ', ') .. '}'), 3)
    end
    seen[pos] = true
    dims_buf[i - 1] = c
  end
  return #dim, dims_buf
end

local function keep(fn, keepdim)
  if keepdim == nil or keepdim == false then return 0 end
  if keepdim == true then return 1 end
  error(fn .. ': expected keepdim to be a boolean, got ' .. type(keepdim), 3)
end

local function need_dim(fn, x, dim)
  if dim == nil then error(fn .. ': expected a dimension, as in x:' .. fn .. '(dim)', 3) end
  return to_cdim(fn, dim, x.ptr.ndim)
end

-- Index tensors come back 0-based from C; Lua's are 1-based.
local function one_based(i)
  check(C.em_binary_scalar_(C.EM_ADD, i.ptr, 1))
  return i
end

-- ---- reductions over dims ---------------------------------------------------------------------
local reduce_ops = {
  sum = C.EM_SUM, mean = C.EM_MEAN, prod = C.EM_PROD, amax = C.EM_AMAX, amin = C.EM_AMIN,
  all = C.EM_ALL, any = C.EM_ANY, logsumexp = C.EM_LOGSUMEXP,
}

local function reduce(name, op)
  return function(x, dim, keepdim)
    need_tensor(name, x)
    local n, dims = parse_dims(name, x, dim)
    local k = keep(name, keepdim)
    return own(C.em_reduce(op, x.ptr, n, dims, k), C.em_reduce, op, x.ptr, n, dims, k)
  end
end

for name, op in pairs(reduce_ops) do
  local f = reduce(name, op)
  methods[name] = f
  M[name] = f
end

-- ---- var and std ------------------------------------------------------------------------------
-- x:var([dim] [, opts]) with opts {correction=1, unbiased=true, keepdim=false}, or PyTorch's
-- positional x:var([dim] [, unbiased [, keepdim]]).
local function is_options(t)
  return type(t) == 'table' and t[1] == nil and next(t) ~= nil
end

local option_keys = { correction = true, unbiased = true, keepdim = true }

local function moments(name, cfun)
  return function(x, dim, a, b)
    need_tensor(name, x)
    if is_options(dim) or type(dim) == 'boolean' then dim, a, b = nil, dim, a end
    local correction, keepdim = 1, b
    if type(a) == 'table' then
      require('ember.util.names').check_options(name, a, option_keys)
      if a.correction ~= nil and a.unbiased ~= nil then
        error(name .. ': give correction or unbiased, not both', 2)
      end
      if a.correction ~= nil then
        if type(a.correction) ~= 'number' then
          error(name .. ': expected correction to be a number, got ' .. type(a.correction), 2)
        end
        correction = a.correction
      elseif a.unbiased == false then
        correction = 0
      end
      keepdim = a.keepdim
      if b ~= nil then error(name .. ': keepdim goes in the options table', 2) end
    elseif type(a) == 'boolean' then
      correction = a and 1 or 0
    elseif a ~= nil then
      error(name .. ': expected an options table or unbiased (a boolean), got ' .. type(a), 2)
    end
    local n, dims = parse_dims(name, x, dim)
    local k = keep(name, keepdim)
    return own(cfun(x.ptr, n, dims, correction, k), cfun, x.ptr, n, dims, correction, k)
  end
end

methods.var = moments('var', C.em_var)
methods.std = moments('std', C.em_std)
M.var, M.std = methods.var, methods.std

-- ---- norm -------------------------------------------------------------------------------------
local named_orders = { fro = 2, inf = math.huge, ['-inf'] = -math.huge }

-- x:norm([p=2] [, dim] [, keepdim]): p is a number, math.huge, 'fro', 'inf' or '-inf'.
function methods.norm(x, p, dim, keepdim)
  need_tensor('norm', x)
  if p == nil then p = 2 end
  if type(p) == 'string' then
    local v = named_orders[p]
    if v == nil then
      error("norm: unsupported order '" .. p .. "' (use a number, 'fro' or 'inf')", 2)
    end
    p = v
  elseif type(p) ~= 'number' then
    error('norm: expected p to be a number, got ' .. type(p), 2)
  end
  local n, dims = parse_dims('norm', x, dim)
  local k = keep('norm', keepdim)
  return own(C.em_norm(x.ptr, p, n, dims, k), C.em_norm, x.ptr, p, n, dims, k)
end
M.norm = methods.norm

-- Torch7's dist: the p-norm of x - y.
function methods.dist(x, y, p)
  need_tensor('dist', x)
  need_tensor('dist', y)
  return methods.norm(x - y, p or 2)
end
M.dist = methods.dist

-- ---- max and min ------------------------------------------------------------------------------
-- x:max() -> 0-d tensor; x:max(dim [, keepdim]) -> values, 1-based indices;
-- x:max(other) -> the elementwise maximum.
local function max_min(name, cfun, op, elementwise)
  return function(x, dim, keepdim)
    need_tensor(name, x)
    if is_tensor(dim) then return methods[elementwise](x, dim) end
    if dim == nil then
      if keepdim then error(name .. ': keepdim needs a dimension', 2) end
      if x:numel() == 0 then
        error(name .. ': cannot reduce over an empty tensor (it has 0 elements)', 2)
      end
      return own(C.em_reduce(op, x.ptr, 0, nil, 0), C.em_reduce, op, x.ptr, 0, nil, 0)
    end
    if type(dim) ~= 'number' then
      error(name .. ': expected a dimension or a tensor, got ' .. type(dim), 2)
    end
    local slots = core.out_slots
    check(cfun(x.ptr, to_cdim(name, dim, x.ptr.ndim, 3), keep(name, keepdim), slots, slots + 1))
    local values, indices = core.take_out(0), core.take_out(1)
    return values, one_based(indices)
  end
end

methods.max = max_min('max', C.em_max_dim, C.EM_AMAX, 'maximum')
methods.min = max_min('min', C.em_min_dim, C.EM_AMIN, 'minimum')
M.max, M.min = methods.max, methods.min

-- x:argmax() -> 1-based index into the flattened tensor; x:argmax(dim [, keepdim]).
local function arg(name, cfun)
  return function(x, dim, keepdim)
    need_tensor(name, x)
    local d = dim == nil and C.EM_ALL_DIMS or to_cdim(name, dim, x.ptr.ndim, 3)
    local k = keep(name, keepdim)
    return one_based(own(cfun(x.ptr, d, k), cfun, x.ptr, d, k))
  end
end

methods.argmax = arg('argmax', C.em_argmax)
methods.argmin = arg('argmin', C.em_argmin)
M.argmax, M.argmin = methods.argmax, methods.argmin

-- ---- along one dim ----------------------------------------------------------------------------
local function along(name, cfun)
  return function(x, dim)
    need_tensor(name, x)
    local d = need_dim(name, x, dim)
    return own(cfun(x.ptr, d), cfun, x.ptr, d)
  end
end

methods.cumsum = along('cumsum', C.em_cumsum)
methods.cumprod = along('cumprod', C.em_cumprod)
methods.softmax = along('softmax', C.em_softmax)
methods.log_softmax = along('log_softmax', C.em_log_softmax)
M.cumsum, M.cumprod = methods.cumsum, methods.cumprod
M.softmax, M.log_softmax = methods.softmax, methods.log_softmax

-- ---- compositions -----------------------------------------------------------------------------
-- Built from the ops above and pointwise ones (so autograd follows them). Dims are checked
-- first, so that errors name the op called.

-- x:count_nonzero([dim]): int64 counts of nonzero elements (NaN counts). No keepdim, as in
-- PyTorch.
function methods.count_nonzero(x, dim)
  need_tensor('count_nonzero', x)
  parse_dims('count_nonzero', x, dim)
  return methods.sum(x:ne(0), dim)
end
M.count_nonzero = methods.count_nonzero

-- x:nansum([dim] [, keepdim]): the sum with NaN counted as 0.
function methods.nansum(x, dim, keepdim)
  need_tensor('nansum', x)
  parse_dims('nansum', x, dim)
  keep('nansum', keepdim)
  if not methods.is_floating_point(x) then return methods.sum(x, dim, keepdim) end
  return methods.sum(x:masked_fill(x:isnan(), 0), dim, keepdim)
end
M.nansum = methods.nansum

-- x:nanmean([dim] [, keepdim]): the mean of the non-NaN elements (NaN when there are none).
function methods.nanmean(x, dim, keepdim)
  need_tensor('nanmean', x)
  if not methods.is_floating_point(x) then
    error('nanmean: expected a floating point tensor, got ' .. x:dtype(), 2)
  end
  parse_dims('nanmean', x, dim)
  keep('nanmean', keepdim)
  local nan = x:isnan()
  local count = methods.sum(nan:logical_not(), dim, keepdim)
  return methods.sum(x:masked_fill(nan, 0), dim, keepdim):div(count)
end
M.nanmean = methods.nanmean

-- Torch7 spellings.
methods.logsoftmax = methods.log_softmax
M.logsoftmax = methods.log_softmax

return M
