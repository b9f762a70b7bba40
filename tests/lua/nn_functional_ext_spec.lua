-- nn.functional's activations, pad, interpolate, distances, pixel shuffle, unfold / fold and
-- embedding_bag (ember/nn/activation_ext.lua, functional_ext.lua) against PyTorch's outputs
-- and gradients (tests/lua/golden/make_nn_functional.py), finite differences, and the same
-- calls on the Vulkan device (lavapipe) against the same values.
local G = require 'nn_golden'
local H = require 'helpers'
local ember = G.ember
local nn = ember.nn
local F = nn.functional
local gradcheck = ember.autograd.gradcheck

-- case name -> { input names, call, int inputs }
local calls = {
  logsigmoid = { { 'x' }, function(t) return F.logsigmoid(t.x) end },
  hardtanh = { { 'x' }, function(t) return F.hardtanh(t.x, -1.5, 2) end },
  relu6 = { { 'x' }, function(t) return F.relu6(t.x) end },
  hardswish = { { 'x' }, function(t) return F.hardswish(t.x) end },
  hardsigmoid = { { 'x' }, function(t) return F.hardsigmoid(t.x) end },
  selu = { { 'x' }, function(t) return F.selu(t.x) end },
  celu = { { 'x' }, function(t) return F.celu(t.x, { alpha = 1.5 }) end },
  mish = { { 'x' }, function(t) return F.mish(t.x) end },
  softsign = { { 'x' }, function(t) return F.softsign(t.x) end },
  glu_last = { { 'x' }, function(t) return F.glu(t.x) end },
  glu_dim1 = { { 'x' }, function(t) return F.glu(t.x, 2) end },
  threshold = { { 'x' }, function(t) return F.threshold(t.x, 0.2, -3) end },
  prelu = { { 'x', 'w' }, function(t) return F.prelu(t.x, t.w) end },
  prelu1 = { { 'x', 'w' }, function(t) return F.prelu(t.x, t.w) end },
  softmin = { { 'x' }, function(t) return F.softmin(t.x, 2) end },
  softplus = { { 'x' }, function(t) return F.softplus(t.x, { beta = 2, threshold = 5 }) end },

  linear = { { 'x', 'w', 'b' }, function(t) return F.linear(t.x, t.w, t.b) end },
  linear_1d = { { 'x', 'w' }, function(t) return F.linear(t.x, t.w) end },

  pad_constant = { { 'x' }, function(t) return F.pad(t.x, { 1, 2, 0, 1, 2, 0 }, { value = 0.5 }) end },
  pad_negative = { { 'x' }, function(t) return F.pad(t.x, { -1, 2, 1, -2 }) end },
  pad_reflect = { { 'x' }, function(t) return F.pad(t.x, { 2, 1, 3, 1 }, 'reflect') end },
  pad_replicate = { { 'x' }, function(t) return F.pad(t.x, { 1, 2, 2, 0, 1, 1 }, 'replicate') end },
  pad_circular = { { 'x' }, function(t) return F.pad(t.x, { 2, 3 }, { mode = 'circular' }) end },
  pad_reflect1d = { { 'x' }, function(t) return F.pad(t.x, { 3, 2 }, 'reflect') end },

  interp_nearest_sf = { { 'x' }, function(t) return F.interpolate(t.x, { scale_factor = 2 }) end },
  interp_nearest_size = { { 'x' }, function(t) return F.interpolate(t.x, { 7, 3 }) end },
  -- PyTorch 1.13's forward takes floor(j / 2.1) here, its backward j / 2 (an output of twice
  -- the input's size) and j (1x): its gradient is not its forward's. Ember's is (gradcheck).
  interp_nearest_sf21 = { { 'x' }, function(t) return F.interpolate(t.x, nil, 2.1) end, nil, { x = true } },
  interp_nearest_sf11 = { { 'x' }, function(t) return F.interpolate(t.x, { scale_factor = 1.1 }) end, nil,
    { x = true } },
  interp_nearest_3 = { { 'x' }, function(t) return F.interpolate(t.x, { 12, 7 }) end },
  interp_nearest_exact = { { 'x' }, function(t)
    return F.interpolate(t.x, { size = { 7, 8 }, mode = 'nearest-exact' })
  end },
  interp_bilinear = { { 'x' }, function(t) return F.interpolate(t.x, { 7, 9 }, nil, 'bilinear') end },
  interp_bilinear_ac = { { 'x' }, function(t)
    return F.interpolate(t.x, { size = { 7, 9 }, mode = 'bilinear', align_corners = true })
  end },
  interp_bilinear_sf = { { 'x' }, function(t)
    return F.interpolate(t.x, { scale_factor = 1.5, mode = 'bilinear' })
  end },
  interp_bilinear_down = { { 'x' }, function(t)
    return F.interpolate(t.x, { size = { 3, 2 }, mode = 'bilinear' })
  end },
  interp_linear = { { 'x' }, function(t)
    return F.interpolate(t.x, { size = 9, mode = 'linear', align_corners = true })
  end },
  interp_trilinear = { { 'x' }, function(t)
    return F.interpolate(t.x, { scale_factor = { 2, 1.5, 1 }, mode = 'trilinear' })
  end },
  interp_area = { { 'x' }, function(t) return F.interpolate(t.x, { size = { 3, 2 }, mode = 'area' }) end },

  normalize = { { 'x' }, function(t) return F.normalize(t.x) end },
  normalize_p1 = { { 'x' }, function(t) return F.normalize(t.x, { p = 1, dim = -1 }) end },
  cosine_similarity = { { 'a', 'b' }, function(t) return F.cosine_similarity(t.a, t.b) end },
  cosine_similarity_bcast = { { 'a', 'b' }, function(t) return F.cosine_similarity(t.a, t.b, -1) end },
  pairwise_distance = { { 'a', 'b' }, function(t) return F.pairwise_distance(t.a, t.b) end },
  pairwise_distance_p3 = { { 'a', 'b' }, function(t)
    return F.pairwise_distance(t.a, t.b, { p = 3, keepdim = true })
  end },

  pixel_shuffle = { { 'x' }, function(t) return F.pixel_shuffle(t.x, 2) end },
  pixel_unshuffle = { { 'x' }, function(t) return F.pixel_unshuffle(t.x, 2) end },
  unfold = { { 'x' }, function(t)
    return F.unfold(t.x, { 2, 3 }, { dilation = { 1, 2 }, padding = 1, stride = { 2, 1 } })
  end },
  unfold_plain = { { 'x' }, function(t) return F.unfold(t.x, 2) end },
  fold = { { 'x' }, function(t)
    return F.fold(t.x, { 5, 6 }, { 2, 3 }, { 1, 2 }, 1, { 2, 1 })
  end },
  fold_overlap = { { 'x' }, function(t) return F.fold(t.x, { 4, 4 }, 3) end },
}

local bag_ints = { i = true, o = true }
for _, mode in ipairs({ 'sum', 'mean', 'max' }) do
  calls['bag_' .. mode] = { { 'w', 'i', 'o' }, function(t)
    return F.embedding_bag(t.i + 1, t.w, t.o + 1, { mode = mode })
  end, bag_ints }
end
calls.bag_psw = { { 'w', 'i', 'o', 's' }, function(t)
  return F.embedding_bag(t.i + 1, t.w, { offsets = t.o + 1, mode = 'sum', per_sample_weights = t.s })
end, bag_ints }
calls.bag_pad_last = { { 'w', 'i', 'o' }, function(t)
  return F.embedding_bag(t.i + 1, t.w, { offsets = t.o + 1, padding_idx = 5, include_last_offset = true })
end, bag_ints }
calls.bag_2d_max = { { 'w', 'i' }, function(t) return F.embedding_bag(t.i + 1, t.w, { mode = 'max' }) end,
  { i = true } }

local names = {}
for k in pairs(calls) do names[#names + 1] = k end
table.sort(names)

describe('nn.functional against PyTorch', function()
  for _, name in ipairs(names) do
    local c = calls[name]
    it(name, function() G.check(name, c[1], c[2], { ints = c[3], skip_grad = c[4] }) end)
  end

  it('covers every golden case of these families', function()
    for _, prefix in ipairs({ 'pad_', 'interp_', 'bag_', 'glu', 'prelu', 'normalize',
      'pixel_', 'unfold', 'fold', 'linear', 'logsig', 'hard', 'relu6', 'selu', 'celu', 'mish',
      'softs', 'softm', 'threshold', 'interp', 'cosine_sim', 'pairwise' }) do
      for _, c in ipairs(G.cases(prefix)) do assert(calls[c], 'no call for golden case ' .. c) end
    end
  end)
end)

describe('nn.functional gradients by finite differences', function()
  local function x64(...) return ember.randn({ ... }, { dtype = 'float64' }):requires_grad_() end
  it('pad (reflect, replicate, circular, constant)', function()
    local x = x64(2, 3, 4)
    for _, mode in ipairs({ 'reflect', 'replicate', 'circular', 'constant' }) do
      assert(gradcheck(function(a) return F.pad(a, { 2, 1, 1, 2 }, mode) end, { x }))
    end
  end)
  it('interpolate bilinear and nearest', function()
    local x = x64(1, 2, 3, 4)
    assert(gradcheck(function(a) return F.interpolate(a, { size = { 5, 3 }, mode = 'bilinear' }) end, { x }))
    assert(gradcheck(function(a) return F.interpolate(a, { scale_factor = 2 }) end, { x }))
    assert(gradcheck(function(a) return F.interpolate(a, { scale_factor = 2.1 }) end, { x }))
  end)
  it('fold, unfold, pixel_shuffle', function()
    assert(gradcheck(function(a) return F.fold(a, { 4, 3 }, 2, { stride = 1, padding = 1 }) end,
      { x64(1, 8, 20) }))
    assert(gradcheck(function(a) return F.unfold(a, 2, { dilation = 2, stride = 2 }) end, { x64(1, 2, 5, 5) }))
    assert(gradcheck(function(a) return F.pixel_shuffle(a, 2) end, { x64(1, 4, 2, 3) }))
  end)
  it('activations and distances', function()
    local x = (x64(3, 4) * 2):detach():requires_grad_()
    for _, f in ipairs({ F.logsigmoid, F.selu, F.mish, F.softsign, F.hardswish,
      function(a) return F.celu(a, 0.7) end, function(a) return F.glu(a, 2) end,
      function(a) return F.softmin(a, 1) end, function(a) return F.normalize(a, 3, 2) end }) do
      assert(gradcheck(f, { x }))
    end
    assert(gradcheck(function(a, b) return F.cosine_similarity(a, b, 1) end, { x, x64(3, 4) }))
    assert(gradcheck(function(a, b) return F.pairwise_distance(a, b, 1.5) end, { x, x64(3, 4) }))
    assert(gradcheck(function(a, w) return F.prelu(a, w) end, { x, x64(4) }))
  end)
  it('embedding_bag max and per-sample weights', function()
    local w = x64(6, 3)
    local i = ember.tensor({ 1, 3, 2, 6, 5 }, { dtype = 'int64' })
    assert(gradcheck(function(a) return F.embedding_bag(i, a, { 1, 3, 3 }, { mode = 'max' }) end, { w }))
    assert(gradcheck(function(a, s)
      return F.embedding_bag(i, a, { 1, 4 }, { mode = 'sum', per_sample_weights = s })
    end, { w, x64(5) }))
  end)
end)

describe('nn.functional arguments', function()
  local x = ember.randn({ 2, 3, 4 })
  it('refuses misspelt options and bad modes', function()
    H.assert_error(function() F.pad(x, { 1, 1 }, { mdoe = 'reflect' }) end, 'unknown option mdoe')
    H.assert_error(function() F.pad(x, { 1, 1 }, 'mirror') end, "mode must be 'constant'")
    H.assert_error(function() F.pad(x, { 4, 0 }, 'reflect') end, 'must be at most 3')
    H.assert_error(function() F.pad(x, { 1 }) end, 'even number')
    H.assert_error(function() F.hardtanh(x, { min = 0 }) end, 'unknown option min')
    H.assert_error(function() F.interpolate(x, { size = 3, scale_factor = 2 }) end, 'exactly one of')
    H.assert_error(function() F.interpolate(x, { size = 3, align_corners = true }) end, 'align_corners can only')
    H.assert_error(function() F.interpolate(x:unsqueeze(1), { size = 3, mode = 'bicubic' }) end,
      "'bicubic' is not implemented")
    H.assert_error(function() F.interpolate(x, { size = 3, mode = 'bilinear' }) end, 'expects a 4-D input')
    H.assert_error(function() F.glu(ember.randn({ 3 })) end, 'must be even')
    H.assert_error(function() F.pixel_shuffle(x, 2) end, 'not divisible')
    H.assert_error(function() F.prelu(x, ember.ones({ 2 })) end, 'weight has 2 elements')
    H.assert_error(function() F.fold(ember.randn({ 1, 8, 5 }), { 4, 4 }, 2) end, 'blocks')
    local w = ember.randn({ 5, 2 })
    H.assert_error(function() F.embedding_bag(ember.tensor({ 1, 6 }, { dtype = 'int64' }), w, { 1 }) end,
      'index 6 is out of range for 5 rows')
    H.assert_error(function()
      F.embedding_bag(ember.tensor({ 1, 2 }, { dtype = 'int64' }), w, { 1 }, { mode = 'max', max_norm = 1 })
    end, 'max_norm is not implemented')
  end)
  it('inplace writes into the input', function()
    local y = ember.tensor({ -8.0, 0.5, 9.0 })
    local r = F.relu6(y, true)
    assert.are.equal(r, y)
    H.assert_close(y, { 0, 0.5, 6 })
  end)
end)

describe('nn.functional layouts and empty batches', function()
  -- a strided (transposed) or broadcast (expanded) input gives what its contiguous copy gives
  local fs = {
    function(a) return F.pad(a, { 1, 2, 2, 1 }, 'reflect') end,
    function(a) return F.pad(a, { 1, 2 }, 'circular') end,
    function(a) return F.interpolate(a, { size = { 5, 7 }, mode = 'bilinear' }) end,
    function(a) return F.unfold(a, 2, { padding = 1 }) end,
    function(a) return F.pixel_unshuffle(a, 2) end,
    function(a) return F.normalize(a, 2, 3) end,
    function(a) return F.glu(a, 3) end,
    function(a) return F.max_pool3d(a:unsqueeze(1), 2) end,
    function(a) return F.avg_pool3d(a:unsqueeze(1), 2, 1) end,
    function(a) return F.conv3d(a:unsqueeze(1), ember.ones({ 2, 2, 1, 2, 2 })) end,
  }
  it('strided and expanded inputs', function()
    local base = ember.randn({ 2, 3, 4, 4 })
    local views = { base:transpose(3, 4), base:narrow(1, 1, 1):expand(2, 3, 4, 4),
      ember.randn({ 2, 3, 4, 8 }):slice(4, 1, 8, 2) }
    for i, f in ipairs(fs) do
      for j, v in ipairs(views) do
        H.assert_close(f(v), f(v:contiguous()):totable(), 1e-6, 1e-6, ('function %d view %d'):format(i, j))
      end
    end
  end)
  it('zero-size batches, forward and backward', function()
    local x = ember.zeros({ 0, 2, 4, 4 }):requires_grad_()
    local outs = { F.pad(x, { 1, 1, 1, 1 }, 'replicate'), F.interpolate(x, { scale_factor = 2, mode = 'bilinear' }),
      F.unfold(x, 2), F.pixel_shuffle(x:reshape(0, 1, 8, 4), 1), F.mish(x), F.glu(x, 2),
      F.conv3d(x:unsqueeze(2), ember.ones({ 3, 1, 1, 2, 2 })), F.max_pool3d(x:unsqueeze(2), { 1, 2, 2 }),
      F.avg_pool3d(x:unsqueeze(2), { 1, 2, 2 }), F.huber_loss(x, x, 'sum') }
    for i, y in ipairs(outs) do
      assert(y:numel() == 0 or y:dim() == 0, 'output ' .. i)
      local g = ember.autograd.grad(y:sum(), { x })[1]
      assert.are.same({ 0, 2, 4, 4 }, { g:size(1), g:size(2), g:size(3), g:size(4) })
    end
  end)
end)

describe('nn modules of the new functions', function()
  it('build, print and call their function', function()
    local x = ember.randn({ 2, 4, 3, 3 })
    local cases = {
      { nn.Hardtanh(-1, 1), F.hardtanh(x, -1, 1) }, { nn.ReLU6(), F.relu6(x) },
      { nn.CELU(0.5), F.celu(x, 0.5) }, { nn.GLU(2), F.glu(x, 2) }, { nn.Softmin(2), F.softmin(x, 2) },
      { nn.Threshold(0.1, 2), F.threshold(x, 0.1, 2) }, { nn.Softplus(2), F.softplus(x, 2) },
      { nn.LogSigmoid(), F.logsigmoid(x) }, { nn.Mish(), F.mish(x) }, { nn.SELU(), F.selu(x) },
      { nn.Hardswish(), F.hardswish(x) }, { nn.Hardsigmoid(), F.hardsigmoid(x) },
      { nn.Softsign(), F.softsign(x) },
      { nn.ReflectionPad2d(1), F.pad(x, { 1, 1, 1, 1 }, 'reflect') },
      { nn.ZeroPad2d({ 1, 0, 2, 0 }), F.pad(x, { 1, 0, 2, 0 }) },
      { nn.ConstantPad1d(2, 3.5), F.pad(x, { 2, 2 }, 'constant', 3.5) },
      { nn.ReplicationPad3d(1), F.pad(x, { 1, 1, 1, 1, 1, 1 }, 'replicate') },
      { nn.Upsample({ scale_factor = 2, mode = 'bilinear' }), F.interpolate(x, nil, 2, 'bilinear') },
      { nn.PixelShuffle(2), F.pixel_shuffle(x, 2) }, { nn.PixelUnshuffle(3), F.pixel_unshuffle(x, 3) },
      { nn.Unfold(2, { padding = 1 }), F.unfold(x, 2, 1, 1) },
    }
    for i, c in ipairs(cases) do
      local y = c[1]:forward(x)
      H.assert_close(y, c[2]:totable(), 1e-6, 1e-6, tostring(c[1]) .. ' (' .. i .. ')')
      assert(#tostring(c[1]) > 0)
    end
    local p = nn.PReLU(4)
    assert.are.equal(4, p.weight:numel())
    H.assert_close(p:forward(x), F.prelu(x, p.weight):totable())
    local bag = nn.EmbeddingBag(10, 3, { mode = 'sum' })
    local ids = ember.tensor({ 1, 2, 3, 4 }, { dtype = 'int64' })
    H.assert_close(bag:forward(ids, { 1, 3 }), F.embedding_bag(ids, bag.weight, { 1, 3 }, { mode = 'sum' }):totable())
    H.assert_error(function() nn.EmbeddingBag(10, 3, { mdoe = 'sum' }) end, 'unknown option mdoe')
  end)
end)

local VK = require('vk_helpers').open('nn.functional on vulkan')
if VK then
  describe('nn.functional on ' .. VK.V .. ' against PyTorch', function()
    for _, name in ipairs(names) do
      local c = calls[name]
      it(name, function()
        G.check(name, c[1], c[2], { ints = c[3], skip_grad = c[4], device = VK.V, dtype = 'float32', rtol = 2e-4, atol = 2e-5 })
      end)
    end
  end)
end
