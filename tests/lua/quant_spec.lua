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
local Q = ember.quant

local R = require 'tests.lua.quant_ref'
local block_of, ref_dequant = R.block_of, R.dequant

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
    assert.matches('dequantize: expected a floating%-point dtype to dequantize into, got int8',
      select(2, pcall(function() return Q.quantize(x, { format = 'q8_0' }):dequantize({ dtype = 'int8' }) end)))
  end)

  it('saves and loads quantized tensors with ember.save, byte for byte', function()
    H.seed(9)
    local x = ember.tensor(rows_of(4, 128, function() return H.random() - 0.5 end))
    local obj = { layer = { weight = Q.quantize(x, { format = 'int4', group = 32, symmetric = true }),
      bias = ember.ones({ 4 }) }, w2 = Q.quantize(x, { format = 'q4_1' }) }
    local path = os.tmpname()
    ember.save(path, obj)
    local back = ember.load(path)
    -- other readers see the raw blocks: uint8, the last dimension in bytes
    local C = require('ember.core').C
    local f = C.em_safetensors_open(path)
    local raw = require('ember.core').own(C.em_safetensors_tensor(f, C.em_safetensors_find(f, 'w2')))
    C.em_safetensors_close(f)
    os.remove(path)
    assert.are.equal('int4_g32_sym', back.layer.weight:dtype())
    assert.are.equal('q4_1', back.w2:dtype())
    assert.are.same({ 4, 128 }, { back.w2:weight_size(1), back.w2:weight_size(2) })
    assert.are.same({ 4, 4 }, { back.w2:size(1), back.w2:size(2) })
    assert.are.same(Q.bytes(obj.w2):totable(), Q.bytes(back.w2):totable())
    assert.are.same(Q.bytes(obj.layer.weight):totable(), Q.bytes(back.layer.weight):totable())
    assert.are.same({ 1, 1, 1, 1 }, back.layer.bias:totable())
    assert.are.equal('uint8', raw:dtype())
    assert.are.same({ 4, 80 }, { raw:size(1), raw:size(2) })
  end)
end)

-- ember.quant.linear against float64: the weights decoded by the reference, the activations as
-- given; the kernel quantizes activations to int8 per 32 (scale amax / 127), so each block may
-- be off by half a step of x times the block's absolute weights, plus float32 summation.
describe('ember.quant.linear', function()
  local function check(fmt, m, n, k, seed)
    H.seed(seed)
    local xs, ws = {}, {}
    for i = 1, m do xs[i] = {} for j = 1, k do xs[i][j] = (H.random() - 0.5) * 4 end end
    for i = 1, n do ws[i] = {} for j = 1, k do ws[i][j] = (H.random() - 0.5) * 2 end end
    local x = ember.tensor(xs)
    local q = Q.quantize(ember.tensor(ws), { format = fmt })
    local y = Q.linear(x, q):totable()
    local wd = ref_dequant(q)
    local xf = x:totable()
    for i = 1, m do
      for j = 1, n do
        local exact, lim = 0, 1e-5
        for b = 0, k / 32 - 1 do
          local amax, wabs = 0, 0
          for t = 1, 32 do
            local kk = b * 32 + t
            local wv = wd[(j - 1) * k + kk]
            exact = exact + xf[i][kk] * wv
            amax = math.max(amax, math.abs(xf[i][kk]))
            wabs = wabs + math.abs(wv)
          end
          lim = lim + amax / 127 / 2 * wabs * 1.001 + 1e-6 * wabs * amax
        end
        local got = y[i][j]
        if math.abs(got - exact) > lim then
          error(('%s [%d, %d]: %.9g, float64 gives %.9g (bound %.3g)'):format(fmt, i, j, got, exact, lim))
        end
      end
    end
  end
  for _, fmt in ipairs({ 'q8_0', 'q4_0' }) do
    it(fmt .. ' matches float64 within the activation rounding (M = 1, odd shapes)', function()
      check(fmt, 1, 37, 96, 1)
      check(fmt, 5, 3, 32, 2)
      check(fmt, 3, 130, 64, 3)
    end)
  end
  for _, fmt in ipairs({ 'q4_1', 'q4_k', 'q6_k', 'int8', 'int4' }) do
    it(fmt .. ' matches float64 within the activation rounding', function()
      local k = fmt:find('_k') and 256 or 128
      check(fmt, 1, 37, k, 4)
      check(fmt, 5, 17, 2 * k, 5)
    end)
  end
  it('keeps leading dimensions, adds the bias, refuses what has no kernel', function()
    local q = Q.quantize(ember.ones({ 4, 64 }), { format = 'q8_0' })
    local y = Q.linear(ember.ones({ 2, 3, 64 }), q, ember.ones({ 4 }))
    assert.are.same({ 2, 3, 4 }, { y:size(1), y:size(2), y:size(3) })
    assert.is_true(math.abs(y[{ 2, 3, 4 }]:item() - 65) < 0.01)  -- 64 * (127 * fp16(1/127)) + 1
    -- q4_k: the portable CPU kernel has none (the optimized one, where built in, may)
    local ok, err = pcall(Q.linear, ember.ones({ 1, 256 }), Q.quantize(ember.ones({ 2, 256 }),
      { format = 'q4_k' }))
    if not ok then assert.matches('ember.quant.linear: not implemented on cpu for q4_k', err) end
    assert.matches("expected the input's last dimension to be 64", select(2, pcall(Q.linear, ember.ones({ 1, 32 }), q)))
  end)
end)

describe('ember.quant.quantize_model', function()
  it('replaces Linear layers in place and reports the ones it leaves', function()
    local nn = ember.nn
    ember.manual_seed(4)
    local model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 5), nn.Embedding(10, 64),
      nn.Linear(30, 4))
    local x = ember.randn({ 3, 64 })
    local dense = model[1]:forward(x)
    local w3 = model[3].weight:detach()
    local _, report = Q.quantize_model(model, { format = 'q8_0', verbose = false })
    assert.are.same({ '0', '2', '3' }, report.quantized)  -- Sequential's names, as PyTorch's
    assert.are.equal('QuantLinear', model[1].__name)
    assert.are.equal('QuantEmbedding', model[4].__name)
    assert.are.equal('Linear', model[5].__name)
    assert.are.same('4', report.skipped[1][1])
    assert.matches('in_features = 30 is not a multiple', report.skipped[1][2])
    -- the quantized layer computes quant.linear with its own weight, a q8_0 tensor
    assert.are.equal('q8_0', model[1].weight:dtype())
    local y = model[1]:forward(x)
    assert.are.same(Q.linear(x, model[1].weight, model[1].bias):totable(), y:totable())
    assert.is_true((y - dense):abs():max():item() < 0.05)
    assert.are.same(Q.bytes(Q.quantize(w3, { format = 'q8_0' })):totable(), Q.bytes(model[3].weight):totable())
    local net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 5))
    local before = net:forward(x):detach()
    Q.quantize_model(net, { format = 'q4_0', verbose = false })
    assert.is_true((net:forward(x) - before):abs():max():item() < 0.5)
    local m2 = nn.Sequential(nn.Linear(256, 4))
    local _, r2 = Q.quantize_model(m2, { format = 'q4_k', modules = { 'Linear' }, verbose = false })
    if #r2.skipped > 0 then assert.matches('not implemented on cpu for q4_k', r2.skipped[1][2])
    else assert.are.equal('q4_k', m2[1].weight:dtype()) end
    assert.matches("expected modules%[1%] to be 'Linear' or 'Embedding', got Conv2d",
      select(2, pcall(Q.quantize_model, m2, { format = 'q8_0', modules = { 'Conv2d' } })))
  end)
end)
