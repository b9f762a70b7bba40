-- ember.ops.reduce_ext: order statistics, paired reductions and scans: median, kthvalue,
-- mode, quantile, aminmax, var_mean, std_mean, cummax, cummin, logcumsumexp, diff.
--
-- All are compositions of existing ops (sort, gather, where, cat, the reductions), so they run
-- on every device those do, and values that come with indices are gathered from the input, so
-- that their gradients flow to the chosen elements as PyTorch's do. The scans take
-- ceil(log2(n)) doubling rounds (Hillis and Steele) over a dim of n elements. Dims are 1-based
-- and indices come back 1-based, as Ember's other reductions.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local pw = require 'ember.ops.pointwise'
local creation = require 'ember.creation'
local names = require 'ember.util.names'
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local function need_tensor(fn, x)
  if not is_tensor(x) then error(fn .. ': expected a tensor, got ' .. type(x), 3) end
end

-- A Lua dim to a positive 1-based one (a 0-d tensor accepts 1 and -1).
local function norm_dim(fn, x, dim)
  local n = math.max(x:dim(), 1)
  if type(dim) ~= 'number' or dim ~= math.floor(dim) then
    error(fn .. ': expected an integer dimension, got ' .. tostring(dim), 3)
  end
  if dim == 0 then error(fn .. ': dimensions are 1-based in Lua; got 0', 3) end
  if dim > n or dim < -n then
    error(('%s: dimension %d out of range for a %d-d tensor'):format(fn, dim, x:dim()), 3)
  end
  return dim < 0 and n + dim + 1 or dim
end

local function keep_flag(fn, keepdim)
  if keepdim == nil then return false end
  if type(keepdim) ~= 'boolean' then
    error(fn .. ': expected keepdim to be a boolean, got ' .. type(keepdim), 3)
  end
  return keepdim
end

local function nonempty(fn, x, d)
  if x:size(d) == 0 then
    error(('%s: cannot reduce dimension %d of size 0'):format(fn, d), 3)
  end
end

-- 0-d tensors reduce as one element along dim 1.
local function at_least_1d(x) return x:dim() == 0 and x:reshape(1) or x end

-- Drops dim d unless keepdim (for a 0-d input, back to 0-d).
local function finish(t, d, keepdim, was0d)
  if was0d then return t:reshape({}) end
  if keepdim then return t end
  return t:squeeze(d)
end

local function is_float(x) return x:is_floating_point() end

-- 0-based positions 0 .. n-1 along dim d of a tensor of ndim dims (other sizes 1), int64.
local function positions(n, d, ndim, device)
  local shape = {}
  for k = 1, ndim do shape[k] = 1 end
  shape[d] = n
  return creation.arange(0, n, 1, { dtype = 'int64', device = device }):reshape(shape)
end

-- ---- order statistics ----------------------------------------------------------------------

-- median(): the lower median of all elements (NaN if any is NaN). median(dim [, keepdim]):
-- values and 1-based indices along dim.
function methods.median(x, dim, keepdim)
  need_tensor('median', x)
  if dim == nil then
    local flat = x:reshape(-1)
    local n = flat:numel()
    if n == 0 then
      return creation.full({}, 0 / 0, { dtype = x:dtype(), device = x:device() })
    end
    local _, idx = flat:sort()
    local v = flat:gather(1, idx:narrow(1, math.floor((n - 1) / 2) + 1, 1)):reshape({})
    if is_float(x) then v = pw.where(flat:isnan():any(), 0 / 0, v) end
    return v
  end
  local was0d = x:dim() == 0
  local d = norm_dim('median', x, dim)
  local k = keep_flag('median', keepdim)
  local x1 = at_least_1d(x)
  nonempty('median', x1, d)
  local n = x1:size(d)
  local _, idx = x1:sort(d)
  local pos
  if is_float(x1) then -- NaNs sort last: the first of them is the median
    local nans = x1:isnan():sum(d, true)
    pos = pw.where(nans:gt(0), (nans - n):neg() + 1, math.floor((n - 1) / 2) + 1)
  else
    local shape = x1:size()
    shape[d] = 1
    pos = creation.full(shape, math.floor((n - 1) / 2) + 1, { dtype = 'int64', device = x:device() })
  end
  local i = idx:gather(d, pos)
  local v = x1:gather(d, i)
  return finish(v, d, k, was0d), finish(i, d, k, was0d)
end

-- kthvalue(k [, dim = -1 [, keepdim]]): the k-th smallest element along dim and its 1-based
-- index (NaN counts as the largest).
function methods.kthvalue(x, k, dim, keepdim)
  need_tensor('kthvalue', x)
  local was0d = x:dim() == 0
  local d = norm_dim('kthvalue', x, dim or -1)
  local kd = keep_flag('kthvalue', keepdim)
  local x1 = at_least_1d(x)
  local n = x1:size(d)
  if type(k) ~= 'number' or k ~= math.floor(k) or k < 1 or k > n then
    error(('kthvalue: expected k in [1, %d], got %s'):format(n, tostring(k)), 2)
  end
  local _, idx = x1:sort(d)
  local i = idx:narrow(d, k, 1)
  return finish(x1:gather(d, i), d, kd, was0d), finish(i, d, kd, was0d)
end

-- mode([dim = -1 [, keepdim]]): the most frequent value along dim (the smallest of equally
-- frequent ones) and the 1-based index of its last occurrence, as PyTorch's CPU gives.
function methods.mode(x, dim, keepdim)
  need_tensor('mode', x)
  local was0d = x:dim() == 0
  local d = norm_dim('mode', x, dim or -1)
  local kd = keep_flag('mode', keepdim)
  local x1 = at_least_1d(x)
  nonempty('mode', x1, d)
  local n = x1:size(d)
  local s, idx = x1:sort(d)
  local pos = positions(n, d, x1:dim(), x:device())
  local starts = pos:eq(0)
  if n > 1 then
    local change = s:narrow(d, 2, n - 1):ne(s:narrow(d, 1, n - 1))
    local shape = x1:size()
    shape[d] = 1
    local head = creation.ones(shape, { dtype = 'bool', device = x:device() })
    starts = methods.cat({ head, change }, d)
  end
  -- the length of the run so far at each position: position - start of its run + 1
  local run_start = methods.cummax(pw.where(starts, pos, 0), d)
  local len = pos - run_start + 1
  local _, at = len:max(d, true) -- the end of the first longest run
  local i = idx:gather(d, at)
  return finish(x1:gather(d, i), d, kd, was0d), finish(i, d, kd, was0d)
end

local interpolations = { linear = true, lower = true, higher = true, midpoint = true, nearest = true }

-- quantile(q [, dim [, keepdim [, interpolation]]]) or quantile(q, {dim=, keepdim=,
-- interpolation=}): q a number or a 1-d tensor in [0, 1]; over all elements without dim. A
-- tensor q puts its dim first in the result. NaN anywhere in a line makes its result NaN.
function methods.quantile(x, q, dim, keepdim, interpolation)
  local fn = 'quantile'
  need_tensor(fn, x)
  if type(dim) == 'table' then
    names.check_options(fn, dim, { 'dim', 'keepdim', 'interpolation' }, 2)
    dim, keepdim, interpolation = dim.dim, dim.keepdim, dim.interpolation
  end
  interpolation = interpolation or 'linear'
  if not interpolations[interpolation] then
    error("quantile: expected interpolation 'linear', 'lower', 'higher', 'midpoint' or " ..
      "'nearest', got " .. tostring(interpolation), 2)
  end
  if not is_float(x) then error('quantile: expected a floating-point tensor, got ' .. x:dtype(), 2) end
  local kd = keep_flag(fn, keepdim)
  local scalar_q = not is_tensor(q)
  if scalar_q then
    if type(q) ~= 'number' or not (q >= 0 and q <= 1) then
      error('quantile: expected q in [0, 1], got ' .. tostring(q), 2)
    end
    q = creation.full({ 1 }, q, { dtype = x:dtype(), device = x:device() })
  else
    if q:dim() > 1 then error('quantile: expected q to be a number or a 1-d tensor, got ' .. q:dim() .. '-d', 2) end
    local ok = q:ge(0):logical_and(q:le(1)):all():item()
    if not ok then error('quantile: expected q in [0, 1]', 2) end
    q = q:reshape(-1):to(x:dtype())
  end
  local x1, d
  if dim == nil then
    x1, d = x:reshape(-1), 1
  else
    d = norm_dim(fn, x, dim)
    x1 = at_least_1d(x)
  end
  if x1:numel() == 0 or x1:size(d) == 0 then error('quantile: expected a non-empty input', 2) end
  -- the reduced dim last, the others in order
  local nd = x1:dim()
  local perm = {}
  for k = 1, nd do if k ~= d then perm[#perm + 1] = k end end
  perm[#perm + 1] = d
  local xt = x1:permute(perm)
  local n = xt:size(-1)
  local _, si = xt:sort(-1)
  local nq = q:numel()
  local pos = q * (n - 1)
  local lo, hi = pos:floor(), pos:ceil()
  if interpolation == 'nearest' then lo = pos:round(); hi = lo end
  local shape = xt:size()
  shape[nd] = nq
  local qshape = {}
  for k = 1, nd - 1 do qshape[k] = 1 end
  qshape[nd] = nq
  local function pick(p)
    local at = (p:to('int64') + 1):reshape(qshape):expand(shape)
    return xt:gather(-1, si:gather(-1, at))
  end
  local r
  if interpolation == 'lower' or interpolation == 'nearest' then r = pick(lo)
  elseif interpolation == 'higher' then r = pick(hi)
  else
    local w = interpolation == 'midpoint' and pw.where(hi:gt(lo), 0.5, 0):to(x:dtype()) or pos - lo
    r = pick(lo):lerp(pick(hi), w:reshape(qshape))
  end
  r = pw.where(xt:isnan():any(-1, true), 0 / 0, r)
  -- (..., Q) -> (Q, ...) with the reduced dim back as 1 when keepdim
  local back = { nd }
  for k = 1, nd - 1 do back[#back + 1] = k end
  r = r:permute(back)
  if kd then
    local out_shape = { nq }
    if dim == nil then
      for k = 1, x:dim() do out_shape[#out_shape + 1] = 1 end
    else
      local j = 1
      for k = 1, x:dim() do
        if k == d then out_shape[#out_shape + 1] = 1
        else out_shape[#out_shape + 1] = r:size(j + 1); j = j + 1 end
      end
    end
    r = r:reshape(out_shape)
  end
  if scalar_q then r = r:squeeze(1) end
  return r
end

-- ---- paired reductions ---------------------------------------------------------------------

-- aminmax([dim [, keepdim]]) or aminmax{dim=, keepdim=}: amin and amax together.
function methods.aminmax(x, dim, keepdim)
  need_tensor('aminmax', x)
  if type(dim) == 'table' then
    names.check_options('aminmax', dim, { 'dim', 'keepdim' }, 2)
    dim, keepdim = dim.dim, dim.keepdim
  end
  if x:numel() == 0 then error('aminmax: expected a non-empty tensor', 2) end
  return x:amin(dim, keepdim), x:amax(dim, keepdim)
end

-- var_mean / std_mean: var (std) and mean over the same dims, with var's arguments.
local function with_mean(name, f)
  return function(x, dim, a, b)
    need_tensor(name, x)
    local v = f(x, dim, a, b)
    local mdim, keepdim = dim, b
    if (type(dim) == 'table' and dim[1] == nil and next(dim) ~= nil) or type(dim) == 'boolean' then
      mdim, keepdim = nil, a
      a = dim
    end
    if type(a) == 'table' then keepdim = a.keepdim end
    return v, x:mean(mdim, keepdim or false)
  end
end
methods.var_mean = with_mean('var_mean', methods.var)
methods.std_mean = with_mean('std_mean', methods.std)

-- ---- scans ---------------------------------------------------------------------------------

-- cummax(dim) / cummin(dim): running extreme values along dim and the 1-based index of the
-- last element that set them; NaN, once met, stays (as PyTorch).
local function running(name, later_wins)
  return function(x, dim)
    need_tensor(name, x)
    if dim == nil then error(name .. ': expected a dimension, as in x:' .. name .. '(dim)', 2) end
    local was0d = x:dim() == 0
    local d = norm_dim(name, x, dim)
    local x1 = at_least_1d(x)
    local n = x1:size(d)
    local v = x1:detach()
    local i = (positions(n, d, x1:dim(), x:device()) + 1):expand(x1:size())
    local s = 1
    while s < n do
      local ev, ei = v:narrow(d, 1, n - s), i:narrow(d, 1, n - s)
      local lv, li = v:narrow(d, s + 1, n - s), i:narrow(d, s + 1, n - s)
      local take = later_wins(lv, ev)
      if is_float(v) then take = take:logical_or(lv:isnan()) end
      v = methods.cat({ v:narrow(d, 1, s), pw.where(take, lv, ev) }, d)
      i = methods.cat({ i:narrow(d, 1, s), pw.where(take, li, ei) }, d)
      s = s * 2
    end
    i = i:contiguous()
    local values = x1:gather(d, i)
    if was0d then return values:reshape({}), i:reshape({}) end
    return values, i
  end
end
methods.cummax = running('cummax', function(l, e) return l:ge(e) end)
methods.cummin = running('cummin', function(l, e) return l:le(e) end)

-- logcumsumexp(dim): log(cumsum(exp(x))) without overflow, by doubling rounds of logaddexp.
function methods.logcumsumexp(x, dim)
  need_tensor('logcumsumexp', x)
  if dim == nil then error('logcumsumexp: expected a dimension, as in x:logcumsumexp(dim)', 2) end
  if not is_float(x) then error('logcumsumexp: expected a floating-point tensor, got ' .. x:dtype(), 2) end
  local was0d = x:dim() == 0
  local d = norm_dim('logcumsumexp', x, dim)
  local v = at_least_1d(x)
  local n = v:size(d)
  local s = 1
  while s < n do
    local tail = methods.logaddexp(v:narrow(d, 1, n - s), v:narrow(d, s + 1, n - s))
    v = methods.cat({ v:narrow(d, 1, s), tail }, d)
    s = s * 2
  end
  if was0d then return v:reshape({}) end
  if n <= 1 then return v:clone() end
  return v
end

-- diff([n = 1 [, dim = -1 [, prepend [, append]]]]) or diff{n=, dim=, prepend=, append=}:
-- the n-th forward difference along dim (logical_xor for bool), after joining prepend and
-- append (tensors, or numbers broadcast to one slice) to the ends.
function methods.diff(x, n, dim, prepend, append)
  local fn = 'diff'
  need_tensor(fn, x)
  if type(n) == 'table' then
    names.check_options(fn, n, { 'n', 'dim', 'prepend', 'append' }, 2)
    n, dim, prepend, append = n.n, n.dim, n.prepend, n.append
  end
  n = n or 1
  if type(n) ~= 'number' or n < 0 or n ~= math.floor(n) then
    error('diff: expected n to be a non-negative integer, got ' .. tostring(n), 2)
  end
  if x:dim() == 0 then error('diff: expected a tensor of at least 1 dimension, got 0-d', 2) end
  local d = norm_dim(fn, x, dim or -1)
  local function slab(v, what)
    if is_tensor(v) then return v end
    if type(v) ~= 'number' and type(v) ~= 'boolean' then
      error(('diff: expected a tensor or a number for %s, got %s'):format(what, type(v)), 3)
    end
    local shape = x:size()
    shape[d] = 1
    return creation.full(shape, v, { dtype = x:dtype(), device = x:device() })
  end
  local parts = {}
  if prepend ~= nil then parts[#parts + 1] = slab(prepend, 'prepend') end
  parts[#parts + 1] = x
  if append ~= nil then parts[#parts + 1] = slab(append, 'append') end
  local v = #parts > 1 and methods.cat(parts, d) or x
  for _ = 1, n do
    local m = v:size(d)
    if m == 0 then break end
    local later, earlier = v:narrow(d, 2, m - 1), v:narrow(d, 1, m - 1)
    v = v:dtype() == 'bool' and later:logical_xor(earlier) or later - earlier
  end
  return v
end

local composed = { 'median', 'kthvalue', 'mode', 'quantile', 'aminmax', 'var_mean', 'std_mean',
  'cummax', 'cummin', 'logcumsumexp', 'diff' }
for _, name in ipairs(composed) do M[name] = methods[name] end
require('ember.ops.named').wrap(composed, methods, M)

return M
