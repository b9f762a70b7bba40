-- quant_device_spec: QTensors on Vulkan (kernels/quant_dequant.comp): blocks moved to the
-- device unchanged, dequantized there bit for bit as on the CPU (every format), on random
-- blocks, odd row counts and random raw bytes (quant.linear on Vulkan: quant_linear_vk_spec).
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
      assert.are.same(q.blocks:totable(), g.blocks:cpu():totable())
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
end)
