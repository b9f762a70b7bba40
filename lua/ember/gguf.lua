-- ember.gguf: GGUF model files (llama.cpp's format) in and out (docs/api/gguf.md).
--
--   ember.gguf.load(path [, {device=}])        -> tensors, metadata
--   ember.gguf.save(path, tensors [, metadata])   writes GGUF v3
--
-- The reader is C (runtime/src/io/gguf.c: every length and offset checked against the file);
-- this file turns its records into Lua values and tensors. Dense tensors come back as tensors of
-- their dtype, quantized ones (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K) as tensors of the block dtype
-- (q8_0 ...) holding the file's blocks. GGUF lists dimensions fastest first; Ember's shapes are the reverse.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local names = require 'ember.util.names'
local quant = require 'ember.quant'

local C = core.C
local M = {}

-- ggml tensor type <-> Ember dtype or quantized format.
local DENSE = { [0] = 'float32', [1] = 'float16', [30] = 'bfloat16', [24] = 'int8',
  [25] = 'int16', [26] = 'int32', [27] = 'int64', [28] = 'float64' }
local QUANT = { [2] = 'q4_0', [3] = 'q4_1', [8] = 'q8_0', [12] = 'q4_k', [14] = 'q6_k' }
local DENSE_ID, QUANT_ID = {}, {}
for k, v in pairs(DENSE) do DENSE_ID[v] = k end
for k, v in pairs(QUANT) do QUANT_ID[v] = k end
local ESIZE = { float32 = 4, float16 = 2, bfloat16 = 2, int8 = 1, int16 = 2, int32 = 4,
  int64 = 8, float64 = 8 }

-- GGUF metadata value types.
local VT = { uint8 = 0, int8 = 1, uint16 = 2, int16 = 3, uint32 = 4, int32 = 5, float32 = 6,
  bool = 7, string = 8, array = 9, uint64 = 10, int64 = 11, float64 = 12 }
local VT_NAME, CT = {}, { [0] = 'uint8_t', 'int8_t', 'uint16_t', 'int16_t', 'uint32_t',
  'int32_t', 'float', 'uint8_t', nil, nil, 'uint64_t', 'int64_t', 'double' }
for k, v in pairs(VT) do VT_NAME[v] = k end

local i64a, inta = ffi.typeof('int64_t[1]'), ffi.typeof('int[1]')

local function scalar(t, p)
  local v = ffi.cast(CT[t] .. '*', p)[0]
  if t == VT.bool then return v ~= 0 end
  if t == VT.uint64 or t == VT.int64 then
    local n = tonumber(v)
    if n >= -2 ^ 53 and n <= 2 ^ 53 then return n end
    return v  -- beyond a double's integers: the int64/uint64 cdata
  end
  return tonumber(v)
end

local function value(g, i, t, j)
  local len = i64a()
  local p = C.em_gguf_kv_value(g, i, j, len)
  if t == VT.string then return ffi.string(p, len[0]) end
  return scalar(t, p)
end

function M.load(path, opts)
  local fn = 'ember.gguf.load'
  if type(path) ~= 'string' then error(('%s: expected a path string, got %s'):format(fn, type(path)), 2) end
  opts = names.check_options(fn, opts, { device = true })
  local raw = C.em_gguf_open(path)
  if raw == nil then error(('%s: %s'):format(fn, ffi.string(C.em_last_error())), 2) end
  local g = ffi.gc(raw, C.em_gguf_close)
  local meta = {}
  local et, len, klen = inta(), i64a(), i64a()
  for i = 0, tonumber(C.em_gguf_kv_count(g)) - 1 do
    local key = ffi.string(C.em_gguf_kv_key(g, i, klen), klen[0])
    local t = C.em_gguf_kv_type(g, i, et, len)
    if t == VT.array then
      local arr = {}
      for j = 0, tonumber(len[0]) - 1 do arr[j + 1] = value(g, i, et[0], j) end
      meta[key] = arr
    else
      meta[key] = value(g, i, t, 0)
    end
  end
  local tensors = {}
  local base = ffi.cast('const uint8_t*', C.em_gguf_data(g))
  local ty, nd, dims, off, nb = inta(), inta(), ffi.new('int64_t[4]'), i64a(), i64a()
  for i = 0, tonumber(C.em_gguf_tensor_count(g)) - 1 do
    local name = ffi.string(C.em_gguf_tensor_info(g, i, ty, nd, dims, off, nb))
    local shape = {}
    for d = 0, nd[0] - 1 do shape[nd[0] - d] = tonumber(dims[d]) end
    local nbytes = tonumber(nb[0])
    local dtype, fmt = DENSE[ty[0]], QUANT[ty[0]]
    local x = creation.empty(fmt and { nbytes } or shape, { dtype = fmt and 'uint8' or dtype })
    if nbytes > 0 then ffi.copy(C.em_data_ptr(x.ptr), base + off[0], nbytes) end
    if fmt then x = quant.from_blocks(x, { format = fmt, shape = shape }) end
    if opts.device then x = x:to(opts.device) end
    if tensors[name] then error(("%s: %s holds tensor '%s' twice"):format(fn, path, name), 2) end
    tensors[name] = x
  end
  return tensors, meta
end

-- ---- writing --------------------------------------------------------------------------------
local function pack(ct, v) return ffi.string(ffi.new(ct .. '[1]', v), ffi.sizeof(ct)) end
local function str(s) return pack('uint64_t', #s) .. s end

-- A metadata value's GGUF type: {type=, value=} names it; else strings, booleans, integers
-- (uint32, int32 when negative, int64 beyond 32 bits), other numbers float32, int64/uint64
-- cdata, and arrays of those (by their first element).
local function infer(fn, key, v)
  if type(v) == 'table' and v.type ~= nil then
    local t = VT[v.type]
    if not t or t == VT.array then
      error(("%s: metadata '%s': unknown type '%s'"):format(fn, key, tostring(v.type)), 4)
    end
    return t, v.value
  end
  if type(v) == 'string' then return VT.string, v end
  if type(v) == 'boolean' then return VT.bool, v end
  if type(v) == 'cdata' then
    return ffi.istype('uint64_t', v) and VT.uint64 or VT.int64, v
  end
  if type(v) == 'number' then
    if v % 1 == 0 and v >= 0 and v < 2 ^ 32 then return VT.uint32, v end
    if v % 1 == 0 and v >= -2 ^ 31 and v < 0 then return VT.int32, v end
    if v % 1 == 0 and math.abs(v) <= 2 ^ 53 then return VT.int64, v end
    return VT.float32, v
  end
  error(("%s: metadata '%s': expected a string, boolean, number, array or {type=, value=}, got %s")
    :format(fn, key, type(v)), 4)
end

local function encode_scalar(t, v)
  if t == VT.string then return str(v) end
  if t == VT.bool then return pack('uint8_t', v and 1 or 0) end
  return pack(CT[t], v)
end

local function encode_kv(fn, key, v)
  if type(v) == 'table' and v.type == nil then
    if #v == 0 then error(("%s: metadata '%s': an empty array has no element type"):format(fn, key), 3) end
    local t = infer(fn, key, v[1])
    local parts = { str(key), pack('uint32_t', VT.array), pack('uint32_t', t), pack('uint64_t', #v) }
    for i = 1, #v do
      local ti, vi = infer(fn, key, v[i])
      if ti ~= t and not (t == VT.float32 and (ti == VT.uint32 or ti == VT.int32)) then
        error(("%s: metadata '%s': element %d is %s, the array's first is %s"):format(fn, key, i,
          VT_NAME[ti], VT_NAME[t]), 3)
      end
      parts[#parts + 1] = encode_scalar(t, vi)
    end
    return table.concat(parts)
  end
  local t, vv = infer(fn, key, v)
  return str(key) .. pack('uint32_t', t) .. encode_scalar(t, vv)
end

function M.save(path, tensors, metadata)
  local fn = 'ember.gguf.save'
  if type(path) ~= 'string' then error(('%s: expected a path string, got %s'):format(fn, type(path)), 2) end
  if type(tensors) ~= 'table' then error(('%s: expected a table of tensors, got %s'):format(fn, type(tensors)), 2) end
  metadata = metadata or {}
  if type(metadata) ~= 'table' then error(('%s: expected a metadata table, got %s'):format(fn, type(metadata)), 2) end
  local align = 32
  local keys = {}
  for k in pairs(metadata) do
    if type(k) ~= 'string' then error(('%s: expected metadata keys to be strings, got %s'):format(fn, type(k)), 2) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  local kv = {}
  for _, k in ipairs(keys) do
    if k == 'general.alignment' then
      error(('%s: general.alignment is written by save (32)'):format(fn), 2)
    end
    kv[#kv + 1] = encode_kv(fn, k, metadata[k])
  end
  kv[#kv + 1] = encode_kv(fn, 'general.alignment', { type = 'uint32', value = align })
  local tnames = {}
  for k in pairs(tensors) do
    if type(k) ~= 'string' then error(('%s: expected tensor names to be strings, got %s'):format(fn, type(k)), 2) end
    tnames[#tnames + 1] = k
  end
  table.sort(tnames)
  local infos, datas, offset = {}, {}, 0
  for _, name in ipairs(tnames) do
    local x, shape, gtype, bytes = tensors[name], nil, nil, nil
    if quant.is_quantized(x) then
      gtype = QUANT_ID[x:dtype()]
      if not gtype then
        error(("%s: tensor '%s': dtype %s has no GGUF type"):format(fn, name, x:dtype()), 2)
      end
      shape = x:weight_size()
      if #shape == 0 then shape = { x:weight_size()[1] or quant.block_elems(x:dtype()) } end
      local b = x:to('cpu'):contiguous()
      bytes = ffi.string(C.em_data_ptr(b.ptr), b:nbytes())
    elseif tensor.is_tensor(x) then
      gtype = DENSE_ID[x:dtype()]
      if not gtype then
        error(("%s: tensor '%s': dtype %s has no GGUF type"):format(fn, name, x:dtype()), 2)
      end
      shape = {}
      for d = 1, x:dim() do shape[d] = x:size(d) end
      if #shape == 0 then shape = { 1 } end
      local c = x:to('cpu'):contiguous()
      bytes = ffi.string(C.em_data_ptr(c.ptr), c:numel() * ESIZE[x:dtype()])
    else
      error(("%s: tensor '%s': expected a tensor, got %s"):format(fn, name, type(x)), 2)
    end
    if #shape > 4 then error(("%s: tensor '%s' has %d dimensions, GGUF holds at most 4"):format(fn, name, #shape), 2) end
    local info = { str(name), pack('uint32_t', #shape) }
    for d = #shape, 1, -1 do info[#info + 1] = pack('uint64_t', shape[d]) end
    info[#info + 1] = pack('uint32_t', gtype) .. pack('uint64_t', offset)
    infos[#infos + 1] = table.concat(info)
    local pad = (align - #bytes % align) % align
    datas[#datas + 1] = bytes .. string.rep('\0', pad)
    offset = offset + #bytes + pad
  end
  local head = 'GGUF' .. pack('uint32_t', 3) .. pack('uint64_t', #tnames) .. pack('uint64_t', #kv) ..
    table.concat(kv) .. table.concat(infos)
  head = head .. string.rep('\0', (align - #head % align) % align)
  local f, err = io.open(path, 'wb')
  if not f then error(('%s: cannot write %s: %s'):format(fn, path, tostring(err)), 2) end
  f:write(head, table.concat(datas))
  f:close()
end

return M
