-- ember.quant: block-quantized weights (docs/api/quant.md; the decision in docs/design.md).
--
--   ember.quant.quantize(x, {format=, group=, symmetric=})  a QTensor of x's values
--   q:dequantize({dtype=})                                  a dense tensor on q's device
--   q:to(device), q:cpu()                                   the blocks moved, bytes unchanged
--   ember.quant.save(path, obj) / ember.quant.load(path)    checkpoints holding QTensors
--   ember.quant.linear(x, w [, bias])                       x W^T + b, W quantized (CPU ggml formats, Vulkan all)
--   ember.quant.quantize_model(model, {format=, ...})      Linear layers replaced in place
--                                                           (lua/ember/quant/model.lua)
--
-- A QTensor holds its raw blocks in one uint8 tensor [rows, row_bytes] (the GGUF bytes of each
-- row, block after block) on any device, with the format, the logical shape and the group.
-- Blocks run along the last dimension, whose size must be whole blocks. The block arithmetic is
-- C (runtime/src/quant/: quant_blocks.c, quant_tensor.c, quant_matmul.c; Vulkan:
-- kernels/quant_dequant.comp); this file moves bytes and checks arguments.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local names = require 'ember.util.names'

local C, check = core.C, core.check
local M = {}

-- format name -> C id; the affine formats take a group and a symmetric flag.
local FORMATS = {
  q8_0 = C.EM_QUANT_Q8_0, q4_0 = C.EM_QUANT_Q4_0, q4_1 = C.EM_QUANT_Q4_1,
  q4_k = C.EM_QUANT_Q4_K, q6_k = C.EM_QUANT_Q6_K, int8 = C.EM_QUANT_AFFINE8,
  int4 = C.EM_QUANT_AFFINE4,
}
local AFFINE = { int8 = true, int4 = true }
local FORMAT_NAMES = {}
for k in pairs(FORMATS) do FORMAT_NAMES[#FORMAT_NAMES + 1] = k end
table.sort(FORMAT_NAMES)
M.formats = FORMAT_NAMES

local QTensor = {}
QTensor.__index = QTensor
M.QTensor = QTensor

function M.is_qtensor(v) return getmetatable(v) == QTensor end

local i64 = ffi.typeof('int64_t[1]')
local function block_size(fmt, group, sym)
  local e, b = i64(), i64()
  check(C.em_quant_block_size(FORMATS[fmt], group, sym and 1 or 0, e, b))
  return tonumber(e[0]), tonumber(b[0])
end

-- Checks format / group / symmetric from an options table (fn names the caller in errors).
local function parse_format(fn, opts, level)
  local fmt = opts.format
  if type(fmt) ~= 'string' or not FORMATS[fmt] then
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
  else
    if group ~= nil or sym ~= nil then
      error(("%s: format '%s' has a fixed block: group and symmetric apply to int8 and int4 only")
        :format(fn, fmt), level + 1)
    end
    group, sym = 0, false
  end
  return fmt, group, sym
end

local function new(fmt, group, sym, shape, blocks)
  return setmetatable({ format = fmt, group = group, symmetric = sym, shape = shape,
    blocks = blocks }, QTensor)
end

function M.quantize(x, opts)
  local fn = 'ember.quant.quantize'
  if not tensor.is_tensor(x) then
    error(('%s: expected a tensor, got %s'):format(fn, type(x)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, group = true, symmetric = true })
  local fmt, group, sym = parse_format(fn, opts, 2)
  if not x:is_floating_point() then
    error(('%s: expected a floating-point tensor, got %s'):format(fn, x:dtype()), 2)
  end
  if x:dim() < 1 then error(('%s: expected at least 1 dimension, got a scalar'):format(fn), 2) end
  local be, bb = block_size(fmt, group, sym)
  local cols = x:size(x:dim())
  if cols % be ~= 0 then
    error(('%s: expected the last dimension to be a multiple of %d (the %s block), got %d')
      :format(fn, be, fmt, cols), 2)
  end
  local shape = {}
  for i = 1, x:dim() do shape[i] = x:size(i) end
  local n = x:numel()
  local rows = cols > 0 and n / cols or 0
  local device = x:device()
  local src = x:to('cpu'):float():contiguous()
  local blocks = creation.empty({ rows, cols / be * bb }, { dtype = 'uint8' })
  if n > 0 then
    local rc = C.em_quant_quantize(FORMATS[fmt], group, sym and 1 or 0,
      ffi.cast('const float*', C.em_data_ptr(src.ptr)), n, C.em_data_ptr(blocks.ptr))
    if rc ~= 0 then
      error(('%s: %s'):format(fn, ffi.string(C.em_last_error()):gsub('^em_quant_quantize: ', '')), 2)
    end
  end
  if tostring(device) ~= 'cpu' then blocks = blocks:to(device) end
  return new(fmt, group, sym, shape, blocks)
end

-- A QTensor over raw blocks (a uint8 tensor, e.g. read from a file): opts.format, opts.shape
-- (the logical shape; its last dimension whole blocks), and for int8/int4 group and symmetric.
function M.from_blocks(blocks, opts)
  local fn = 'ember.quant.from_blocks'
  if not tensor.is_tensor(blocks) or blocks:dtype() ~= 'uint8' then
    error(('%s: expected a uint8 tensor of blocks, got %s'):format(fn,
      tensor.is_tensor(blocks) and blocks:dtype() or type(blocks)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, group = true, symmetric = true, shape = true })
  local shape = opts.shape
  local fmt, group, sym = parse_format(fn, { format = opts.format, group = opts.group,
    symmetric = opts.symmetric }, 2)
  if type(shape) ~= 'table' or #shape == 0 then
    error(('%s: expected shape to be a list of sizes, got %s'):format(fn, type(shape)), 2)
  end
  local be, bb = block_size(fmt, group, sym)
  local n, cols = 1, shape[#shape]
  for i, v in ipairs(shape) do
    if type(v) ~= 'number' or v < 0 or v % 1 ~= 0 then
      error(('%s: expected shape[%d] to be a size, got %s'):format(fn, i, tostring(v)), 2)
    end
    n = n * v
  end
  if cols % be ~= 0 then
    error(('%s: expected the last dimension to be a multiple of %d (the %s block), got %d')
      :format(fn, be, fmt, cols), 2)
  end
  if blocks:numel() ~= n / be * bb then
    error(('%s: expected %d bytes of %s blocks for shape [%s], got %d'):format(fn, n / be * bb,
      fmt, table.concat(shape, ', '), blocks:numel()), 2)
  end
  local rows = cols > 0 and n / cols or 0
  local copy = {}
  for i, v in ipairs(shape) do copy[i] = v end
  return new(fmt, group, sym, copy, blocks:contiguous():view(rows, cols / be * bb))
end

function QTensor:device() return self.blocks:device() end
function QTensor:size(i)
  if i == nil then return core.Size(self.shape) end
  return self.shape[i]
end
function QTensor:dim() return #self.shape end
function QTensor:numel()
  local n = 1
  for _, s in ipairs(self.shape) do n = n * s end
  return n
end
-- Bytes of the blocks (the weight memory).
function QTensor:nbytes() return self.blocks:numel() end

function QTensor:to(device)
  return new(self.format, self.group, self.symmetric, self.shape, self.blocks:to(device))
end
function QTensor:cpu() return self:to('cpu') end

local DQ_TYPES = { float32 = true, float16 = true, bfloat16 = true }
function QTensor:dequantize(opts)
  local fn = 'QTensor:dequantize'
  opts = names.check_options(fn, opts, { dtype = true })
  local dtype = opts.dtype or 'float32'
  if not DQ_TYPES[dtype] then
    error(('%s: expected dtype float32, float16 or bfloat16, got %s'):format(fn, tostring(dtype)), 2)
  end
  local out = creation.empty(self.shape, { dtype = 'float32', device = self:device() })
  if self:numel() > 0 then
    local rc = C.em_quant_dequantize_tensor(self.blocks:contiguous().ptr, FORMATS[self.format],
      self.group, self.symmetric and 1 or 0, out.ptr)
    if rc ~= 0 then
      local msg = ffi.string(C.em_last_error()):gsub('^em_quant_dequantize_tensor: ', '')
      error(('%s: %s'):format(fn, msg), 2)
    end
  end
  if dtype ~= 'float32' then out = out:to(dtype) end
  return out
end

-- x [..., K] (floating) times a quantized weight w [N, K], as nn.Linear: [..., N], plus bias.
-- CPU, the ggml formats (runtime/src/quant/quant_matmul.c, kernels in runtime/src/quant/cpu);
-- int8/int4 raise "not implemented" there; Vulkan: every format (runtime/src/vulkan/
-- vk_quant_matmul.c).
local LINEAR = { q8_0 = true, q4_0 = true, q4_1 = true, q4_k = true, q6_k = true }
function M.linear(x, w, bias)
  local fn = 'ember.quant.linear'
  if not tensor.is_tensor(x) then error(('%s: expected x to be a tensor, got %s'):format(fn, type(x)), 2) end
  if not M.is_qtensor(w) then error(('%s: expected w to be a QTensor, got %s'):format(fn, type(w)), 2) end
  if #w.shape ~= 2 then error(('%s: expected a 2-D weight [N, K], got %d dimensions'):format(fn, #w.shape), 2) end
  local n, k = w.shape[1], w.shape[2]
  if x:dim() < 1 or x:size(x:dim()) ~= k then
    error(('%s: expected x\'s last dimension to be %d (the weight\'s K), got %s'):format(fn, k,
      x:dim() < 1 and 'a scalar' or tostring(x:size(x:dim()))), 2)
  end
  local dev, wdev = tostring(x:device()), tostring(w:device())
  if dev ~= wdev then
    error(('%s: expected x and w on one device, got %s and %s'):format(fn, dev, wdev), 2)
  end
  if dev == 'cpu' and not LINEAR[w.format] then
    error(('%s: format %s is not implemented on cpu (q8_0, q4_0, q4_1, q4_k and q6_k are)'):format(fn, w.format), 2)
  end
  local lead = {}
  for i = 1, x:dim() - 1 do lead[i] = x:size(i) end
  local x2 = x:float():contiguous():view(-1, k)
  local out = creation.empty({ x2:size(1), n }, { dtype = 'float32', device = x2:device() })
  if x2:size(1) > 0 and n > 0 then
    if dev == 'cpu' then
      check(C.em_quant_linear(x2.ptr, w.blocks:contiguous().ptr, FORMATS[w.format], out.ptr))
    else  -- Vulkan: every format (runtime/src/vulkan/vk_quant_matmul.c)
      check(C.em_quant_linear_grouped(x2.ptr, w.blocks:contiguous().ptr, FORMATS[w.format],
        w.group or 0, w.symmetric and 1 or 0, out.ptr))
    end
  end
  lead[#lead + 1] = n
  out = out:view(unpack(lead))
  if bias ~= nil then out = out + bias end
  return out
end

-- ember.quant.quantize_model(model, {format=, modules=, verbose=}): lua/ember/quant/model.lua.
function M.quantize_model(model, opts)
  return require('ember.quant.model').quantize_model(model, opts)
end

function QTensor:__tostring()
  local s = {}
  for i, v in ipairs(self.shape) do s[i] = tostring(v) end
  return ('QTensor(%s%s, [%s], %s, %d bytes)'):format(self.format,
    AFFINE[self.format] and ((' group %d%s'):format(self.group, self.symmetric and ' symmetric' or '')) or '',
    table.concat(s, ', '), tostring(self:device()), self:nbytes())
end

-- ---- checkpoints: a QTensor is saved as a table of its blocks and description ---------------
local MARK = '__ember_quant__'

local function encode(v)
  if M.is_qtensor(v) then
    return { [MARK] = v.format, group = v.group, symmetric = v.symmetric,
      shape = v.shape, blocks = v.blocks }
  end
  if type(v) == 'table' and not tensor.is_tensor(v) then
    local t = {}
    for k, x in pairs(v) do t[k] = encode(x) end
    return t
  end
  return v
end

local function decode(v)
  if type(v) ~= 'table' or tensor.is_tensor(v) then return v end
  if v[MARK] then
    local fmt = v[MARK]
    if not FORMATS[fmt] then
      error(("ember.quant.load: unknown quantized format '%s' in the file"):format(tostring(fmt)), 0)
    end
    local shape = {}
    for i = 1, #v.shape do shape[i] = v.shape[i] end
    local q = new(fmt, v.group, v.symmetric, shape, v.blocks)
    local be, bb = block_size(fmt, v.group, v.symmetric)
    if #shape == 0 or q:numel() / be * bb ~= v.blocks:numel() then
      error(("ember.quant.load: the %s blocks hold %d bytes, expected %d for shape [%s]")
        :format(fmt, v.blocks:numel(), q:numel() / be * bb, table.concat(shape, ', ')), 0)
    end
    return q
  end
  local t = {}
  for k, x in pairs(v) do t[k] = decode(x) end
  return t
end

-- ember.save with QTensors allowed anywhere in obj.
function M.save(path, obj) return require('ember.serialize').save(path, encode(obj)) end
-- ember.load, giving back the QTensors saved by ember.quant.save.
function M.load(path, opts) return decode(require('ember.serialize').load(path, opts)) end

return M
