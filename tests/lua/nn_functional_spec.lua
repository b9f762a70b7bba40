-- ember.nn.functional, convolution and pooling, against independent references (tests/lua/
-- nn_ref.lua: direct loops over Lua tables in double) and finite differences
-- (ember.autograd.gradcheck, float64). Normalization, dropout, embedding and the losses are in
-- nn_functional_norm_spec.lua.
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = require 'ember.nn.functional'
local R = require 'tests.lua.nn_ref'

local gradcheck = ember.autograd.gradcheck
local rnd, leaf, flat, check = R.rnd, R.leaf, R.flat, R.check
local conv2d_ref, conv_transpose2d_ref = R.conv2d_ref, R.conv_transpose2d_ref
local max_pool_ref, avg_pool_ref, adaptive_ref = R.max_pool_ref, R.avg_pool_ref, R.adaptive_ref

-- ---- convolution -----------------------------------------------------------------------------------

describe('conv2d', function()
  local cases = {
    { 'batch 1, 1 channel', { 1, 1, 5, 5 }, { 1, 1, 3, 3 }, {} },
    { 'stride and padding per axis', { 2, 3, 7, 6 }, { 4, 3, 3, 2 }, { stride = { 2, 1 }, padding = { 1, 0 } } },
    { 'dilation and groups', { 3, 4, 9, 8 }, { 6, 2, 3, 3 }, { dilation = 2, padding = 2, groups = 2 } },
    { 'depthwise', { 2, 4, 6, 7 }, { 4, 1, 3, 3 }, { groups = 4, padding = 1, stride = 2 } },
    { 'depthwise multiplier 2', { 1, 3, 5, 5 }, { 6, 1, 3, 3 }, { groups = 3, padding = 1 } },
    { '1x1 (columns are the input)', { 2, 5, 4, 3 }, { 3, 5, 1, 1 }, {} },
    { '1x1 strided', { 2, 5, 5, 4 }, { 3, 5, 1, 1 }, { stride = 2 } },
    { 'kernel as large as the padded input', { 2, 2, 3, 4 }, { 3, 2, 5, 6 }, { padding = 1 } },
    { 'odd sizes, several K blocks and panels', { 2, 20, 11, 13 }, { 13, 20, 5, 5 }, { padding = 2 } },
    { 'strided and dilated, no bias', { 1, 3, 10, 9 }, { 2, 3, 2, 3 }, { stride = 3, dilation = { 2, 1 } }, true },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(3)
        local x, w = rnd(c[2], dtype), rnd(c[3], dtype)
        local b = not c[5] and rnd({ c[3][1] }, dtype) or nil
        local ref, shape = conv2d_ref(x, w, b, c[4])
        check(F.conv2d(x, w, b, c[4]), ref, shape, dtype == 'float32' and 2e-5 or 1e-12, c[1])
      end)
    end
  end

  it('takes PyTorch positional options', function()
    H.seed(4)
    local x, w, b = rnd({ 1, 2, 6, 6 }), rnd({ 3, 2, 3, 3 }), rnd({ 3 })
    local ref, shape = conv2d_ref(x, w, b, { stride = 2, padding = 1 })
    check(F.conv2d(x, w, b, 2, 1), ref, shape, 1e-12)
  end)

  it('reads strided and transposed inputs', function()
    H.seed(5)
    local base = rnd({ 2, 3, 6, 8 })
    local x = base:transpose(3, 4) -- [2, 3, 8, 6], not contiguous
    local w = rnd({ 4, 3, 3, 3 })
    local ref, shape = conv2d_ref(x:contiguous(), w, nil, { padding = 1 })
    check(F.conv2d(x, w, nil, { padding = 1 }), ref, shape, 1e-12)
    local sliced = rnd({ 2, 6, 5, 5 })[{ {}, { 1, 6, 2 } }]
    local ref2, shape2 = conv2d_ref(sliced:contiguous(), w, nil, {})
    check(F.conv2d(sliced, w), ref2, shape2, 1e-12)
  end)

  it('accepts an unbatched input and an empty batch', function()
    H.seed(6)
    local x, w, b = rnd({ 3, 5, 5 }), rnd({ 2, 3, 3, 3 }), rnd({ 2 })
    local ref = conv2d_ref(x:unsqueeze(1), w, b, { padding = 1 })
    check(F.conv2d(x, w, b, { padding = 1 }), ref, { 2, 5, 5 }, 1e-12)
    local y = F.conv2d(ember.zeros(0, 3, 5, 5, { dtype = 'float64' }), w, b)
    assert.same({ 0, 2, 3, 3 }, { y:size(1), y:size(2), y:size(3), y:size(4) })
  end)

  it("supports padding 'same' (odd and even kernels) and 'valid'", function()
    H.seed(7)
    local x = rnd({ 1, 2, 6, 7 })
    for _, k in ipairs({ { 3, 3 }, { 4, 2 }, { 2, 5 } }) do
      local w = rnd({ 3, 2, k[1], k[2] })
      local y = F.conv2d(x, w, nil, { padding = 'same' })
      -- PyTorch: total padding d*(k-1), left half rounded down, the rest on the right
      local xp = ember.zeros(1, 2, 6 + k[1] - 1, 7 + k[2] - 1, { dtype = 'float64' })
      local top, left = math.floor((k[1] - 1) / 2), math.floor((k[2] - 1) / 2)
      xp[{ {}, {}, { top + 1, top + 6 }, { left + 1, left + 7 } }] = x
      local ref, shape = conv2d_ref(xp, w, nil, {})
      check(y, ref, shape, 1e-12, 'same ' .. k[1] .. 'x' .. k[2])
    end
    local w = rnd({ 3, 2, 3, 3 })
    local ref, shape = conv2d_ref(x, w, nil, {})
    check(F.conv2d(x, w, nil, { padding = 'valid' }), ref, shape, 1e-12)
  end)

  it('handles zero input channels (the output is the bias)', function()
    local b = ember.tensor({ 1, 2, 3 }, { dtype = 'float64' })
    local y = F.conv2d(ember.zeros(2, 0, 4, 4, { dtype = 'float64' }), ember.zeros(3, 0, 3, 3, { dtype = 'float64' }), b)
    local ref = {}
    for n = 1, 2 do for m = 1, 3 do for _ = 1, 4 do ref[#ref + 1] = m end end end
    check(y, ref, { 2, 3, 2, 2 }, 0)
    local y32 = F.conv2d(ember.zeros(1, 0, 3, 3), ember.zeros(2, 0, 1, 1))
    check(y32, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, { 1, 2, 3, 3 }, 0)
  end)

  it('computes float16 and bfloat16 through float32', function()
    H.seed(8)
    local x, w = rnd({ 1, 2, 5, 5 }), rnd({ 2, 2, 3, 3 })
    local ref, shape = conv2d_ref(x, w, nil, {})
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      local y = F.conv2d(x:to(dt), w:to(dt))
      assert.equal(dt, y:dtype())
      check(y:double(), ref, shape, 5e-2, dt)
    end
  end)

  it('has gradients for input, weight and bias', function()
    H.seed(9)
    gradcheck(function(x, w, b) return F.conv2d(x, w, b, { stride = 2, padding = 1 }) end,
      { leaf({ 2, 2, 5, 5 }), leaf({ 3, 2, 3, 3 }), leaf({ 3 }) })
    gradcheck(function(x, w, b) return F.conv2d(x, w, b, { dilation = 2, padding = { 1, 2 }, groups = 2 }) end,
      { leaf({ 1, 4, 5, 6 }), leaf({ 2, 2, 2, 3 }), leaf({ 2 }) })
    gradcheck(function(x, w) return F.conv2d(x, w, nil, { groups = 3 }) end, -- depthwise, 1x1
      { leaf({ 2, 3, 3, 3 }), leaf({ 3, 1, 1, 1 }) })
  end)

  -- float32 runs on the AVX-512 kernels where the CPU has them (direct for stride 1, im2col +
  -- packed GEMM otherwise), float64 on im2col + BLAS, checked above by finite differences.
  local grad_cases = {
    { 'stride 1, padded (direct)', { 3, 6, 9, 11 }, { 10, 6, 5, 5 }, { padding = 2 } },
    { 'wide output channels (full panels)', { 2, 3, 8, 19 }, { 40, 3, 3, 3 }, { padding = 1 } },
    { 'stride 2 (im2col input gradient)', { 2, 4, 9, 10 }, { 33, 4, 3, 3 }, { stride = 2, padding = 1 } },
    { 'stride 3, dilation 2', { 1, 3, 13, 12 }, { 8, 3, 3, 2 }, { stride = 3, dilation = 2 } },
    { 'depthwise', { 2, 8, 7, 7 }, { 8, 1, 3, 3 }, { groups = 8, padding = 1 } },
    { 'groups of 16 channels', { 1, 32, 5, 6 }, { 32, 16, 3, 3 }, { groups = 2, padding = 1 } },
    { '1x1', { 2, 20, 5, 7 }, { 36, 20, 1, 1 }, {} },
    { 'padding wider than the kernel', { 1, 2, 4, 4 }, { 16, 2, 2, 2 }, { padding = 2 } },
  }
  for _, c in ipairs(grad_cases) do
    it('gives float32 gradients that agree with float64: ' .. c[1], function()
      H.seed(10)
      local x64, w64, b64 = leaf(c[2]), leaf(c[3]), leaf({ c[3][1] })
      local y64 = F.conv2d(x64, w64, b64, c[4])
      local g = rnd({ y64:size(1), y64:size(2), y64:size(3), y64:size(4) })
      y64:backward(g)
      local x32 = x64:detach():float():requires_grad_()
      local w32 = w64:detach():float():requires_grad_()
      local b32 = b64:detach():float():requires_grad_()
      local y32 = F.conv2d(x32, w32, b32, c[4])
      check(y32, flat(y64), y64:size(), 1e-4, 'output')
      y32:backward(g:float())
      check(x32.grad, flat(x64.grad), x64:size(), 1e-4, 'input grad')
      check(w32.grad, flat(w64.grad), w64:size(), 1e-4, 'weight grad')
      check(b32.grad, flat(b64.grad), b64:size(), 1e-4, 'bias grad')
    end)
  end

  it('agrees between float32 and float64 on random geometries (forward, gradients, transposed)', function()
    H.seed(99)
    local function r(a, b) return a + math.floor(H.random() * (b - a + 1)) end
    for _ = 1, 40 do
      local groups = ({ 1, 1, 1, 2, 4 })[r(1, 5)]
      local Cg, Mg = r(1, 6) * (H.random() < 0.3 and 8 or 1), H.random() < 0.3 and 16 * r(1, 3) or r(1, 40)
      local kh, kw, sh, sw, dh, dw, ph, pw = r(1, 5), r(1, 5), r(1, 3), r(1, 3), r(1, 2), r(1, 2), r(0, 3), r(0, 3)
      local Hh = math.max(r(1, 16), dh * (kh - 1) + 1 - 2 * ph)
      local W = math.max(r(1, 20), dw * (kw - 1) + 1 - 2 * pw)
      local o = { stride = { sh, sw }, padding = { ph, pw }, dilation = { dh, dw }, groups = groups }
      local what = ('N2 C%d %dx%d M%d k%dx%d s%d,%d d%d,%d p%d,%d g%d'):format(Cg * groups, Hh, W,
        Mg * groups, kh, kw, sh, sw, dh, dw, ph, pw, groups)
      local x, w, b = leaf({ 2, Cg * groups, Hh, W }), leaf({ Mg * groups, Cg, kh, kw }), leaf({ Mg * groups })
      local y = F.conv2d(x, w, b, o)
      local g = rnd({ y:size(1), y:size(2), y:size(3), y:size(4) })
      y:backward(g)
      local x32, w32 = x:detach():float():requires_grad_(), w:detach():float():requires_grad_()
      local b32 = b:detach():float():requires_grad_()
      local y32 = F.conv2d(x32, w32, b32, o)
      y32:backward(g:float())
      check(y32, flat(y), y:size(), 1e-4, what .. ' output')
      check(x32.grad, flat(x.grad), x:size(), 1e-4, what .. ' input grad')
      check(w32.grad, flat(w.grad), w:size(), 1e-4, what .. ' weight grad')
      local ot = { stride = { sh, sw }, padding = { ph, pw }, dilation = { dh, dw }, groups = groups }
      local ok, t64 = pcall(F.conv_transpose2d, y:detach(), w:detach(), nil, ot)
      if ok then
        check(F.conv_transpose2d(y:detach():float(), w:detach():float(), nil, ot), flat(t64), t64:size(), 1e-4,
          what .. ' transposed')
      end
    end
  end)

  it('supports double backward', function()
    H.seed(11)
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.conv2d(x, w, nil, { padding = 1, stride = 2 })
        local gx, gw = unpack(ember.autograd.grad((y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 1, 2, 4, 4 }), leaf({ 2, 2, 3, 3 }) })
  end)

  it('reports bad arguments', function()
    local x, w = ember.randn(2, 4, 8, 8), ember.randn(8, 3, 5, 5)
    H.assert_error(function() F.conv2d(x, w) end,
      'conv2d: expected input with 3 channels (weight [8,3,5,5]), got 4')
    H.assert_error(function() F.conv2d(ember.randn(4, 8, 8), ember.randn(8, 2, 5, 5), nil, { groups = 3 }) end,
      "conv2d: expected the weight's 8 output channels to be divisible by groups (3)")
    H.assert_error(function() F.conv2d(ember.randn(1, 6, 8, 8), ember.randn(6, 2, 3, 3), nil, { groups = 2 }) end,
      'conv2d: expected input with 4 channels (weight [6,2,3,3], groups 2), got 6')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 3, 3), w:narrow(2, 1, 3)) end,
      'conv2d: the kernel [5,5] (dilated) is larger than the padded input [3,3]')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 6, 6), ember.randn(2, 3, 3, 3), nil, { dilation = 3 }) end,
      'conv2d: the kernel [7,7] (dilated) is larger than the padded input [6,6]')
    H.assert_error(function() F.conv2d(ember.randn(8, 8), w) end, 'conv2d: expected a 3-D (unbatched) or 4-D input, got 2-D')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(3, 3, 3)) end, 'conv2d: expected a 4-D weight, got 3-D')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), ember.randn(3)) end,
      'conv2d: expected a bias of shape [2], got [3]')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { stride = 0 }) end,
      'conv2d: expected stride >= 1, got 0')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { padding = -1 }) end,
      'conv2d: expected padding >= 0, got -1')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { groups = 0 }) end,
      'conv2d: expected groups >= 1, got 0')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3):double()) end,
      'conv2d: expected a weight of the input\'s dtype float32, got float64')
    H.assert_error(function() F.conv2d(ember.ones(1, 3, 8, 8, { dtype = 'int64' }), ember.ones(2, 3, 3, 3, { dtype = 'int64' })) end,
      'conv2d: expected a floating point input, got int64')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { padding = 'same', stride = 2 }) end,
      "conv2d: padding='same' needs stride 1")
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { stride = { 1, 2, 3 } }) end,
      'conv2d: expected stride as a number or a table of 2 numbers')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), 'w') end, 'conv2d: expected weight to be a tensor')
  end)
end)

describe('conv1d', function()
  -- conv1d is conv2d over a height of 1: checked against conv2d_ref on [N, C, 1, L]
  for _, c in ipairs({
    { { 2, 3, 10 }, { 4, 3, 3 }, { stride = 2, padding = 1 } },
    { { 1, 4, 9 }, { 4, 2, 2 }, { dilation = 3, groups = 2 } },
    { { 3, 7 }, { 2, 3, 7 }, {} }, -- unbatched, kernel as long as the input
  }) do
    it(('input [%s], weight [%s]'):format(table.concat(c[1], ','), table.concat(c[2], ',')), function()
      H.seed(12)
      local x, w, b = rnd(c[1]), rnd(c[2]), rnd({ c[2][1] })
      local x4 = #c[1] == 2 and x:unsqueeze(1):unsqueeze(3) or x:unsqueeze(3)
      local o = c[3]
      local ref, shape = conv2d_ref(x4, w:unsqueeze(3), b, { stride = { 1, o.stride or 1 },
        padding = { 0, o.padding or 0 }, dilation = { 1, o.dilation or 1 }, groups = o.groups })
      local y = F.conv1d(x, w, b, o)
      if #c[1] == 2 then shape = { shape[2], shape[4] } else shape = { shape[1], shape[2], shape[4] } end
      check(y, ref, shape, 1e-12)
    end)
  end

  it('has gradients', function()
    H.seed(13)
    gradcheck(function(x, w, b) return F.conv1d(x, w, b, { stride = 2, padding = 1 }) end,
      { leaf({ 2, 2, 7 }), leaf({ 3, 2, 3 }), leaf({ 3 }) })
  end)

  it('reports bad ranks', function()
    H.assert_error(function() F.conv1d(ember.randn(2, 3, 4, 5), ember.randn(2, 3, 3)) end,
      'conv1d: expected a 2-D (unbatched) or 3-D input, got 4-D')
  end)
end)

describe('conv_transpose2d', function()
  local cases = {
    { 'stride 2, output_padding 1', { 2, 3, 4, 5 }, { 3, 2, 3, 3 }, { stride = 2, padding = 1, output_padding = 1 } },
    { 'groups and dilation', { 1, 4, 3, 3 }, { 4, 3, 2, 3 }, { groups = 2, dilation = 2, stride = { 1, 2 } } },
    { 'output_padding below the dilation', { 1, 2, 3, 3 }, { 2, 2, 3, 3 }, { dilation = 2, output_padding = 1 } },
    { '1x1', { 2, 5, 3, 4 }, { 5, 3, 1, 1 }, {} },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(14)
        local x, w = rnd(c[2], dtype), rnd(c[3], dtype)
        local b = rnd({ c[3][2] * (c[4].groups or 1) }, dtype)
        local ref, shape = conv_transpose2d_ref(x, w, b, c[4])
        check(F.conv_transpose2d(x, w, b, c[4]), ref, shape, dtype == 'float32' and 2e-5 or 1e-12, c[1])
      end)
    end
  end

  it('has gradients for input, weight and bias', function()
    H.seed(15)
    gradcheck(function(x, w, b) return F.conv_transpose2d(x, w, b, { stride = 2, padding = 1, output_padding = 1 }) end,
      { leaf({ 1, 2, 3, 3 }), leaf({ 2, 3, 3, 3 }), leaf({ 3 }) })
    gradcheck(function(x, w) return F.conv_transpose2d(x, w, nil, { dilation = 2, output_padding = 1, groups = 2 }) end,
      { leaf({ 1, 2, 2, 3 }), leaf({ 2, 1, 2, 2 }) })
  end)

  it('conv_transpose1d matches the 2-D form', function()
    H.seed(16)
    local x, w, b = rnd({ 2, 3, 5 }), rnd({ 3, 2, 4 }), rnd({ 2 })
    local ref, shape = conv_transpose2d_ref(x:unsqueeze(3), w:unsqueeze(3), b,
      { stride = { 1, 3 }, padding = { 0, 1 }, output_padding = { 0, 2 } })
    check(F.conv_transpose1d(x, w, b, { stride = 3, padding = 1, output_padding = 2 }), ref,
      { shape[1], shape[2], shape[4] }, 1e-12)
    gradcheck(function(a, c) return F.conv_transpose1d(a, c, nil, { stride = 2 }) end, { leaf({ 1, 2, 3 }), leaf({ 2, 2, 3 }) })
  end)

  it('conv2d_weight is the weight gradient of conv2d', function()
    H.seed(17)
    local x, w = leaf({ 2, 4, 6, 5 }), leaf({ 6, 2, 3, 2 })
    local o = { stride = 2, padding = 1, groups = 2 }
    local y = F.conv2d(x, w, nil, o)
    local g = rnd({ y:size(1), y:size(2), y:size(3), y:size(4) })
    y:backward(g)
    check(F.conv2d_weight(x:detach(), { 6, 2, 3, 2 }, g, o), flat(w.grad), { 6, 2, 3, 2 }, 1e-12)
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 3, 4, 4), ember.randn(2, 3, 3, 3)) end,
      'conv_transpose2d: expected input with 2 channels (weight [2,3,3,3]), got 3')
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 2, 4, 4), ember.randn(2, 3, 3, 3), nil, { stride = 2, output_padding = 2 }) end,
      'conv_transpose2d: expected output_padding (2) to be >= 0 and smaller than the stride (2) or the dilation (1)')
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 3, 4, 4), ember.randn(3, 3, 3, 3), nil, { groups = 2 }) end,
      "conv_transpose2d: expected the weight's 3 input channels to be divisible by groups (2)")
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 2, 1, 1), ember.randn(2, 3, 1, 1), nil, { padding = 1 }) end,
      'conv_transpose2d: the output size -1 is not positive')
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 2, 1, 1), ember.randn(2, 3, 2, 2), nil, { padding = 1 }) end,
      'conv_transpose2d: the output size 0 is not positive')
  end)
end)

-- ---- pooling -----------------------------------------------------------------------------------------

describe('max_pool2d', function()
  local cases = {
    { 'kernel 2', { 2, 3, 6, 8 }, 2, {} },
    { 'odd size, kernel 2 (the 2x2 path drops the last row)', { 1, 2, 7, 5 }, 2, {} },
    { 'kernel 3, stride 2, padding 1', { 2, 2, 7, 6 }, 3, { stride = 2, padding = 1 } },
    { 'dilation', { 1, 2, 9, 9 }, { 3, 2 }, { dilation = { 2, 3 }, stride = 1 } },
    { 'ceil_mode', { 1, 1, 7, 6 }, 3, { stride = 2, ceil_mode = true } },
    { 'ceil_mode with padding', { 1, 2, 6, 6 }, 3, { stride = 2, padding = 1, ceil_mode = true } },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(20)
        local x = rnd(c[2], dtype)
        local vals, inds, shape = max_pool_ref(x, c[3], c[4])
        local o = {}
        for k, v in pairs(c[4]) do o[k] = v end
        o.return_indices = true
        local y, idx = F.max_pool2d(x, c[3], o)
        check(y, vals, shape, 1e-12)
        assert.equal('int64', idx:dtype())
        check(idx, inds, shape, 0)
        check(F.max_pool2d(x, c[3], c[4]), vals, shape, 1e-12)
      end)
    end
  end

  it('propagates NaN and keeps the first of equal maxima', function()
    local x = ember.tensor({ { { { 1, 0 / 0, 3, 3 }, { 2, 2, 3, 1 } } } })
    local y, idx = F.max_pool2d(x, 2, { return_indices = true })
    local t = y:totable()[1][1][1]
    assert.is_true(t[1] ~= t[1])
    assert.equal(3, t[2])
    assert.same({ 2, 3 }, idx:totable()[1][1][1])
    local y3 = F.max_pool2d(ember.tensor({ { { 0 / 0, 1, 2 }, { 3, 4, 5 }, { 6, 7, 8 } } }), 3)
    assert.is_true(y3:item() ~= y3:item())
  end)

  it('has gradients (through the saved indices) and double backward', function()
    H.seed(21)
    gradcheck(function(x) return F.max_pool2d(x, 3, { stride = 2, padding = 1 }) end, { leaf({ 2, 2, 5, 5 }) })
    gradcheck(function(x) return F.max_pool2d(x, 2, { dilation = 2, stride = 1 }) end, { leaf({ 1, 2, 4, 5 }) })
    -- overlapping windows pick the same element twice: its gradient is the sum
    local x = ember.tensor({ { { { 0, 0, 0 }, { 0, 5, 0 }, { 0, 0, 0 } } } }):requires_grad_()
    F.max_pool2d(x, 2, { stride = 1 }):sum():backward()
    assert.same({ { 0, 0, 0 }, { 0, 4, 0 }, { 0, 0, 0 } }, x.grad:totable()[1][1])
    gradcheck(function(a)
      return ember.enable_grad(function()
        local y = F.max_pool2d(a, 2)
        local g = ember.autograd.grad((y * y):sum(), a, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 1, 1, 4, 4 }) })
  end)

  it('max_pool1d and max_unpool2d', function()
    H.seed(22)
    local x = rnd({ 2, 3, 9 })
    local vals, inds, shape = max_pool_ref(x:unsqueeze(3), { 1, 3 }, { stride = { 1, 2 }, padding = { 0, 1 } })
    local y, idx = F.max_pool1d(x, 3, { stride = 2, padding = 1, return_indices = true })
    check(y, vals, { shape[1], shape[2], shape[4] }, 1e-12)
    check(idx, inds, { shape[1], shape[2], shape[4] }, 0)
    -- unpooling puts each maximum back where it came from
    local x2 = rnd({ 1, 2, 4, 6 })
    local p, i = F.max_pool2d(x2, 2, { return_indices = true })
    local u = F.max_unpool2d(p, i, 2)
    local xt, ut = flat(x2), flat(u)
    local it_, pt = flat(i), flat(p)
    local expect = {}
    for k = 1, #xt do expect[k] = 0 end
    for k = 1, #it_ do
      local plane = math.floor((k - 1) / 6)
      expect[plane * 24 + it_[k]] = pt[k]
    end
    check(u, expect, { 1, 2, 4, 6 }, 1e-12)
    for k = 1, #ut do assert(ut[k] == 0 or ut[k] == xt[k]) end
    gradcheck(function(a) return F.max_unpool2d(a, i, 2) end, { p:detach():clone():requires_grad_() })
    H.assert_error(function() F.max_unpool2d(p, i + 100, 2) end, 'max_unpool2d: expected indices in [0, 24)')
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.max_pool2d(ember.randn(4, 4), 2) end, 'max_pool2d: expected a 3-D (unbatched) or 4-D input, got 2-D')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 2, { padding = 2 }) end,
      'max_pool2d: expected padding between 0 and half the kernel size (1), got 2')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 2, 2), 3) end, 'max_pool2d: the output size 0x0 is too small')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 0) end, 'max_pool2d: expected kernel size >= 1, got 0')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 2, { stride = 0 }) end, 'max_pool2d: expected stride >= 1, got 0')
    H.assert_error(function() F.max_pool2d(ember.ones(1, 1, 4, 4, { dtype = 'int32' }), 2) end,
      'max_pool2d: expected a floating point input, got int32')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 0, 4, 4), 2) end, 'max_pool2d: expected non-empty channel and spatial dims')
  end)
end)

describe('avg_pool2d', function()
  local cases = {
    { 'kernel 2', { 2, 3, 6, 8 }, 2, {} },
    { 'padding counted', { 1, 2, 5, 5 }, 3, { stride = 2, padding = 1 } },
    { 'padding not counted', { 1, 2, 5, 5 }, 3, { stride = 2, padding = 1, count_include_pad = false } },
    { 'ceil_mode', { 1, 2, 7, 6 }, 3, { stride = 2, ceil_mode = true } },
    { 'ceil_mode, padding, not counted', { 2, 1, 6, 7 }, { 3, 2 }, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false } },
    { 'divisor_override', { 1, 2, 4, 6 }, 2, { divisor_override = 3 } },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(23)
        local x = rnd(c[2], dtype)
        local ref, shape = avg_pool_ref(x, c[3], c[4])
        check(F.avg_pool2d(x, c[3], c[4]), ref, shape, dtype == 'float32' and 1e-6 or 1e-12, c[1])
      end)
    end
  end

  it('has gradients, first and second order', function()
    H.seed(24)
    gradcheck(function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1, count_include_pad = false }) end, { leaf({ 1, 2, 5, 5 }) })
    gradcheck(function(x) return F.avg_pool2d(x, 2, { ceil_mode = true, stride = 2 }) end, { leaf({ 1, 1, 5, 3 }) })
    gradcheck(function(x)
      return ember.enable_grad(function()
        local y = F.avg_pool2d(x, 2, { stride = 1 })
        local g = ember.autograd.grad((y * y):sum(), x, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 1, 1, 3, 4 }) })
  end)

  it('avg_pool1d', function()
    H.seed(25)
    local x = rnd({ 2, 2, 7 })
    local ref, shape = avg_pool_ref(x:unsqueeze(3), { 1, 3 }, { stride = { 1, 2 }, padding = { 0, 1 } })
    check(F.avg_pool1d(x, 3, { stride = 2, padding = 1 }), ref, { shape[1], shape[2], shape[4] }, 1e-12)
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.avg_pool2d(ember.randn(1, 1, 4, 4), 2, { padding = 2 }) end,
      'avg_pool2d: expected padding between 0 and half the kernel size (1), got 2')
    H.assert_error(function() F.avg_pool2d(ember.randn(1, 1, 4, 4), 2, { divisor_override = 0 }) end,
      'avg_pool2d: expected divisor_override >= 1, got 0')
  end)
end)

describe('adaptive pooling', function()
  for _, c in ipairs({ { { 2, 3, 7, 7 }, 3 }, { { 1, 2, 5, 5 }, 5 }, { { 1, 2, 10, 6 }, { 4, 4 } }, { { 2, 1, 3, 4 }, { 1, 1 } } }) do
    it(('[%s] to %s'):format(table.concat(c[1], ','), type(c[2]) == 'table' and table.concat(c[2], 'x') or c[2]), function()
      H.seed(26)
      local x = rnd(c[1])
      local ref, shape = adaptive_ref(x, c[2], false)
      check(F.adaptive_avg_pool2d(x, c[2]), ref, shape, 1e-12, 'avg')
      local mref = adaptive_ref(x, c[2], true)
      check(F.adaptive_max_pool2d(x, c[2]), mref, shape, 1e-12, 'max')
    end)
  end

  it('keeps a dim given as false, and takes unbatched inputs', function()
    H.seed(27)
    local x = rnd({ 2, 6, 5 })
    local ref = adaptive_ref(x:unsqueeze(1), { 3, 5 }, false)
    check(F.adaptive_avg_pool2d(x, { 3, false }), ref, { 2, 3, 5 }, 1e-12)
  end)

  it('has gradients', function()
    H.seed(28)
    gradcheck(function(x) return F.adaptive_avg_pool2d(x, { 3, 2 }) end, { leaf({ 1, 2, 5, 4 }) })
    gradcheck(function(x) return F.adaptive_max_pool2d(x, 2) end, { leaf({ 1, 2, 5, 3 }) })
    gradcheck(function(x) return F.adaptive_avg_pool1d(x, 3) end, { leaf({ 2, 2, 7 }) })
  end)

  it('reports bad sizes', function()
    H.assert_error(function() F.adaptive_avg_pool2d(ember.randn(1, 1, 4, 4), 0) end,
      'adaptive_avg_pool2d: expected an output size >= 1, got 0x0')
  end)
end)

