-- conv3d, max_pool3d, avg_pool3d and adaptive max pooling (ember/nn/conv3d.lua) against
-- PyTorch's values, indices and gradients (tests/lua/golden/make_nn_functional.py), a naive
-- loop for conv3d, finite differences, and the same calls on the Vulkan device (lavapipe).
local G = require 'nn_golden'
local H = require 'helpers'
local ember = G.ember
local nn = ember.nn
local F = nn.functional
local gradcheck = ember.autograd.gradcheck

local calls = {
  conv3d = { { 'x', 'w', 'b' }, function(t)
    return F.conv3d(t.x, t.w, t.b, { 1, 2, 1 }, { 1, 0, 2 }, { 2, 1, 1 })
  end },
  conv3d_groups = { { 'x', 'w' }, function(t) return F.conv3d(t.x, t.w, nil, { stride = 2, groups = 2 }) end },
  conv3d_same = { { 'x', 'w' }, function(t) return F.conv3d(t.x, t.w, nil, { padding = 'same' }) end },
  conv3d_unbatched = { { 'x', 'w', 'b' }, function(t) return F.conv3d(t.x, t.w, t.b, { padding = 1 }) end },
  max_pool3d = { { 'x' }, function(t) return F.max_pool3d(t.x, 2, { return_indices = true }) end },
  max_pool3d_full = { { 'x' }, function(t)
    return F.max_pool3d(t.x, { 3, 2, 2 }, { 2, 1, 2 }, { 1, 1, 0 }, { 1, 2, 1 }, true, true)
  end },
  avg_pool3d = { { 'x' }, function(t) return F.avg_pool3d(t.x, 2) end },
  avg_pool3d_pad = { { 'x' }, function(t)
    return F.avg_pool3d(t.x, 3, { stride = 2, padding = 1, ceil_mode = true })
  end },
  avg_pool3d_excl = { { 'x' }, function(t)
    return F.avg_pool3d(t.x, { 3, 2, 3 }, { stride = { 2, 2, 1 }, padding = 1, count_include_pad = false })
  end },
  avg_pool3d_div = { { 'x' }, function(t) return F.avg_pool3d(t.x, 2, { stride = 1, divisor_override = 3 }) end },
  adaptive_max1d = { { 'x' }, function(t) return F.adaptive_max_pool1d(t.x, 4, true) end },
  adaptive_max2d = { { 'x' }, function(t) return F.adaptive_max_pool2d(t.x, { 3, 2 }, true) end },
}
local names = {}
for k in pairs(calls) do names[#names + 1] = k end
table.sort(names)

describe('conv3d and 3-D pooling against PyTorch', function()
  for _, name in ipairs(names) do
    it(name, function() G.check(name, calls[name][1], calls[name][2]) end)
  end
  it('covers every golden case of these families', function()
    for _, prefix in ipairs({ 'conv3d', 'max_pool3d', 'avg_pool3d', 'adaptive_max' }) do
      for _, c in ipairs(G.cases(prefix)) do assert(calls[c], 'no call for golden case ' .. c) end
    end
  end)
end)

describe('conv3d', function()
  it('equals a naive loop', function()
    local x = ember.randn({ 1, 2, 3, 4, 3 }, { dtype = 'float64' })
    local w = ember.randn({ 2, 2, 2, 2, 2 }, { dtype = 'float64' })
    local y = F.conv3d(x, w, nil, { stride = { 1, 2, 1 } }):totable()
    local xt, wt = x:totable(), w:totable()
    for o = 1, 2 do
      for d = 1, 2 do
        for h = 1, 2 do
          for ww = 1, 2 do
            local s = 0
            for c = 1, 2 do
              for a = 1, 2 do
                for b = 1, 2 do
                  for e = 1, 2 do s = s + xt[1][c][d + a - 1][(h - 1) * 2 + b][ww + e - 1] * wt[o][c][a][b][e] end
                end
              end
            end
            assert(math.abs(y[1][o][d][h][ww] - s) < 1e-12)
          end
        end
      end
    end
  end)
  it('gradchecks input, weight and bias; pooling gradchecks', function()
    local function x64(...) return ember.randn({ ... }, { dtype = 'float64' }):requires_grad_() end
    assert(gradcheck(function(a, b, c) return F.conv3d(a, b, c, { padding = { 1, 0, 1 }, stride = 2 }) end,
      { x64(1, 2, 3, 3, 4), x64(2, 2, 2, 2, 2), x64(2) }))
    assert(gradcheck(function(a) return F.max_pool3d(a, 2, { stride = 1, padding = 1 }) end, { x64(1, 1, 3, 3, 3) }))
    assert(gradcheck(function(a)
      return F.avg_pool3d(a, 2, { stride = 1, padding = 1, count_include_pad = false, ceil_mode = true })
    end, { x64(1, 1, 3, 2, 3) }))
  end)
  it('refuses bad arguments', function()
    local x = ember.randn({ 1, 2, 3, 3, 3 })
    H.assert_error(function() F.conv3d(x, ember.randn({ 2, 3, 1, 1, 1 })) end, 'expected an input of 3 channels')
    H.assert_error(function() F.conv3d(x:view(6, 3, 3), ember.randn({ 2, 2, 1, 1, 1 })) end, 'expected a 4-D')
    H.assert_error(function() F.conv3d(x, ember.randn({ 2, 2, 1, 1, 1 }), nil, { strides = 2 }) end,
      'unknown option strides')
    H.assert_error(function() F.max_pool3d(x, 2, { padding = 2 }) end, 'at most half')
    H.assert_error(function() F.avg_pool3d(x, 2, { divisor_override = 0 }) end, 'divisor_override')
  end)
end)

describe('volumetric and adaptive modules', function()
  it('Conv3d, MaxPool3d, AvgPool3d, AdaptiveMaxPool1d/2d', function()
    local conv = nn.Conv3d(2, 3, { 2, 1, 2 }, { padding = 1 })
    assert.are.same({ 3, 2, 2, 1, 2 }, { conv.weight:size(1), conv.weight:size(2), conv.weight:size(3),
      conv.weight:size(4), conv.weight:size(5) })
    local x = ember.randn({ 2, 2, 4, 4, 4 })
    H.assert_close(conv:forward(x), F.conv3d(x, conv.weight, conv.bias, { padding = 1 }):totable(), 1e-6, 1e-6)
    local y, i = nn.MaxPool3d(2, { return_indices = true }):forward(x)
    local y2, i2 = F.max_pool3d(x, 2, { return_indices = true })
    H.assert_close(y, y2:totable())
    H.assert_close(i, i2:totable())
    H.assert_close(nn.AvgPool3d(2, 1):forward(x), F.avg_pool3d(x, 2, 1):totable())
    local s = ember.randn({ 2, 3, 7 })
    H.assert_close(nn.AdaptiveMaxPool1d(3):forward(s), F.adaptive_max_pool1d(s, 3):totable())
    H.assert_close(nn.AdaptiveMaxPool2d({ 2, 2 }):forward(x:select(3, 1)), F.adaptive_max_pool2d(x:select(3, 1), 2):totable())
    H.assert_close(nn.AdaptiveAvgPool1d(3):forward(s), F.adaptive_avg_pool1d(s, 3):totable())
    assert(tostring(conv):find('Conv3d(2, 3', 1, true))
  end)
end)

local VK = require('vk_helpers').open('conv3d on vulkan')
if VK then
  describe('conv3d and 3-D pooling on ' .. VK.V .. ' against PyTorch', function()
    for _, name in ipairs(names) do
      it(name, function()
        G.check(name, calls[name][1], calls[name][2], { device = VK.V, dtype = 'float32', rtol = 2e-4, atol = 2e-5 })
      end)
    end
  end)
end
