-- ember.ops.index_ext: PyTorch's indexing functions beyond gather/scatter/index_*: take,
-- take_along_dim, index_put (with accumulate), scatter_reduce (sum, prod, mean, amax, amin,
-- include_self) and masked_scatter, with their in-place forms.
--
-- All are compositions of index_select, gather, index_copy, index_add, scatter, where and
-- the reductions, so they have gradients and run on every device those run on. Indices are
-- 1-based, as everywhere in Ember's Lua API.
--
-- scatter_reduce with prod, amax or amin builds, per slice, the [target, source] table of
-- which source element lands where (a comparison of the index with a range) and reduces it:
-- memory grows with target size times source size along dim. Fine for the sizes it is used
-- at (segment reductions, pooling by label); a dedicated kernel would be the next step.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local C = core.C
local methods, is_tensor = tensor.methods, tensor.is_tensor

-- where(cond, a, b); methods.where is the method form x:where(cond, y).
local where = require('ember.ops.pointwise').where

local M = {}

local A = require 'ember.ops.ext_args'
local fail, need_tensor, need_index, pdim = A.fail, A.need_tensor, A.need_index, A.pdim

local function flat(x) return methods.reshape(x, { -1 }) end

-- Negative indices count from the end (-1 is the last), as PyTorch's; 0 is refused by the
-- ops underneath.
local function wrap_negative(i, n)
  return where(methods.lt(i, 0), i + (n + 1), i)
end

-- ---- take, take_along_dim --------------------------------------------------------------------
-- take(index): the elements of x read as 1-D, at 1-based positions; the result has index's
-- shape.
function methods.take(x, index)
  need_tensor('take', x)
  need_index('take', index, 'the index')
  local n = x:numel()
  local i = wrap_negative(methods.to(flat(index), 'int64'), n)
  if i:numel() == 0 then return methods.view(methods.narrow(flat(x), 1, 1, 0), index:size()) end
  return methods.view(methods.index_select(flat(x), 1, i), index:size())
end

-- take_along_dim(indices [, dim]): gather along dim with x and indices broadcast against
-- each other on the other dims; without dim, both are read as 1-D.
function methods.take_along_dim(x, indices, dim)
  need_tensor('take_along_dim', x)
  need_index('take_along_dim', indices, 'the indices')
  if dim == nil then return methods.gather(flat(x), 1, flat(indices)) end
  if x:dim() ~= indices:dim() then
    fail('take_along_dim', ('expected indices with as many dims as the input (%d), got %d'):format(
      x:dim(), indices:dim()))
  end
  local d = pdim('take_along_dim', dim, x:dim())
  local xs, is = x:size(), indices:size()
  for k = 1, #xs do
    if k ~= d then
      local s = xs[k] == 1 and is[k] or xs[k]
      if is[k] ~= s and is[k] ~= 1 then
        fail('take_along_dim', ('sizes %d and %d of dimension %d cannot broadcast'):format(
          xs[k], is[k], k))
      end
      xs[k], is[k] = s, s
    end
  end
  xs[d] = x:size(d)
  return methods.gather(methods.expand(x, xs), d, methods.expand(indices, is))
end

-- ---- index_put ---------------------------------------------------------------------------------
-- The index tensors of index_put as one linear 0-based row index into x's leading dims: bool
-- masks become their coordinates, integer indices broadcast together.
local function linear_index(fn, x, indices)
  if type(indices) ~= 'table' or #indices == 0 then
    fail(fn, 'expected a non-empty table of index tensors')
  end
  local cols = {}
  for k, t in ipairs(indices) do
    if not is_tensor(t) then
      fail(fn, ('expected an index tensor at position %d, got %s'):format(k, type(t)))
    end
    if t:dtype() == 'bool' then
      local nz = methods.nonzero(t, { as_tuple = true })
      for _, c in ipairs(nz) do cols[#cols + 1] = c end
    elseif t:is_floating_point() then
      fail(fn, ('expected integer or bool index tensors, got %s at position %d'):format(t:dtype(), k))
    else
      cols[#cols + 1] = methods.to(t, 'int64')
    end
  end
  local nd = #cols
  if nd > x:dim() then fail(fn, ('%d indices for a %d-d tensor'):format(nd, x:dim())) end
  local bt = require('ember.ops.shape_ext').broadcast_tensors(cols)
  local lin, stride = nil, 1
  for k = nd, 1, -1 do
    local size = x:size(k)
    local i = wrap_negative(bt[k], size) - 1
    lin = lin and lin + i * stride or i * stride
    stride = stride * size
  end
  local shape = bt[1]:size()
  -- x viewed as [rows of the indexed dims, rest...]
  local rest = { stride }
  for k = nd + 1, x:dim() do rest[#rest + 1] = x:size(k) end
  return flat(lin), shape, rest
end

local function index_put(fn, x, indices, values, accumulate, inplace)
  need_tensor(fn, x)
  if type(values) == 'number' or type(values) == 'boolean' then
    values = creation.full({}, values, { dtype = x:dtype(), device = x:device() })
  end
  need_tensor(fn, values, 'the values')
  local lin, shape, rest = linear_index(fn, x, indices)
  local rows = methods.reshape(x, rest)
  -- values broadcast to [index shape..., rest of x...]
  local vshape = {}
  for _, s in ipairs(shape) do vshape[#vshape + 1] = s end
  for k = 2, #rest do vshape[#vshape + 1] = rest[k] end
  local ok, ve = pcall(methods.expand, values, vshape)
  if not ok then
    fail(fn, ('values of shape %s cannot broadcast to the indexed shape %s'):format(
      tostring(values:size()), tostring(setmetatable(vshape, core.Size))))
  end
  local fshape = { lin:numel() }
  for k = 2, #rest do fshape[#fshape + 1] = rest[k] end
  local v = methods.to(methods.reshape(ve, fshape), x:dtype())
  local idx = lin + 1
  if inplace and methods.is_same_storage(rows, x) and x:is_contiguous() then
    if accumulate then methods.index_add_(rows, 1, idx, v) else methods.index_copy_(rows, 1, idx, v) end
    return x
  end
  local r = accumulate and methods.index_add(rows, 1, idx, v) or methods.index_copy(rows, 1, idx, v)
  r = methods.view(r, x:size())
  if inplace then methods.copy_(x, r); return x end
  return r
end

-- index_put(indices, values [, accumulate=false]): x[indices] = values as PyTorch's, with
-- indices a table of 1-based integer (or bool mask) tensors, one per leading dim; with
-- accumulate, values at repeated positions add up.
function methods.index_put(x, indices, values, accumulate)
  return index_put('index_put', x, indices, values, accumulate, false)
end
function methods.index_put_(x, indices, values, accumulate)
  return index_put('index_put_', x, indices, values, accumulate, true)
end

-- ---- scatter_reduce ----------------------------------------------------------------------------
local reductions = { sum = true, prod = true, mean = true, amax = true, amin = true }

local function type_limit(x, high)
  if x:is_floating_point() then return high and math.huge or -math.huge end
  local lim = { int8 = 127, uint8 = 255, int16 = 32767, int32 = 2147483647, bool = 1,
    int64 = 9.2233720368547748e18 }
  local low = { int8 = -128, uint8 = 0, int16 = -32768, int32 = -2147483648, bool = 0,
    int64 = -9.2233720368547758e18 }
  return high and lim[x:dtype()] or low[x:dtype()]
end

local function scatter_reduce(fn, x, dim, index, src, reduce, opts)
  need_tensor(fn, x)
  need_index(fn, index, 'the index')
  need_tensor(fn, src, 'the source')
  if not reductions[reduce] then
    fail(fn, ("expected reduce to be 'sum', 'prod', 'mean', 'amax' or 'amin', got %s"):format(
      tostring(reduce)))
  end
  opts = require('ember.util.names').check_options(fn, opts, { 'include_self' }, 3)
  local include_self = opts.include_self ~= false
  local n = x:dim()
  local d = pdim(fn, dim, n)
  if index:dim() ~= n or src:dim() ~= n then
    fail(fn, ('expected the input, index and source to have the same number of dims, got %d, %d and %d'):format(
      n, index:dim(), src:dim()))
  end
  if index:numel() == 0 then return methods.clone(x) end
  local is = index:size()
  -- The used part of src is index's shape.
  local s = src
  for k = 1, n do
    if is[k] > src:size(k) then
      fail(fn, ('index size %d exceeds the source size %d in dimension %d'):format(is[k], src:size(k), k))
    end
    if k ~= d and is[k] > x:size(k) then
      fail(fn, ('index size %d exceeds the input size %d in dimension %d'):format(is[k], x:size(k), k))
    end
    if is[k] < src:size(k) then s = methods.narrow(s, k, 1, is[k]) end
  end
  s = methods.to(s, x:dtype())
  local touched_f = methods.scatter(creation.zeros_like(x, { dtype = 'float32' }), d, index, 1)
  local touched = methods.gt(touched_f, 0)
  if reduce == 'sum' or reduce == 'mean' then
    local base = include_self and x or where(touched, creation.zeros({}, { dtype = x:dtype(), device = x:device() }), x)
    local total = methods.scatter_add(base, d, index, s)
    if reduce == 'sum' then return total end
    local count = methods.scatter_add(
      creation.full_like(x, include_self and 1 or 0), d, index, creation.ones_like(s))
    count = methods.clamp_min(count, 1)
    if x:is_floating_point() then return methods.div(total, count) end
    return methods.div(total, count, 'floor')
  end
  -- prod, amax, amin: the region of x that index reaches (index's extent off dim, all of dim),
  -- with dim moved last: xr [B..., N], and the sources ir, sr [B..., K].
  local xr = x
  for k = 1, n do
    if k ~= d and is[k] < x:size(k) then xr = methods.narrow(xr, k, 1, is[k]) end
  end
  local N = x:size(d)
  local xl = methods.movedim(xr, d, n)
  local il = methods.movedim(index, d, n)
  local sl = methods.movedim(s, d, n)
  local targets = creation.arange(1, N + 1, 1, { dtype = 'int64', device = x:device() })
  local hit = methods.eq(methods.unsqueeze(methods.to(il, 'int64'), -2), methods.view(targets, { N, 1 })) -- [B..., N, K]
  local ident = reduce == 'prod' and 1 or type_limit(x, reduce == 'amin')
  local fill = creation.full({}, ident, { dtype = x:dtype(), device = x:device() })
  local spread = where(hit, methods.unsqueeze(sl, -2), fill)
  local red
  if reduce == 'prod' then red = methods.prod(spread, -1)
  elseif reduce == 'amax' then red = methods.amax(spread, -1)
  else red = methods.amin(spread, -1) end
  local any = methods.any(hit, -1)
  local out
  if include_self then
    if reduce == 'prod' then out = xl * red
    elseif reduce == 'amax' then out = where(any, methods.maximum(xl, red), xl)
    else out = where(any, methods.minimum(xl, red), xl) end
  else
    out = where(any, red, xl)
  end
  out = methods.movedim(out, n, d)
  if out:size() == x:size() then return out end
  -- Put the region back into x.
  local where_to = methods.view(targets, (function()
    local v = {}
    for k = 1, n do v[k] = k == d and N or 1 end
    return v end)())
  return methods.scatter(x, d, methods.expand(where_to, out:size()), out)
end

-- scatter_reduce(dim, index, src, reduce [, {include_self=true}]): each src element reduced
-- into x at the position index gives along dim; reduce is 'sum', 'prod', 'mean', 'amax' or
-- 'amin'. Without include_self, x's own values at reached positions are left out.
function methods.scatter_reduce(x, dim, index, src, reduce, opts)
  return scatter_reduce('scatter_reduce', x, dim, index, src, reduce, opts)
end
function methods.scatter_reduce_(x, dim, index, src, reduce, opts)
  local r = scatter_reduce('scatter_reduce_', x, dim, index, src, reduce, opts)
  methods.copy_(x, r)
  return x
end

-- ---- masked_scatter ------------------------------------------------------------------------------
-- masked_scatter(mask, source): x with the positions where mask (broadcast to x) is true
-- filled, in row-major order, by consecutive elements of source.
local function masked_scatter(fn, x, mask, source)
  need_tensor(fn, x)
  need_tensor(fn, mask, 'the mask')
  need_tensor(fn, source, 'the source')
  if mask:dtype() ~= 'bool' then fail(fn, 'expected a bool mask, got ' .. mask:dtype()) end
  local ok, m = pcall(methods.expand, mask, x:size())
  if not ok then
    fail(fn, ('mask of shape %s cannot broadcast to the input shape %s'):format(
      tostring(mask:size()), tostring(x:size())))
  end
  local pos = methods.cumsum(flat(methods.to(m, 'int64')), 1)
  local count = pos:numel() > 0 and methods.item(methods.select(pos, 1, -1)) or 0
  if count > source:numel() then
    fail(fn, ('the mask selects %d elements, but the source has %d'):format(count, source:numel()))
  end
  if count == 0 then return methods.clone(x) end
  local taken = methods.index_select(methods.to(flat(source), x:dtype()), 1, methods.clamp_min(pos, 1))
  return where(m, methods.view(taken, x:size()), x)
end
function methods.masked_scatter(x, mask, source) return masked_scatter('masked_scatter', x, mask, source) end
function methods.masked_scatter_(x, mask, source)
  methods.copy_(x, masked_scatter('masked_scatter_', x, mask, source))
  return x
end

-- Errors of the ops inside carry these functions' names.
local as_op = require 'ember.util.as_op'
as_op.wrap_all(methods, { 'take', 'take_along_dim', 'index_put', 'index_put_', 'scatter_reduce',
  'scatter_reduce_', 'masked_scatter', 'masked_scatter_' })

return M
