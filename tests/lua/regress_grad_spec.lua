-- Regression tests for gradients that were wrong or refused: strided parameters of the nn
-- kernels, backward through empty results, and the special-value cases of single formulas.
-- References are independent of the code under test: finite differences in float64
-- (ember.autograd.gradcheck), plain-Lua float64 loops, PyTorch's documented formulas, and the
-- CPU's float64 result for the Vulkan device (lavapipe).
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = ember.nn.functional
local gradcheck = ember.autograd.gradcheck

local function f64(t) return ember.tensor(t, { dtype = 'float64' }) end
local function leaf(t) return f64(t):requires_grad_() end

local function vulkan_device()
  for _, d in ipairs(ember.devices()) do
    if d.type ~= 'cpu' then return d.name end
  end
end

describe('nn kernels with strided parameters', function()
  -- A strided weight (every other element of a longer tensor) and an expanded one (stride 0)
  -- built inside the checked function, so gradcheck perturbs the storage they read.
  local x = {}
  H.seed(7)
  for n = 1, 4 do
    x[n] = {}
    for c = 1, 3 do x[n][c] = { H.uniform(-2, 2), H.uniform(-2, 2) } end
  end
  local wide = { 0.7, 99, -1.3, 99, 1.9, 99 }

  for _, training in ipairs({ true, false }) do
    local mode = training and 'training' or 'evaluation'
    local function bn(xx, w)
      local rm, rv = f64({ 0.1, -0.2, 0.3 }), f64({ 1.5, 0.5, 2.0 })
      local y = F.batch_norm(xx, rm, rv, w, nil, training)
      return y * y * y -- a nonlinear function of y, so gx depends on w's values
    end
    it('batch_norm (' .. mode .. ') follows a strided weight (finite differences)', function()
      gradcheck(function(xx, ww) return bn(xx, ww:slice(1, 1, 6, 2)) end,
        { leaf(x), leaf(wide) })
    end)
    it('batch_norm (' .. mode .. ') follows an expanded weight (finite differences)', function()
      gradcheck(function(xx, w1) return bn(xx, w1:expand(3)) end, { leaf(x), leaf({ 1.7 }) })
    end)
  end

  it('batch_norm on Vulkan matches the CPU with strided and expanded weights', function()
    local V = vulkan_device()
    if V == nil then return pending('no Vulkan device') end
    local function grads(dev, mk)
      local xx = ember.tensor(x):to(dev):requires_grad_() -- a fresh leaf on each device
      local y = F.batch_norm(xx, nil, nil, mk(dev), nil, true)
      local l = (y * y * y):sum()
      l:backward()
      return xx.grad:to('cpu')
    end
    local forms = {
      function(dev) return ember.tensor(wide):to(dev):slice(1, 1, 6, 2) end,
      function(dev) return ember.tensor({ 1.7 }):to(dev):expand(3) end,
    }
    for _, mk in ipairs(forms) do
      local want = grads('cpu', function() return mk('cpu'):contiguous() end)
      H.assert_close(grads(V, mk), want:totable(), 1e-4, 1e-4)
    end
  end)
end)

describe('backward through empty results', function()
  local empty_index = ember.zeros({ 0 }, { dtype = 'int64' })
  local cases = {
    { 'gather', function(x) return x:gather(2, ember.zeros({ 3, 0 }, { dtype = 'int64' })) end },
    { 'index_select', function(x) return x:index_select(1, empty_index) end },
    { 'masked_select', function(x) return x:masked_select(ember.zeros({ 3, 4 }, { dtype = 'bool' })) end },
    { 'repeat by 0', function(x) return x['repeat'](x, 0, 2) end },
    { 'tril of an empty slice', function(x) return x:narrow(1, 1, 0):tril() end },
    { 'triu of an empty slice', function(x) return x:narrow(2, 1, 0):triu(1) end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ' gives zero gradients', function()
      local x = leaf({ { 1, 2, 3, 4 }, { 5, 6, 7, 8 }, { 9, 10, 11, 12 } })
      local y = c[2](x)
      assert.are.equal(0, y:numel())
      local l = y:sum()
      l:backward()
      H.assert_close(x.grad, H.zeros({ 3, 4 }), 0, 0)
    end)
  end

  it('sort and topk of a 0-d tensor pass the gradient through', function()
    for _, pick in ipairs({ function(x) return (x:sort()) end, function(x) return (x:topk(1)) end }) do
      local x = f64(3):requires_grad_()
      local y = pick(x)
      local l = y * 5
      l:backward()
      assert.are.equal(5, x.grad:item())
    end
    local x = f64(3):requires_grad_()
    local l = x:topk(0):sum()
    l:backward()
    assert.are.equal(0, x.grad:item())
  end)

  it('an empty batch trains a model', function()
    ember.manual_seed(1)
    local m = ember.nn.Sequential(ember.nn.Linear(3, 2))
    local xb = ember.zeros({ 0, 3 })
    local idx = ember.zeros({ 0 }, { dtype = 'int64' })
    local out = m:forward(xb):index_select(1, idx)
    local loss = out:sum()
    loss:backward()
    for _, p in ipairs(m:parameters()) do assert.are.equal(0, p.grad:abs():sum():item()) end
  end)
end)

describe('single-formula special cases', function()
  it('max_unpool2d stores values whose windows overlap, as PyTorch (not their sum)', function()
    -- max_pool2d with stride 1 < kernel 2 picks the 5 at (1, 2) twice and the 3 at (2, 2) twice
    local x = ember.tensor({ { { { 1, 5, 2 }, { 0, 3, 1 }, { 2, 1, 0 } } } })
    local p, ind = F.max_pool2d(x, 2, { stride = 1, return_indices = true })
    local want = H.zeros({ 3, 3 }) -- a plain loop: out[ind] = p
    local pt, it_ = p:totable()[1][1], ind:totable()[1][1]
    for i = 1, 2 do
      for j = 1, 2 do
        local k = it_[i][j] - 1
        want[math.floor(k / 3) + 1][k % 3 + 1] = pt[i][j]
      end
    end
    H.assert_close(F.max_unpool2d(p, ind, 2, { stride = 1 })[1][1], want, 0, 0)
    local V = vulkan_device()
    if V then
      H.assert_close(F.max_unpool2d(p:to(V), ind:to(V), 2, { stride = 1 }):to('cpu')[1][1], want, 0, 0)
    end
    -- its gradient is PyTorch's: the gather at the indices (both copies read their cell)
    local pl = p:double():requires_grad_()
    local gy = f64({ { { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } } })
    F.max_unpool2d(pl, ind, 2, { stride = 1 }):backward(gy)
    local gw = {}
    for i = 1, 2 do
      gw[i] = {}
      for j = 1, 2 do gw[i][j] = it_[i][j] end -- gy holds 1-based positions as values
    end
    H.assert_close(pl.grad[1][1], gw, 0, 0)
  end)

  it('softplus(beta, threshold) has finite gradients where exp(beta x) overflows', function()
    local xs = { 100, 50, -100, 1, 0, 30, -0.5 }
    for _, dt in ipairs({ 'float32', 'float64' }) do
      local x = ember.tensor(xs, { dtype = dt }):requires_grad_()
      local y = x:softplus(2, 1000)
      local l = y:sum()
      l:backward()
      local want = {}
      for i, v in ipairs(xs) do want[i] = 1 / (1 + math.exp(-2 * v)) end -- sigmoid(beta x)
      H.assert_close(x.grad, want, 1e-6, 1e-30, dt)
    end
  end)

  it('std backward at zero spread is 0, as PyTorch', function()
    local x = leaf({ { 3, 3, 3 }, { 1, 2, 4 } })
    local l = x:std(2):sum()
    l:backward()
    local g = x.grad:totable()
    H.assert_close(g[1], { 0, 0, 0 }, 0, 0)
    -- the other row against finite differences
    gradcheck(function(a) return a:std(2) end, { leaf({ { 1, 2, 4 } }) })
    local y = leaf({ 5, 5 })
    local s = y:std()
    s:backward()
    H.assert_close(y.grad, { 0, 0 }, 0, 0)
  end)

  it('float64 2 ^ x backward uses a float64 ln 2', function()
    local x = leaf({ 1.5, -3.25, 0 })
    local y = 2 ^ x
    local l = y:sum()
    l:backward()
    local want = {}
    for i, v in ipairs({ 1.5, -3.25, 0 }) do want[i] = 2 ^ v * math.log(2) end
    H.assert_close(x.grad, want, 1e-15, 0)
  end)
end)

describe('errors where PyTorch works', function()
  it('layer_norm backward with size-1 dims in normalized_shape and an affine weight', function()
    H.seed(3)
    local x = leaf(H.rand_table({ 2, 3, 1 }, -2, 2))
    local w = leaf({ { 0.5 }, { -1.5 }, { 2 } })
    local b = leaf({ { 0.1 }, { 0.2 }, { 0.3 } })
    gradcheck(function(xx, ww, bb)
      local y = F.layer_norm(xx, { 3, 1 }, ww, bb)
      return y * y
    end, { x, w, b })
  end)

  it('cumprod backward with zeros is exact (finite differences)', function()
    gradcheck(function(a) return a:cumprod(1) end, { leaf({ 2, 0, 3, 0, 4 }) })
    gradcheck(function(a) return a:cumprod(2) end, { leaf({ { 0, 1.5, -2 }, { 1.5, -2, 0 }, { 0.5, 3, 2 } }) })
    -- the plain formula: grad_i = sum_{j >= i} prod_{k <= j, k ~= i} x_k (g = ones)
    local x = leaf({ 2, 0, 3, 0, 4 })
    local l = x:cumprod(1):sum()
    l:backward()
    H.assert_close(x.grad, { 1, 2 + 2 * 3, 0, 0, 0 }, 0, 0)
  end)

  it('binary_cross_entropy on an empty input is NaN (an empty mean), as PyTorch', function()
    local x = ember.zeros(0):requires_grad_()
    local l = F.binary_cross_entropy(x, ember.zeros(0))
    assert.is_true(l:item() ~= l:item())
    l:backward()
    assert.are.equal(0, x.grad:numel())
    assert.are.equal(0, F.binary_cross_entropy(ember.zeros(0), ember.zeros(0), nil, 'sum'):item())
  end)

  it('outer of two dtypes promotes', function()
    local a = ember.tensor({ 1.5, -2 }, { dtype = 'float32' })
    local b = ember.tensor({ 0.1, 3, 7 }, { dtype = 'float64' })
    local r = ember.outer(a, b)
    assert.are.equal('float64', r:dtype())
    local want = {}
    for i, u in ipairs({ 1.5, -2 }) do
      want[i] = {}
      for j, v in ipairs({ 0.1, 3, 7 }) do want[i][j] = u * v end
    end
    H.assert_close(r, want, 1e-15, 0)
    local ri = ember.outer(ember.tensor({ 1, 2 }, { dtype = 'int32' }), b)
    assert.are.equal('float64', ri:dtype())
  end)

  it('rounded division names div in its errors and takes bool operands as PyTorch', function()
    H.assert_close(ember.tensor({ true, false }):div(2, 'trunc'), { 0, 0 }, 0, 0)
    H.assert_close(ember.tensor({ true, false }):div(2, 'floor'), { 0, 0 }, 0, 0)
    local ok, err = pcall(function() return ember.tensor({ 1, 2 }, { dtype = 'int64' }):div(0, 'trunc') end)
    assert.is_false(ok)
    assert.are.equal('div: integer division by zero', tostring(err):match('div: .*'))
    assert.is_nil(tostring(err):find('fmod', 1, true))
    ok, err = pcall(function() return ember.tensor({ 1, 2 }, { dtype = 'int64' }):div(0, 'floor') end)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('div: integer division by zero', 1, true))
    ok, err = pcall(function() return ember.tensor({ true }):div(ember.tensor({ true }), 'trunc') end)
    assert.is_false(ok)
    assert.is_nil(tostring(err):find('sub:', 1, true))
    assert.is_truthy(tostring(err):find('div:', 1, true))
  end)
end)
