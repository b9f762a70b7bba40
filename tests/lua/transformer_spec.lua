-- MultiheadAttention and the Transformer layers against PyTorch (tests/lua/golden/
-- make_transformer.py wrote the state_dicts by PyTorch's key names, inputs, outputs and
-- gradients), plus their argument errors.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn

local g, state_dict = H.golden('tests/lua/golden/transformer.safetensors')
local function mask(name) return g(name):ne(0) end

local function close(actual, expected, tol, what)
  tol = tol or 1e-5
  assert.are.same(expected:size(), actual:size(), what)
  local a, e = actual:to('float64'), expected:to('float64')
  local scale = math.max(1, e:abs():masked_fill(e:isinf(), 0):max():item())
  local diff = (a - e):abs():masked_fill(a:eq(e), 0):max():item() -- equal infinities agree
  assert(diff <= tol * scale, ('%s: max difference %g (tolerance %g)'):format(what or '', diff,
    tol * scale))
end

local function weighted_backward(y, case)
  (y * g(case .. '.r')):sum():backward()
end

describe('nn.MultiheadAttention against PyTorch', function()
  it('cross-attention with a key padding mask and a float attn_mask, weights averaged and per head', function()
    local m = nn.MultiheadAttention(8, 2)
    m:load_state_dict(state_dict('mha'))
    local q = g('mha.q'):clone():requires_grad_(true)
    local y, w = m(q, g('mha.k'), g('mha.v'), { key_padding_mask = mask('mha.kpm'),
      attn_mask = g('mha.am') })
    close(y, g('mha.y'), 1e-5, 'output')
    close(w, g('mha.w'), 1e-5, 'averaged weights')
    weighted_backward(y, 'mha')
    close(q.grad, g('mha.grad.q'), 1e-5, 'grad q')
    close(m.in_proj_weight.grad, g('mha.grad.in_proj_weight'), 1e-5, 'grad in_proj_weight')
    local _, wh = m(q, g('mha.k'), g('mha.v'), { key_padding_mask = mask('mha.kpm'),
      attn_mask = g('mha.am'), average_attn_weights = false })
    close(wh, g('mha.w_heads'), 1e-5, 'weights per head')
    local yf, none = m(q, g('mha.k'), g('mha.v'), { key_padding_mask = mask('mha.kpm'),
      attn_mask = g('mha.am'), need_weights = false })
    assert.is_nil(none)
    close(yf, g('mha.y_fused'), 1e-5, 'fused output')
  end)

  it('self-attention, batch_first, a boolean causal mask, fused', function()
    local m = nn.MultiheadAttention(12, 3, { batch_first = true })
    m:load_state_dict(state_dict('self'))
    local x = g('self.x'):clone():requires_grad_(true)
    local causal = ember.ones(7, 7, { dtype = 'bool' }):triu(1)
    local y = m(x, x, x, { attn_mask = causal, need_weights = false })
    close(y, g('self.y'), 1e-5, 'output')
    weighted_backward(y, 'self')
    close(x.grad, g('self.grad.x'), 1e-5, 'grad x')
    close(m.in_proj_weight.grad, g('self.grad.in_proj_weight'), 1e-5, 'grad in_proj_weight')
    close(m.out_proj.weight.grad, g('self.grad.out_proj.weight'), 1e-5, 'grad out_proj.weight')
    -- is_causal with the mask as the hint gives the same numbers through the causal kernel
    local yc = m(x, x, x, { attn_mask = causal, need_weights = false, is_causal = true })
    close(yc, g('self.y'), 1e-5, 'is_causal hint')
  end)

  it('kdim/vdim, add_bias_kv and add_zero_attn on unbatched inputs', function()
    local m = nn.MultiheadAttention(8, 4, { kdim = 5, vdim = 3, add_bias_kv = true,
      add_zero_attn = true })
    local keys = {}
    for k in pairs(m:state_dict()) do keys[#keys + 1] = k end
    table.sort(keys)
    assert.are.same({ 'bias_k', 'bias_v', 'in_proj_bias', 'k_proj_weight', 'out_proj.bias',
      'out_proj.weight', 'q_proj_weight', 'v_proj_weight' }, keys)
    m:load_state_dict(state_dict('kv'))
    local y, w = m(g('kv.q'), g('kv.k'), g('kv.v'))
    close(y, g('kv.y'), 1e-5, 'output')
    close(w, g('kv.w'), 1e-5, 'weights')
  end)

  it('refuses bad arguments with clear errors', function()
    assert.has_error(function() nn.MultiheadAttention(10, 3) end,
      'MultiheadAttention: embed_dim (10) must be divisible by num_heads (3)')
    assert.has_error(function() nn.MultiheadAttention(8, 2, { batchfirst = true }) end)
    local m = nn.MultiheadAttention(8, 2)
    local x = ember.randn(4, 2, 8)
    local ok, err = pcall(m, x, x, x, { need_weight = false })
    assert.is_false(ok)
    assert.matches('unknown option need_weight', err)
    ok, err = pcall(m, x, x, x, { attn_mask = ember.zeros(3, 4) })
    assert.is_false(ok)
    assert.matches('expected a 2%-D attn_mask of %[4, 4%], got %[3, 4%]', err)
    ok, err = pcall(m, x, x, x, { key_padding_mask = ember.zeros(4, 2, { dtype = 'bool' }) })
    assert.is_false(ok)
    assert.matches('expected key_padding_mask of %[2, 4%], got %[4, 2%]', err)
    ok, err = pcall(m, ember.randn(4, 2, 6), x, x)
    assert.is_false(ok)
    assert.matches('expected query of embed_dim 8', err)
    ok, err = pcall(m, x, x, x, { is_causal = true })
    assert.is_false(ok)
    assert.matches('pass attn_mask too', err)
  end)
end)

describe('Transformer layers against PyTorch', function()
  it('TransformerEncoderLayer, post-norm, relu, causal and padding masks', function()
    local m = nn.TransformerEncoderLayer(16, 4, { dim_feedforward = 32, dropout = 0 })
    m:load_state_dict(state_dict('enc'))
    local x = g('enc.x'):clone():requires_grad_(true)
    local y = m(x, { src_mask = g('enc.mask'), src_key_padding_mask = mask('enc.kpm') })
    close(y, g('enc.y'), 1e-5, 'output')
    weighted_backward(y, 'enc')
    close(x.grad, g('enc.grad.x'), 1e-5, 'grad x')
    close(m.linear1.weight.grad, g('enc.grad.linear1.weight'), 1e-5, 'grad linear1.weight')
    close(m.self_attn.in_proj_weight.grad, g('enc.grad.self_attn.in_proj_weight'), 1e-5,
      'grad self_attn.in_proj_weight')
    -- PyTorch's positional form
    close(m(x, g('enc.mask'), mask('enc.kpm')), g('enc.y'), 1e-5, 'positional masks')
  end)

  it('TransformerEncoderLayer, pre-norm, gelu, batch_first', function()
    local m = nn.TransformerEncoderLayer(16, 2, { dim_feedforward = 24, dropout = 0,
      activation = 'gelu', norm_first = true, batch_first = true })
    m:load_state_dict(state_dict('encpre'))
    local x = g('encpre.x'):clone():requires_grad_(true)
    local y = m(x)
    close(y, g('encpre.y'), 1e-5, 'output')
    weighted_backward(y, 'encpre')
    close(x.grad, g('encpre.grad.x'), 1e-5, 'grad x')
    close(m.norm1.weight.grad, g('encpre.grad.norm1.weight'), 1e-5, 'grad norm1.weight')
  end)

  it('TransformerDecoderLayer with a causal target mask and a memory padding mask', function()
    local m = nn.TransformerDecoderLayer(16, 4, { dim_feedforward = 32, dropout = 0 })
    m:load_state_dict(state_dict('dec'))
    local t = g('dec.t'):clone():requires_grad_(true)
    local mem = g('dec.mem'):clone():requires_grad_(true)
    local y = m(t, mem, { tgt_mask = g('dec.tmask'), memory_key_padding_mask = mask('dec.mkpm') })
    close(y, g('dec.y'), 1e-5, 'output')
    weighted_backward(y, 'dec')
    close(t.grad, g('dec.grad.t'), 1e-5, 'grad tgt')
    close(mem.grad, g('dec.grad.mem'), 1e-5, 'grad memory')
    close(m.multihead_attn.in_proj_weight.grad, g('dec.grad.multihead_attn.in_proj_weight'),
      1e-5, 'grad multihead_attn.in_proj_weight')
  end)

  it('nn.Transformer loads PyTorch\'s state_dict by name (encoder.layers.0...)', function()
    local m = nn.Transformer({ d_model = 8, nhead = 2, num_encoder_layers = 2,
      num_decoder_layers = 2, dim_feedforward = 16, dropout = 0, batch_first = true })
    m:load_state_dict(state_dict('tr')) -- strict: every key matches by name and shape
    local src = g('tr.src'):clone():requires_grad_(true)
    local y = m(src, g('tr.tgt'), { tgt_mask = nn.Transformer.generate_square_subsequent_mask(4) })
    close(y, g('tr.y'), 1e-5, 'output')
    weighted_backward(y, 'tr')
    close(src.grad, g('tr.grad.src'), 1e-5, 'grad src')
  end)

  it('TransformerEncoder copies its layer, and layers are independent', function()
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local enc = nn.TransformerEncoder(layer, 3, { norm = nn.LayerNorm(8) })
    assert.are.equal(3, #enc.layers:children())
    local a, b = enc.layers:children()[1], enc.layers:children()[2]
    assert.are_not.equal(a.linear1.weight, b.linear1.weight)
    close(a.linear1.weight, layer.linear1.weight, 0, 'copied weights')
    assert.has_error(function() nn.TransformerEncoder(nn.Linear(2, 2), 2) end)
    assert.has_error(function() nn.TransformerEncoderLayer(8, 2, { dim_feed_forward = 4 }) end)
  end)

  it('generate_square_subsequent_mask matches PyTorch', function()
    close(nn.Transformer.generate_square_subsequent_mask(6), g('enc.mask'), 0, 'mask')
  end)
end)
