-- ember.ops.search: searching sorted sequences and counting: searchsorted, bucketize,
-- bincount, histc, unique_consecutive.
--
-- All are compositions of existing ops, so they run on every device those do. searchsorted is
-- a binary search on whole tensors: ceil(log2(M + 1)) rounds of gather and compare for a
-- sequence of M elements. Positions and inverse indices are 1-based, as Ember's other index
-- results: searchsorted gives PyTorch's insertion point + 1 (1 .. M + 1).
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local pw = require 'ember.ops.pointwise'
local creation = require 'ember.creation'
local names = require 'ember.util.names'
local C, own = core.C, core.own
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local function need_tensor(fn, x, what)
  if not is_tensor(x) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what, type(x)), 3)
  end
end

-- The shared options check (ember.util.names): unknown keys name the closest valid one.
local function options(fn, opts, keys)
  return names.check_options(fn, opts, keys, 3)
end

local function sizes_equal(a, b, upto)
  for d = 1, upto do
    if a:size(d) ~= b:size(d) then return false end
  end
  return true
end

local function shape_str(x)
  local t = {}
  for d = 1, x:dim() do t[d] = tostring(x:size(d)) end
  return '[' .. table.concat(t, ', ') .. ']'
end

-- searchsorted(sorted_sequence, values [, opts]) with opts {right = false, side = 'left' |
-- 'right', sorter = <1-based indices that sort the sequence>, out_int32 = false}: for each
-- value, the 1-based position where inserting it keeps the last dim of the sequence sorted
-- (the first such position, or the last with right). A 1-d sequence serves values of any
-- shape; otherwise the sequence's leading dims match the values'.
function methods.searchsorted(seq, values, opts)
  local fn = 'searchsorted'
  need_tensor(fn, seq, 'the sorted sequence')
  opts = options(fn, opts, { right = true, side = true, sorter = true, out_int32 = true })
  local right = opts.right and true or false
  if opts.side ~= nil then
    if opts.side ~= 'left' and opts.side ~= 'right' then
      error("searchsorted: expected side 'left' or 'right', got " .. tostring(opts.side), 2)
    end
    if opts.right and opts.side == 'left' then
      error("searchsorted: side 'left' contradicts right = true", 2)
    end
    right = opts.side == 'right'
  end
  local scalar = not is_tensor(values)
  if scalar then
    if type(values) ~= 'number' then
      error('searchsorted: expected a tensor or a number for the values, got ' .. type(values), 2)
    end
    values = creation.full({}, values, { dtype = seq:dtype(), device = seq:device() })
  end
  if seq:dim() == 0 then error('searchsorted: expected a sorted sequence of at least 1 dimension', 2) end
  if opts.sorter ~= nil then
    need_tensor(fn, opts.sorter, 'sorter')
    seq = seq:gather(-1, opts.sorter)
  end
  local m = seq:size(-1)
  local vshape = values:size()
  local seq2, val2
  if seq:dim() == 1 then
    seq2, val2 = seq:reshape(1, m), values:reshape(1, -1)
  else
    if values:dim() ~= seq:dim() or not sizes_equal(seq, values, seq:dim() - 1) then
      error(('searchsorted: the sequence %s and the values %s must match in all but the last ' ..
        'dimension'):format(shape_str(seq), shape_str(values)), 2)
    end
    local b = math.floor(seq:numel() / math.max(m, 1))
    if m == 0 then b = math.floor(values:numel() / math.max(values:size(-1), 1)) end
    seq2, val2 = seq:reshape(b, m), values:reshape(b, values:size(-1))
  end
  local dev = seq:device()
  local lo = creation.zeros(val2:size(), { dtype = 'int64', device = dev })
  if m > 0 then
    local hi = creation.full(val2:size(), m, { dtype = 'int64', device = dev })
    local steps = math.ceil(math.log(m + 1) / math.log(2))
    for _ = 1, steps do
      local active = lo:lt(hi)
      local mid = (lo + hi):floor_divide(2)
      local v = own(C.em_gather(seq2.ptr, 1, mid:clamp(0, m - 1).ptr))
      -- PyTorch's tests: NaN values land after everything
      local go = right and v:gt(val2):logical_not() or v:ge(val2):logical_not()
      go = go:logical_and(active)
      lo = pw.where(go, mid + 1, lo)
      hi = pw.where(active:logical_and(go:logical_not()), mid, hi)
    end
  end
  local r = (lo + 1):reshape(vshape)
  if opts.out_int32 then r = r:to('int32') end
  return r
end
M.searchsorted = methods.searchsorted

-- bucketize(input, boundaries [, opts]) with opts {right = false, out_int32 = false}: the
-- 1-based bucket of each element among the 1-d boundaries: i such that
-- boundaries[i-1] < x <= boundaries[i] (boundaries[i-1] <= x < boundaries[i] with right).
function methods.bucketize(x, boundaries, opts)
  need_tensor('bucketize', boundaries, 'the boundaries')
  opts = options('bucketize', opts, { right = true, out_int32 = true })
  if boundaries:dim() ~= 1 then
    error('bucketize: expected 1-d boundaries, got ' .. boundaries:dim() .. '-d', 2)
  end
  return methods.searchsorted(boundaries, x, { right = opts.right, out_int32 = opts.out_int32 })
end
M.bucketize = methods.bucketize

-- bincount(input [, weights [, minlength]]) or bincount(input, {weights=, minlength=}): counts
-- of each value 0 .. max(input) of a 1-d non-negative integer tensor (sums of weights:
-- float32 weights give float32, other weights float64, none int64).
function methods.bincount(x, weights, minlength)
  local fn = 'bincount'
  need_tensor(fn, x, 'the input')
  if type(weights) == 'table' and not is_tensor(weights) then
    local o = options(fn, weights, { weights = true, minlength = true })
    weights, minlength = o.weights, o.minlength
  end
  minlength = minlength or 0
  if type(minlength) ~= 'number' or minlength < 0 or minlength ~= math.floor(minlength) then
    error('bincount: expected minlength to be a non-negative integer, got ' .. tostring(minlength), 2)
  end
  if x:dim() ~= 1 then error('bincount: expected a 1-d tensor, got ' .. x:dim() .. '-d', 2) end
  if x:is_floating_point() or x:dtype() == 'bool' then
    error('bincount: expected an integer tensor, got ' .. x:dtype(), 2)
  end
  local n = x:numel()
  local size = minlength
  if n > 0 then
    local lo = x:amin():item()
    if lo < 0 then error(('bincount: expected non-negative values, got %d'):format(lo), 2) end
    size = math.max(size, x:amax():item() + 1)
  end
  local dtype, src = 'int64', nil
  if weights ~= nil then
    need_tensor(fn, weights, 'weights')
    if weights:dim() ~= 1 or weights:numel() ~= n then
      error(('bincount: expected weights of the input\'s shape [%d], got %s'):format(n,
        shape_str(weights)), 2)
    end
    dtype = weights:dtype() == 'float32' and 'float32' or 'float64'
    src = weights:to(dtype)
  else
    src = creation.ones(n, { dtype = 'int64', device = x:device() })
  end
  local out = creation.zeros(size, { dtype = dtype, device = x:device() })
  if n == 0 then return out end
  return own(C.em_index_add(out.ptr, 0, x:to('int64').ptr, src.ptr, 1))
end
M.bincount = methods.bincount

-- histc(input [, bins [, min [, max]]]) or histc(input, {bins=, min=, max=}): a histogram of
-- bins equal bins over [min, max] (the data's range when min == max); elements outside it
-- (and NaN) are not counted.
function methods.histc(x, bins, lo, hi)
  local fn = 'histc'
  need_tensor(fn, x, 'the input')
  if type(bins) == 'table' then
    local o = options(fn, bins, { bins = true, min = true, max = true })
    bins, lo, hi = o.bins, o.min, o.max
  end
  bins, lo, hi = bins or 100, lo or 0, hi or 0
  if type(bins) ~= 'number' or bins < 1 or bins ~= math.floor(bins) then
    error('histc: expected bins to be a positive integer, got ' .. tostring(bins), 2)
  end
  if not x:is_floating_point() then
    error('histc: expected a floating-point tensor, got ' .. x:dtype(), 2)
  end
  if lo > hi then error(('histc: expected min <= max, got %g and %g'):format(lo, hi), 2) end
  if lo == hi and x:numel() > 0 then
    lo, hi = x:amin():item(), x:amax():item()
  end
  if lo == hi then lo, hi = lo - 1, hi + 1 end
  if lo ~= lo or hi ~= hi or math.abs(lo) == math.huge or math.abs(hi) == math.huge then
    error(('histc: range of [%g, %g] is not finite'):format(lo, hi), 2)
  end
  local inside = x:ge(lo):logical_and(x:le(hi))
  local pos = ((x - lo) / (hi - lo) * bins):floor()
  pos = pw.where(inside, pos:clamp(0, bins - 1), bins):to('int64'):reshape(-1)
  local out = creation.zeros(bins + 1, { dtype = x:dtype(), device = x:device() })
  local ones = creation.ones(pos:numel(), { dtype = x:dtype(), device = x:device() })
  out = own(C.em_index_add(out.ptr, 0, pos.ptr, ones.ptr, 1))
  return out:narrow(1, 1, bins)
end
M.histc = methods.histc

-- unique_consecutive(x [, opts]) with opts {return_inverse=, return_counts=, dim=}: the
-- flattened input (or, with dim, the slices along dim) with each run of equal elements
-- (slices) kept once; inverse (1-based: x's shape, or a 1-d tensor over dim) and counts on
-- request, in that order.
function methods.unique_consecutive(x, opts)
  local fn = 'unique_consecutive'
  need_tensor(fn, x, 'the input')
  opts = options(fn, opts, { return_inverse = true, return_counts = true, dim = true })
  local dev = x:device()
  local d, src, n
  if opts.dim == nil then
    src, d = x:reshape(-1), 1
  else
    if x:dim() == 0 then error('unique_consecutive: expected a tensor of at least 1 dimension with dim', 2) end
    local dim = opts.dim
    if type(dim) ~= 'number' or dim ~= math.floor(dim) or dim == 0 or dim > x:dim() or dim < -x:dim() then
      error(('unique_consecutive: dimension %s out of range for a %d-d tensor'):format(
        tostring(dim), x:dim()), 2)
    end
    src, d = x, dim < 0 and x:dim() + dim + 1 or dim
  end
  n = src:size(d)
  local starts = creation.ones(math.min(n, 1), { dtype = 'bool', device = dev })
  if n > 1 then
    local change = src:narrow(d, 2, n - 1):ne(src:narrow(d, 1, n - 1))
    if src:dim() > 1 then -- a slice starts a run when any of its elements changed
      local perm = { d }
      for k = 1, src:dim() do if k ~= d then perm[#perm + 1] = k end end
      change = change:permute(perm):reshape(n - 1, -1):any(2)
    end
    starts = methods.cat({ starts, change })
  end
  local values
  if opts.dim == nil then
    values = src:masked_select(starts)
  else
    local at = starts:nonzero():reshape(-1)
    values = src:index_select(d, at)
  end
  local inverse = starts:to('int64'):cumsum(1)
  local out = { values }
  if opts.return_inverse then
    out[#out + 1] = opts.dim == nil and inverse:reshape(x:size()) or inverse
  end
  if opts.return_counts then
    local k = values:dim() > 0 and values:size(d) or 0
    local cnt = creation.zeros(k, { dtype = 'int64', device = dev })
    if n > 0 then
      local ones = creation.ones(n, { dtype = 'int64', device = dev })
      cnt = own(C.em_index_add(cnt.ptr, 0, (inverse - 1).ptr, ones.ptr, 1))
    end
    out[#out + 1] = cnt
  end
  return unpack(out)
end
M.unique_consecutive = methods.unique_consecutive

require('ember.ops.named').wrap({ 'searchsorted', 'bucketize', 'bincount', 'histc',
  'unique_consecutive' }, methods, M)

return M
