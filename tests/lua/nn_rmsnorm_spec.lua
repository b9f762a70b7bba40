-- nn.RMSNorm and F.rms_norm (PyTorch 2.4's) against a float64 formula written with plain Lua
-- numbers, plus finite differences and argument errors.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn
local F = nn.functional

-- y[r][j] = x[r][j] / sqrt(mean_j x[r][j]^2 + eps) * w[j], rows r of a [R, N] table
local function reference(x, w, eps)
  local y = {}
  for r, row in ipairs(x) do
    local s = 0
    for _, v in ipairs(row) do s = s + v * v end
    local scale = 1 / math.sqrt(s / #row + eps)
    y[r] = {}
    for j, v in ipairs(row) do y[r][j] = v * scale * (w and w[j] or 1) end
  end
  return y
end

describe('nn.RMSNorm', function()
  it('normalizes over the trailing dims, with PyTorch 2.4 defaults', function()
    H.seed(7)
    local xt = H.rand_table({ 6, 12 }, -3, 3)
    local wt = H.rand_table({ 12 }, 0.5, 2)
    local m = nn.RMSNorm(12):double()
    assert.are.same({ 12 }, m.weight:size())
    assert.are.equal('float64', m.weight:dtype())
    assert.are.same({ 'weight' }, (function() local r = {} for k in pairs(m:state_dict()) do r[#r + 1] = k end return r end)())
    m.weight:detach():copy_(ember.tensor(wt, { dtype = 'float64' }))
    local x = ember.tensor(xt, { dtype = 'float64' })
    -- eps nil: float64's machine epsilon
    H.assert_close(m(x), reference(xt, wt, 2.220446049250313e-16), 1e-13, 1e-14)
    -- two trailing dims: [6, 12] as [2, 3, 12] normalized over [3, 12] is over 36 values
    local x3 = x:view(2, 3, 12)
    local flat = {}
    for b = 1, 2 do
      flat[b] = {}
      for r = 1, 3 do for j = 1, 12 do flat[b][#flat[b] + 1] = xt[(b - 1) * 3 + r][j] end end
    end
    local want = reference(flat, nil, 1e-3)
    local got = F.rms_norm(x3, { 3, 12 }, nil, 1e-3):reshape(2, 36)
    H.assert_close(got, want, 1e-13, 1e-14)
    -- float32, eps nil: float32's epsilon, and no weight
    local m32 = nn.RMSNorm({ 12 }, { elementwise_affine = false })
    assert.is_nil(m32.weight)
    H.assert_close(m32(x:float()), reference(xt, nil, 1.1920928955078125e-07), 2e-6, 1e-6)
    local m_eps = nn.RMSNorm(12, { eps = 0.5 })
    H.assert_close(m_eps(x:float()), reference(xt, nil, 0.5), 2e-6, 1e-6)
    assert.are.equal('RMSNorm([12], eps=0.5, elementwise_affine=true)', tostring(m_eps))
  end)

  it('gradchecks in float64', function()
    ember.manual_seed(8)
    local x = ember.randn(3, 5, { dtype = 'float64' }):requires_grad_(true)
    local w = ember.randn(5, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(ember.autograd.gradcheck(function(a, b) return F.rms_norm(a, 5, b, 1e-5) end, { x, w }))
  end)

  it('raises clearly on bad arguments', function()
    H.assert_error(function() nn.RMSNorm(4, { epsilon = 1 }) end, 'RMSNorm: unknown option epsilon')
    H.assert_error(function() nn.RMSNorm(0) end, 'RMSNorm: expected normalized_shape of positive integers, got 0')
    H.assert_error(function() F.rms_norm(ember.randn(2, 3), { 4 }) end,
      'rms_norm: expected input with trailing dimensions [4], got [2, 3]')
    H.assert_error(function() F.rms_norm(ember.ones(2, 3, { dtype = 'int64' }), 3) end,
      'rms_norm: expected a floating input, got int64')
  end)
end)
