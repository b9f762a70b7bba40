-- Convolution and pooling on the Vulkan device against the CPU: conv2d (forward, input and
-- weight gradients) over kernel sizes, strides, padding, dilation, groups (depthwise too),
-- with and without bias, batch 1 and more, non-square images, channel counts crossing the
-- kernel's 16/32/64-wide tiles, zero-size batches, float32 and float64; max / average /
-- adaptive pooling and their gradients (max_unpool2d included); and nn modules moved with
-- :to(device) running forward and backward. Every Vulkan result is compared with the CPU's.
-- tests/lua/device_spec.lua reruns this file under the validation layer.
local VK = require('vk_helpers').open('vulkan conv')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local on, has_f64 = VK.on, VK.has_f64
local nn = require 'ember.nn'
local F = nn.functional

-- Sums of products: the rounding error grows with the sum's length (terms of unit size), and
-- the order of the additions differs from the CPU's (tiles, split sums).
local tol = { float32 = { 2e-4, 2e-6 }, float64 = { 1e-11, 1e-14 } }
local function agree(got, want, what, dtype, terms)
  local t = tol[dtype]
  VK.agree(got, want, what, { t[1], t[2] * math.max(terms or 1, 10) })
end

local function dtypes()
  local out = { 'float32' }
  if has_f64 then out[2] = 'float64' end
  return out
end

local function randn(shape, dtype)
  return ember.randn(shape, { dtype = dtype })
end

-- The bias gradient is a sum over N, H, W: a reduction kernel, which may be absent.
local has_sum = pcall(function() return on(ember.ones({ 2, 2 })):sum() end)

-- conv2d on both devices, then the gradients of x, w (and b) for a random gy.
local function check_conv(case, dtype)
  local N, C, Hh, W, M, k = case.N, case.C, case.H, case.W, case.M, case.k
  local g = case.groups or 1
  local kh, kw = type(k) == 'table' and k[1] or k, type(k) == 'table' and k[2] or k
  local x, w = randn({ N, C, Hh, W }, dtype), randn({ M, C / g, kh, kw }, dtype)
  local b = case.bias and randn({ M }, dtype) or nil
  local opts = { stride = case.stride or 1, padding = case.padding or 0,
    dilation = case.dilation or 1, groups = g }
  local what = ('%s %s'):format(dtype, case.name)
  local want = F.conv2d(x, w, b, opts)
  local got = F.conv2d(on(x), on(w), b and on(b), opts)
  agree(got, want, what .. ' forward', dtype, C / g * kh * kw)
  -- gradients
  local grad_bias = b ~= nil and has_sum
  local xc, wc = x:clone():requires_grad_(), w:clone():requires_grad_()
  local xv, wv = on(x):requires_grad_(), on(w):requires_grad_()
  local bc = b and b:clone():requires_grad_(grad_bias)
  local bv = b and on(b):requires_grad_(grad_bias)
  local yc, yv = F.conv2d(xc, wc, bc, opts), F.conv2d(xv, wv, bv, opts)
  local gy = randn(yc:size(), dtype)
  yc:backward(gy)
  yv:backward(on(gy))
  local OHW = gy:size(3) * gy:size(4)
  agree(xv.grad, xc.grad, what .. ' input grad', dtype, M / g * kh * kw)
  agree(wv.grad, wc.grad, what .. ' weight grad', dtype, N * OHW)
  if grad_bias then agree(bv.grad, bc.grad, what .. ' bias grad', dtype, N * OHW) end
end

local conv_cases = {
  { name = '3x3 pad 1 bias', N = 2, C = 3, H = 9, W = 7, M = 5, k = 3, padding = 1, bias = true },
  { name = 'batch 1, 1x1', N = 1, C = 17, H = 5, W = 6, M = 33, k = 1 },
  { name = '5x5 pad 2 (the CNN first layer)', N = 3, C = 1, H = 28, W = 28, M = 32, k = 5,
    padding = 2, bias = true },
  { name = 'channels across tiles', N = 2, C = 35, H = 6, W = 5, M = 70, k = 3, padding = 1,
    bias = true },
  { name = 'stride 2, non-square kernel', N = 2, C = 4, H = 11, W = 8, M = 6, k = { 3, 2 },
    stride = 2, padding = { 1, 0 } },
  { name = 'stride (2,3) dilation (2,1)', N = 2, C = 3, H = 13, W = 12, M = 4, k = 3,
    stride = { 2, 3 }, dilation = { 2, 1 }, padding = 2, bias = true },
  { name = 'groups 2', N = 2, C = 6, H = 7, W = 7, M = 4, k = 3, groups = 2, padding = 1,
    bias = true },
  { name = 'depthwise', N = 2, C = 5, H = 8, W = 9, M = 10, k = 3, groups = 5, padding = 1 },
  { name = 'large batch (split-K weight grad)', N = 16, C = 8, H = 14, W = 14, M = 16, k = 5,
    padding = 2, bias = true },
  { name = 'many splits over few weights', N = 32, C = 1, H = 28, W = 28, M = 4, k = 3,
    padding = 1 },
}

describe('vulkan conv2d (' .. V .. ')', function()
  for _, dtype in ipairs(dtypes()) do
    for _, case in ipairs(conv_cases) do
      it(('%s %s: forward, input, weight%s gradients'):format(dtype, case.name,
        case.bias and ', bias' or ''), function()
        ember.manual_seed(7)
        check_conv(case, dtype)
      end)
    end
  end

  it('the bias gradient (needs the sum reduction on the device)', function()
    if not has_sum then pending('no sum reduction on ' .. V .. ' yet') return end
    check_conv({ name = 'bias', N = 2, C = 2, H = 5, W = 5, M = 3, k = 3, bias = true },
      'float32')
  end)

  it('computes the weight gradient directly (F.conv2d_weight) and conv_transpose2d', function()
    ember.manual_seed(3)
    local x, gy = randn({ 4, 3, 10, 9 }, 'float32'), randn({ 4, 6, 5, 5 }, 'float32')
    local o = { stride = 2, padding = 1 }
    agree(F.conv2d_weight(on(x), { 6, 3, 3, 3 }, on(gy), o),
      F.conv2d_weight(x, { 6, 3, 3, 3 }, gy, o), 'conv2d_weight', 'float32')
    local w, b = randn({ 6, 2, 3, 3 }, 'float32'), randn({ 2 }, 'float32')
    local t = { stride = 2, padding = 1, output_padding = 1 }
    agree(F.conv_transpose2d(on(gy), on(w), on(b), t), F.conv_transpose2d(gy, w, b, t),
      'conv_transpose2d', 'float32')
  end)

  it('handles zero-size batches and an empty K', function()
    local x, w = randn({ 0, 3, 5, 5 }, 'float32'), randn({ 4, 3, 3, 3 }, 'float32')
    local y = F.conv2d(on(x), on(w), nil, { padding = 1 })
    assert.are.same({ 0, 4, 5, 5 }, y:size())
    -- weight gradient over an empty batch: zeros
    local gw = F.conv2d_weight(on(x), { 4, 3, 3, 3 }, on(ember.zeros({ 0, 4, 5, 5 })),
      { padding = 1 })
    agree(gw, ember.zeros({ 4, 3, 3, 3 }), 'empty-batch weight grad', 'float32')
  end)

  it('keeps a transposed (non-contiguous) input correct', function()
    ember.manual_seed(5)
    local x, w = randn({ 2, 3, 6, 7 }, 'float32'), randn({ 4, 3, 3, 3 }, 'float32')
    local xt = x:transpose(3, 4)
    agree(F.conv2d(on(x):transpose(3, 4), on(w), nil, { padding = 1 }),
      F.conv2d(xt, w, nil, { padding = 1 }), 'transposed input', 'float32')
  end)
end)

-- ---- pooling ----------------------------------------------------------------------------------

local function check_pool(kind, dtype, shape, k, opts)
  local x = randn(shape, dtype)
  local what = ('%s %s k=%s %s'):format(dtype, kind, H.show and H.show(k) or tostring(k),
    table.concat(shape, 'x'))
  local fn = kind == 'max' and F.max_pool2d or F.avg_pool2d
  local xc, xv = x:clone():requires_grad_(), on(x):requires_grad_()
  local yc, yv
  if kind == 'max' then
    local o = {}
    for key, v in pairs(opts) do o[key] = v end
    o.return_indices = true
    local ic, iv
    yc, ic = fn(xc, k, o)
    yv, iv = fn(xv, k, o)
    assert.are.equal(V, iv:device())
    assert.are.same(ic:totable(), iv:to('cpu'):totable(), what .. ' indices')
  else
    yc, yv = fn(xc, k, opts), fn(xv, k, opts)
  end
  agree(yv, yc, what .. ' forward', dtype)
  local gy = randn(yc:size(), dtype)
  yc:backward(gy)
  yv:backward(on(gy))
  agree(xv.grad, xc.grad, what .. ' gradient', dtype)
end

describe('vulkan pooling (' .. V .. ')', function()
  for _, dtype in ipairs(dtypes()) do
    it(dtype .. ' max_pool2d: values, indices, gradient', function()
      ember.manual_seed(11)
      check_pool('max', dtype, { 2, 3, 8, 8 }, 2, {})
      check_pool('max', dtype, { 1, 2, 9, 7 }, 3, { stride = 1, padding = 1 }) -- overlapping
      check_pool('max', dtype, { 2, 2, 11, 10 }, { 3, 2 }, { stride = { 2, 1 }, dilation = { 2, 1 },
        padding = { 1, 0 } })
      check_pool('max', dtype, { 2, 3, 7, 9 }, 2, { ceil_mode = true })
      check_pool('max', dtype, { 4, 33, 28, 28 }, 2, {}) -- crosses workgroups
    end)

    it(dtype .. ' avg_pool2d: padding, count_include_pad, ceil_mode, divisor', function()
      ember.manual_seed(13)
      check_pool('avg', dtype, { 2, 3, 8, 8 }, 2, {})
      check_pool('avg', dtype, { 2, 2, 9, 7 }, 3, { stride = 2, padding = 1 })
      check_pool('avg', dtype, { 2, 2, 9, 7 }, 3, { stride = 2, padding = 1,
        count_include_pad = false })
      check_pool('avg', dtype, { 1, 2, 10, 11 }, { 3, 2 }, { stride = { 2, 3 }, ceil_mode = true })
      check_pool('avg', dtype, { 2, 2, 6, 6 }, 3, { stride = 1, divisor_override = 5 })
      check_pool('avg', dtype, { 3, 40, 20, 20 }, 2, {})
    end)

    it(dtype .. ' adaptive pooling and max_unpool2d', function()
      ember.manual_seed(17)
      local x = randn({ 2, 3, 11, 9 }, dtype)
      agree(F.adaptive_avg_pool2d(on(x), { 4, 5 }), F.adaptive_avg_pool2d(x, { 4, 5 }),
        'adaptive avg', dtype)
      local xc, xv = x:clone():requires_grad_(), on(x):requires_grad_()
      local yc, ic = F.adaptive_max_pool2d(xc, { 3, 4 }, true)
      local yv, iv = F.adaptive_max_pool2d(xv, { 3, 4 }, true)
      agree(yv, yc, 'adaptive max', dtype)
      assert.are.same(ic:totable(), iv:to('cpu'):totable())
      local gy = randn(yc:size(), dtype)
      yc:backward(gy)
      yv:backward(on(gy))
      agree(xv.grad, xc.grad, 'adaptive max gradient', dtype)
      local ac, av = x:clone():requires_grad_(), on(x):requires_grad_()
      local zc, zv = F.adaptive_avg_pool2d(ac, { 4, 5 }), F.adaptive_avg_pool2d(av, { 4, 5 })
      local gz = randn(zc:size(), dtype)
      zc:backward(gz)
      zv:backward(on(gz))
      agree(av.grad, ac.grad, 'adaptive avg gradient', dtype)
    end)

    it(dtype .. ' F.max_unpool2d with colliding indices', function()
      -- (F.max_unpool2d checks the indices with amax, a reduction kernel of another area)
      local ok = pcall(function() return on(ember.ones({ 2 })):amax() end)
      if not ok then pending('no amax reduction on ' .. V .. ' yet') return end
      ember.manual_seed(19)
      local x = randn({ 2, 3, 11, 9 }, dtype)
      local p, ind = F.max_pool2d(x, 3, { stride = 1, return_indices = true })
      agree(F.max_unpool2d(on(p), on(ind), 3, { stride = 1 }),
        F.max_unpool2d(p, ind, 3, { stride = 1 }), 'max_unpool2d', dtype)
    end)
  end

  it('propagates NaN and keeps the first maximum among ties', function()
    local nan = 0 / 0
    local x = ember.tensor({ { { { 1, 1, 2, nan }, { 1, 0, 2, 2 }, { 3, 3, 0, 0 },
      { 3, 3, 0, 0 } } } })
    local yc, ic = F.max_pool2d(x, 2, { return_indices = true })
    local yv, iv = F.max_pool2d(on(x), 2, { return_indices = true })
    assert.are.same(ic:totable(), iv:to('cpu'):totable())
    local got, want = yv:to('cpu'):totable()[1][1], yc:totable()[1][1]
    assert.is_true(got[1][2] ~= got[1][2], 'NaN propagates')
    assert.are.same({ want[1][1], want[2][1], want[2][2] }, { got[1][1], got[2][1], got[2][2] })
  end)

  it('handles zero-size batches', function()
    local x = on(ember.zeros({ 0, 3, 8, 8 }))
    assert.are.same({ 0, 3, 4, 4 }, F.max_pool2d(x, 2):size())
    assert.are.same({ 0, 3, 4, 4 }, F.avg_pool2d(x, 2):size())
  end)
end)

-- ---- modules ------------------------------------------------------------------------------------

describe('vulkan nn modules (' .. V .. ')', function()
  it('runs nn.Conv2d, nn.MaxPool2d and nn.AvgPool2d moved with :to(device)', function()
    ember.manual_seed(21)
    local function net()
      ember.manual_seed(23)
      return nn.Sequential(nn.Conv2d(1, 8, 5, { padding = 2, bias = has_sum }), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, { padding = 1, bias = has_sum }), nn.AvgPool2d(2))
    end
    local mc, mv = net(), net():to(V)
    local x = randn({ 4, 1, 12, 12 }, 'float32')
    local yc, yv = mc:forward(x), mv:forward(on(x))
    agree(yv, yc, 'module forward', 'float32')
    local gy = randn(yc:size(), 'float32')
    yc:backward(gy)
    yv:backward(on(gy))
    local pc, pv = mc:parameters(), mv:parameters()
    assert.are.equal(#pc, #pv)
    for i = 1, #pc do
      assert.are.equal(V, pv[i]:device())
      agree(pv[i].grad, pc[i].grad, 'parameter ' .. i .. ' gradient', 'float32')
    end
  end)
end)

if VK.nested and os.getenv('EMBER_VK_VALIDATION') then
  describe('vulkan conv under validation', function()
    it('reported no validation messages', function()
      assert.are.equal(0, ember.device(V):info().validation_messages)
    end)
  end)
end
