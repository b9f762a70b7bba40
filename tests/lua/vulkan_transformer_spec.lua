-- MultiheadAttention and the Transformer layers on Vulkan against the CPU: the same weights and
-- inputs on both devices, outputs and every gradient of a weighted sum compared. Covers the
-- fused attention path (need_weights = false, causal and padding masks) and the explicit one
-- (need_weights = true) as the layers compose them.
local VK = require('vk_helpers').open('vulkan transformer layers')
if not VK then return end
local ember = VK.ember
local nn = ember.nn

local tol = { 3e-5, 3e-5 } -- float32 sums in another order than the CPU's

-- Runs f(module, on) on a CPU module and a Vulkan copy with the same weights; f returns the
-- outputs and the inputs that require grad. Compares outputs, input and weight gradients.
local function check(name, make, f)
  ember.manual_seed(7)
  local cpu = make()
  local vk = make()
  vk:load_state_dict(cpu:state_dict())
  vk:to(VK.V)
  cpu:evaluate()
  vk:evaluate()
  local function run(m, on)
    local outs, ins = f(m, on)
    local loss
    for i, p in ipairs(outs) do
      local w = on(ember.arange(1, p:numel() + 1):view(p:size()):mul(0.01 * i):sin())
      local term = (p * w):sum()
      loss = loss and loss + term or term
    end
    loss:backward()
    return outs, ins
  end
  local oc, ic = run(cpu, function(t) return t:detach():clone() end) -- own leaves, no shared .grad
  local ov, iv = run(vk, VK.on)
  for i = 1, #oc do VK.agree(ov[i], oc[i], name .. ' output ' .. i, tol) end
  for i = 1, #ic do VK.agree(iv[i].grad, ic[i].grad, name .. ' grad input ' .. i, tol) end
  local pv = vk:named_parameters()
  for i, p in ipairs(cpu:named_parameters()) do
    VK.agree(pv[i][2].grad, p[2].grad, name .. ' grad ' .. p[1], tol)
  end
end

describe('vulkan Transformer layers against the CPU', function()
  ember.manual_seed(3)
  local x = ember.randn(2, 9, 16)
  local mem = ember.randn(2, 5, 16)
  local kpm = ember.zeros(2, 9, { dtype = 'bool' })
  kpm[{ 2, { 7, 9 } }] = true -- the second sequence is padded after 6 tokens
  local causal = ember.ones(9, 9, { dtype = 'bool' }):triu(1)

  it('MultiheadAttention: fused with padding, explicit with weights', function()
    check('mha', function() return nn.MultiheadAttention(16, 4, { batch_first = true }) end,
      function(m, on)
        local q = on(x):requires_grad_(true)
        local y1 = m(q, q, q, { key_padding_mask = on(kpm), need_weights = false })
        local y2, w = m(q, q, q, { attn_mask = on(causal) })
        return { y1, y2, w }, { q }
      end)
  end)

  it('TransformerEncoderLayer (pre-norm, gelu) with a causal mask as the is_causal hint', function()
    check('encoder layer', function()
      return nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32, dropout = 0,
        norm_first = true, activation = 'gelu', batch_first = true })
    end, function(m, on)
      local s = on(x):requires_grad_(true)
      return { m(s, { src_mask = on(causal), is_causal = true }) }, { s }
    end)
  end)

  it('TransformerDecoderLayer over a memory with a padding mask', function()
    check('decoder layer', function()
      return nn.TransformerDecoderLayer(16, 2, { dim_feedforward = 24, dropout = 0,
        batch_first = true })
    end, function(m, on)
      local t = on(x):requires_grad_(true)
      local mm = on(mem):requires_grad_(true)
      local mk = ember.zeros(2, 5, { dtype = 'bool' })
      mk[{ 1, 5 }] = true
      return { m(t, mm, { tgt_mask = on(causal), memory_key_padding_mask = on(mk) }) }, { t, mm }
    end)
  end)
end)
