-- ember.ops.index: indexing (index_select, gather, scatter, index_add/copy/fill, masked_select,
-- nonzero), joining and splitting (cat, stack, split, chunk), reordering (flip, roll, repeat,
-- tril, triu) and sorting (sort, argsort, topk, unique).
--
-- Lua is 1-based, C is 0-based. Index tensors and tables given here are 1-based and are
-- shifted down by one before the C call; results that are indices (sort's, topk's, nonzero's,
-- unique's inverse) are shifted up. Error messages from these C ops speak C (0-based dims and
-- indices), so they are translated back before they reach the user: "index 5 is out of bounds
-- for dimension 0" becomes "index 6 is out of bounds for dimension 1".
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, cdim = core.C, core.cdim
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

-- ---- errors in Lua's terms ------------------------------------------------------------------
local function lua_message(msg)
  -- a GPU's deferred report of an earlier op, surfacing in this op's synchronization
  if msg:find('reported at its next synchronization', 1, true) then return core.lua_terms(msg) end
  msg = msg:gsub('index (%-?%d+) is out of bounds', function(i)
    return 'index ' .. (tonumber(i) + 1) .. ' is out of bounds'
  end)
  msg = msg:gsub('dimension (%d+)', function(d) return 'dimension ' .. (tonumber(d) + 1) end)
  msg = msg:gsub('number (%d+) in the list', function(i)
    return 'number ' .. (tonumber(i) + 1) .. ' in the list'
  end)
  return msg
end
M._lua_message = lua_message

local function raise(level)
  error(lua_message(ffi.string(C.em_last_error())), level + 1)
end

-- Like core.own (retry once after a collection when memory ran out), with Lua-terms errors.
local function own(p, retry_fn, ...)
  if p == nil and retry_fn and C.em_last_error_kind() == C.EM_ERR_OOM then
    core.collect()
    p = retry_fn(...)
  end
  if p == nil then raise(3) end
  return core.own(p)
end

local function check(rc)
  if rc ~= 0 then raise(3) end
end

local function argerror(fn, msg) error(fn .. ': ' .. msg, 3) end

-- ---- index arguments ------------------------------------------------------------------------
local int_dtypes = {
  [C.EM_INT8] = true, [C.EM_UINT8] = true, [C.EM_INT16] = true, [C.EM_INT32] = true,
  [C.EM_INT64] = true,
}

local function check_integral(fn, v)
  if type(v) ~= 'number' or v ~= math.floor(v) or v ~= v then
    argerror(fn, 'expected integer indices, got ' .. tostring(v))
  end
end

-- Walks a nested table of indices, checking each is an integer.
local function check_table(fn, t)
  for i = 1, #t do
    local v = t[i]
    if type(v) == 'table' then check_table(fn, v) else check_integral(fn, v) end
  end
end

local idx_sizes = ffi.new('int64_t[1]')

-- A 0-based int64 index tensor on `device` from a 1-based tensor, table or number.
local function c_index(fn, idx, device)
  if is_tensor(idx) then
    local dt = idx.ptr.dtype_id
    if not int_dtypes[dt] then
      argerror(fn, 'expected an integer index tensor, got ' .. core.dtype_names[dt])
    end
    local p = idx.ptr
    local wide
    if dt ~= C.EM_INT64 then
      wide = own(C.em_to_dtype(p, C.EM_INT64))
      p = wide.ptr
    end
    return own(C.em_binary_scalar(C.EM_SUB, p, 1, 0))
  end
  if type(idx) == 'number' then idx = { idx } end
  if type(idx) ~= 'table' then
    argerror(fn, 'expected an index tensor or a table of indices, got ' .. type(idx))
  end
  if idx[1] == nil or type(idx[1]) == 'number' then -- flat: straight into an int64 buffer
    local n = #idx
    local buf = ffi.new('int64_t[?]', math.max(n, 1))
    for i = 1, n do
      check_integral(fn, idx[i])
      buf[i - 1] = idx[i] - 1
    end
    idx_sizes[0] = n
    return own(C.em_from_buffer(buf, C.EM_INT64, 1, idx_sizes, C.EM_INT64, device))
  end
  check_table(fn, idx)
  local t = require('ember.creation').tensor(idx, { dtype = 'int64', device = device })
  check(C.em_binary_scalar_(C.EM_SUB, t.ptr, 1))
  return t
end

-- Shifts a C index result up to Lua's 1-based convention, in place.
local function one_based(t)
  check(C.em_binary_scalar_(C.EM_ADD, t.ptr, 1))
  return t
end

-- A source operand: a tensor, or a number as a 0-d tensor of x's dtype.
local function c_source(fn, x, src)
  if is_tensor(src) then return src end
  if type(src) == 'boolean' then src = src and 1 or 0 end
  if type(src) ~= 'number' then argerror(fn, 'expected a tensor or a number, got ' .. type(src)) end
  return own(C.em_scalar_tensor(src, x.ptr.dtype_id, x.ptr.device_id, 1))
end

local function fill_value(fn, v)
  if type(v) == 'boolean' then return v and 1 or 0 end
  if is_tensor(v) then return methods.item(v) end
  if type(v) ~= 'number' then argerror(fn, 'expected a number, got ' .. type(v)) end
  return v
end

-- ---- index_select, gather, scatter ----------------------------------------------------------
function methods.index_select(x, dim, index)
  local d = cdim(dim, 'index_select')
  local i = c_index('index_select', index, x.ptr.device_id)
  return own(C.em_index_select(x.ptr, d, i.ptr), C.em_index_select, x.ptr, d, i.ptr)
end
methods.index = methods.index_select   -- Torch7's name

function methods.gather(x, dim, index)
  local d = cdim(dim, 'gather')
  local i = c_index('gather', index, x.ptr.device_id)
  return own(C.em_gather(x.ptr, d, i.ptr), C.em_gather, x.ptr, d, i.ptr)
end

local function scatter_pair(name, cnew, cinplace)
  methods[name] = function(x, dim, index, src)
    local d = cdim(dim, name)
    local i = c_index(name, index, x.ptr.device_id)
    local s = c_source(name, x, src)
    return own(cnew(x.ptr, d, i.ptr, s.ptr), cnew, x.ptr, d, i.ptr, s.ptr)
  end
  methods[name .. '_'] = function(x, dim, index, src)
    local d = cdim(dim, name .. '_')
    local i = c_index(name .. '_', index, x.ptr.device_id)
    local s = c_source(name .. '_', x, src)
    check(cinplace(x.ptr, d, i.ptr, s.ptr))
    return x
  end
end
scatter_pair('scatter', C.em_scatter, C.em_scatter_)
scatter_pair('scatter_add', C.em_scatter_add, C.em_scatter_add_)

-- ---- index_add, index_copy, index_fill ------------------------------------------------------
function methods.index_add(x, dim, index, src, alpha)
  local d = cdim(dim, 'index_add')
  local i = c_index('index_add', index, x.ptr.device_id)
  local s = c_source('index_add', x, src)
  alpha = alpha or 1
  return own(C.em_index_add(x.ptr, d, i.ptr, s.ptr, alpha), C.em_index_add, x.ptr, d, i.ptr,
    s.ptr, alpha)
end

function methods.index_add_(x, dim, index, src, alpha)
  local d = cdim(dim, 'index_add_')
  local i = c_index('index_add_', index, x.ptr.device_id)
  local s = c_source('index_add_', x, src)
  check(C.em_index_add_(x.ptr, d, i.ptr, s.ptr, alpha or 1))
  return x
end

function methods.index_copy(x, dim, index, src)
  local d = cdim(dim, 'index_copy')
  local i = c_index('index_copy', index, x.ptr.device_id)
  local s = c_source('index_copy', x, src)
  return own(C.em_index_copy(x.ptr, d, i.ptr, s.ptr), C.em_index_copy, x.ptr, d, i.ptr, s.ptr)
end

function methods.index_copy_(x, dim, index, src)
  local d = cdim(dim, 'index_copy_')
  local i = c_index('index_copy_', index, x.ptr.device_id)
  local s = c_source('index_copy_', x, src)
  check(C.em_index_copy_(x.ptr, d, i.ptr, s.ptr))
  return x
end

function methods.index_fill(x, dim, index, value)
  local d = cdim(dim, 'index_fill')
  local i = c_index('index_fill', index, x.ptr.device_id)
  local v = fill_value('index_fill', value)
  return own(C.em_index_fill(x.ptr, d, i.ptr, v), C.em_index_fill, x.ptr, d, i.ptr, v)
end

function methods.index_fill_(x, dim, index, value)
  local d = cdim(dim, 'index_fill_')
  local i = c_index('index_fill_', index, x.ptr.device_id)
  check(C.em_index_fill_(x.ptr, d, i.ptr, fill_value('index_fill_', value)))
  return x
end

-- Torch7's names for these were in place.
methods.indexAdd = methods.index_add_
methods.indexCopy = methods.index_copy_
methods.indexFill = methods.index_fill_

-- ---- masked_select, nonzero -----------------------------------------------------------------
function methods.masked_select(x, mask)
  if not is_tensor(mask) then
    argerror('masked_select', 'expected a bool mask tensor, got ' .. type(mask))
  end
  return own(C.em_masked_select(x.ptr, mask.ptr), C.em_masked_select, x.ptr, mask.ptr)
end
methods.maskedSelect = methods.masked_select

-- nonzero() -> [count, ndim] 1-based coordinates; nonzero{as_tuple = true} -> one 1-D tensor
-- of coordinates per dimension.
function methods.nonzero(x, opts)
  local r = one_based(own(C.em_nonzero(x.ptr), C.em_nonzero, x.ptr))
  if type(opts) == 'table' and opts.as_tuple then
    local cols = {}
    for j = 1, x.ptr.ndim do cols[j] = methods.contiguous(methods.select(r, 2, j)) end
    return cols
  end
  return r
end

-- ---- cat, stack, split, chunk ---------------------------------------------------------------
-- cat({a, b, ...} [, dim]) or cat(a, b, ... [, dim]); dim defaults to 1.
local function tensor_list(fn, first, ...)
  local list, dim
  if is_tensor(first) then
    list = { first }
    local n = select('#', ...)
    for k = 1, n do
      local v = select(k, ...)
      if is_tensor(v) then list[#list + 1] = v
      elseif k == n then dim = v
      else argerror(fn, 'expected tensors, got ' .. type(v) .. ' at position ' .. (k + 1)) end
    end
  elseif type(first) == 'table' then
    list, dim = first, select(1, ...)
    if #list == 0 then argerror(fn, 'expected a non-empty list of tensors') end
  else
    argerror(fn, 'expected a list of tensors, got ' .. type(first))
  end
  local n = #list
  local arr = ffi.new('em_tensor*[?]', n)
  for k = 1, n do
    if not is_tensor(list[k]) then
      argerror(fn, 'expected tensors, got ' .. type(list[k]) .. ' at position ' .. k)
    end
    arr[k - 1] = list[k].ptr
  end
  return n, arr, cdim(dim or 1, fn), list
end

function M.cat(...)
  local n, arr, d, keep = tensor_list('cat', ...)
  local r = own(C.em_cat(n, arr, d), C.em_cat, n, arr, d)
  local _ = keep
  return r
end
methods.cat = M.cat

function M.stack(...)
  local n, arr, d, keep = tensor_list('stack', ...)
  local r = own(C.em_stack(n, arr, d), C.em_stack, n, arr, d)
  local _ = keep
  return r
end
methods.stack = M.stack

local function dim_size(fn, x, dim)
  local nd = x.ptr.ndim
  local d = cdim(dim, fn)
  if d < 0 then d = d + nd end
  if d < 0 or d >= nd then
    argerror(fn, ('dimension %d out of range for a %d-d tensor'):format(dim, nd))
  end
  return tonumber(x.ptr.sizes[d])
end

-- split(size) -> views of `size` along dim (the last may be smaller); split({s1, s2, ...}) ->
-- views of those sizes, which must add up to the dimension's size. dim defaults to 1.
function methods.split(x, sizes, dim)
  dim = dim or 1
  local n = dim_size('split', x, dim)
  local parts = {}
  if type(sizes) == 'number' then
    if sizes ~= math.floor(sizes) or sizes <= 0 then
      argerror('split', 'expected a positive integer size, got ' .. tostring(sizes))
    end
    local start = 1
    repeat
      local len = math.min(sizes, n - start + 1)
      parts[#parts + 1] = methods.narrow(x, dim, start, len)
      start = start + len
    until start > n
  elseif type(sizes) == 'table' then
    local total = 0
    for _, s in ipairs(sizes) do
      if type(s) ~= 'number' or s ~= math.floor(s) or s < 0 then
        argerror('split', 'expected sizes >= 0, got ' .. tostring(s))
      end
      total = total + s
    end
    if total ~= n then
      argerror('split', ('sizes add up to %d, but dimension %d has size %d'):format(total, dim, n))
    end
    local start = 1
    for _, s in ipairs(sizes) do
      parts[#parts + 1] = methods.narrow(x, dim, start, s)
      start = start + s
    end
  else
    argerror('split', 'expected a size or a table of sizes, got ' .. type(sizes))
  end
  return parts
end

-- chunk(n) -> at most n views of equal size (the last may be smaller), as PyTorch's chunk.
function methods.chunk(x, chunks, dim)
  dim = dim or 1
  if type(chunks) ~= 'number' or chunks ~= math.floor(chunks) or chunks <= 0 then
    argerror('chunk', 'expected a positive number of chunks, got ' .. tostring(chunks))
  end
  local n = dim_size('chunk', x, dim)
  if n == 0 then -- PyTorch: n empty pieces of a zero-size dim
    local parts = {}
    for i = 1, chunks do parts[i] = methods.narrow(x, dim, 1, 0) end
    return parts
  end
  return methods.split(x, math.ceil(n / chunks), dim)
end

-- ---- flip, roll, repeat, tril, triu ---------------------------------------------------------
function methods.flip(x, ...)
  if select('#', ...) == 0 then argerror('flip', 'expected the dimensions to flip') end
  local n, dims = tensor.parse_dims('flip', ...)
  return own(C.em_flip(x.ptr, n, dims), C.em_flip, x.ptr, n, dims)
end

local roll_shifts = ffi.new('int64_t[8]')
local roll_dims = ffi.new('int[8]')

-- roll(shifts [, dims]): without dims the flattened tensor rolls.
function methods.roll(x, shifts, dims)
  local sh = type(shifts) == 'table' and shifts or { shifts }
  if #sh == 0 or #sh > 8 then argerror('roll', 'expected 1 to 8 shifts') end
  for k = 1, #sh do
    check_integral('roll', sh[k])
    roll_shifts[k - 1] = sh[k]
  end
  if dims == nil then
    return own(C.em_roll(x.ptr, #sh, roll_shifts, nil))
  end
  local ds = type(dims) == 'table' and dims or { dims }
  if #ds ~= #sh then
    argerror('roll', ('expected as many dims as shifts, got %d shifts and %d dims'):format(
      #sh, #ds))
  end
  for k = 1, #ds do roll_dims[k - 1] = cdim(ds[k], 'roll') end
  return own(C.em_roll(x.ptr, #sh, roll_shifts, roll_dims))
end

-- x:repeat_tensor(2, 3) or x['repeat'](x, {2, 3}): `repeat` is a Lua keyword.
function methods.repeat_tensor(x, ...)
  local n, sizes = core.parse_sizes('repeat', ...)
  return own(C.em_repeat(x.ptr, n, sizes), C.em_repeat, x.ptr, n, sizes)
end
methods['repeat'] = methods.repeat_tensor
methods.repeatTensor = methods.repeat_tensor

local function triangle(name, cfun)
  methods[name] = function(x, k)
    k = k or 0
    check_integral(name, k)
    return own(cfun(x.ptr, k), cfun, x.ptr, k)
  end
  methods[name .. '_'] = function(x, k)
    local r = methods[name](x, k)
    check(C.em_copy_(x.ptr, r.ptr))
    return x
  end
end
triangle('tril', C.em_tril)
triangle('triu', C.em_triu)

-- ---- sort, argsort, topk, unique ------------------------------------------------------------
local slots = core.out_slots

-- (dim, descending) with both optional: sort(), sort(2), sort(true), sort(2, true).
local function sort_args(fn, dim, descending)
  if type(dim) == 'boolean' then dim, descending = nil, dim end
  return cdim(dim or -1, fn), descending and 1 or 0
end

function methods.sort(x, dim, descending)
  local d, desc = sort_args('sort', dim, descending)
  check(C.em_sort(x.ptr, d, desc, slots, slots + 1))
  local v, i = core.take_out(0), core.take_out(1)
  return v, one_based(i)
end

function methods.argsort(x, dim, descending)
  local d, desc = sort_args('argsort', dim, descending)
  return one_based(own(C.em_argsort(x.ptr, d, desc), C.em_argsort, x.ptr, d, desc))
end

-- topk(k [, dim [, largest [, sorted]]]): the k largest (or smallest) along dim (default the
-- last), sorted; values and 1-based indices.
function methods.topk(x, k, dim, largest, sorted)
  check_integral('topk', k)
  local d = cdim(dim or -1, 'topk')
  local big = largest == nil or largest
  local keep_sorted = (sorted == nil or sorted) and 1 or 0
  check(C.em_topk(x.ptr, k, d, big and 1 or 0, keep_sorted, slots, slots + 1))
  local v, i = core.take_out(0), core.take_out(1)
  return v, one_based(i)
end

-- unique{return_inverse = bool, return_counts = bool} -> values [, inverse] [, counts].
function methods.unique(x, opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    argerror('unique', 'expected an options table, got ' .. type(opts))
  end
  require('ember.util.names').check_options('unique', opts, { 'return_inverse', 'return_counts' })
  local want_inv = opts.return_inverse and true or false
  local want_cnt = opts.return_counts and true or false
  check(C.em_unique(x.ptr, slots, want_inv and slots + 1 or nil, want_cnt and slots + 2 or nil))
  local v, inv, cnt = core.take_out(0), core.take_out(1), core.take_out(2)
  if inv then one_based(inv) end
  if want_inv and want_cnt then return v, inv, cnt end
  if want_inv then return v, inv end
  if want_cnt then return v, cnt end
  return v
end

-- ---- ember.<name> functions -----------------------------------------------------------------
for _, name in ipairs({ 'index_select', 'gather', 'scatter', 'scatter_add', 'index_add',
  'index_copy', 'index_fill', 'masked_select', 'nonzero', 'split', 'chunk', 'flip', 'roll',
  'repeat_tensor', 'repeatTensor', 'tril', 'triu', 'sort', 'argsort', 'topk', 'unique' }) do
  M[name] = methods[name]
end
M['repeat'] = methods['repeat']

return M
