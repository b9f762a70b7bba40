-- take, take_along_dim, index_put, scatter_reduce and masked_scatter (lua/ember/ops/index_ext.lua)
-- against PyTorch's values and gradients (tests/lua/golden/make_shape_linalg.py), plain-loop
-- references, zero-size and strided inputs, errors, and on Vulkan against the CPU.
local H = require 'helpers'
local GC = require 'golden_cases'
local ember = H.ember
local f64 = { dtype = 'float64' }
local i64 = { dtype = 'int64' }

describe('indexing against PyTorch', function()
  it('take, with negative indices', function()
    GC.run('take', function(x, i) return x:take(i) end, { nil, 'index' })
  end)
  it('take_along_dim', function()
    GC.run('take_along_dim', function(x, i) return x:take_along_dim(i, 2) end, { nil, 'index' })
    GC.run('take_along_bcast', function(x, i) return ember.take_along_dim(x, i, 1) end, { nil, 'index' })
  end)
  it('index_put, with and without accumulate', function()
    GC.run('index_put', function(x, i, v) return x:index_put({ i }, v) end, { nil, 'index' })
    GC.run('index_put_acc', function(x, i, v) return x:index_put({ i }, v, true) end, { nil, 'index' })
    GC.run('index_put2', function(x, i, j, v) return x:index_put({ i, j }, v, true) end,
      { nil, 'index', 'index' })
  end)
  for _, red in ipairs({ 'sum', 'prod', 'mean', 'amax', 'amin' }) do
    for _, inc in ipairs({ true, false }) do
      it(('scatter_reduce %s include_self=%s'):format(red, tostring(inc)), function()
        GC.run(('scatter_%s_%d'):format(red, inc and 1 or 0), function(x, i, s)
          return x:scatter_reduce(2, i, s, red, { include_self = inc })
        end, { nil, 'index' })
      end)
    end
  end
  it('scatter_reduce over part of the input', function()
    GC.run('scatter_amax_part', function(x, i, s)
      return x:scatter_reduce(1, i, s, 'amax', { include_self = false })
    end, { nil, 'index' })
  end)
  it('masked_scatter, with a broadcast mask', function()
    GC.run('masked_scatter', function(x, m, s) return x:masked_scatter(m, s) end, { nil, 'mask' })
    GC.run('masked_scatter_bcast', function(x, m, s) return x:masked_scatter(m, s) end, { nil, 'mask' })
  end)
end)

describe('indexing by hand', function()
  it('index_put_ writes in place, also through a bool mask and into a strided view', function()
    local x = ember.zeros(3, 4, f64)
    x:index_put_({ ember.tensor({ 1, 3 }, i64), ember.tensor({ 2, 4 }, i64) }, ember.tensor({ 5, 6 }, f64))
    H.assert_close(x, { { 0, 5, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 6 } })
    local y = ember.zeros(4, 3, f64):t()   -- a transposed view
    y:index_put_({ ember.tensor({ 2 }, i64) }, 1)
    H.assert_close(y, { { 0, 0, 0, 0 }, { 1, 1, 1, 1 }, { 0, 0, 0, 0 } })
    local z = ember.arange(0, 6, 1, f64):view(2, 3)
    z:index_put_({ z:gt(2) }, -1)
    H.assert_close(z, { { 0, 1, 2 }, { -1, -1, -1 } })
    local acc = ember.zeros(3, f64):index_put({ ember.tensor({ 1, 1, 1, 3 }, i64) }, ember.ones(4, f64), true)
    H.assert_close(acc, { 3, 0, 1 })
  end)

  it('scatter_reduce against a plain loop, on int64 too', function()
    local x = ember.tensor({ 5, 1, 7, 3 }, i64)
    local idx = ember.tensor({ 1, 1, 4, 2, 4 }, i64)
    local src = ember.tensor({ 2, 9, -1, 4, 6 }, i64)
    H.assert_close(x:scatter_reduce(1, idx, src, 'amax'), { 9, 4, 7, 6 })
    H.assert_close(x:scatter_reduce(1, idx, src, 'amin', { include_self = false }), { 2, 4, 7, -1 })
    H.assert_close(x:scatter_reduce(1, idx, src, 'prod'), { 90, 4, 7, -18 })
    H.assert_close(x:scatter_reduce(1, idx, src, 'sum', { include_self = false }), { 11, 4, 7, 5 })
    assert.are.equal('int64', x:scatter_reduce(1, idx, src, 'mean'):dtype())
    local y = x:clone():scatter_reduce_(1, idx, src, 'amax')
    H.assert_close(y, { 9, 4, 7, 6 })
  end)

  it('empty indices and masks change nothing and keep gradients', function()
    local x = ember.randn(3, 2, f64):requires_grad_()
    local r = x:scatter_reduce(1, ember.zeros(0, 2, i64), ember.zeros(0, 2, f64), 'amax')
    H.assert_close(r, x:totable(), 0, 0)
    r:sum():backward()
    H.assert_close(x.grad, { { 1, 1 }, { 1, 1 }, { 1, 1 } })
    local m = x:masked_scatter(ember.zeros(3, 2, { dtype = 'bool' }), ember.zeros(0, f64))
    H.assert_close(m, x:totable(), 0, 0)
    assert.are.same(0, ember.zeros(2, 3):take(ember.zeros(0, i64)):numel())
    local p = ember.zeros(2, 2):index_put({ ember.zeros(0, i64) }, ember.zeros(0, 2))
    H.assert_close(p, { { 0, 0 }, { 0, 0 } })
  end)

  it('gradcheck', function()
    local g = ember.autograd.gradcheck
    local idx = ember.tensor({ { 1, 3, 3 }, { 2, 2, 1 } }, i64)
    assert.is_true(g(function(x, s) return x:scatter_reduce(2, idx, s, 'prod') end,
      { ember.randn(2, 3, f64):requires_grad_(), ember.randn(2, 3, f64):requires_grad_() }))
    assert.is_true(g(function(x, v) return x:index_put({ ember.tensor({ 2, 2 }, i64) }, v, true) end,
      { ember.randn(3, 2, f64):requires_grad_(), ember.randn(2, 2, f64):requires_grad_() }))
    assert.is_true(g(function(x, s) return x:masked_scatter(x:gt(0), s) end,
      { ember.randn(3, 2, f64):requires_grad_(), ember.randn(6, f64):requires_grad_() }))
  end)

  it('errors', function()
    local x = ember.zeros(3, 4)
    H.assert_error(function() x:take(ember.zeros(2)) end, 'take: expected an integer tensor for the index, got float32')
    H.assert_error(function() x:scatter_reduce(1, ember.zeros(1, 1, i64), ember.zeros(1, 1), 'max') end,
      "scatter_reduce: expected reduce to be 'sum', 'prod', 'mean', 'amax' or 'amin', got max")
    H.assert_error(function()
      x:scatter_reduce(1, ember.zeros(1, 1, i64), ember.zeros(1, 1), 'sum', { include_slef = true })
    end, 'unknown option include_slef')
    H.assert_error(function() x:masked_scatter(x:gt(-1), ember.zeros(5)) end,
      'masked_scatter: the mask selects 12 elements, but the source has 5')
    H.assert_error(function() x:index_put({ ember.tensor({ 1 }, i64) }, ember.zeros(5)) end,
      'index_put: values of shape [5] cannot broadcast to the indexed shape [1, 4]')
    H.assert_error(function() x:take_along_dim(ember.zeros(3, 4, i64), 3) end, 'dimension 3 out of range')
    -- the ops inside report in the called function's name
    H.assert_error(function() x:take(ember.tensor({ 13 }, i64)) end, 'take: index 13 is out of bounds')
    H.assert_error(function() x:index_put({ ember.tensor({ 4 }, i64) }, 1, true) end, 'index_put: index 4 is out of bounds')
    H.assert_error(function() x:scatter_reduce(2, ember.tensor({ { 5 } }, i64), x, 'amax') end,
      'scatter_reduce: index 5 is out of bounds')
  end)
end)

local VK = require('vk_helpers').open('indexing on vulkan')
if not VK then return end

describe('indexing on vulkan against the cpu', function()
  it('runs each function on the device', function()
    local x = ember.randn(3, 5)
    local idx = ember.tensor({ { 1, 3, 3, 5 }, { 2, 2, 1, 1 }, { 4, 5, 4, 4 } }, i64)
    local s = ember.randn(3, 4)
    local xv, iv, sv = VK.on(x), VK.on(idx), VK.on(s)
    VK.agree(xv:take(VK.on(ember.tensor({ 1, 7, -1 }, i64))), x:take(ember.tensor({ 1, 7, -1 }, i64)), 'take')
    VK.agree(xv:take_along_dim(iv, 2), x:take_along_dim(idx, 2), 'take_along_dim')
    for _, red in ipairs({ 'sum', 'mean', 'amax', 'amin', 'prod' }) do
      VK.agree(xv:scatter_reduce(2, iv, sv, red), x:scatter_reduce(2, idx, s, red), red, true)
    end
    local i = ember.tensor({ 1, 3, 1 }, i64)
    VK.agree(xv:index_put({ VK.on(i) }, VK.on(ember.ones(3, 5)), true), x:index_put({ i }, ember.ones(3, 5), true), 'index_put')
    VK.agree(xv:masked_scatter(xv:gt(0), VK.on(ember.ones(15))), x:masked_scatter(x:gt(0), ember.ones(15)), 'masked_scatter')
  end)
end)
