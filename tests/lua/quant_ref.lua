-- quant_ref: an independent decoder of the quantized block layouts (GGUF Q8_0, Q4_0, Q4_1,
-- Q4_K, Q6_K and Ember's affine int8/int4), plain Lua loops in float64 over the raw bytes, fp16
-- decoded bit by bit here (not by the runtime), rounded to float32 once at the end as the
-- formats' float32 arithmetic does (every product in them is exact in float32). Used by
-- quant_spec.lua and gguf_spec.lua.
local ffi = require 'ffi'
local f32buf = ffi.new('float[1]')
local function f32(v) f32buf[0] = v; return f32buf[0] end

local function half(lo, hi)  -- little-endian fp16 bytes -> number
  local h = lo + 256 * hi
  local sign = h >= 32768 and -1 or 1
  local e, m = math.floor(h / 1024) % 32, h % 1024
  if e == 0 then return sign * m * 2 ^ -24 end
  if e == 31 then return m == 0 and sign * math.huge or 0 / 0 end
  return sign * (1 + m / 1024) * 2 ^ (e - 15)
end

local function s8(b) return b >= 128 and b - 256 or b end
local function lo4(b) return b % 16 end
local function hi4(b) return math.floor(b / 16) end

-- Decodes one block (bytes y, 1-based array) into out (appending).
local ref = {}
function ref.q8_0(y, out)
  local d = half(y[1], y[2])
  for j = 1, 32 do out[#out + 1] = d * s8(y[2 + j]) end
end
function ref.q4_0(y, out)
  local d, base = half(y[1], y[2]), #out
  for j = 1, 16 do
    out[base + j] = (lo4(y[2 + j]) - 8) * d
    out[base + 16 + j] = (hi4(y[2 + j]) - 8) * d
  end
end
function ref.q4_1(y, out)
  local d, m, base = half(y[1], y[2]), half(y[3], y[4]), #out
  for j = 1, 16 do
    out[base + j] = lo4(y[4 + j]) * d + m
    out[base + 16 + j] = hi4(y[4 + j]) * d + m
  end
end
function ref.q4_k(y, out)
  local d, dmin = half(y[1], y[2]), half(y[3], y[4])
  local sc = function(i) return y[5 + i] end  -- 0-based into the 12 scale bytes
  local function scale_min(j)
    if j < 4 then return sc(j) % 64, sc(j + 4) % 64 end
    return lo4(sc(j + 4)) + math.floor(sc(j - 4) / 64) * 16, hi4(sc(j + 4)) + math.floor(sc(j) / 64) * 16
  end
  local base = #out
  for sub = 0, 7 do  -- sub-block sub: 32 weights, nibbles of bytes 32*floor(sub/2) ...
    local s, m = scale_min(sub)
    for l = 0, 31 do
      local byte = y[17 + 32 * math.floor(sub / 2) + l]
      local q = sub % 2 == 0 and lo4(byte) or hi4(byte)
      out[base + 32 * sub + l + 1] = d * s * q - dmin * m
    end
  end
end
function ref.q6_k(y, out)
  local d, base = half(y[209], y[210]), #out
  for i = 0, 255 do  -- weight i: half n (128 each), then position l and quarter k in it
    local n, r = math.floor(i / 128), i % 128
    local k, l = math.floor(r / 32), r % 32
    local ql = y[1 + 64 * n + l + (k % 2 == 1 and 32 or 0)]
    local low = k < 2 and lo4(ql) or hi4(ql)
    local qh = math.floor(y[129 + 32 * n + l] / 4 ^ k) % 4
    local scale = s8(y[193 + 8 * n + math.floor(l / 16) + 2 * k])
    out[base + i + 1] = d * scale * (low + 16 * qh - 32)
  end
end
local function affine(bits)
  return function(y, out, group, sym)
    local scale, min = half(y[1], y[2]), sym and 0 or half(y[3], y[4])
    local off, halfc = sym and 2 or 4, 2 ^ (bits - 1)
    for j = 0, group - 1 do
      local c
      if bits == 8 then c = y[off + 1 + j]
      else
        local byte = y[off + 1 + math.floor(j / 2)]  -- two codes a byte, the first low
        c = j % 2 == 0 and lo4(byte) or hi4(byte)
      end
      out[#out + 1] = sym and (c - halfc) * scale or c * scale + min
    end
  end
end
ref.int8, ref.int4 = affine(8), affine(4)

local BLOCK = { q8_0 = { 32, 34 }, q4_0 = { 32, 18 }, q4_1 = { 32, 20 }, q4_k = { 256, 144 },
  q6_k = { 256, 210 } }
local function block_of(fmt, group, sym)
  if BLOCK[fmt] then return BLOCK[fmt][1], BLOCK[fmt][2] end
  return group, (sym and 2 or 4) + (fmt == 'int8' and group or group / 2)
end

-- The reference decoding of a quantized tensor's bytes (its dtype names the layout: q4_k,
-- int8_g64_sym ...), as a flat list of float32 values.
local function ref_dequant(q)
  local ember = require 'ember'
  local bytes = ember.quant.bytes(q:cpu():contiguous()):contiguous():view(-1):totable()
  local fmt, group, sym = ember.quant.format_of(q:dtype())
  local be, bb = block_of(fmt, group, sym)
  assert(bb == q:element_size(), 'the block size of ' .. q:dtype())
  local out = {}
  for b = 0, #bytes / bb - 1 do
    local y = {}
    for i = 1, bb do y[i] = bytes[b * bb + i] end
    ref[fmt](y, out, be, sym)
  end
  for i = 1, #out do out[i] = f32(out[i]) end
  return out
end


-- Decodes a flat list of bytes (numbers 0..255) of whole blocks into a list of float32 values.
local function decode(fmt, bytes, group, sym)
  local be, bb = block_of(fmt, group, sym)
  local out = {}
  for b = 0, #bytes / bb - 1 do
    local y = {}
    for i = 1, bb do y[i] = bytes[b * bb + i] end
    ref[fmt](y, out, be, sym)
  end
  for i = 1, #out do out[i] = f32(out[i]) end
  return out
end

return { decode = decode, dequant = ref_dequant, block_of = block_of, half = half, f32 = f32 }
