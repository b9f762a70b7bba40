-- quant_device_spec: QTensors on Vulkan (kernels/quant_dequant.comp): blocks moved to the
-- device unchanged, dequantized there bit for bit as on the CPU (the GGUF formats), on
-- random blocks, odd row counts and random raw bytes; the affine formats refuse with "not
-- implemented on <device>" rather than going through the host.
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
  for _, f in ipairs({ 'q8_0', 'q4_0', 'q4_1', 'q4_k', 'q6_k' }) do
    local cols = f:find('_k') and 512 or 96
    it(f .. ' dequantizes on the device as on the CPU', function()
      H.seed(21)
      local t = {}
      for r = 1, 7 do
        t[r] = {}
        for j = 1, cols do t[r][j] = (H.random() - 0.5) * 10 end
      end
      local q = Q.quantize(ember.tensor(t), { format = f })
      local g = q:to(V)
      assert.are.equal(V, tostring(g:device()))
      assert.are.same(q.blocks:totable(), g.blocks:cpu():totable())
      local y = g:dequantize()
      assert.are.equal(V, tostring(y:device()))
      same_bits(y:cpu():view(-1):totable(), q:dequantize():view(-1):totable())
      -- raw bytes: every code and scale pattern, including subnormal fp16 scales
      local bytes = {}
      for i = 1, q:nbytes() do bytes[i] = math.floor(H.random() * 256) end
      local r = Q.from_blocks(ember.tensor(bytes, { dtype = 'uint8' }), { format = f, shape = { 7, cols } })
      same_bits(r:to(V):dequantize():cpu():view(-1):totable(), r:dequantize():view(-1):totable())
      -- a 16-bit result is the float32 one rounded
      local h = g:dequantize({ dtype = 'float16' })
      assert.are.same(q:dequantize():to('float16'):float():totable(), h:cpu():float():totable())
    end)
  end

  it('refuses formats without a kernel, naming the device', function()
    local g = Q.quantize(ember.zeros({ 1, 256 }), { format = 'int4', group = 32 }):to(V)
    local ok, err = pcall(g.dequantize, g)
    assert.is_false(ok)
    assert.matches('format int4 is not implemented on ' .. V, err, 1, true)
  end)
end)
