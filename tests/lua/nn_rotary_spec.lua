-- nn.RotaryEmbedding and F.apply_rotary (LLaMA / GPT-NeoX half-rotation layout) against a
-- float64 formula written with plain Lua numbers, against Hugging Face's formulas run in
-- PyTorch (tests/lua/golden/make_sequence.py, "rope.*"), and by finite differences.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn
local F = nn.functional

-- Rotates x [T][D] (plain tables) for positions p0 .. p0 + T - 1 (0-based, as the formula).
local function reference(x, p0, base, rotary)
  local D = #x[1]
  local R = rotary or D
  local half = R / 2
  local y = {}
  for t, row in ipairs(x) do
    local pos = p0 + t - 1
    y[t] = {}
    for j = 1, D do y[t][j] = row[j] end
    for i = 1, half do
      local theta = pos * base ^ (-2 * (i - 1) / R)
      local c, s = math.cos(theta), math.sin(theta)
      local a, b = row[i], row[i + half]
      y[t][i] = a * c - b * s
      y[t][i + half] = b * c + a * s
    end
  end
  return y
end

describe('rotary position embedding', function()
  it('rotates [B, H, T, D] as the float64 formula, from position offset', function()
    H.seed(9)
    local rope = nn.RotaryEmbedding(8, { base = 500, max_len = 40, dtype = 'float64' })
    local xt = { H.rand_table({ 2, 6, 8 }, -2, 2), H.rand_table({ 2, 6, 8 }, -2, 2) } -- [B=2, H=2, T=6, D=8]
    local x = ember.tensor(xt, { dtype = 'float64' })
    for _, offset in ipairs({ 0, 3, 34 }) do
      local y = rope(x, { offset = offset })
      for b = 1, 2 do
        for h = 1, 2 do
          H.assert_close(y[b][h], reference(xt[b][h], offset, 500), 1e-12, 1e-12, 'offset ' .. offset)
        end
      end
    end
    -- one step of decoding at position 20 (0-based) is row 21 of the full sequence
    local full = ember.randn(1, 2, 24, 8, { dtype = 'float64' })
    local step = rope(full:narrow(3, 21, 1):contiguous(), { offset = 20 })
    H.assert_close(step, rope(full):narrow(3, 21, 1):totable(), 1e-15, 1e-15)
    -- float32 input: tables in float32 too, computed in float64 then rounded
    local y32 = rope(x:float(), { offset = 3 })
    assert.are.equal('float32', y32:dtype())
    H.assert_close(y32[1][1], reference(xt[1][1], 3, 500), 1e-5, 1e-6)
  end)

  it('rotates the first R dims only when the tables are narrower (rotary_pct)', function()
    local rope = nn.RotaryEmbedding(4, { max_len = 10, dtype = 'float64' })
    H.seed(10)
    local xt = H.rand_table({ 5, 10 }, -1, 1)
    local x = ember.tensor(xt, { dtype = 'float64' })
    local y = F.apply_rotary(x, rope.cos, rope.sin, { offset = 2 })
    H.assert_close(y, reference(xt, 2, 10000, 4), 1e-12, 1e-12)
  end)

  it("matches Hugging Face's LLaMA formulas run in PyTorch", function()
    local G = ember.load('tests/lua/golden/sequence.safetensors', { flat = true })
    local rope = nn.RotaryEmbedding(8, { max_len = 16 })
    H.assert_close(rope.cos, G['rope.cos']:totable(), 1e-6, 1e-6)
    H.assert_close(rope.sin, G['rope.sin']:totable(), 1e-6, 1e-6)
    local q = G['rope.q']:float()
    H.assert_close(rope(q, { offset = 5 }), G['rope.q_embed']:totable(), 1e-5, 1e-6)
    -- rotate_half as Hugging Face's
    H.assert_close(F.rotate_half(ember.tensor({ 1, 2, 3, 4 })), { -3, -4, 1, 2 }, 0, 0)
  end)

  it('gradchecks in float64', function()
    ember.manual_seed(11)
    local rope = nn.RotaryEmbedding(4, { max_len = 8, dtype = 'float64' })
    local x = ember.randn(1, 2, 3, 4, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(ember.autograd.gradcheck(function(a) return rope(a, { offset = 2 }) end, { x }))
  end)

  it('raises clearly on bad arguments', function()
    local rope = nn.RotaryEmbedding(8, { max_len = 6 })
    H.assert_error(function() rope(ember.randn(1, 1, 4, 8), { offset = 3 }) end,
      'apply_rotary: positions 4..7 exceed the table of 6 positions')
    H.assert_error(function() rope(ember.randn(1, 1, 4, 8), { ofset = 3 }) end, 'apply_rotary: unknown option ofset')
    H.assert_error(function() rope(ember.randn(1, 1, 4, 6)) end,
      'apply_rotary: expected tables of an even width at most the head dim 6, got 8')
    H.assert_error(function() nn.RotaryEmbedding(7) end, 'RotaryEmbedding: expected an even dim >= 2, got 7')
    H.assert_error(function() nn.RotaryEmbedding(8, { max_length = 3 }) end, 'RotaryEmbedding: unknown option max_length')
  end)
end)
