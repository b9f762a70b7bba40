-- ember.quant: block-quantized weights (docs/api/quant.md; the decision in docs/design.md).
--
--   ember.quant.quantize(x, {format=, group=, symmetric=})  a tensor of a block dtype
--   q:dequantize({dtype=})                                  a dense tensor on q's device
--   q:weight_size([dim])                                    the weights' shape (size counts blocks)
--   ember.quant.linear(x, w [, bias])                       x W^T + b, W quantized
--   ember.quant.quantize_model(model, {format=, ...})      Linear and Embedding layers replaced
--                                                           in place (lua/ember/quant/model.lua)
--   ember.quant.from_blocks(bytes, {format=, shape=, ...})  raw GGUF-layout bytes as a tensor
--   ember.quant.bytes(q)                                    the blocks' bytes, a uint8 view
--
-- A quantized tensor is an ordinary tensor whose dtype is a block: q8_0, q4_0, q4_1, q4_k,
-- q6_k (GGUF's layouts) or int8/int4 per group (int8_g64, int4_g32_sym ...). Its element is one
-- block, so x:size() counts blocks along the last dimension and x:weight_size() the weights.
-- Copies, views along whole blocks, index_select, :to(device), ember.save/load work as for any
-- tensor; arithmetic raises "not implemented for <dtype>". The ops are C (runtime/src/ops/
-- quant.c and the kernels of each device); this file parses options and names formats.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local names = require 'ember.util.names'

local C, own = core.C, core.own
local methods = tensor.methods
local M = {}

local FIXED = { q8_0 = true, q4_0 = true, q4_1 = true, q4_k = true, q6_k = true }
local AFFINE = { int8 = true, int4 = true }
local FORMAT_NAMES = { 'int4', 'int8', 'q4_0', 'q4_1', 'q4_k', 'q6_k', 'q8_0' }
M.formats = FORMAT_NAMES

-- The block dtype's name for a format and its options.
function M.dtype_for(format, group, symmetric)
  if FIXED[format] then return format end
  return ('%s_g%d%s'):format(format, group or 64, symmetric and '_sym' or '')
end

-- format, group, symmetric of a block dtype name (nil for a dense one).
function M.format_of(dtype)
  if FIXED[dtype] then return dtype, 0, false end
  local f, g, s = dtype:match('^(int[48])_g(%d+)(.*)$')
  if not f then return nil end
  return f, tonumber(g), s == '_sym'
end

local function is_block_id(id) return C.em_dtype_is_block(id) ~= 0 end
function M.is_quantized(x) return tensor.is_tensor(x) and is_block_id(x.ptr.dtype_id) end
-- Weights per block of a block dtype (1 for a dense one).
function M.block_elems(dtype)
  return tonumber(C.em_dtype_block_elems(core.dtype_id(dtype, 'ember.quant.block_elems')))
end

-- Checks format / group / symmetric from an options table (fn names the caller in errors).
local function parse_format(fn, opts, level)
  local fmt = opts.format
  if type(fmt) ~= 'string' or not (FIXED[fmt] or AFFINE[fmt]) then
    error(('%s: expected format to be one of %s, got %s%s'):format(fn,
      table.concat(FORMAT_NAMES, ', '), type(fmt) == 'string' and ("'" .. fmt .. "'") or tostring(fmt),
      type(fmt) == 'string' and names.hint(fmt, FORMAT_NAMES) or ''), level + 1)
  end
  local group, sym = opts.group, opts.symmetric
  if AFFINE[fmt] then
    group = group == nil and 64 or group
    if group ~= 32 and group ~= 64 and group ~= 128 then
      error(('%s: expected group to be 32, 64 or 128, got %s'):format(fn, tostring(group)), level + 1)
    end
    if sym ~= nil and type(sym) ~= 'boolean' then
      error(('%s: expected symmetric to be a boolean, got %s'):format(fn, type(sym)), level + 1)
    end
    sym = sym == true
  elseif group ~= nil or sym ~= nil then
    error(("%s: format '%s' has a fixed block: group and symmetric apply to int8 and int4 only")
      :format(fn, fmt), level + 1)
  end
  return M.dtype_for(fmt, group, sym)
end
M.parse_format = parse_format

-- C's message without the op name, under fn's.
local function raise_as(fn, op, level)
  local msg = ffi.string(C.em_last_error()):gsub('^' .. op .. ': ', '')
  error(('%s: %s'):format(fn, msg), level + 1)
end

function M.quantize(x, opts)
  local fn = 'ember.quant.quantize'
  if not tensor.is_tensor(x) then
    error(('%s: expected a tensor, got %s'):format(fn, type(x)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, group = true, symmetric = true })
  local dtype = parse_format(fn, opts, 2)
  local r = C.em_quantize(x.ptr, core.dtype_id(dtype, fn))
  if r == nil then raise_as(fn, 'quantize', 2) end
  return own(r)
end

-- x quantized into the block dtype named dtype (q4_k, int8_g64_sym ...).
function M.quantize_as(x, dtype)
  local r = C.em_quantize(x.ptr, core.dtype_id(dtype, 'ember.quant.quantize'))
  if r == nil then raise_as('ember.quant.quantize', 'quantize', 2) end
  return own(r)
end

-- Raw blocks (a uint8 tensor, e.g. read from a file, bytes in GGUF's layout) as a tensor of the
-- block dtype: opts.format, opts.shape (the weights' shape, its last dimension whole blocks),
-- and for int8/int4 group and symmetric.
function M.from_blocks(bytes, opts)
  local fn = 'ember.quant.from_blocks'
  if not tensor.is_tensor(bytes) or bytes:dtype() ~= 'uint8' then
    error(('%s: expected a uint8 tensor of blocks, got %s'):format(fn,
      tensor.is_tensor(bytes) and bytes:dtype() or type(bytes)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, group = true, symmetric = true, shape = true })
  local shape = opts.shape
  local dtype = parse_format(fn, { format = opts.format, group = opts.group,
    symmetric = opts.symmetric }, 2)
  if type(shape) ~= 'table' or #shape == 0 then
    error(('%s: expected shape to be a list of sizes, got %s'):format(fn, type(shape)), 2)
  end
  local id = core.dtype_id(dtype, fn)
  local be, bb = tonumber(C.em_dtype_block_elems(id)), tonumber(C.em_dtype_size(id))
  local n, cols = 1, shape[#shape]
  for i, v in ipairs(shape) do
    if type(v) ~= 'number' or v < 0 or v % 1 ~= 0 then
      error(('%s: expected shape[%d] to be a size, got %s'):format(fn, i, tostring(v)), 2)
    end
    n = n * v
  end
  if cols % be ~= 0 then
    error(('%s: expected the last dimension to be a multiple of %d (the %s block), got %d')
      :format(fn, be, dtype, cols), 2)
  end
  if bytes:numel() ~= n / be * bb then
    error(('%s: expected %d bytes of %s blocks for shape [%s], got %d'):format(fn, n / be * bb,
      dtype, table.concat(shape, ', '), bytes:numel()), 2)
  end
  local sizes = {}
  for i, v in ipairs(shape) do sizes[i] = v end
  sizes[#sizes] = cols / be * bb
  local b = bytes:contiguous():view(unpack(sizes))
  return own(C.em_view_dtype(b.ptr, id))
end

-- The blocks' bytes: a uint8 view whose last dimension is in bytes (a copy when q's last
-- dimension is not contiguous).
function M.bytes(q)
  if not M.is_quantized(q) then
    error(('ember.quant.bytes: expected a quantized tensor, got %s'):format(
      tensor.is_tensor(q) and q:dtype() or type(q)), 2)
  end
  if q:dim() == 0 then q = q:view(1) end
  if q:dim() > 0 and q:size(q:dim()) > 1 and q:stride(q:dim()) ~= 1 then q = q:contiguous() end
  return own(C.em_view_dtype(q.ptr, C.EM_UINT8))
end

-- ---- methods of block tensors ---------------------------------------------------------------
-- q:dequantize({dtype=}): the weights, float32 unless dtype says (float16, bfloat16, float64).
function methods.dequantize(q, opts)
  local fn = 'dequantize'
  opts = names.check_options(fn, opts, { dtype = true })
  local dt = core.dtype_id(opts.dtype or 'float32', fn)
  local r = C.em_dequantize(q.ptr, dt)
  if r == nil then core.raise(2) end
  return own(r)
end

-- The shape in weights: size() with the last dimension times the block's weights.
function methods.weight_size(x, d)
  local s = x:size()
  if #s > 0 then s[#s] = s[#s] * tonumber(C.em_dtype_block_elems(x.ptr.dtype_id)) end
  if d == nil then return s end
  local i = d > 0 and d or #s + d + 1
  if i < 1 or i > #s then
    error(('weight_size: dimension %d out of range for a %d-d tensor'):format(d, #s), 2)
  end
  return s[i]
end
function methods.is_quantized(x) return is_block_id(x.ptr.dtype_id) end
-- Bytes of the elements (the weight memory of a quantized tensor).
function methods.nbytes(x) return x:numel() * tonumber(C.em_dtype_size(x.ptr.dtype_id)) end

-- x [..., K] (floating) times a quantized weight w [N, K] (in weights), as nn.Linear: [..., N],
-- plus bias. The device's quant_linear kernel; none for the format: "not implemented on <device>".
function M.linear(x, w, bias)
  local fn = 'ember.quant.linear'
  if not tensor.is_tensor(x) then error(('%s: expected x to be a tensor, got %s'):format(fn, type(x)), 2) end
  if not M.is_quantized(w) then
    error(('%s: expected w to be a quantized tensor, got %s'):format(fn,
      tensor.is_tensor(w) and w:dtype() or type(w)), 2)
  end
  if bias ~= nil and not tensor.is_tensor(bias) then
    error(('%s: expected bias to be a tensor or nil, got %s'):format(fn, type(bias)), 2)
  end
  local r = C.em_linear_quantized(x.ptr, w.ptr, bias and bias.ptr or nil)
  if r == nil then raise_as(fn, 'linear', 2) end
  return own(r)
end

-- ember.quant.quantize_model(model, {format=, modules=, verbose=}): lua/ember/quant/model.lua.
function M.quantize_model(model, opts)
  return require('ember.quant.model').quantize_model(model, opts)
end

-- Checkpoints: ember.save / ember.load keep block dtypes (serialize.lua); these remain as
-- names of the same functions.
function M.save(path, obj) return require('ember.serialize').save(path, obj) end
function M.load(path, opts) return require('ember.serialize').load(path, opts) end

return M
