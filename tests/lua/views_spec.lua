-- views_spec: the tensor core's views, indexing, conversions and printing, checked against
-- plain-Lua references built from index arithmetic (never from Ember itself).
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'

-- Nested table of `shape` whose element at the 1-based multi-index idx is f(idx).
local function gen(shape, f)
  local idx = {}
  local function build(d)
    if d > #shape then return f(idx) end
    local t = {}
    for i = 1, shape[d] do idx[d] = i; t[i] = build(d + 1) end
    return t
  end
  return build(1)
end

-- Row-major linear index (0-based) of a 1-based multi-index.
local function lin(shape)
  return function(idx)
    local v = 0
    for d = 1, #shape do v = v * shape[d] + (idx[d] - 1) end
    return v
  end
end

-- A tensor holding 0, 1, 2, ... in row-major order, built from a nested Lua table.
local function seq(shape, dtype)
  return ember.tensor(gen(shape, lin(shape)), { dtype = dtype or 'float64' })
end

local function sizes(x)
  local s = {}
  for d = 1, x:dim() do s[d] = x:size(d) end
  return s
end

describe('properties', function()
  it('report size, dim, numel, stride, dtype, device and contiguity', function()
    local x = seq({ 2, 3, 4 }, 'float32')
    assert.are.same({ 2, 3, 4 }, sizes(x))
    assert.are.equal('[2, 3, 4]', tostring(x:size()))
    assert.is_true(x:size() == x:shape())
    assert.are.equal(4, x:size(-1))
    assert.are.equal(2, x:size(-3))
    assert.are.equal(3, x:dim())
    assert.are.equal(3, x:nDimension())
    assert.are.equal(24, x:numel())
    assert.are.equal(24, x:nElement())
    assert.are.same({ 12, 4, 1 }, x:stride())
    assert.are.equal(4, x:stride(2))
    assert.are.equal(1, x:stride(-1))
    assert.are.equal('float32', x:dtype())
    assert.are.equal('cpu', x:device())
    assert.are.equal(4, x:element_size())
    assert.are.equal(0, x:storage_offset())
    assert.is_true(x:is_contiguous())
    assert.is_true(x:is_floating_point())
    assert.is_false(seq({ 2 }, 'int16'):is_floating_point())
    assert.are.equal(2, #x)
    assert.are.equal(0, #ember.tensor(1))
  end)

  it('reject dimensions out of range', function()
    local x = ember.zeros(3, 4)
    H.assert_error(function() x:size(3) end, 'size: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:size(0) end, 'size: dimension 0 out of range')
    H.assert_error(function() x:size(-3) end, 'size: dimension -3 out of range')
    H.assert_error(function() x:stride(5) end, 'stride: dimension 5 out of range for a 2-d tensor')
  end)
end)

describe('view', function()
  it('reshapes without copying and infers one -1', function()
    local x = seq({ 2, 6 })
    for _, case in ipairs({ { { 3, 4 }, { 3, 4 } }, { { -1, 4 }, { 3, 4 } }, { { 3, -1 }, { 3, 4 } },
      { { 12 }, { 12 } }, { { -1 }, { 12 } }, { { 2, -1, 2 }, { 2, 3, 2 } }, { { 1, 12, 1 }, { 1, 12, 1 } } }) do
      local v = x:view(unpack(case[1]))
      assert.are.same(case[2], sizes(v))
      assert.is_true(v:is_same_storage(x))
      H.assert_close(v, gen(case[2], lin(case[2])))
    end
    -- table and Size forms
    assert.are.same({ 4, 3 }, sizes(x:view({ 4, 3 })))
    assert.are.same({ 6, 2 }, sizes(x:view(ember.zeros(6, 2):size())))
    assert.are.same({ 3, 4 }, sizes(x:view_as(ember.zeros(3, 4))))
  end)

  it('shares memory: writes through a view reach the base', function()
    local x = ember.zeros(2, 6)
    local v = x:view(3, 4)
    v[{ 2, 3 }] = 5
    assert.are.equal(5, x[{ 2, 1 }]:item()) -- row-major element 7 (1-based) is x[2][1]
    x:fill_(1)
    assert.are.equal(1, v[{ 3, 4 }]:item())
  end)

  it('splits and merges dimensions of non-contiguous tensors when strides allow', function()
    local x = seq({ 3, 4 })
    local t = x:t() -- [4, 3], strides (1, 4)
    local v = t:view(2, 2, 3) -- splits the stride-1 dimension: a view exists
    assert.is_true(v:is_same_storage(x))
    H.assert_close(v, gen({ 2, 2, 3 }, function(i) return ((i[1] - 1) * 2 + (i[2] - 1)) + 4 * (i[3] - 1) end))
    local s = seq({ 4, 6 })[{ {}, { 1, -1, 2 } }] -- [4, 3], strides (6, 2)
    local w = s:view(4, 3, 1)
    assert.is_true(w:is_same_storage(s))
    H.assert_close(w, gen({ 4, 3, 1 }, function(i) return (i[1] - 1) * 6 + (i[2] - 1) * 2 end))
  end)

  it('refuses incompatible strides and wrong element counts', function()
    local t = seq({ 3, 4 }):t()
    H.assert_error(function() t:view(12) end,
      "view: the tensor's strides are incompatible with the new shape; use reshape, or contiguous first")
    H.assert_error(function() seq({ 4, 5 })[{ {}, { 1, -1, 2 } }]:view(12) end, 'strides are incompatible')
    -- every other column of an even-width row is evenly spaced: that one is a view
    local s6 = seq({ 4, 6 })
    local even = s6[{ {}, { 1, -1, 2 } }]:view(12)
    assert.is_true(even:is_same_storage(s6))
    H.assert_close(even, gen({ 12 }, function(i) return 2 * (i[1] - 1) end))
    H.assert_error(function() seq({ 2, 6 }):view(5, -1) end,
      'view: shape [5,-1] is invalid for a tensor of shape [2,6] (12 elements)')
    H.assert_error(function() seq({ 2, 6 }):view(5, 3) end, 'view: shape [5,3] is invalid')
    H.assert_error(function() seq({ 2, 6 }):view(-1, -1) end, 'view: only one dimension can be -1')
    H.assert_error(function() seq({ 2, 6 }):view(-2, 6) end, 'view: invalid size -2')
    H.assert_error(function() seq({ 2, 6 }):view(1, 1, 1, 1, 1, 1, 1, 1, 12) end, 'at most 8 dimensions')
    H.assert_error(function() ember.zeros(0, 3):view(-1, 0) end, 'view: shape [-1,0] is invalid')
  end)

  it('handles rank 0 and zero-size tensors', function()
    local s = ember.tensor({ 7 })
    local r = s:view({})
    assert.are.equal(0, r:dim())
    assert.are.equal(7, r:item())
    assert.are.same({ 1, 1 }, sizes(ember.tensor(3):view(1, 1)))
    assert.are.same({ 1 }, sizes(ember.tensor(3):view(-1)))
    local z = ember.zeros(0, 3)
    assert.are.same({ 0 }, sizes(z:view(-1)))
    assert.are.same({ 3, 0 }, sizes(z:view(3, -1)))
    assert.are.same({ 0, 5 }, sizes(z:view(0, 5)))
  end)
end)

describe('reshape', function()
  it('returns a view when it can and copies only when it must', function()
    local x = seq({ 3, 4 })
    local r = x:reshape(2, 6)
    assert.is_true(r:is_same_storage(x))
    H.assert_close(r, gen({ 2, 6 }, lin({ 2, 6 })))
    local t = x:t()
    local c = t:reshape(12)
    assert.is_false(c:is_same_storage(x))
    H.assert_close(c, gen({ 12 }, function(i) local k = i[1] - 1; return (k % 3) * 4 + math.floor(k / 3) end))
    assert.is_true(t:reshape(2, 2, 3):is_same_storage(x)) -- splitting is still a view
    local e = ember.tensor({ 1, 2, 3 }):expand(2, 3)
    local er = e:reshape(6)
    H.assert_close(er, { 1, 2, 3, 1, 2, 3 })
    assert.are.same({ 6, 2 }, sizes(x:reshape_as(ember.zeros(6, 2))))
    H.assert_error(function() x:reshape(5, -1) end, 'reshape: shape [5,-1] is invalid')
    H.assert_error(function() x:reshape(-1, -1) end, 'reshape: only one dimension can be -1')
  end)
end)

describe('narrow, select and slice', function()
  it('narrow takes length elements from start (1-based) and shares memory', function()
    local x = seq({ 4, 5 })
    local n = x:narrow(2, 2, 3)
    assert.are.same({ 4, 3 }, sizes(n))
    H.assert_close(n, gen({ 4, 3 }, function(i) return (i[1] - 1) * 5 + i[2] end))
    assert.is_true(n:is_same_storage(x))
    n:fill_(-1)
    assert.are.equal(-1, x[{ 3, 2 }]:item())
    assert.are.equal(10, x[{ 3, 1 }]:item())
    H.assert_close(seq({ 6 }):narrow(1, 6, 1), { 5 })
    assert.are.same({ 0, 5 }, sizes(x:narrow(1, 5, 0)))
    H.assert_close(seq({ 6 }):narrow(-1, 2, 2), { 1, 2 })
  end)

  it('narrow counts a negative start from the end', function()
    H.assert_close(seq({ 6 }):narrow(1, -2, 2), { 4, 5 })
    H.assert_close(seq({ 6 }):narrow(1, -6, 1), { 0 })
  end)

  it('narrow rejects ranges out of bounds', function()
    local x = seq({ 4, 5 })
    H.assert_error(function() x:narrow(2, 4, 3) end, 'narrow: ')
    H.assert_error(function() x:narrow(2, 0, 2) end, 'narrow: indices are 1-based in Lua; got 0')
    H.assert_error(function() x:narrow(2, 1, -1) end, 'narrow: ')
    H.assert_error(function() x:narrow(3, 1, 1) end, 'narrow: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() ember.tensor(1):narrow(1, 1, 1) end, 'narrow: cannot narrow a 0-d tensor')
  end)

  it('select drops a dimension; negative indices count from the end', function()
    local x = seq({ 3, 4, 2 })
    local s = x:select(2, 3)
    assert.are.same({ 3, 2 }, sizes(s))
    H.assert_close(s, gen({ 3, 2 }, function(i) return (i[1] - 1) * 8 + 2 * 2 + (i[2] - 1) end))
    H.assert_close(x:select(1, -1), gen({ 4, 2 }, function(i) return 16 + (i[1] - 1) * 2 + i[2] - 1 end))
    H.assert_close(x:select(-1, 2), gen({ 3, 4 }, function(i) return (i[1] - 1) * 8 + (i[2] - 1) * 2 + 1 end))
    assert.is_true(s:is_same_storage(x))
    H.assert_error(function() x:select(1, 4) end, 'select: index 4 is out of range for dimension 1 of size 3')
    H.assert_error(function() x:select(1, -4) end, 'select: index -4 is out of range for dimension 1 of size 3')
    H.assert_error(function() x:select(1, 0) end, 'select: indices are 1-based in Lua; got 0')
    H.assert_error(function() x:select(4, 1) end, 'select: dimension 4 out of range for a 3-d tensor')
    H.assert_error(function() ember.tensor(2):select(1, 1) end, 'select: cannot index a 0-d tensor')
  end)

  it('x[i] selects along the first dimension; a 1-D tensor gives a Lua number', function()
    local v = seq({ 5 })
    assert.are.equal('number', type(v[2]))
    assert.are.equal(1, v[2])
    assert.are.equal(4, v[-1])
    local m = seq({ 3, 4 })
    H.assert_close(m[2], { 4, 5, 6, 7 })
    H.assert_close(m[-1], { 8, 9, 10, 11 })
    assert.are.equal(6, m[2][3])
    assert.are.equal(true, ember.tensor({ false, true })[2])
    H.assert_error(function() return v[6] end, 'select: index 6 is out of range for dimension 1 of size 5')
    H.assert_error(function() return v[0] end, 'indices are 1-based in Lua; got 0')
    H.assert_error(function() return v[1.5] end, 'expected an integer index, got 1.5')
  end)

  it('x[{...}] takes numbers, {first, last [, step]} ranges (inclusive) and {} or ":"', function()
    local x = seq({ 4, 5 })
    H.assert_close(x[{ { 1, -1, 2 } }], gen({ 2, 5 }, function(i) return (i[1] - 1) * 10 + i[2] - 1 end))
    H.assert_close(x[{ 2, { 1, 3 } }], { 5, 6, 7 })
    H.assert_close(x[{ {}, 2 }], { 1, 6, 11, 16 })
    H.assert_close(x[{ ':', { 2, 3 } }], gen({ 4, 2 }, function(i) return (i[1] - 1) * 5 + i[2] end))
    H.assert_close(x[{ { 2 } }], { { 5, 6, 7, 8, 9 } }) -- a one-element range keeps the dimension
    H.assert_close(x[{ { -2, -1 }, { 2, 5, 3 } }], { { 11, 14 }, { 16, 19 } })
    H.assert_close(x[{ 3, 4 }], 13)
    assert.are.equal(0, x[{ 3, 4 }]:dim())
    assert.are.same({ 0, 5 }, sizes(x[{ { 3, 2 } }])) -- empty when last < first
    H.assert_close(x[{ { 3, 100 }, 1 }], { 10, 15 }) -- clamped at the end
    assert.is_true(x[{ {}, { 1, -1, 2 } }]:is_same_storage(x))
    assert.is_false(x[{ {}, { 1, -1, 2 } }]:is_contiguous())
    H.assert_error(function() return x[{ 1, 2, 3 }] end, 'index: 3 indices for a 2-d tensor')
    H.assert_error(function() return x[{ { 1, 4, 0 } }] end, 'slice: expected a step > 0, got 0')
    H.assert_error(function() return x[{ true }] end, 'index: unsupported index entry true')
    H.assert_error(function() return x[{ { 0, 2 } }] end, 'indices are 1-based in Lua; got 0')
  end)

  it('assignment x[i] = v and x[{...}] = tensor writes into the base', function()
    local v = ember.zeros(4)
    v[2] = 9
    v[-1] = 7
    H.assert_close(v, { 0, 9, 0, 7 })
    local x = ember.zeros(3, 4)
    x[2] = 5
    x[{ 3, { 2, 3 } }] = ember.tensor({ 1, 2 })
    x[{ {}, 4 }] = ember.tensor({ -1, -2, -3 })
    x[{ 1, 1 }] = 8
    H.assert_close(x, { { 8, 0, 0, -1 }, { 5, 5, 5, -2 }, { 0, 1, 2, -3 } })
    x[{ { 1, 2 }, { 1, 2 } }] = ember.tensor({ 10, 20 }) -- broadcast over rows
    H.assert_close(x[{ { 1, 2 }, { 1, 2 } }], { { 10, 20 }, { 10, 20 } })
    local t = ember.zeros(2, 3):t()
    t[{ 3, 1 }] = 4 -- through a transposed view
    H.assert_close(t:t(), { { 0, 0, 4 }, { 0, 0, 0 } })
    x[{ {}, { 1, -1, 2 } }] = ember.tensor({ 1, 2 }, { dtype = 'int64' }) -- casts
    H.assert_close(x[1], { 1, 20, 2, -1 })
    H.assert_error(function() x[{ {}, { 1, 2 } }] = ember.ones(3) end, 'copy_: shape [3] cannot broadcast to [3,2]')
    H.assert_error(function() v[5] = 1 end, 'select: index 5 is out of range')
    H.assert_error(function() x.foo = 1 end, 'tensor: cannot set field foo')
  end)
end)

describe('transpose, t and permute', function()
  it('swap dimensions as views', function()
    local x = seq({ 2, 3, 4 })
    local tr = x:transpose(1, 3)
    assert.are.same({ 4, 3, 2 }, sizes(tr))
    assert.are.same({ 1, 4, 12 }, tr:stride())
    H.assert_close(tr, gen({ 4, 3, 2 }, function(i) return (i[3] - 1) * 12 + (i[2] - 1) * 4 + i[1] - 1 end))
    assert.is_true(tr:is_same_storage(x))
    assert.is_false(tr:is_contiguous())
    H.assert_close(x:transpose(-1, 2), gen({ 2, 4, 3 }, function(i) return (i[1] - 1) * 12 + (i[3] - 1) * 4 + i[2] - 1 end))
    local m = seq({ 2, 3 })
    H.assert_close(m:t(), { { 0, 3 }, { 1, 4 }, { 2, 5 } })
    H.assert_close(m:transpose(), m:t():totable()) -- defaults to dims 1 and 2
    H.assert_close(seq({ 3 }):t(), { 0, 1, 2 })
    H.assert_close(ember.tensor(2):t(), 2)
    H.assert_error(function() x:t() end, 't: expected a tensor with at most 2 dimensions, got 3')
    H.assert_error(function() x:transpose(1, 4) end, 'transpose: dimension 4 out of range for a 3-d tensor')
  end)

  it('permute reorders every dimension (all orders of a 3-d tensor)', function()
    local shape = { 2, 3, 4 }
    local x = seq(shape)
    local f = lin(shape)
    for _, p in ipairs({ { 1, 2, 3 }, { 1, 3, 2 }, { 2, 1, 3 }, { 2, 3, 1 }, { 3, 1, 2 }, { 3, 2, 1 } }) do
      local y = x:permute(unpack(p))
      local ps = { shape[p[1]], shape[p[2]], shape[p[3]] }
      assert.are.same(ps, sizes(y))
      H.assert_close(y, gen(ps, function(i)
        local src = {}
        for k = 1, 3 do src[p[k]] = i[k] end
        return f(src)
      end), 0, 0, table.concat(p, ','))
      assert.is_true(y:is_same_storage(x))
    end
    H.assert_close(x:permute({ 3, 1, 2 }), x:permute(3, 1, 2):totable())
    H.assert_close(x:permute(-1, 1, -2), x:permute(3, 1, 2):totable())
    H.assert_error(function() x:permute(3, 1, 1) end, 'permute: dimension')
    H.assert_error(function() x:permute(2, 1) end, 'permute: expected 3 dimensions, got 2')
    H.assert_error(function() x:permute(1, 2, 4) end, 'permute: dimension 4 out of range for a 3-d tensor')
  end)
end)

describe('expand', function()
  it('repeats size-1 dimensions with stride 0, without copying', function()
    local x = ember.tensor({ { 1 }, { 2 }, { 3 } })
    local e = x:expand(3, 4)
    assert.are.same({ 3, 4 }, sizes(e))
    assert.are.equal(0, e:stride(2))
    H.assert_close(e, gen({ 3, 4 }, function(i) return i[1] end))
    assert.is_true(e:is_same_storage(x))
    H.assert_close(x:expand(-1, 2), { { 1, 1 }, { 2, 2 }, { 3, 3 } })
    local lead = ember.tensor({ 1, 2 }):expand(3, 2)
    assert.are.same({ 0, 1 }, lead:stride())
    H.assert_close(lead, { { 1, 2 }, { 1, 2 }, { 1, 2 } })
    H.assert_close(ember.tensor(5):expand(2, 2), { { 5, 5 }, { 5, 5 } })
    assert.are.same({ 2, 3, 4 }, sizes(x:expand_as(ember.zeros(2, 3, 4))))
    assert.are.same({ 3, 0 }, sizes(x:expand(3, 0)))
    x[2][1] = 20 -- the expanded view sees writes to its base
    H.assert_close(e[2], { 20, 20, 20, 20 })
    H.assert_error(function() x:expand(2, 4) end, 'expand: shape [3,1] cannot broadcast to [2,4]')
    H.assert_error(function() x:expand(4) end, 'expand: expected at least 2')
    H.assert_error(function() x:expand(-1, -2) end, 'expand: invalid size -2')
  end)
end)

describe('squeeze and unsqueeze', function()
  it('remove and insert size-1 dimensions, negative dims included', function()
    local x = seq({ 1, 3, 1, 2 })
    assert.are.same({ 3, 2 }, sizes(x:squeeze()))
    assert.are.same({ 3, 1, 2 }, sizes(x:squeeze(1)))
    assert.are.same({ 1, 3, 2 }, sizes(x:squeeze(-2)))
    assert.are.same({ 1, 3, 1, 2 }, sizes(x:squeeze(2))) -- not size 1: unchanged
    H.assert_close(x:squeeze(), gen({ 3, 2 }, lin({ 3, 2 })))
    assert.is_true(x:squeeze():is_same_storage(x))
    local v = seq({ 3 })
    assert.are.same({ 1, 3 }, sizes(v:unsqueeze(1)))
    assert.are.same({ 3, 1 }, sizes(v:unsqueeze(2)))
    assert.are.same({ 3, 1 }, sizes(v:unsqueeze(-1)))
    assert.are.same({ 1, 3 }, sizes(v:unsqueeze(-2)))
    local m = seq({ 2, 3 })
    assert.are.same({ 2, 1, 3 }, sizes(m:unsqueeze(2)))
    H.assert_close(m:unsqueeze(2), { { { 0, 1, 2 } }, { { 3, 4, 5 } } })
    H.assert_close(m:t():unsqueeze(1):squeeze(1), m:t():totable())
    assert.are.equal(0, ember.tensor(4):squeeze():dim())
    assert.are.same({ 1 }, sizes(ember.tensor(4):unsqueeze(1)))
    assert.are.same({ 0, 1 }, sizes(ember.zeros(0):unsqueeze(2)))
    H.assert_error(function() v:unsqueeze(3) end, 'unsqueeze: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:squeeze(5) end, 'squeeze: dimension 5 out of range for a 4-d tensor')
    H.assert_error(function() ember.zeros(1, 1, 1, 1, 1, 1, 1, 1):unsqueeze(1) end,
      'unsqueeze: a tensor has at most 8 dimensions')
  end)
end)

describe('unfold and flatten', function()
  it('unfold makes sliding windows as a view', function()
    local u = seq({ 7 }):unfold(1, 3, 2)
    assert.are.same({ 3, 3 }, sizes(u))
    H.assert_close(u, gen({ 3, 3 }, function(i) return (i[1] - 1) * 2 + i[2] - 1 end))
    local m = seq({ 2, 5 })
    local w = m:unfold(2, 2, 2)
    assert.are.same({ 2, 2, 2 }, sizes(w))
    H.assert_close(w, gen({ 2, 2, 2 }, function(i) return (i[1] - 1) * 5 + (i[2] - 1) * 2 + i[3] - 1 end))
    assert.is_true(w:is_same_storage(m))
    assert.are.same({ 1, 7 }, sizes(seq({ 7 }):unfold(1, 7, 1)))
    H.assert_error(function() seq({ 7 }):unfold(1, 8, 1) end, 'unfold: size 8 is larger than')
    H.assert_error(function() seq({ 7 }):unfold(1, 2, 0) end, 'unfold: expected a step > 0, got 0')
  end)

  it('unfold of a 0-d tensor gives a 1-d window', function()
    local u = ember.tensor(5):unfold(1, 1, 1)
    assert.are.same({ 1 }, sizes(u))
    H.assert_close(u, { 5 })
  end)

  it('flatten merges a range of dimensions', function()
    local x = seq({ 2, 3, 4 })
    assert.are.same({ 24 }, sizes(x:flatten()))
    assert.are.same({ 2, 12 }, sizes(x:flatten(2)))
    assert.are.same({ 6, 4 }, sizes(x:flatten(1, 2)))
    assert.are.same({ 2, 12 }, sizes(x:flatten(-2, -1)))
    H.assert_close(x:flatten(), gen({ 24 }, lin({ 24 })))
    assert.is_true(x:flatten():is_same_storage(x))
    local t = x:transpose(1, 3)
    local f = t:flatten()
    assert.is_false(f:is_same_storage(x))
    H.assert_close(f, gen({ 24 }, function(i)
      local k = i[1] - 1
      local a, b, c = math.floor(k / 6), math.floor(k / 2) % 3, k % 2 -- t is [4, 3, 2]
      return c * 12 + b * 4 + a
    end))
    assert.are.same({ 1 }, sizes(ember.tensor(3):flatten()))
    H.assert_error(function() x:flatten(3, 1) end, 'flatten: start_dim')
  end)
end)

describe('contiguous and clone', function()
  it('contiguous returns the tensor itself when it already is', function()
    local x = seq({ 3, 4 })
    assert.is_true(x:contiguous():is_same_storage(x))
    local t = x:t()
    local c = t:contiguous()
    assert.is_true(c:is_contiguous())
    assert.is_false(c:is_same_storage(x))
    assert.are.same({ 3, 1 }, c:stride())
    H.assert_close(c, t:totable())
    local e = ember.tensor({ 1, 2 }):expand(3, 2):contiguous()
    assert.are.same({ 2, 1 }, e:stride())
  end)

  it('clone always copies', function()
    local x = seq({ 2, 3 })
    local c = x:clone()
    assert.is_false(c:is_same_storage(x))
    H.assert_close(c, x:totable())
    c:fill_(0)
    H.assert_close(x, gen({ 2, 3 }, lin({ 2, 3 })))
    local tc = x:t():clone()
    H.assert_close(tc, { { 0, 3 }, { 1, 4 }, { 2, 5 } })
    assert.are.equal('int8', seq({ 2 }, 'int8'):clone():dtype())
  end)

  it('is_contiguous follows the strides', function()
    assert.is_true(ember.zeros(3, 1):t():is_contiguous()) -- size-1 dims do not count
    assert.is_false(ember.zeros(3, 4)[{ {}, { 1, 2 } }]:is_contiguous())
    assert.is_true(ember.zeros(3, 4)[{ { 1, 2 }, {} }]:is_contiguous())
    assert.is_false(ember.zeros(1, 3):expand(2, 3):is_contiguous())
    assert.is_true(ember.zeros(0, 3):t():is_contiguous())
    assert.is_true(ember.tensor(1):is_contiguous())
  end)
end)

describe('views compose', function()
  it('writes through a chain of views reach the base', function()
    local x = ember.zeros(4, 5, 6)
    local v = x:narrow(1, 2, 2):transpose(2, 3):select(3, 4)[{ {}, { 2, 6, 2 } }] -- [2, 3]
    assert.are.same({ 2, 3 }, sizes(v))
    v:fill_(1)
    local want = gen({ 4, 5, 6 }, function(i)
      return (i[1] >= 2 and i[1] <= 3 and i[2] == 4 and (i[3] == 2 or i[3] == 4 or i[3] == 6)) and 1 or 0
    end)
    H.assert_close(x, want)
    local sum = 0
    for _, val in ipairs(H.flatten(x:totable())) do sum = sum + val end
    assert.are.equal(6, sum)
  end)

  it('works on 8-dimensional tensors', function()
    local shape = { 2, 1, 2, 1, 3, 1, 2, 2 }
    local x = seq(shape)
    assert.are.equal(8, x:dim())
    local p = x:permute(8, 7, 6, 5, 4, 3, 2, 1)
    assert.are.same({ 2, 2, 1, 3, 1, 2, 1, 2 }, sizes(p))
    local f = lin(shape)
    H.assert_close(p, gen(sizes(p), function(i)
      local src = {}
      for k = 1, 8 do src[9 - k] = i[k] end
      return f(src)
    end))
    H.assert_close(x:view(48), gen({ 48 }, lin({ 48 })))
    H.assert_close(x:squeeze(), gen({ 2, 2, 3, 2, 2 }, lin({ 2, 2, 3, 2, 2 })))
    assert.are.equal(f({ 2, 1, 1, 1, 3, 1, 2, 1 }), x[{ 2, 1, 1, 1, 3, 1, 2, 1 }]:item())
    H.assert_error(function() x:unsqueeze(1) end, 'at most 8 dimensions')
    H.assert_error(function() ember.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, 'at most 8 dimensions')
  end)

  it('keeps zero-size dimensions through every view', function()
    local z = ember.zeros(0, 3)
    assert.are.same({ 3, 0 }, sizes(z:t()))
    assert.are.same({ 0, 3, 1 }, sizes(z:unsqueeze(3)))
    assert.are.same({ 0 }, sizes(z:select(2, 2)))
    assert.are.same({ 0, 2 }, sizes(z:narrow(2, 2, 2)))
    assert.are.same({ 0, 3 }, sizes(z[{ {}, {} }]))
    assert.are.same({ 2, 0, 3 }, sizes(z:expand(2, 0, 3)))
    assert.are.same({ 3, 0 }, sizes(z:permute(2, 1)))
    assert.are.same({}, z:totable())
    assert.are.equal(0, z:clone():numel())
    z:fill_(3) -- no elements: nothing to do, no error
  end)
end)

describe('conversions and reads', function()
  -- Round-to-nearest-even to `bits` significant bits: the float16 (11) and bfloat16 (8)
  -- references for values in their normal range.
  local function round_bits(v, bits)
    if v == 0 then return 0 end
    local m, e = math.frexp(v)
    local s = m * 2 ^ bits
    local r = math.floor(s)
    local frac = s - r
    if frac > 0.5 or (frac == 0.5 and r % 2 == 1) then r = r + 1 end
    return r * 2 ^ (e - bits)
  end

  it('to(dtype) and the named casts convert values', function()
    local vals = { 1.7, -1.7, 0, 2.5, -300.25, 1 / 3 }
    local x = ember.tensor(vals, { dtype = 'float64' })
    local function trunc(v) return v < 0 and math.ceil(v) or math.floor(v) end
    H.assert_close(x:long(), H.map(trunc, vals), 0, 0)
    H.assert_close(x:int(), H.map(trunc, vals), 0, 0)
    H.assert_close(x:short(), H.map(trunc, vals), 0, 0)
    H.assert_close(x:bool(), H.map(function(v) return v ~= 0 end, vals))
    H.assert_close(x:half(), H.map(function(v) return round_bits(v, 11) end, vals), 0, 0)
    H.assert_close(x:bfloat16(), H.map(function(v) return round_bits(v, 8) end, vals), 0, 0)
    H.assert_close(x:float(), H.map(function(v) return round_bits(v, 24) end, vals), 0, 0)
    H.assert_close(ember.tensor({ 1, 0, 3 }, { dtype = 'int64' }):double(), { 1, 0, 3 }, 0, 0)
    H.assert_close(ember.tensor({ true, false }):byte(), { 1, 0 }, 0, 0)
    H.assert_close(ember.tensor({ 200, 5 }, { dtype = 'int64' }):byte(), { 200, 5 }, 0, 0)
    local names = { float = 'float32', double = 'float64', half = 'float16', bfloat16 = 'bfloat16',
      long = 'int64', int = 'int32', short = 'int16', char = 'int8', byte = 'uint8', bool = 'bool' }
    for m, dt in pairs(names) do assert.are.equal(dt, x[m](x):dtype(), m) end
    assert.are.equal('int16', x:to('int16'):dtype())
    assert.are.equal('int16', x:type('int16'):dtype())
    assert.are.equal('float64', x:type())
    assert.are.equal('int8', x:to({ dtype = 'int8' }):dtype())
    assert.are.equal('int8', x:to('cpu', 'int8'):dtype())
    assert.are.equal('uint8', x:to(ember.zeros(1, { dtype = 'uint8' })):dtype())
    assert.are.equal(x, x:to('float64')) -- same dtype: the tensor itself
    local t = x:view(2, 3):t():int() -- converting a strided view keeps logical order
    H.assert_close(t, { { 1, 2 }, { -1, -300 }, { 0, 0 } }, 0, 0)
    H.assert_error(function() x:to('float128') end, "unknown dtype or device 'float128'")
    H.assert_error(function() x:to({ dtype = 'nope' }) end, "unknown dtype 'nope'")
  end)

  it('item reads one element as a Lua value; totable gives nested tables', function()
    assert.are.equal(2.5, ember.tensor(2.5):item())
    assert.are.equal(3, ember.tensor({ { 3 } }, { dtype = 'int64' }):item())
    assert.are.equal(true, ember.tensor(true):item())
    assert.are.equal(false, ember.tensor({ false }):item())
    assert.is_true(ember.tensor(2 ^ 60, { dtype = 'int64' }):item_int64() == 2 ^ 60)
    H.assert_error(function() ember.zeros(2):item() end,
      'item: expected a tensor with one element, got 2 elements')
    H.assert_error(function() ember.zeros(0):item() end, 'got 0 elements')
    assert.are.same({ { 0, 1, 2 }, { 3, 4, 5 } }, seq({ 2, 3 }):totable())
    assert.are.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, seq({ 2, 3 }):t():totable())
    assert.are.same({ true, false }, ember.tensor({ true, false }):totable())
    assert.are.equal(4, ember.tensor(4):totable())
    assert.are.same({ {}, {} }, ember.zeros(2, 0):totable())
    local nan = ember.tensor({ 0 / 0 }):totable()[1]
    assert.is_true(nan ~= nan)
  end)

  it('copy_, fill_ and zero_ write into views, broadcasting and casting', function()
    local x = ember.zeros(3, 4)
    x:t():copy_(ember.tensor({ 1, 2, 3 })) -- broadcast over the transposed view's rows
    H.assert_close(x, { { 1, 1, 1, 1 }, { 2, 2, 2, 2 }, { 3, 3, 3, 3 } })
    x[{ {}, { 2, 3 } }]:fill_(9)
    H.assert_close(x, { { 1, 9, 9, 1 }, { 2, 9, 9, 2 }, { 3, 9, 9, 3 } })
    x:narrow(1, 2, 1):zero_()
    H.assert_close(x, { { 1, 9, 9, 1 }, { 0, 0, 0, 0 }, { 3, 9, 9, 3 } })
    local i = ember.zeros(2, { dtype = 'int32' }):copy_(ember.tensor({ 2.9, -2.9 }))
    H.assert_close(i, { 2, -2 }, 0, 0)
    assert.are.equal(x, x:fill_(1)) -- returns self
    H.assert_close(ember.zeros(2, { dtype = 'bool' }):fill_(5), { true, true })
    H.assert_error(function() x:copy_(ember.zeros(5)) end, 'copy_: shape [5] cannot broadcast to [3,4]')
  end)
end)

describe('printing', function()
  it('prints values, and the dtype unless it is float32', function()
    assert.are.equal('tensor([[0., 1., 2.],\n        [3., 4., 5.]])', tostring(seq({ 2, 3 }, 'float32')))
    assert.are.equal('tensor([1.5000, 2.0000])', tostring(ember.tensor({ 1.5, 2 })))
    assert.are.equal('tensor([1, 2], dtype=int64)', tostring(ember.tensor({ 1, 2 }, { dtype = 'int64' })))
    assert.are.equal('tensor([1., 2.], dtype=float64)', tostring(ember.tensor({ 1, 2 }, { dtype = 'float64' })))
    assert.are.equal('tensor([ true, false], dtype=bool)', tostring(ember.tensor({ true, false })))
    assert.are.equal('tensor(3.5000)', tostring(ember.tensor(3.5)))
    assert.are.equal('tensor([], size=[0, 3])', tostring(ember.zeros(0, 3)))
    assert.are.equal('tensor([   nan,    inf,   -inf, 1.5000])', tostring(ember.tensor({ 0 / 0, 1 / 0, -1 / 0, 1.5 })))
    local s = tostring(ember.tensor({ 1, 2 }, { dtype = 'int8' }))
    assert.is_truthy(s:find('dtype=int8', 1, true))
  end)

  it('summarizes above 1000 elements with ...', function()
    local small = tostring(seq({ 1000 }, 'float32'))
    assert.is_falsy(small:find('...', 1, true))
    assert.is_truthy(small:find('999.', 1, true))
    local big = tostring(seq({ 1001 }, 'float32'))
    assert.is_truthy(big:find('...', 1, true))
    assert.is_truthy(big:find('[   0.,    1.,    2., ...,  998.,  999., 1000.]', 1, true))
    local m = tostring(seq({ 40, 30 }, 'int32'))
    assert.is_truthy(m:find('...', 1, true))
    assert.is_truthy(m:find('1199', 1, true)) -- the last element
    assert.is_falsy(m:find('600', 1, true)) -- a middle row is left out
    assert.is_truthy(m:find('dtype=int32', 1, true))
  end)

  it('prints transposed and 3-d tensors in logical order', function()
    assert.are.equal('tensor([[0., 2.],\n        [1., 3.]])', tostring(seq({ 2, 2 }, 'float32'):t()))
    assert.are.equal('tensor([[[0., 1.]],\n\n        [[2., 3.]]])', tostring(seq({ 2, 1, 2 }, 'float32')))
  end)
end)
