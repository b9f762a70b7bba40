local H = require 'tests.lua.helpers'
local ember = H.ember

describe('tensor basics', function()
  it('creates from nested tables', function()
    local x = ember.tensor{{1, 2}, {3, 4}}
    assert.are.equal(2, x:dim())
    assert.are.equal(4, x:numel())
    assert.are.equal('float32', x:dtype())
    assert.are.equal('cpu', x:device())
    H.assert_close(x, {{1, 2}, {3, 4}})
    assert.are.same({2, 2}, {x:size(1), x:size(2)})
  end)

  it('makes zeros with a dtype option', function()
    local z = ember.zeros({3, 4}, {dtype = 'int64'})
    assert.are.equal('int64', z:dtype())
    H.assert_close(z, H.nested({3, 4}, function() return 0 end))
  end)

  it('rejects ragged tables with the position', function()
    H.assert_error(function() ember.tensor{{1, 2}, {3}} end, 'ragged nested table')
  end)

  it('supports rank 0 and zero-size dims', function()
    local s = ember.tensor(3.5)
    assert.are.equal(0, s:dim())
    assert.are.equal(3.5, s:item())
    local e = ember.zeros(0, 3)
    assert.are.equal(0, e:numel())
    assert.are.same({0, 3}, {e:size(1), e:size(2)})
  end)
end)

describe('add', function()
  it('adds every layout against plain loops', function()
    H.seed(1)
    local t = H.rand_table({5, 7})
    local u = H.rand_table({5, 7})
    for _, v in ipairs(H.variants(t)) do
      local name, x, xt = v[1], v[2], v[3]
      local expected = H.map(function(a, b) return a + b end, xt, u)
      H.assert_close(x + ember.tensor(u), expected, 1e-6, 1e-6, name)
    end
  end)

  it('names both shapes when they cannot broadcast', function()
    H.assert_error(function() return ember.zeros(3, 4) + ember.zeros(5) end,
      'add: shapes [3,4] and [5] cannot broadcast')
  end)
end)

describe('assignment through index tensors', function()
  it('fills and copies rows chosen by 1-based indices, and fills through a bool mask', function()
    local x = ember.zeros(4, 2)
    x[ember.tensor({ 1, 3 }, { dtype = 'int64' })] = 5
    H.assert_close(x, { { 5, 5 }, { 0, 0 }, { 5, 5 }, { 0, 0 } })
    x[ember.tensor({ 2 }, { dtype = 'int64' })] = ember.tensor({ 7, 8 })
    H.assert_close(x, { { 5, 5 }, { 7, 8 }, { 5, 5 }, { 0, 0 } })
    x[x:gt(6)] = -1
    H.assert_close(x, { { 5, 5 }, { -1, -1 }, { 5, 5 }, { 0, 0 } })
    H.assert_error(function() x[x:gt(0)] = ember.tensor({ 1, 2 }) end,
      'assigning a tensor through a bool mask is not supported')
  end)
end)

describe('printing', function()
  it('shares one format per tensor and wraps long rows', function()
    assert.are.equal('tensor([1.0000e+10, 1.0000e+00])', tostring(ember.tensor({ 1e10, 1 })))
    assert.are.equal('tensor([1.0000e-03, 1.2500e+01])', tostring(ember.tensor({ 0.001, 12.5 })))
    local s = tostring(ember.arange(30))
    assert.is_truthy(s:find('\n', 1, true))
    for line in s:gmatch('[^\n]+') do assert.is_true(#line <= 80) end
    assert.is_truthy(tostring(ember.arange(2000)):find('...', 1, true))
  end)
end)

describe('transposed copies', function()
  it('copies large transposed matrices exactly (the tiled path)', function()
    for _, dt in ipairs({ 'float32', 'float64', 'int32', 'int64' }) do
      local a = ember.arange(97 * 45, { dtype = dt }):view(97, 45)
      local c = a:t():contiguous()
      local at, ct = a:totable(), c:totable()
      for i = 1, 45 do
        for j = 1, 97 do
          if ct[i][j] ~= at[j][i] then error(('%s: [%d][%d] %s ~= %s'):format(dt, i, j, ct[i][j], at[j][i])) end
        end
      end
      -- a narrowed source: the leading dimension is larger than the rows
      local wide = ember.arange(50 * 80, { dtype = dt }):view(50, 80):narrow(2, 3, 40)
      H.assert_close(wide:t():contiguous(), wide:t():totable(), 0, 0)
    end
  end)
end)
