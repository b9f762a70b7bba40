-- Order statistics, paired reductions and scans (ember.ops.reduce_ext) against PyTorch's
-- results (tests/lua/golden/make_math_api.py), with NaN lines, infinities, 0-d, strided and
-- zero-size inputs, gradients against finite differences, and the argument errors. Vulkan
-- against the CPU: tests/lua/math_ext_device_spec.lua.
local H = require 'helpers'
local ember = H.ember
local g = H.golden('tests/lua/golden/math_api.safetensors')
local gradcheck = ember.autograd.gradcheck

local function same(got, name, rtol)
  H.assert_close(got, g(name):totable(), rtol or 1e-12, 0, name)
end

describe('order statistics against PyTorch', function()
  local x = g('x')

  it('median, kthvalue along each dim, and over everything', function()
    for d = 1, 2 do
      local v, i = x:median(d)
      same(v, 'median.' .. d .. '.v')
      same(i, 'median.' .. d .. '.i')
      assert.are.equal('int64', i:dtype())
      v, i = ember.kthvalue(x, 3, d)
      same(v, 'kthvalue.' .. d .. '.v')
      same(i, 'kthvalue.' .. d .. '.i')
    end
    same(x:median(), 'median.all')
    local v, i = g('xn'):median(2)
    same(v, 'median.nan.v')
    same(i, 'median.nan.i')
    assert.is_true(g('xn'):median():item() ~= g('xn'):median():item())
  end)

  it('keepdim, strided inputs, 0-d and integer dtypes', function()
    local v, i = x:t():median(1, true)
    assert.are.same({ 1, 5 }, { v:size(1), v:size(2) })
    H.assert_close(v:squeeze(1), g('median.2.v'):totable(), 0, 0)
    H.assert_close(i:squeeze(1), g('median.2.i'):totable(), 0, 0)
    local s = ember.tensor(4.5)
    local sv, si = s:median(1)
    assert.are.equal(0, sv:dim())
    assert.are.equal(1, si:item())
    local iv = ember.tensor({ 5, 1, 4, 2 }, { dtype = 'int64' }):median(1)
    assert.are.equal(2, iv:item())
    local kv, ki = ember.tensor({ 3.0, 1.0, 2.0 }):kthvalue(3)
    assert.are.same({ 3, 1 }, { kv:item(), ki:item() })
  end)

  it('mode: the smallest most frequent value and its last index', function()
    local v, i = g('ints'):long():mode(2)
    same(v, 'mode.v')
    same(i, 'mode.i')
    local mv, mi = ember.tensor({ 2.0, 7.0, 2.0, 7.0, 1.0 }):mode()
    assert.are.same({ 2, 3 }, { mv:item(), mi:item() })
  end)

  it('quantile with every interpolation, keepdim and NaN lines', function()
    local q = g('q')
    for _, interp in ipairs({ 'linear', 'lower', 'higher', 'midpoint', 'nearest' }) do
      same(x:quantile(q, 2, false, interp), 'quantile.' .. interp)
      same(ember.quantile(x, q, { dim = 2, interpolation = interp }), 'quantile.' .. interp)
    end
    same(x:quantile(0.3), 'quantile.all')
    same(x:quantile(q, 1, true), 'quantile.keep')
    same(g('xn'):quantile(0.5, 2), 'quantile.nan')
    assert.are.same({ 5, 1, 6 }, { x:quantile(q, 1, true):size(1), x:quantile(q, 1, true):size(2),
      x:quantile(q, 1, true):size(3) })
  end)

  it('has gradients into the chosen elements', function()
    local t = ember.tensor(H.rand_table({ 4, 5 }, -2, 2), { dtype = 'float64' }):requires_grad_()
    assert.is_true(gradcheck(function(a) return (a:median(2)) end, { t }))
    assert.is_true(gradcheck(function(a) return (a:kthvalue(2, 1)) end, { t }))
    assert.is_true(gradcheck(function(a) return a:quantile(ember.tensor({ 0.2, 0.9 }, { dtype = 'float64' }), 2) end, { t }))
    assert.is_true(gradcheck(function(a) return a:median() end, { t }))
  end)

  it('checks its arguments', function()
    H.assert_error(function() x:kthvalue(7, 2) end, 'kthvalue: expected k in [1, 6], got 7')
    H.assert_error(function() x:median(3) end, 'median: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:median(0) end, 'median: dimensions are 1-based in Lua; got 0')
    H.assert_error(function() x:quantile(1.5) end, 'quantile: expected q in [0, 1], got 1.5')
    H.assert_error(function() x:quantile(0.5, { dimm = 1 }) end, 'quantile: unknown option dimm')
    H.assert_error(function() x:quantile(0.5, 1, false, 'cubic') end, "quantile: expected interpolation 'linear'")
    H.assert_error(function() ember.zeros(2, 0):median(2) end, 'median: cannot reduce dimension 2 of size 0')
    H.assert_error(function() ember.tensor({ 1, 2 }, { dtype = 'int64' }):quantile(0.5) end,
      'quantile: expected a floating-point tensor, got int64')
  end)
end)

describe('paired reductions against PyTorch', function()
  local x = g('x')

  it('var_mean, std_mean and aminmax', function()
    for d = 1, 2 do
      local v, m = x:var_mean(d)
      same(v, 'var_mean.' .. d .. '.v')
      same(m, 'var_mean.' .. d .. '.m')
      v, m = ember.std_mean(x, d, { unbiased = false, keepdim = true })
      same(v, 'std_mean.' .. d .. '.v')
      same(m, 'std_mean.' .. d .. '.m')
      v, m = x:std_mean(d, false, true)
      same(v, 'std_mean.' .. d .. '.v')
      same(m, 'std_mean.' .. d .. '.m')
    end
    local v, m = x:var_mean()
    H.assert_close(v, x:var():item(), 0, 0)
    H.assert_close(m, x:mean():item(), 0, 0)
    local lo, hi = x:aminmax()
    assert.are.same({ x:amin():item(), x:amax():item() }, { lo:item(), hi:item() })
    lo, hi = ember.aminmax(x, { dim = 2, keepdim = true })
    H.assert_close(lo, x:amin(2, true):totable(), 0, 0)
    H.assert_close(hi, x:amax(2, true):totable(), 0, 0)
    H.assert_error(function() ember.zeros(0):aminmax() end, 'aminmax: expected a non-empty tensor')
  end)
end)

describe('scans against PyTorch', function()
  local x = g('x')

  it('cummax, cummin, logcumsumexp and diff along each dim', function()
    for d = 1, 2 do
      for _, name in ipairs({ 'cummax', 'cummin' }) do
        local v, i = x[name](x, d)
        same(v, name .. '.' .. d .. '.v')
        same(i, name .. '.' .. d .. '.i')
      end
      same(x:logcumsumexp(d), 'logcumsumexp.' .. d, 1e-12)
      same(x:diff(1, d), 'diff.' .. d)
      same(ember.diff(x, { n = 2, dim = d, prepend = x:narrow(d, 1, 1), append = x:narrow(d, 1, 2) }),
        'diff2.' .. d)
    end
    local v, i = g('xn'):cummax(2)
    same(v, 'cummax.nan.v')
    same(i, 'cummax.nan.i')
    local inf = math.huge
    same(ember.tensor({ -inf, -inf, 0.0, inf, 1.0, -inf }, { dtype = 'float64' }):logcumsumexp(1), 'logcumsumexp.inf')
    same(ember.tensor({ -1000.0, 0.0, 1000.0, 999.0 }, { dtype = 'float64' }):logcumsumexp(1), 'logcumsumexp.big')
  end)

  it('ties take the later index; integers, 0-d, strided and zero-size inputs', function()
    local v, i = ember.tensor({ 1, 3, 3, 2, 3 }, { dtype = 'int64' }):cummax(1)
    H.assert_close(v, { 1, 3, 3, 3, 3 }, 0, 0)
    H.assert_close(i, { 1, 2, 3, 3, 5 }, 0, 0)
    v, i = x:t():cummin(2)
    H.assert_close(v, select(1, x:cummin(1)):t():totable(), 0, 0)
    v, i = ember.tensor(2.5):cummax(1)
    assert.are.same({ 0, 2.5, 1 }, { v:dim(), v:item(), i:item() })
    v, i = ember.zeros(3, 0):cummax(2)
    assert.are.same({ 3, 0, 'int64' }, { i:size(1), i:size(2), i:dtype() })
    assert.are.equal(0, ember.zeros(0, 4):logcumsumexp(1):size(1))
    H.assert_close(ember.tensor({ true, true, false }):diff(), { false, true })
    H.assert_close(ember.tensor({ 1.0, 4.0 }):diff(1, 1, 0, 10), { 1, 3, 6 })
    assert.are.equal(0, ember.tensor({ 1.0, 4.0 }):diff(3):size(1))
  end)

  it('has gradients', function()
    local t = ember.tensor(H.rand_table({ 3, 5 }, -2, 2), { dtype = 'float64' }):requires_grad_()
    assert.is_true(gradcheck(function(a) return (a:cummax(2)) end, { t }))
    assert.is_true(gradcheck(function(a) return (a:cummin(1)) end, { t }))
    assert.is_true(gradcheck(function(a) return a:logcumsumexp(2) end, { t }))
    assert.is_true(gradcheck(function(a) return a:diff(2, 2) end, { t }))
  end)

  it('checks its arguments', function()
    H.assert_error(function() x:cummax() end, 'cummax: expected a dimension')
    H.assert_error(function() x:logcumsumexp(5) end, 'logcumsumexp: dimension 5 out of range')
    H.assert_error(function() x:diff(-1) end, 'diff: expected n to be a non-negative integer, got -1')
    H.assert_error(function() x:diff({ nn = 1 }) end, 'diff: unknown option nn')
    H.assert_error(function() ember.tensor(1.0):diff() end, 'diff: expected a tensor of at least 1 dimension')
  end)
end)
