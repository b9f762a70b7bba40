-- ember.ops.shape_ext: the shaping functions of PyTorch that Ember composes from its own views
-- and ops: diag, diagonal, diag_embed, trace, tril_indices, triu_indices, movedim, unbind,
-- unflatten, tensor_split, hstack/vstack/dstack, tile, repeat_interleave, rot90,
-- broadcast_to, broadcast_tensors, broadcast_shapes, meshgrid, as_strided, new_zeros/
-- new_ones/new_full/new_empty/new_tensor, type_as and logspace.
--
-- Each is a composition of ops that already have gradients and kernels on every device
-- (narrow, reshape, permute, expand, cat, where, index_select, ...), so they differentiate
-- and run on Vulkan without code of their own there. Dimensions are 1-based, negative from
-- the end; index results (tril_indices) are 1-based, as nonzero's.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local C = core.C
local methods, is_tensor = tensor.methods, tensor.is_tensor

-- where(cond, a, b); methods.where is the method form x:where(cond, y).
local where = require('ember.ops.pointwise').where

local M = {}

local check_options = require('ember.util.names').check_options

local function cat(...) return require('ember.ops.index').cat(...) end

local A = require 'ember.ops.ext_args'
local fail, pdim, need_tensor = A.fail, A.pdim, A.need_tensor

local function need_int(fn, v, what, min)
  if type(v) ~= 'number' or v ~= math.floor(v) or v ~= v then
    error(('%s: expected an integer %s, got %s'):format(fn, what, tostring(v)), 4)
  end
  if min and v < min then
    error(('%s: expected %s >= %d, got %d'):format(fn, what, min, v), 4)
  end
end

local function like(x) return { dtype = x:dtype(), device = x:device() } end

-- ---- movedim ---------------------------------------------------------------------------------
-- movedim(source, destination): dims (numbers or tables of numbers) moved to those positions,
-- the others keeping their order.
function methods.movedim(x, source, destination)
  need_tensor('movedim', x)
  local n = x:dim()
  local src = type(source) == 'table' and source or { source }
  local dst = type(destination) == 'table' and destination or { destination }
  if #src ~= #dst then
    fail('movedim', ('expected as many destinations as sources, got %d and %d'):format(#src, #dst))
  end
  local order, used, taken = {}, {}, {}
  for i = 1, #src do
    local s, d = pdim('movedim', src[i], n), pdim('movedim', dst[i], n)
    if used[s] then fail('movedim', 'repeated source dimension ' .. src[i]) end
    if order[d] then fail('movedim', 'repeated destination dimension ' .. dst[i]) end
    used[s], order[d], taken[s] = true, s, true
  end
  local rest = 1
  for d = 1, n do
    if order[d] == nil then
      while taken[rest] do rest = rest + 1 end
      order[d] = rest
      rest = rest + 1
    end
  end
  if n == 0 then return methods.view(x, {}) end
  return methods.permute(x, order)
end
methods.moveaxis = methods.movedim

-- ---- diagonal, diag, diag_embed, trace -------------------------------------------------------
-- diagonal([offset=0] [, dim1=1] [, dim2=2]): the diagonal of the (dim1, dim2) matrices as a
-- last dim. Made from a reshape (a view when the two dims can merge) and a strided slice.
function methods.diagonal(x, offset, dim1, dim2)
  need_tensor('diagonal', x)
  offset = offset or 0
  need_int('diagonal', offset, 'offset')
  local n = x:dim()
  if n < 2 then fail('diagonal', ('expected a tensor of at least 2 dims, got %d-d'):format(n)) end
  local d1, d2 = pdim('diagonal', dim1 or 1, n), pdim('diagonal', dim2 or 2, n)
  if d1 == d2 then fail('diagonal', 'dim1 and dim2 must differ, both are ' .. d1) end
  local m = methods.movedim(x, { d1, d2 }, { n - 1, n })
  local rows, cols = m:size(n - 1), m:size(n)
  local len, start
  if offset >= 0 then
    len, start = math.max(math.min(rows, cols - offset), 0), offset
  else
    len, start = math.max(math.min(rows + offset, cols), 0), -offset * cols
  end
  local merged = m:size()   -- [lead..., rows * cols]
  merged[n - 1], merged[n] = rows * cols, nil
  local flat = methods.reshape(m, merged)
  if len == 0 then return methods.narrow(flat, -1, 1, 0) end
  -- Element i of the diagonal is at start + i * (cols + 1) in the merged dim.
  local last = start + (len - 1) * (cols + 1)
  return methods.slice(flat, -1, start + 1, last + 1, cols + 1)
end

-- diag_embed([offset=0] [, dim1=-2] [, dim2=-1]): the last dim of x put on the diagonals of
-- new (dim1, dim2) matrices of size n + |offset|, zeros elsewhere.
function methods.diag_embed(x, offset, dim1, dim2)
  need_tensor('diag_embed', x)
  offset = offset or 0
  need_int('diag_embed', offset, 'offset')
  if x:dim() == 0 then fail('diag_embed', 'expected a tensor of at least 1 dim, got 0-d') end
  local n = x:dim() + 1
  local d1, d2 = pdim('diag_embed', dim1 or -2, n), pdim('diag_embed', dim2 or -1, n)
  if d1 == d2 then fail('diag_embed', 'dim1 and dim2 must differ, both are ' .. d1) end
  local len = x:size(-1)
  local eye = creation.eye(len, { dtype = 'bool', device = x:device() })
  local zero = creation.zeros({}, like(x))
  local m = where(eye, methods.unsqueeze(x, -1), zero)   -- [..., len, len]
  local k = math.abs(offset)
  if k > 0 then
    local s = m:size()
    s[n] = k
    local side = creation.zeros(s, like(x))
    m = offset > 0 and cat({ side, m }, n) or cat({ m, side }, n)
    s = m:size()
    s[n - 1] = k
    local below = creation.zeros(s, like(x))
    m = offset > 0 and cat({ m, below }, n - 1) or cat({ below, m }, n - 1)
  end
  -- The new matrix dims are the last two; place them at d1 and d2.
  return methods.movedim(m, { n - 1, n }, { d1, d2 })
end

-- diag([k=0]): a 1-D x gives the matrix with x on its k-th diagonal; a 2-D x its k-th
-- diagonal as a 1-D tensor.
function methods.diag(x, k)
  need_tensor('diag', x)
  k = k or 0
  need_int('diag', k, 'diagonal offset')
  if x:dim() == 1 then return methods.diag_embed(x, k) end
  if x:dim() == 2 then return methods.contiguous(methods.diagonal(x, k)) end
  fail('diag', ('expected a 1-D or 2-D tensor, got %d-d'):format(x:dim()))
end

-- trace(): the sum of the main diagonal of a 2-D tensor.
function methods.trace(x)
  need_tensor('trace', x)
  if x:dim() ~= 2 then fail('trace', ('expected a 2-D tensor, got %d-d'):format(x:dim())) end
  return methods.sum(methods.diagonal(x))
end

-- ---- tril_indices, triu_indices ----------------------------------------------------------------
-- tril_indices(row, col [, offset=0] [, opts]): a [2, N] int64 tensor of the 1-based
-- coordinates of the lower triangle (row by row), as PyTorch's plus one.
local function tri_indices(fn, lower)
  return function(row, col, offset, opts)
    if type(offset) == 'table' then opts, offset = offset, nil end
    offset = offset or 0
    need_int(fn, row, 'row count', 0)
    need_int(fn, col, 'column count', 0)
    need_int(fn, offset, 'offset')
    local rs, cs = {}, {}
    for i = 0, row - 1 do
      for j = 0, col - 1 do
        if (lower and j - i <= offset) or (not lower and j - i >= offset) then
          rs[#rs + 1], cs[#cs + 1] = i + 1, j + 1
        end
      end
    end
    opts = check_options(fn, opts, { 'dtype', 'device' })
    local o = { dtype = opts.dtype or 'int64', device = opts.device }
    if #rs == 0 then return creation.zeros(2, 0, o) end
    return creation.tensor({ rs, cs }, o)
  end
end
M.tril_indices = tri_indices('tril_indices', true)
M.triu_indices = tri_indices('triu_indices', false)

-- ---- unbind, unflatten, tensor_split ---------------------------------------------------------
-- unbind([dim=1]): a table of the slices along dim (views, dim removed).
function methods.unbind(x, dim)
  need_tensor('unbind', x)
  if x:dim() == 0 then fail('unbind', 'expected a tensor of at least 1 dim, got 0-d') end
  local d = pdim('unbind', dim or 1, x:dim())
  local r = {}
  for i = 1, x:size(d) do r[i] = methods.select(x, d, i) end
  return r
end

-- unflatten(dim, sizes): dim split into sizes (one may be -1).
function methods.unflatten(x, dim, sizes)
  need_tensor('unflatten', x)
  local n = x:dim()
  local d = pdim('unflatten', dim, n)
  if type(sizes) ~= 'table' or #sizes == 0 then
    fail('unflatten', 'expected a non-empty table of sizes, got ' .. type(sizes))
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x:size(i) end
  local known, infer = 1, nil
  for _, s in ipairs(sizes) do
    need_int('unflatten', s, 'size')
    if s == -1 then
      if infer then fail('unflatten', 'only one size can be -1') end
      infer = #shape + 1
    else
      known = known * s
    end
    shape[#shape + 1] = s
  end
  local size = n > 0 and x:size(d) or 1
  if infer and known ~= 0 then shape[infer] = size / known; known = known * shape[infer] end
  if known ~= size or (infer and shape[infer] ~= math.floor(shape[infer])) then
    local t = {}
    for i, s in ipairs(sizes) do t[i] = tostring(s) end
    fail('unflatten', ('sizes [%s] do not multiply to the size %d of dimension %d'):format(
      table.concat(t, ','), size, dim))
  end
  for i = d + 1, n do shape[#shape + 1] = x:size(i) end
  return methods.view(x, shape)
end

-- tensor_split(sections or split points [, dim=1]): a number n gives n pieces, the first
-- size % n one larger; a table of split points {i, j, ...} gives the pieces before element
-- i + 1, from i + 1 to j, ... (the same numbers as PyTorch's indices: x[:i], x[i:j], ...);
-- a 1-D integer tensor is read as that table.
function methods.tensor_split(x, spec, dim)
  need_tensor('tensor_split', x)
  if x:dim() == 0 then fail('tensor_split', 'expected a tensor of at least 1 dim, got 0-d') end
  local d = pdim('tensor_split', dim or 1, x:dim())
  local size = x:size(d)
  if is_tensor(spec) then
    if spec:is_floating_point() or spec:dim() > 1 then
      fail('tensor_split', 'expected a number or a 1-D integer tensor of split points')
    end
    spec = spec:dim() == 0 and spec:item() or spec:totable()
  end
  local bounds = { 0 }
  if type(spec) == 'number' then
    need_int('tensor_split', spec, 'number of sections', 1)
    local q, r = math.floor(size / spec), size % spec
    for i = 1, spec do bounds[i + 1] = bounds[i] + q + (i <= r and 1 or 0) end
  elseif type(spec) == 'table' then
    for i, p in ipairs(spec) do
      need_int('tensor_split', p, 'split point')
      bounds[i + 1] = p
    end
    bounds[#bounds + 1] = size
  else
    fail('tensor_split', 'expected a number of sections or a table of split points, got ' ..
      type(spec))
  end
  local parts = {}
  for i = 1, #bounds - 1 do
    -- Split points clamp to [0, size], and an earlier point after a later one gives an empty
    -- piece, as Python slicing.
    local a = math.min(math.max(bounds[i] < 0 and size + bounds[i] or bounds[i], 0), size)
    local b = math.min(math.max(bounds[i + 1] < 0 and size + bounds[i + 1] or bounds[i + 1], 0), size)
    parts[i] = methods.narrow(x, d, a + 1, math.max(b - a, 0))
  end
  return parts
end

-- ---- hstack, vstack, dstack, atleast_nd ------------------------------------------------------
local function atleast(n)
  return function(x)
    need_tensor('atleast_' .. n .. 'd', x)
    local d = x:dim()
    if d >= n then return x end
    if d == 0 then x = methods.view(x, { 1 }); d = 1 end
    if n >= 2 and d == 1 then x = methods.unsqueeze(x, 1); d = 2 end
    if n >= 3 and d == 2 then x = methods.unsqueeze(x, 3) end
    return x
  end
end
methods.atleast_1d, methods.atleast_2d, methods.atleast_3d = atleast(1), atleast(2), atleast(3)

local function stack_fn(fn, lift, dim_of)
  return function(list, ...)
    if is_tensor(list) then list = { list, ... } end
    if type(list) ~= 'table' or #list == 0 then
      fail(fn, 'expected a non-empty table of tensors')
    end
    local ts = {}
    for i, t in ipairs(list) do
      if not is_tensor(t) then fail(fn, ('expected a tensor at position %d, got %s'):format(i, type(t))) end
      ts[i] = lift(t)
    end
    return cat(ts, dim_of(ts[1]))
  end
end
M.hstack = stack_fn('hstack', atleast(1), function(t) return t:dim() == 1 and 1 or 2 end)
M.vstack = stack_fn('vstack', atleast(2), function() return 1 end)
M.dstack = stack_fn('dstack', atleast(3), function() return 3 end)
M.row_stack = M.vstack
M.column_stack = stack_fn('column_stack', function(t)
  if t:dim() <= 1 then return methods.reshape(t, { t:numel(), 1 }) end
  return t
end, function() return 2 end)

-- ---- tile, repeat_interleave, rot90 ----------------------------------------------------------
-- tile(reps): repeat, with reps padded by leading ones to x's rank (or x viewed with leading
-- size-1 dims when reps is longer).
function methods.tile(x, ...)
  need_tensor('tile', x)
  local reps = type(select(1, ...)) == 'table' and select(1, ...) or { ... }
  local r = {}
  for i = 1, math.max(x:dim() - #reps, 0) do r[i] = 1 end
  for _, v in ipairs(reps) do need_int('tile', v, 'repetition count', 0); r[#r + 1] = v end
  return methods.repeat_tensor(x, r)
end

-- repeat_interleave(repeats [, dim]): each element (each slice along dim; of the flattened x
-- without dim) repeated; repeats is a number or a 1-D integer tensor, one count per slice.
-- ember.repeat_interleave(counts) alone gives the 1-based indices repeated by counts.
function methods.repeat_interleave(x, repeats, dim)
  need_tensor('repeat_interleave', x)
  if repeats == nil then   -- repeat_interleave(counts): indices 1..n repeated counts[i] times
    repeats, x = x, nil
  end
  local counts
  if is_tensor(repeats) then
    if repeats:is_floating_point() or repeats:dim() > 1 then
      fail('repeat_interleave', 'expected repeats to be a number or a 1-D integer tensor')
    end
    counts = repeats:dim() == 0 and { repeats:item() } or repeats:totable()
  elseif type(repeats) == 'number' then
    need_int('repeat_interleave', repeats, 'repeat count', 0)
    counts = repeats
  else
    fail('repeat_interleave', 'expected repeats to be a number or a tensor, got ' .. type(repeats))
  end
  local device = x and x:device() or repeats:device()
  if x == nil then
    local idx = {}
    for i, c in ipairs(counts) do
      if c < 0 then fail('repeat_interleave', 'expected counts >= 0, got ' .. c) end
      for _ = 1, c do idx[#idx + 1] = i end
    end
    if #idx == 0 then return creation.zeros(0, { dtype = 'int64', device = device }) end
    return creation.tensor(idx, { dtype = 'int64', device = device })
  end
  if dim == nil then x = methods.reshape(x, { -1 }); dim = 1 end
  local d = pdim('repeat_interleave', dim, x:dim())
  local n = x:dim() == 0 and 1 or x:size(d)
  if x:dim() == 0 then x = methods.view(x, { 1 }) end
  if type(counts) == 'number' then
    local c = counts
    counts = {}
    for i = 1, n do counts[i] = c end
  elseif #counts == 1 and n ~= 1 then
    local c = counts[1]
    for i = 2, n do counts[i] = c end
  end
  if #counts ~= n then
    fail('repeat_interleave', ('expected %d repeat counts for dimension %d of size %d, got %d'):format(
      n, dim, n, #counts))
  end
  local idx = {}
  for i, c in ipairs(counts) do
    if c < 0 or c ~= math.floor(c) then
      fail('repeat_interleave', 'expected counts to be integers >= 0, got ' .. tostring(c))
    end
    for _ = 1, c do idx[#idx + 1] = i end
  end
  if #idx == 0 then return methods.narrow(x, d, 1, 0) end
  return methods.index_select(x, d, creation.tensor(idx, { dtype = 'int64', device = device }))
end
M.repeat_interleave = methods.repeat_interleave

-- rot90([k=1] [, dims={1, 2}]): rotated by 90 degrees k times, from the first dim toward the
-- second.
function methods.rot90(x, k, dims)
  need_tensor('rot90', x)
  k = k or 1
  need_int('rot90', k, 'number of turns')
  dims = dims or { 1, 2 }
  if type(dims) ~= 'table' or #dims ~= 2 then fail('rot90', 'expected dims to be a table of 2 dims') end
  if x:dim() < 2 then fail('rot90', ('expected a tensor of at least 2 dims, got %d-d'):format(x:dim())) end
  local a, b = pdim('rot90', dims[1], x:dim()), pdim('rot90', dims[2], x:dim())
  if a == b then fail('rot90', 'the two dims must differ, both are ' .. a) end
  k = k % 4
  if k == 0 then return methods.clone(x) end
  if k == 2 then return methods.flip(x, { a, b }) end
  if k == 1 then return methods.transpose(methods.flip(x, { b }), a, b) end
  return methods.flip(methods.transpose(x, a, b), { b })
end

-- ---- broadcasting --------------------------------------------------------------------------
-- broadcast_shapes(s1, s2, ...): the common shape (sizes as tables or ember.Size).
function M.broadcast_shapes(...)
  local out = {}
  local shapes = { ... }
  local rank = 0
  for _, s in ipairs(shapes) do rank = math.max(rank, #s) end
  for i = 1, rank do out[i] = 1 end
  for _, s in ipairs(shapes) do
    for j = 1, #s do
      local pos = rank - #s + j
      local v = s[j]
      if v ~= out[pos] then
        if out[pos] == 1 then out[pos] = v
        elseif v ~= 1 then
          error(('broadcast_shapes: shapes %s cannot broadcast (size %d against %d)'):format(
            tostring(setmetatable({ unpack(s) }, core.Size)), v, out[pos]), 3)
        end
      end
    end
  end
  return setmetatable(out, core.Size)
end

-- broadcast_to(shape): expand with leading dims added; -1 keeps a size.
function methods.broadcast_to(x, ...)
  need_tensor('broadcast_to', x)
  local shape = type(select(1, ...)) == 'table' and select(1, ...) or { ... }
  return methods.expand(x, shape)
end

-- broadcast_tensors(a, b, ...) or ({a, b, ...}): the tensors expanded to their common shape,
-- returned as a table.
function M.broadcast_tensors(first, ...)
  local list = is_tensor(first) and { first, ... } or first
  if type(list) ~= 'table' then fail('broadcast_tensors', 'expected tensors') end
  local shapes = {}
  for i, t in ipairs(list) do
    if not is_tensor(t) then
      fail('broadcast_tensors', ('expected a tensor at position %d, got %s'):format(i, type(t)))
    end
    shapes[i] = t:size()
  end
  local ok, shape = pcall(M.broadcast_shapes, unpack(shapes))
  if not ok then fail('broadcast_tensors', tostring(shape):gsub('^.-broadcast_shapes: ', '')) end
  local r = {}
  for i, t in ipairs(list) do r[i] = methods.expand(t, shape) end
  return r
end

-- meshgrid(t1, t2, ... [, {indexing='ij'|'xy'}]) or ({t1, ...}, opts): coordinate grids of
-- 1-D (or 0-d) tensors, as a table. 'ij' (the default, as PyTorch 1.13) gives [n1, n2, ...];
-- 'xy' swaps the first two dims.
function M.meshgrid(...)
  local args = { ... }
  local opts
  if #args > 0 and type(args[#args]) == 'table' and not is_tensor(args[#args]) and
    (args[#args].indexing ~= nil or next(args[#args]) == nil or #args > 1 and not is_tensor(args[#args][1])) then
    opts = table.remove(args)
  end
  if #args == 1 and type(args[1]) == 'table' and not is_tensor(args[1]) then args = args[1] end
  opts = check_options('meshgrid', opts, { 'indexing' })
  local indexing = opts.indexing or 'ij'
  if indexing ~= 'ij' and indexing ~= 'xy' then
    fail('meshgrid', "expected indexing 'ij' or 'xy', got " .. tostring(indexing))
  end
  if #args == 0 then fail('meshgrid', 'expected at least one tensor') end
  local ts, shape = {}, {}
  for i, t in ipairs(args) do
    if not is_tensor(t) then fail('meshgrid', ('expected a tensor at position %d, got %s'):format(i, type(t))) end
    if t:dim() > 1 then fail('meshgrid', ('expected 0-d or 1-D tensors, got %d-d at position %d'):format(t:dim(), i)) end
    ts[i] = methods.reshape(t, { -1 })
    shape[i] = ts[i]:numel()
  end
  local swap = indexing == 'xy' and #ts >= 2
  if swap then shape[1], shape[2] = shape[2], shape[1] end
  local r = {}
  for i, t in ipairs(ts) do
    local pos = i
    if swap and i <= 2 then pos = 3 - i end
    local v = {}
    for j = 1, #ts do v[j] = j == pos and shape[j] or 1 end
    r[i] = methods.expand(methods.view(t, v), shape)
  end
  return r
end

-- ---- as_strided ------------------------------------------------------------------------------
-- as_strided(size, stride [, offset]): a view of x's storage with these sizes and strides
-- (in elements) and offset (default x's own). Differentiable: the gradient gathers what each
-- element of x's storage received.
local function storage_positions(sizes, strides, offset, device)
  local pos = creation.full({}, offset, { dtype = 'int64', device = device })
  for i = 1, #sizes do
    local shape = {}
    for j = 1, #sizes do shape[j] = j == i and sizes[i] or 1 end
    local ar = creation.arange(0, sizes[i], 1, { dtype = 'int64', device = device })
    pos = pos + methods.view(ar * strides[i], shape)
  end
  return pos   -- broadcast to exactly `sizes`
end

-- One past the last storage element a geometry reaches.
local function storage_span(sizes, strides, offset)
  local hi = offset
  for i = 1, #sizes do
    if sizes[i] == 0 then return 0 end
    hi = hi + (sizes[i] - 1) * strides[i]
  end
  return hi + 1
end

local raw_as_strided = function(x, sizes, strides, offset)
  local n = #sizes
  local cs, cst = core.ffi.new('int64_t[8]'), core.ffi.new('int64_t[8]')
  for i = 1, n do cs[i - 1], cst[i - 1] = sizes[i], strides[i] end
  return core.own(C.em_as_strided(x.ptr, n, cs, cst, offset))
end

local AsStrided
function methods.as_strided(x, size, stride, offset)
  need_tensor('as_strided', x)
  if type(size) ~= 'table' or type(stride) ~= 'table' then
    fail('as_strided', 'expected tables of sizes and strides')
  end
  if #size ~= #stride then
    fail('as_strided', ('expected as many strides as sizes, got %d and %d'):format(#stride, #size))
  end
  if #size > 8 then fail('as_strided', 'expected at most 8 dimensions') end
  for i = 1, #size do
    need_int('as_strided', size[i], 'size', 0)
    need_int('as_strided', stride[i], 'stride', 0)
  end
  offset = offset or x:storage_offset()
  need_int('as_strided', offset, 'offset', 0)
  if not (x.requires_grad and C.em_grad_enabled() ~= 0) then
    return raw_as_strided(x, size, stride, offset)
  end
  AsStrided = AsStrided or require('ember.autograd.function').Function{
    name = 'AsStridedBackward',
    forward = function(ctx, t, sz, st, off)
      ctx.sz, ctx.st, ctx.off = sz, st, off
      ctx.xsz, ctx.xst, ctx.xoff = t:size(), t:stride(), t:storage_offset()
      ctx.nstore = math.max(storage_span(sz, st, off), storage_span(ctx.xsz, ctx.xst, ctx.xoff))
      return raw_as_strided(t, sz, st, off)
    end,
    backward = function(ctx, g)
      local dev = g:device()
      local flat = creation.zeros(ctx.nstore, { dtype = g:dtype(), device = dev })
      local into = storage_positions(ctx.sz, ctx.st, ctx.off, dev)
      if g:numel() > 0 then
        flat = methods.index_add(flat, 1, methods.reshape(into, { -1 }) + 1, methods.reshape(g, { -1 }))
      end
      local from = storage_positions(ctx.xsz, ctx.xst, ctx.xoff, dev)
      if from:numel() == 0 then
        return creation.zeros(ctx.xsz, { dtype = g:dtype(), device = dev }), nil, nil, nil
      end
      return methods.view(methods.index_select(flat, 1, methods.reshape(from, { -1 }) + 1), ctx.xsz),
        nil, nil, nil
    end,
  }
  return AsStrided(x, size, stride, offset)
end

-- ---- new_*, type_as --------------------------------------------------------------------------
local function new_opts(fn, x, opts)
  local o = { dtype = x:dtype(), device = x:device() }
  for k, v in pairs(check_options(fn, opts, { 'dtype', 'device', 'requires_grad' }, 3)) do
    o[k] = v
  end
  return o
end

-- Sizes as varargs or a table, then an optional options table.
local function sizes_and_opts(...)
  local args = { ... }
  local opts
  local n = select('#', ...)
  local last = args[n]
  if n > 0 and type(last) == 'table' and getmetatable(last) ~= core.Size and last[1] == nil and
    next(last) ~= nil then
    opts = args[n]
    args[n] = nil
  end
  if type(args[1]) == 'table' then return args[1], opts end
  return args, opts
end

local function finish(t, o)
  if o.requires_grad then t.requires_grad = true end
  return t
end

for name, fn in pairs({ new_zeros = creation.zeros, new_ones = creation.ones, new_empty = creation.empty }) do
  methods[name] = function(x, ...)
    need_tensor(name, x)
    local sizes, opts = sizes_and_opts(...)
    local o = new_opts(name, x, opts)
    return finish(fn(sizes, { dtype = o.dtype, device = o.device }), o)
  end
end

function methods.new_full(x, sizes, value, opts)
  need_tensor('new_full', x)
  local o = new_opts('new_full', x, opts)
  return finish(creation.full(sizes, value, { dtype = o.dtype, device = o.device }), o)
end

function methods.new_tensor(x, data, opts)
  need_tensor('new_tensor', x)
  local o = new_opts('new_tensor', x, opts)
  if is_tensor(data) then
    return finish(methods.clone(methods.to(methods.detach(data), { dtype = o.dtype, device = o.device })), o)
  end
  return finish(creation.tensor(data, { dtype = o.dtype, device = o.device }), o)
end

function methods.type_as(x, other)
  need_tensor('type_as', x)
  need_tensor('type_as', other, 'the other tensor')
  return methods.to(x, other:dtype())
end

-- ---- logspace --------------------------------------------------------------------------------
-- logspace(start, end [, steps=100] [, base=10] [, opts]): base ^ linspace(start, end, steps),
-- computed in float64 and rounded once to the dtype.
function M.logspace(start, stop, steps, base, opts)
  if type(steps) == 'table' then opts, steps, base = steps, nil, nil end
  if type(base) == 'table' then opts, base = base, nil end
  if type(start) ~= 'number' or type(stop) ~= 'number' then
    error('logspace: expected numbers for start and end', 2)
  end
  steps = steps or 100
  base = base or 10
  if type(base) ~= 'number' then error('logspace: expected a number for base, got ' .. type(base), 2) end
  if type(steps) ~= 'number' or steps ~= math.floor(steps) or steps < 0 then
    error('logspace: expected an integer number of steps >= 0, got ' .. tostring(steps), 2)
  end
  opts = check_options('logspace', opts, { 'dtype', 'device' })
  local dtype = opts.dtype or core.dtype_names[core.default_dtype]
  local e = creation.linspace(start, stop, steps, { dtype = 'float64' })
  local r = methods.pow(base, e)
  return methods.to(methods.to(r, dtype), opts.device or core.device_name(C.em_default_device()))
end

-- Errors of the ops inside carry these functions' names.
local as_op = require 'ember.util.as_op'
as_op.wrap_all(methods, { 'diagonal', 'diag_embed', 'diag', 'trace', 'movedim', 'unflatten',
  'tensor_split', 'tile', 'repeat_interleave', 'rot90', 'broadcast_to', 'as_strided' })
as_op.wrap_all(M, { 'hstack', 'vstack', 'dstack', 'column_stack', 'meshgrid' })
M.row_stack = M.vstack
M.repeat_interleave = methods.repeat_interleave
methods.moveaxis = methods.movedim

return M
