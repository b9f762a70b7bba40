-- searchsorted, bucketize, bincount, histc and unique_consecutive (ember.ops.search) against
-- PyTorch's results (tests/lua/golden/make_math_api.py; positions 1-based), with infinities
-- and NaN among the values, batched sequences, zero-size inputs and the argument errors.
-- Vulkan against the CPU: tests/lua/math_ext_device_spec.lua.
local H = require 'helpers'
local ember = H.ember
local g = H.golden('tests/lua/golden/math_api.safetensors')

local function same(got, name)
  H.assert_close(got, g(name):totable(), 0, 0, name)
end

describe('searchsorted and bucketize against PyTorch', function()
  it('1-d and batched sequences, left and right', function()
    local seq, vals = g('seq'), g('vals')
    local r = ember.searchsorted(seq, vals)
    same(r, 'searchsorted.left')
    assert.are.equal('int64', r:dtype())
    same(seq:searchsorted(vals, { right = true }), 'searchsorted.right')
    same(seq:searchsorted(vals, { side = 'right' }), 'searchsorted.right')
    same(ember.searchsorted(g('seq2'), g('vals2')), 'searchsorted.batch')
    same(ember.searchsorted(g('seq2'), g('vals2'), { side = 'right' }), 'searchsorted.batch_right')
    same(ember.bucketize(g('special'), g('bounds')), 'bucketize')
    same(g('special'):bucketize(g('bounds'), { right = true }), 'bucketize.right')
  end)

  it('values of any shape, numbers, a sorter, int32 output and empty inputs', function()
    local seq = ember.tensor({ 1.0, 3.0, 5.0, 7.0 })
    local r = seq:searchsorted(ember.tensor({ { 0.0, 3.0 }, { 6.0, 9.0 } }))
    H.assert_close(r, { { 1, 2 }, { 4, 5 } }, 0, 0)
    local s = seq:searchsorted(5)
    assert.are.same({ 0, 3 }, { s:dim(), s:item() })
    local shuffled = ember.tensor({ 5.0, 1.0, 7.0, 3.0 })
    local sorter = ember.tensor({ 2, 4, 1, 3 }, { dtype = 'int64' })
    H.assert_close(shuffled:searchsorted(ember.tensor({ 4.0 }), { sorter = sorter }), { 3 }, 0, 0)
    assert.are.equal('int32', seq:searchsorted(ember.tensor({ 2.0 }), { out_int32 = true }):dtype())
    H.assert_close(ember.zeros(0):searchsorted(ember.tensor({ 1.0, 2.0 })), { 1, 1 }, 0, 0)
    assert.are.equal(0, seq:searchsorted(ember.zeros(0)):numel())
    local ints = ember.tensor({ 2, 4, 4, 8 }, { dtype = 'int64' })
    H.assert_close(ints:searchsorted(ember.tensor({ 4, 5 }, { dtype = 'int64' })), { 2, 4 }, 0, 0)
  end)

  it('checks its arguments', function()
    local seq = ember.tensor({ 1.0, 2.0 })
    H.assert_error(function() seq:searchsorted(ember.tensor({ 1.0 }), { rigth = true }) end,
      'searchsorted: unknown option rigth')
    H.assert_error(function() seq:searchsorted(ember.tensor({ 1.0 }), { side = 'up' }) end,
      "searchsorted: expected side 'left' or 'right', got up")
    H.assert_error(function() ember.zeros(2, 3):searchsorted(ember.zeros(3, 1)) end,
      'searchsorted: the sequence [2, 3] and the values [3, 1] must match')
    H.assert_error(function() ember.tensor({ 1.0 }):bucketize(ember.zeros(2, 2)) end,
      'bucketize: expected 1-d boundaries, got 2-d')
  end)
end)

describe('counting against PyTorch', function()
  it('bincount with weights and minlength', function()
    local x = g('bincount.in'):long()
    local r = x:bincount()
    same(r, 'bincount')
    assert.are.equal('int64', r:dtype())
    local w = ember.bincount(x, g('bincount.w'))
    H.assert_close(w, g('bincount.weights'):totable(), 1e-12, 1e-12)
    assert.are.equal('float64', w:dtype())
    assert.are.equal('float32', x:bincount(g('bincount.w'):float()):dtype())
    same(x:bincount({ minlength = 12 }), 'bincount.min')
    same(x:bincount(nil, 12), 'bincount.min')
    H.assert_close(ember.zeros(0, { dtype = 'int64' }):bincount(nil, 3), { 0, 0, 0 }, 0, 0)
    H.assert_error(function() ember.tensor({ 1, -2 }, { dtype = 'int64' }):bincount() end,
      'bincount: expected non-negative values, got -2')
    H.assert_error(function() ember.tensor({ 1.0 }):bincount() end,
      'bincount: expected an integer tensor, got float32')
  end)

  it('histc over a range and over the data', function()
    local x = g('histc.in')
    same(x:histc(7, -1.5, 1.5), 'histc')
    same(ember.histc(x, { bins = 5 }), 'histc.auto')
    assert.are.equal('float32', x:float():histc(4):dtype())
    H.assert_close(ember.tensor({ 0.0, 1.0, 1.0, 0 / 0, 5.0 }):histc(2, 0, 1), { 1, 2 }, 0, 0)
    H.assert_close(ember.tensor({ 3.0, 3.0 }):histc(4), { 0, 0, 2, 0 }, 0, 0)
    H.assert_error(function() x:histc(0) end, 'histc: expected bins to be a positive integer, got 0')
    H.assert_error(function() x:histc(3, 2, 1) end, 'histc: expected min <= max, got 2 and 1')
  end)

  it('unique_consecutive with inverse and counts', function()
    local v, inv, cnt = g('uc.in'):unique_consecutive({ return_inverse = true, return_counts = true })
    same(v, 'uc.v')
    same(inv, 'uc.inv')
    same(cnt, 'uc.cnt')
    local m = ember.tensor({ { 1, 1 }, { 2, 1 } }, { dtype = 'int64' })
    local mv, mi = ember.unique_consecutive(m, { return_inverse = true })
    H.assert_close(mv, { 1, 2, 1 }, 0, 0)
    H.assert_close(mi, { { 1, 1 }, { 2, 3 } }, 0, 0)
    local ev, ec = ember.zeros(0):unique_consecutive({ return_counts = true })
    assert.are.same({ 0, 0 }, { ev:numel(), ec:numel() })
    H.assert_error(function() m:unique_consecutive({ dim = 1 }) end,
      'unique_consecutive: not implemented with dim')
  end)
end)
