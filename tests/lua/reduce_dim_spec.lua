-- Ops along one dim (max/min with indices, argmax/argmin, cumsum/cumprod, softmax and
-- log_softmax) against plain-Lua references computed in double (tests/lua/reduce_ref.lua), on
-- every layout (tests/lua/reduce_util.lua).
local H = require 'tests.lua.helpers'
local ember = H.ember

local nan, inf = 0 / 0, math.huge

local ref = require 'tests.lua.reduce_ref'
local R, ref_reduce, ref_along = ref.R, ref.reduce, ref.along
local U = require 'tests.lua.reduce_util'
local eighths, ints, tol, variants3 = U.eighths, U.ints, U.tol, U.variants3
local layouts = U.layouts

-- Values and 1-based indices along dim against the reference.
local function check_max_min(x, xt, dim, keepdim, dtype, what)
  local flat, shape = H.flatten(xt), H.shape_of(xt)
  for _, name in ipairs({ 'max', 'min' }) do
    local argf = name == 'max' and R.argmax or R.argmin
    local v, i = x[name](x, dim, keepdim)
    local ei = ref_reduce(flat, shape, dim, keepdim, argf)
    local ev = ref_reduce(flat, shape, dim, keepdim, function(l) return l[argf(l)] end)
    assert.are.equal('int64', i:dtype())
    assert.are.equal(dtype, v:dtype())
    H.assert_close(i, ei, 0, 0, name .. ' indices ' .. what)
    H.assert_close(v, ev, 0, 0, name .. ' values ' .. what)
    local a = x['arg' .. name](x, dim, keepdim)
    H.assert_close(a, ei, 0, 0, 'arg' .. name .. ' ' .. what)
  end
end

describe('max, min, argmax, argmin', function()
  it('give values and 1-based indices on every layout and dtype', function()
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int32', 'int64' }) do
      H.seed(9)
      -- few distinct values, so ties are common and first-occurrence is tested
      for _, v in ipairs(layouts(function(sh) return ints(sh, -3, 3) end, dtype)) do
        for _, dim in ipairs({ 1, 2, -1 }) do
          for _, keepdim in ipairs({ false, true }) do
            check_max_min(v[2], v[3], dim, keepdim, dtype,
              ('%s %s dim=%d keepdim=%s'):format(dtype, v[1], dim, tostring(keepdim)))
          end
        end
      end
    end
    H.seed(13)
    local t = ints({ 3, 4, 5 }, -2, 2)
    for _, v in ipairs(variants3(t, 'float32')) do
      for _, dim in ipairs({ 1, 2, 3 }) do
        check_max_min(v[2], v[3], dim, false, 'float32', v[1])
      end
    end
  end)

  it('argmax without dim is the flattened index', function()
    H.seed(21)
    for _, v in ipairs(layouts(function(sh) return ints(sh, -3, 3) end)) do
      local flat = H.flatten(v[3])
      H.assert_close(v[2]:argmax(), R.argmax(flat), 0, 0, v[1])
      H.assert_close(v[2]:argmin(), R.argmin(flat), 0, 0, v[1])
      assert.are.equal(0, v[2]:argmax():dim())
      local k = v[2]:argmax(nil, true)
      assert.are.same({ 1, 1 }, { k:size(1), k:size(2) })
      H.assert_close(k, { { R.argmax(flat) } }, 0, 0)
    end
    local x = ember.tensor(4)
    H.assert_close(x:argmax(), 1)
    H.assert_close(x:argmax(1), 1)
    local v, i = x:max(1)
    H.assert_close(v, 4)
    H.assert_close(i, 1)
  end)

  it('x:max() and x:min() reduce everything to a 0-d tensor', function()
    local x = ember.tensor({ { 1, 9, 3 }, { -4, 5, 6 } })
    assert.are.equal(0, x:max():dim())
    H.assert_close(x:max(), 9)
    H.assert_close(x:min(), -4)
    H.assert_close(ember.max(x), 9)
    assert.are.equal('int32', x:int():max():dtype())
  end)

  it('x:max(other) is the elementwise maximum', function()
    local a, b = ember.tensor({ 1, 5, 3 }), ember.tensor({ 4, 2, 6 })
    local ok, err = pcall(function() return a:maximum(b) end)
    if not ok and tostring(err):find('not implemented', 1, true) then
      pending('maximum is not implemented on cpu yet')
      return
    end
    H.assert_close(a:max(b), { 4, 5, 6 })
    H.assert_close(a:min(b), { 1, 2, 3 })
  end)

  it('treat NaN as the max and the min (first NaN wins)', function()
    local x = ember.tensor({ { 1, nan, 3, nan }, { 2, 2, 0, 2 } })
    local v, i = x:max(2)
    H.assert_close(v, { nan, 2 })
    H.assert_close(i, { 2, 1 })
    v, i = x:min(2)
    H.assert_close(v, { nan, 0 })
    H.assert_close(i, { 2, 3 })
    H.assert_close(x:argmax(), 2)
    H.assert_close(x:argmin(), 2)
    H.assert_close(x:t():argmax(1), { 2, 1 }) -- column path
    H.assert_close(x:t():argmin(1), { 2, 3 })
    H.assert_close(ember.tensor({ -inf, -inf }):argmax(), 1)
    H.assert_close(ember.tensor({ inf, inf }):argmin(), 1)
  end)

  it('handle zero-size tensors', function()
    local e = ember.zeros(0, 3)
    local v, i = e:max(2)
    assert.are.same({ 0 }, { v:size(1) })
    assert.are.same({ 0 }, { i:size(1) })
    assert.are.equal(0, e:argmax(2):numel())
    H.assert_error(function() e:max(1) end,
      'max: cannot reduce over an empty dimension (input shape [0,3])')
    H.assert_error(function() e:min(-2) end,
      'min: cannot reduce over an empty dimension (input shape [0,3])')
    H.assert_error(function() e:argmax() end,
      'argmax: cannot reduce over an empty tensor (it has 0 elements)')
    H.assert_error(function() e:argmin(1) end,
      'argmin: cannot reduce over an empty dimension (input shape [0,3])')
  end)

  it('report bad arguments', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:max(3) end, 'max: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:max({ 1 }) end, 'max: expected a dimension or a tensor, got table')
    H.assert_error(function() x:max(nil, true) end, 'max: keepdim needs a dimension')
    H.assert_error(function() x:argmax(-3) end,
      'argmax: dimension -3 out of range for a 2-d tensor')
    H.assert_error(function() x:argmin(1, 'yes') end, 'argmin: expected keepdim to be a boolean')
  end)
end)

describe('cumsum and cumprod', function()
  it('match the reference on every layout and dtype', function()
    for _, name in ipairs({ 'cumsum', 'cumprod' }) do
      local specs = {
        { 'float32', function(s) return eighths(s, -12, 12) end },
        { 'float64', function(s) return eighths(s, -12, 12) end },
        { 'float16', function(s) return eighths(s, -12, 12) end },
        { 'bfloat16', function(s) return eighths(s, -12, 12) end },
        { 'int32', function(s) return ints(s, -3, 3) end },
      }
      for _, spec in ipairs(specs) do
        local dtype = spec[1]
        H.seed(17)
        for _, v in ipairs(layouts(spec[2], dtype)) do
          local flat, shape = H.flatten(v[3]), H.shape_of(v[3])
          for _, dim in ipairs({ 1, 2, -1 }) do
            local got = v[2][name](v[2], dim)
            local rt = tol[dtype][1]
            H.assert_close(got, ref_along(flat, shape, dim, R[name]), rt, rt * 10,
              ('%s %s %s dim=%d'):format(name, dtype, v[1], dim))
          end
        end
      end
      H.seed(19)
      local t = eighths({ 3, 4, 5 }, -12, 12)
      for _, v in ipairs(variants3(t, 'float64')) do
        local flat, shape = H.flatten(v[3]), H.shape_of(v[3])
        for _, dim in ipairs({ 1, 2, 3 }) do
          H.assert_close(v[2][name](v[2], dim), ref_along(flat, shape, dim, R[name]), 1e-12, 1e-12,
            name .. ' ' .. v[1] .. ' dim=' .. dim)
        end
      end
    end
  end)

  it('give int64 for integers and bool, keep float dtypes', function()
    local b = ember.tensor({ true, true, false, true })
    assert.are.equal('int64', b:cumsum(1):dtype())
    assert.are.same({ 1, 2, 2, 3 }, b:cumsum(1):totable())
    assert.are.equal('int64', ember.tensor({ 1, 2 }, { dtype = 'int8' }):cumprod(1):dtype())
    assert.are.equal('float16', ember.tensor({ 1, 2 }, { dtype = 'float16' }):cumsum(1):dtype())
    -- int8 inputs do not wrap at 8 bits: they accumulate in int64
    assert.are.same({ 100, 200, 300 },
      ember.tensor({ 100, 100, 100 }, { dtype = 'int8' }):cumsum(1):totable())
  end)

  it('handle 0-d and zero-size tensors', function()
    H.assert_close(ember.tensor(3):cumsum(1), 3)
    H.assert_close(ember.tensor(3):cumprod(-1), 3)
    local e = ember.zeros(0, 3):cumsum(1)
    assert.are.same({ 0, 3 }, { e:size(1), e:size(2) })
    assert.are.equal(0, ember.zeros(2, 0):cumprod(2):numel())
  end)

  it('report bad arguments', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:cumsum() end, 'cumsum: expected a dimension, as in x:cumsum(dim)')
    H.assert_error(function() x:cumprod(3) end,
      'cumprod: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:cumsum(0) end, 'cumsum: dimensions are 1-based in Lua; got 0')
  end)
end)

describe('softmax and log_softmax', function()
  it('match the reference on every layout and dtype', function()
    for _, name in ipairs({ 'softmax', 'log_softmax' }) do
      for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
        H.seed(23)
        for _, v in ipairs(layouts(eighths, dtype)) do
          local flat, shape = H.flatten(v[3]), H.shape_of(v[3])
          for _, dim in ipairs({ 1, 2, -1 }) do
            local got = v[2][name](v[2], dim)
            assert.are.equal(dtype, got:dtype())
            H.assert_close(got, ref_along(flat, shape, dim, R[name]), tol[dtype][1], tol[dtype][2],
              ('%s %s %s dim=%d'):format(name, dtype, v[1], dim))
          end
        end
      end
      H.seed(29)
      local t = eighths({ 3, 4, 5 })
      for _, v in ipairs(variants3(t, 'float32')) do
        local flat, shape = H.flatten(v[3]), H.shape_of(v[3])
        for _, dim in ipairs({ 1, 2, 3 }) do
          H.assert_close(ember[name](v[2], dim), ref_along(flat, shape, dim, R[name]), 1e-6, 1e-6,
            name .. ' ' .. v[1] .. ' dim=' .. dim)
        end
      end
    end
  end)

  it('is stable for large inputs', function()
    local x = ember.tensor({ 1000, 1001, 1002 })
    H.assert_close(x:softmax(1), R.softmax({ 0, 1, 2 }), 1e-6, 1e-7)
    H.assert_close(x:log_softmax(1), R.log_softmax({ 0, 1, 2 }), 1e-6, 1e-6)
    local y = ember.tensor({ { -1000, -1001 }, { 1e30, 0 } }, { dtype = 'float64' })
    H.assert_close(y:softmax(2), { R.softmax({ 0, -1 }), { 1, 0 } }, 1e-12, 1e-12)
    H.assert_close(y:log_softmax(2), { R.log_softmax({ 0, -1 }), { 0, -1e30 } }, 1e-12, 1e-12)
    -- lines of several tiles with the max early: the max must carry across tiles
    local long = {}
    for i = 1, 700 do long[i] = 900 + (i * 7) % 11 end
    long[3] = 1000
    local z = ember.tensor({ long, long })
    H.assert_close(z:softmax(2), { R.softmax(long), R.softmax(long) }, 1e-5, 1e-9)
    H.assert_close(z:log_softmax(-1), { R.log_softmax(long), R.log_softmax(long) }, 1e-6, 1e-5)
    H.assert_close(z:t():softmax(1):t(), { R.softmax(long), R.softmax(long) }, 1e-5, 1e-9)
    H.assert_close(z:logsumexp(2), { R.logsumexp(long), R.logsumexp(long) }, 1e-7, 0)
  end)

  it('sums to one along the dim', function()
    H.seed(31)
    local x = ember.tensor(eighths({ 6, 9 }, -200, 200))
    H.assert_close(x:softmax(1):sum(1), H.nested({ 9 }, function() return 1 end), 1e-6, 1e-6)
  end)

  it('gives NaN for lines with NaN or all -inf, like PyTorch', function()
    local x = ember.tensor({ { 1, nan, 2 }, { -inf, -inf, -inf }, { -inf, 0, -inf } })
    H.assert_close(x:softmax(2), { { nan, nan, nan }, { nan, nan, nan }, { 0, 1, 0 } })
    H.assert_close(x:log_softmax(2), { { nan, nan, nan }, { nan, nan, nan }, { -inf, 0, -inf } })
  end)

  it('computes integer inputs as float32; handles 0-d and zero-size', function()
    local x = ember.tensor({ 1, 2, 3 }, { dtype = 'int64' })
    assert.are.equal('float32', x:softmax(1):dtype())
    H.assert_close(x:softmax(1), R.softmax({ 1, 2, 3 }), 1e-6, 1e-7)
    H.assert_close(ember.tensor(7):softmax(1), 1)
    H.assert_close(ember.tensor(7):log_softmax(-1), 0)
    assert.are.equal(0, ember.zeros(0, 4):softmax(2):numel())
    assert.are.equal(0, ember.zeros(3, 0):log_softmax(2):numel())
    H.assert_close(ember.tensor({ 1, 2 }):logsoftmax(1), R.log_softmax({ 1, 2 }), 1e-6, 1e-6)
  end)

  it('requires a dim', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:softmax() end,
      'softmax: expected a dimension, as in x:softmax(dim)')
    H.assert_error(function() ember.log_softmax(x) end, 'log_softmax: expected a dimension')
    H.assert_error(function() x:softmax(5) end,
      'softmax: dimension 5 out of range for a 2-d tensor')
    H.assert_error(function() ember.softmax(nil, 1) end, 'softmax: expected a tensor, got nil')
  end)
end)
