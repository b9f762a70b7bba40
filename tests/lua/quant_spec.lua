-- quant_spec: ember.quant's block formats against an independent implementation.
--
-- The reference below decodes raw block bytes with plain Lua loops in float64, following the
-- GGUF/ggml definitions of each layout (fp16 decoded bit by bit here, not by the runtime), and
-- rounds to float32 once at the end, as the formats' fp32 arithmetic does (every product in
-- them is exact in float32). Dequantize must agree bit for bit, on blocks from quantize and on
-- random bytes; quantize must come back within each format's error bound, on random and
-- adversarial blocks (all equal, zeros, one huge outlier), and reject NaN and inf.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local Q = ember.quant

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

-- The reference decoding of a QTensor's bytes, as a flat list of float32 values.
local function ref_dequant(q)
  local bytes = q.blocks:contiguous():view(-1):totable()
  local be, bb = block_of(q.format, q.group, q.symmetric)
  local out = {}
  for b = 0, #bytes / bb - 1 do
    local y = {}
    for i = 1, bb do y[i] = bytes[b * bb + i] end
    ref[q.format](y, out, be, q.symmetric)
  end
  for i = 1, #out do out[i] = f32(out[i]) end
  return out
end

local function same(a, b) return a == b or (a ~= a and b ~= b) end

local CASES = {
  { format = 'q8_0' }, { format = 'q4_0' }, { format = 'q4_1' }, { format = 'q4_k' },
  { format = 'q6_k' },
  { format = 'int8', group = 32 }, { format = 'int8', group = 64, symmetric = true },
  { format = 'int4', group = 128 }, { format = 'int4', group = 32, symmetric = true },
}

-- Error bound of one block of weights x (a list), by the format's rounding and scale storage.
local function bound(c, x)
  local lo, hi, amax = math.huge, -math.huge, 0
  for _, v in ipairs(x) do lo = math.min(lo, v); hi = math.max(hi, v); amax = math.max(amax, math.abs(v)) end
  local range, fp16 = hi - lo, amax * 2e-3
  local f = c.format
  if f == 'q8_0' then return amax / 254 + fp16 end
  if f == 'q4_0' then return amax / 8 + fp16 end  -- the side opposite the extreme clips at 7d
  if f == 'q4_1' then return range / 30 + fp16 end
  if f == 'q4_k' then return amax * 0.12 + fp16 end   -- 6-bit sub-block scales and minimums
  if f == 'q6_k' then return amax * 0.03 + fp16 end   -- 8-bit sub-block scales
  if f == 'int8' then return (c.symmetric and amax / 254 or range / 510) + fp16 end
  return (c.symmetric and amax / 14 or range / 30) + fp16
end

local function name(c)
  return c.format .. (c.group and (' group ' .. c.group) or '') .. (c.symmetric and ' symmetric' or '')
end

local function rows_of(rows, cols, gen)
  local t = {}
  for r = 1, rows do
    t[r] = {}
    for j = 1, cols do t[r][j] = gen(r, j) end
  end
  return t
end

local function check_roundtrip(c, data)
  local x = ember.tensor(data)
  local xs = x:float():totable()  -- the float32 weights quantize sees
  local q = Q.quantize(x, { format = c.format, group = c.group, symmetric = c.symmetric })
  local y = q:dequantize():view(-1):totable()
  local r = ref_dequant(q)
  assert.are.equal(#r, #y)
  for i = 1, #y do
    if not same(r[i], y[i]) then
      error(name(c) .. ': dequantize[' .. i .. '] = ' .. tostring(y[i]) .. ', the reference gives ' .. tostring(r[i]))
    end
  end
  local be = block_of(c.format, c.group, c.symmetric)
  local flat = {}
  for _, row in ipairs(xs) do for _, v in ipairs(row) do flat[#flat + 1] = v end end
  for b = 0, #flat / be - 1 do
    local blk = {}
    for i = 1, be do blk[i] = flat[b * be + i] end
    local lim = bound(c, blk)
    for i = 1, be do
      local err = math.abs(y[b * be + i] - blk[i])
      if err > lim then
        error(('%s: weight %d came back as %.9g from %.9g (error %.3g, bound %.3g)'):format(
          name(c), b * be + i, y[b * be + i], blk[i], err, lim))
      end
    end
  end
  return q
end

describe('ember.quant', function()
  for _, c in ipairs(CASES) do
    describe(name(c), function()
      it('round-trips random rows within the bound, dequantizing as the reference', function()
        H.seed(7)
        check_roundtrip(c, rows_of(3, 256, function() return (H.random() - 0.5) * 6 end))
        check_roundtrip(c, rows_of(2, 256, function() return H.random() * 0.01 + 1 end))
      end)
      it('handles adversarial blocks: all equal, zeros, one huge outlier', function()
        check_roundtrip(c, rows_of(1, 256, function() return 0.3 end))
        check_roundtrip(c, rows_of(1, 256, function() return -2.5 end))
        check_roundtrip(c, rows_of(1, 256, function() return 0 end))
        H.seed(3)
        check_roundtrip(c, rows_of(2, 256, function(r, j)
          if j == 37 then return r == 1 and 5000 or -5000 end
          return (H.random() - 0.5) * 0.02
        end))
      end)
      it('dequantizes random block bytes exactly as the reference', function()
        local be, bb = block_of(c.format, c.group, c.symmetric)
        H.seed(11)
        local nb = math.max(2, 512 / be)
        local bytes = {}
        for i = 1, nb * bb do bytes[i] = math.floor(H.random() * 256) end
        local q = Q.from_blocks(ember.tensor(bytes, { dtype = 'uint8' }), { format = c.format,
          group = c.group, symmetric = c.symmetric, shape = { nb * be } })
        local y, r = q:dequantize():totable(), ref_dequant(q)
        for i = 1, #y do
          if not same(r[i], y[i]) then
            error(name(c) .. ': dequantize[' .. i .. '] = ' .. tostring(y[i]) .. ', the reference gives ' .. tostring(r[i]))
          end
        end
      end)
      it('rejects NaN and inf', function()
        for _, bad in ipairs({ 0 / 0, math.huge, -math.huge }) do
          local x = ember.zeros({ 2, 256 })
          x[{ 2, 9 }] = bad
          local ok, err = pcall(Q.quantize, x, { format = c.format, group = c.group,
            symmetric = c.symmetric })
          assert.is_false(ok)
          assert.matches('expected finite weights, got %a+ at element 265', err)
        end
      end)
    end)
  end

  it('rejects a scale beyond fp16', function()
    local ok, err = pcall(Q.quantize, ember.ones({ 1, 32 }) * 1e9, { format = 'q4_1' })
    assert.is_false(ok)
    assert.matches('overflows fp16', err)
  end)

  it('dequantizes to float16 and bfloat16 as the float32 values rounded', function()
    H.seed(5)
    local x = ember.tensor(rows_of(2, 64, function() return H.random() - 0.5 end))
    local q = Q.quantize(x, { format = 'q8_0' })
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      local y = q:dequantize({ dtype = dt })
      assert.are.equal(dt, y:dtype())
      assert.are.same(q:dequantize():to(dt):float():totable(), y:float():totable())
    end
  end)

  it('checks its arguments', function()
    local x = ember.zeros({ 4, 64 })
    assert.has_error(function() Q.quantize(x, { format = 'q8' }) end)
    assert.matches("expected format to be one of", select(2, pcall(Q.quantize, x, { format = 'q8' })))
    assert.matches('unknown option grop %(did you mean group%?',
      select(2, pcall(Q.quantize, x, { format = 'q8_0', grop = 32 })))
    assert.matches('group and symmetric apply to int8 and int4 only',
      select(2, pcall(Q.quantize, x, { format = 'q8_0', group = 32 })))
    assert.matches('expected group to be 32, 64 or 128, got 48',
      select(2, pcall(Q.quantize, x, { format = 'int8', group = 48 })))
    assert.matches('multiple of 256 %(the q4_k block%), got 64',
      select(2, pcall(Q.quantize, x, { format = 'q4_k' })))
    assert.matches('expected dtype float32, float16 or bfloat16, got int8',
      select(2, pcall(function() return Q.quantize(x, { format = 'q8_0' }):dequantize({ dtype = 'int8' }) end)))
  end)

  it('saves and loads QTensors with the checkpoint code', function()
    H.seed(9)
    local x = ember.tensor(rows_of(4, 128, function() return H.random() - 0.5 end))
    local obj = { layer = { weight = Q.quantize(x, { format = 'int4', group = 32, symmetric = true }),
      bias = ember.ones({ 4 }) }, w2 = Q.quantize(x, { format = 'q4_1' }) }
    local path = os.tmpname()
    Q.save(path, obj)
    local back = Q.load(path)
    os.remove(path)
    assert.is_true(Q.is_qtensor(back.layer.weight))
    assert.are.equal('int4', back.layer.weight.format)
    assert.are.equal(32, back.layer.weight.group)
    assert.is_true(back.layer.weight.symmetric)
    assert.are.same({ 4, 128 }, back.w2.shape)
    assert.are.same(obj.layer.weight:dequantize():totable(), back.layer.weight:dequantize():totable())
    assert.are.same(obj.w2.blocks:totable(), back.w2.blocks:totable())
    assert.are.same({ 1, 1, 1, 1 }, back.layer.bias:totable())
  end)
end)
