-- quant_device_spec: quantized tensors (block dtypes) on Vulkan: blocks moved to the device
-- and back unchanged, views, index_select and cat of blocks there, dequantized there bit for
-- bit as on the CPU (kernels/quant_dequant.comp, every format) on random blocks, odd row
-- counts and random raw bytes; quantize and (without its kernel) quant.linear refuse with
-- "not implemented on <device>" rather than going through the host.
local VK = require('vk_helpers').open('vulkan quant')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local Q = ember.quant

local function same_bits(a, b)
  for i = 1, #a do
    if not (a[i] == b[i] or (a[i] ~= a[i] and b[i] ~= b[i])) then
      error(('element %d: %.9g on the device, %.9g on the CPU'):format(i, a[i], b[i]))
    end
  end
end

describe('vulkan quant (' .. V .. ')', function()
  local cases = { { format = 'q8_0' }, { format = 'q4_0' }, { format = 'q4_1' },
    { format = 'q4_k' }, { format = 'q6_k' }, { format = 'int8', group = 32 },
    { format = 'int8', group = 128, symmetric = true }, { format = 'int4', group = 64 },
    { format = 'int4', group = 32, symmetric = true } }
  for _, c in ipairs(cases) do
    local f = c.format
    local cols = f:find('_k') and 512 or 384
    it(f .. ' ' .. tostring(c.group or '') .. (c.symmetric and ' symmetric' or '') ..
      ' dequantizes on the device as on the CPU', function()
      H.seed(21)
      local t = {}
      for r = 1, 7 do
        t[r] = {}
        for j = 1, cols do t[r][j] = (H.random() - 0.5) * 10 end
      end
      local q = Q.quantize(ember.tensor(t), c)
      local g = q:to(V)
      assert.are.equal(V, tostring(g:device()))
      assert.are.equal(q:dtype(), g:dtype())
      assert.are.same(Q.bytes(q):totable(), Q.bytes(g:cpu()):totable())
      local y = g:dequantize()
      assert.are.equal(V, tostring(y:device()))
      same_bits(y:cpu():view(-1):totable(), q:dequantize():view(-1):totable())
      -- raw bytes: every code and scale pattern, including subnormal fp16 scales
      local bytes = {}
      for i = 1, q:nbytes() do bytes[i] = math.floor(H.random() * 256) end
      local r = Q.from_blocks(ember.tensor(bytes, { dtype = 'uint8' }), { format = f, group = c.group,
        symmetric = c.symmetric, shape = { 7, cols } })
      same_bits(r:to(V):dequantize():cpu():view(-1):totable(), r:dequantize():view(-1):totable())
      -- a 16-bit result is the float32 one rounded
      local h = g:dequantize({ dtype = 'float16' })
      assert.are.same(q:dequantize():to('float16'):float():totable(), h:cpu():float():totable())
    end)
  end

  it('takes views, index_select, cat and clone of blocks on the device', function()
    H.seed(4)
    local q = Q.quantize(ember.randn({ 5, 96 }), { format = 'q4_1' })  -- [5, 3] blocks
    local g = q:to(V)
    local idx = ember.tensor({ 4, 1, 4 }, { dtype = 'int64' })
    local cases = {
      { q:index_select(1, idx), g:index_select(1, idx:to(V)) },
      { q:narrow(2, 2, 2):contiguous(), g:narrow(2, 2, 2):contiguous() },
      { q:t():contiguous(), g:t():contiguous() },
      { ember.cat({ q, q[{ { 2, 3 } }] }, 1), ember.cat({ g, g[{ { 2, 3 } }] }, 1) },
      { q:clone(), g:clone() },
      -- strided views across devices, both ways, and copy_ into a device tensor
      { q:narrow(2, 2, 2), q:narrow(2, 2, 2):to(V) },
      { q:t(), g:t():cpu():to(V) },
      { q, ember.empty(5, 3, { dtype = 'q4_1', device = V }):copy_(q) },
    }
    for i, c in ipairs(cases) do
      assert.are.equal('q4_1', c[2]:dtype())
      assert.are.same(Q.bytes(c[1]:contiguous()):totable(), Q.bytes(c[2]:cpu()):totable(), 'case ' .. i)
    end
    -- the rows picked on the device dequantize as those rows of the whole
    assert.are.same(q:dequantize():index_select(1, idx):totable(),
      g:index_select(1, idx:to(V)):dequantize():cpu():totable())
  end)

  it('looks up a QuantEmbedding on the device as the dense lookup of the dequantized weight', function()
    local nn = ember.nn
    ember.manual_seed(8)
    for _, f in ipairs({ 'q8_0', 'q4_k' }) do
      local model = nn.Sequential(nn.Embedding(9, 256))
      Q.quantize_model(model, { format = f, verbose = false })
      model:to(V)
      local w = model[1].weight
      assert.are.equal(V, tostring(w:device()))
      assert.are.equal(f, w:dtype())
      local idx = ember.tensor({ { 9, 2 }, { 2, 5 } }, { dtype = 'int64' }):to(V)
      local got = model:forward(idx)
      assert.are.equal(V, tostring(got:device()))
      local dense = nn.functional.embedding(idx:cpu(), w:cpu():dequantize())
      same_bits(got:cpu():view(-1):totable(), dense:view(-1):totable())
    end
  end)

  it('runs a quantized GPT on the device, its logits close to the dense model\'s', function()
    local G = require 'ember.models.gpt'
    for _, f in ipairs({ 'q8_0', 'q4_k' }) do
      ember.manual_seed(5)
      local m = G.GPT { vocab_size = 12, block_size = 16, n_layer = 1, n_head = 2, n_embd = 256 }
      m:to(V)
      m:evaluate()
      local idx = ember.tensor({ { 1, 5, 3, 12 } }, { dtype = 'int64' }):to(V)
      local dense = ember.no_grad(function() return m(idx) end):cpu()
      local _, report = G.quantize(m, { format = f, verbose = false })
      assert.are.same({}, report.skipped)
      assert.are.equal(f, m.transformer.h[1].mlp.c_fc.weight:dtype())
      local q = ember.no_grad(function() return m(idx) end)
      assert.are.equal(V, tostring(q:device()))
      local err = (q:cpu() - dense):abs():max():item()
      assert.is_true(err < 0.1 * dense:abs():max():item(), f .. ' error ' .. err)
    end
  end)

  it('refuses what has no kernel, naming the device', function()
    local g = Q.quantize(ember.zeros({ 2, 64 }), { format = 'q8_0' }):to(V)
    local ok, err = pcall(Q.linear, ember.zeros({ 1, 64 }):to(V), g)
    if not ok then assert.matches('not implemented on ' .. V, err, 1, true) end
    ok, err = pcall(Q.quantize, ember.zeros({ 2, 64 }):to(V), { format = 'q8_0' })
    assert.is_false(ok)
    assert.matches('ember.quant.quantize: not implemented on ' .. V, err, 1, true)
    assert.matches('add: not implemented for q8_0', select(2, pcall(function() return g + g end)))
  end)
end)
