-- Reductions over dims (sum, mean, prod, amax, amin, all, any, logsumexp, var, std, norm,
-- count_nonzero, nansum, nanmean) against plain-Lua references computed in double
-- (tests/lua/reduce_ref.lua), on every layout (tests/lua/reduce_util.lua). Ops along one dim
-- are in reduce_dim_spec.lua.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local C = ember.C

local nan, inf = 0 / 0, math.huge

local ref = require 'tests.lua.reduce_ref'
local R, ref_reduce, isnan = ref.R, ref.reduce, ref.isnan
local U = require 'tests.lua.reduce_util'
local eighths, ints, tol = U.eighths, U.ints, U.tol
local layouts, check_2d, check_3d = U.layouts, U.check_2d, U.check_3d

local function last_error() return ffi.string(C.em_last_error()) end
local cdims = ffi.new('int[9]')
local function c_dims(list)
  for i = 1, #list do cdims[i - 1] = list[i] end
  return #list, cdims
end

describe('reductions over dims', function()
  it('sum on every layout and dtype', function()
    check_2d('sum', R.sum, { 'float32', 'float64', 'float16', 'bfloat16' })
    check_2d('sum', R.sum, { 'int32', 'int64' }, function(s) return ints(s, -50, 50) end)
    check_3d('sum', R.sum, 'float32')
  end)

  it('mean on every layout and dtype', function()
    check_2d('mean', R.mean, { 'float32', 'float64', 'float16', 'bfloat16' })
    check_3d('mean', R.mean, 'float64')
  end)

  it('prod on every layout and dtype', function()
    local small = function(s) return eighths(s, -12, 12) end
    check_2d('prod', R.prod, { 'float32', 'float64' }, small)
    check_2d('prod', R.prod, { 'int32', 'int64' }, function(s) return ints(s, -3, 3) end)
    check_3d('prod', R.prod, 'float64')
  end)

  it('amax and amin on every layout and dtype', function()
    for _, name in ipairs({ 'amax', 'amin' }) do
      check_2d(name, R[name], { 'float32', 'float64', 'float16', 'bfloat16' })
      check_2d(name, R[name], { 'int32', 'int64' }, function(s) return ints(s, -1000, 1000) end)
      check_3d(name, R[name], 'float32')
    end
  end)

  it('all and any on every layout, with zeros that decide', function()
    local sparse = function(s)
      return H.nested(s, function()
        return H.random() < 0.3 and 0 or math.floor(H.uniform(-3, 3))
      end)
    end
    local mostly_zero = function(s)
      return H.nested(s, function() return H.random() < 0.85 and 0 or 1 end)
    end
    for _, name in ipairs({ 'all', 'any' }) do
      check_2d(name, R[name], { 'float32', 'int32', 'bool' }, sparse)
      check_2d(name, R[name], { 'float64', 'int64', 'bool' }, mostly_zero)
      check_3d(name, R[name], 'float32')
    end
  end)

  it('logsumexp on every layout and dtype', function()
    check_2d('logsumexp', R.logsumexp, { 'float32', 'float64', 'float16', 'bfloat16' })
    check_3d('logsumexp', R.logsumexp, 'float64')
  end)

  it('reduces 0-d tensors over dim 1 / -1 and over nothing', function()
    local s = ember.tensor(2.5)
    H.assert_close(s:sum(), 2.5)
    H.assert_close(s:sum(1), 2.5)
    H.assert_close(s:sum(-1, true), 2.5)
    H.assert_close(s:mean({ 1 }), 2.5)
    H.assert_close(s:amax(1), 2.5)
    H.assert_close(s:logsumexp(1), 2.5)
    assert.are.equal(0, s:sum(1):dim())
  end)

  it('gives PyTorch dtypes', function()
    local i32 = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = 'int32' })
    local b = ember.tensor({ true, false, true })
    local h = ember.tensor({ 1, 2 }, { dtype = 'float16' })
    assert.are.equal('int64', i32:sum():dtype())
    assert.are.equal('int64', i32:prod(1):dtype())
    assert.are.equal('int64', b:sum():dtype())
    assert.are.equal(2, b:sum():item())
    assert.are.equal('int32', i32:amax(1):dtype())
    assert.are.equal('int32', i32:amin():dtype())
    assert.are.equal('bool', i32:all():dtype())
    assert.are.equal('bool', h:any(1):dtype())
    assert.are.equal('float16', h:sum():dtype())
    assert.are.equal('float16', h:mean():dtype())
    assert.are.equal('float32', i32:logsumexp(1):dtype())
    H.assert_close(i32:logsumexp(2), { math.log(math.exp(1) + math.exp(2)),
      math.log(math.exp(3) + math.exp(4)) }, 1e-6, 1e-6)
    assert.are.equal('bfloat16', ember.tensor({ 1 }, { dtype = 'bfloat16' }):prod():dtype())
    assert.are.equal('uint8', ember.tensor({ 1, 200 }, { dtype = 'uint8' }):amax():dtype())
    assert.are.equal(200, ember.tensor({ 1, 200 }, { dtype = 'uint8' }):amax():item())
    assert.are.equal(201, ember.tensor({ 1, 200 }, { dtype = 'uint8' }):sum():item())
  end)

  it('sums int64 exactly (no trip through double)', function()
    -- 2^53 + 1 has no double: build it from an int64 buffer
    local buf = ffi.new('int64_t[3]', { 9007199254740993LL, 1, -2 })
    local sizes = ffi.new('int64_t[1]', 3)
    local x = ember.C.em_from_buffer(buf, C.EM_INT64, 1, sizes, C.EM_INT64, 0)
    x = require('ember.core').own(x)
    assert.are.equal(9007199254740992LL, x:sum():item_int64())
    assert.are.equal(9007199254740993LL, x:amax():item_int64())
    assert.are.equal(-18014398509481986LL, x:prod():item_int64())
    local v, i = x:max(1)
    assert.are.equal(9007199254740993LL, v:item_int64())
    assert.are.equal(1, i:item())
    assert.are.same({ 9007199254740993LL, 9007199254740994LL, 9007199254740992LL },
      { x:cumsum(1):select(1, 1):item_int64(), x:cumsum(1):select(1, 2):item_int64(),
        x:cumsum(1):select(1, 3):item_int64() })
  end)

  it('handles zero-size inputs like PyTorch', function()
    local e = ember.zeros(0, 3)
    H.assert_close(e:sum(), 0)
    H.assert_close(e:prod(), 1)
    assert.is_true(isnan(e:mean():item()))
    assert.is_true(e:all():item())
    assert.is_false(e:any():item())
    H.assert_close(e:logsumexp(), -inf)
    H.assert_close(e:sum(1), { 0, 0, 0 })
    H.assert_close(e:prod(1, true), { { 1, 1, 1 } })
    assert.are.same({ 0 }, { e:sum(2):size(1) })
    assert.are.same({ 0, 1 }, { e:amax(2, true):size(1), e:amax(2, true):size(2) })
    local m = e:mean(1)
    for i = 1, 3 do assert.is_true(isnan(m[i])) end
    assert.are.same({ true, true, true }, e:all(1):totable())
    assert.are.same({ false, false, false }, e:any(1):totable())
    local ei = ember.zeros({ 3, 0 }, { dtype = 'int32' })
    assert.are.same({ 0, 0, 0 }, ei:sum(2):totable())
    assert.are.equal('int64', ei:sum(2):dtype())
  end)

  it('propagates NaN like PyTorch', function()
    local x = ember.tensor({ { 1, nan, 3 }, { 4, 5, 6 } })
    assert.is_true(isnan(x:amax():item()))
    assert.is_true(isnan(x:amin():item()))
    H.assert_close(x:amax(2), { nan, 6 })
    H.assert_close(x:amin(1), { 1, nan, 3 })
    H.assert_close(x:sum(2), { nan, 15 })
    H.assert_close(x:logsumexp(2), { nan, R.logsumexp({ 4, 5, 6 }) }, 1e-6, 1e-6)
    -- NaN is nonzero: it counts as true
    assert.is_true(ember.tensor({ nan, 1 }):all():item())
    assert.is_true(ember.tensor({ nan, 0 }):any():item())
    -- column path too
    local xt = ember.tensor({ { 1, 4 }, { nan, 5 }, { 3, 6 } }):t()
    H.assert_close(xt:amax(2), { nan, 6 })
  end)

  it('logsumexp is stable and handles infinities', function()
    H.assert_close(ember.tensor({ 1000, 1001, 1002 }):logsumexp(),
      R.logsumexp({ 1000, 1001, 1002 }), 1e-7, 0)
    H.assert_close(ember.tensor({ -1000, -1001 }):logsumexp(1), R.logsumexp({ -1000, -1001 }),
      1e-7, 0)
    H.assert_close(ember.tensor({ inf, 1 }):logsumexp(), inf)
    H.assert_close(ember.tensor({ -inf, -inf }):logsumexp(), -inf)
    H.assert_close(ember.tensor({ -inf, 0 }):logsumexp(), 0)
  end)

  it('reports bad dims and dtypes', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:sum(3) end, 'sum: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() x:sum(-3) end, 'sum: dimension -3 out of range for a 2-d tensor')
    H.assert_error(function() x:sum(0) end, 'sum: dimensions are 1-based in Lua; got 0')
    H.assert_error(function() x:sum({ 1, -2 }) end, 'sum: dimension 1 appears more than once')
    H.assert_error(function() x:sum(1.5) end, 'sum: expected an integer dimension')
    H.assert_error(function() x:sum('a') end, 'sum: expected a dimension or a table of dimensions')
    H.assert_error(function() x:sum(1, 1) end, 'sum: expected keepdim to be a boolean, got number')
    H.assert_error(function() ember.sum(3) end, 'sum: expected a tensor, got number')
    H.assert_error(function() ember.tensor(1):sum(2) end,
      'sum: dimension 2 out of range for a 0-d tensor')
    H.assert_error(function() ember.zeros({ 2 }, { dtype = 'int64' }):mean() end,
      'mean: expected a floating point tensor, got int64')
    H.assert_error(function() ember.zeros({ 2 }, { dtype = 'bool' }):mean(1) end,
      'mean: expected a floating point tensor, got bool')
  end)

  it('reports reductions without identity over empty dims', function()
    local e = ember.zeros(0, 3)
    H.assert_error(function() e:amax() end,
      'amax: cannot reduce over an empty dimension (input shape [0,3])')
    H.assert_error(function() e:amin(1) end,
      'amin: cannot reduce over an empty dimension (input shape [0,3])')
    H.assert_error(function() e:max() end, 'max: cannot reduce over an empty tensor')
    H.assert_error(function() e:min() end, 'min: cannot reduce over an empty tensor')
  end)

  it('reports C-level errors (0-based dims, NULL, bad counts)', function()
    local x = ember.zeros(2, 3)
    local n, d = c_dims({ 2 })
    assert.is_true(C.em_reduce(C.EM_SUM, x.ptr, n, d, 0) == nil)
    assert.are.equal('sum: dimension 2 out of range for a 2-d tensor', last_error())
    n, d = c_dims({ 0, -2 })
    assert.is_true(C.em_reduce(C.EM_AMAX, x.ptr, n, d, 0) == nil)
    assert.are.equal('amax: dimension 0 appears more than once in the list of dimensions',
      last_error())
    assert.is_true(C.em_reduce(C.EM_SUM, x.ptr, 9, d, 0) == nil)
    assert.are.equal('sum: expected at most 8 dimensions, got 9', last_error())
    assert.is_true(C.em_reduce(C.EM_SUM, x.ptr, 1, nil, 0) == nil)
    assert.are.equal('sum: expected a list of 1 dimensions, got NULL', last_error())
    assert.is_true(C.em_reduce(C.EM_SUM, nil, 0, nil, 0) == nil)
    assert.are.equal('sum: expected a tensor, got NULL', last_error())
    assert.is_true(C.em_reduce(99, x.ptr, 0, nil, 0) == nil)
    assert.are.equal('reduce: invalid op 99', last_error())
    assert.is_true(C.em_var(x.ptr, 0, nil, 0 / 0, 0) == nil)
    assert.are.equal('var: expected a finite correction, got nan', last_error())
    assert.is_true(C.em_norm(x.ptr, 0 / 0, 0, nil, 0) == nil)
    assert.are.equal('norm: expected p to be a number, got nan', last_error())
    assert.is_true(C.em_argmax(x.ptr, 2, 0) == nil)
    assert.are.equal('argmax: dimension 2 out of range for a 2-d tensor', last_error())
    assert.are.equal(-1, C.em_max_dim(x.ptr, 0, 0, nil, nil))
    assert.are.equal('max: expected output pointers for values and indices, got NULL', last_error())
    assert.is_true(C.em_cumsum(x.ptr, -3) == nil)
    assert.are.equal('cumsum: dimension -3 out of range for a 2-d tensor', last_error())
    assert.is_true(C.em_softmax(nil, 0) == nil)
    assert.are.equal('softmax: expected a tensor, got NULL', last_error())
  end)
end)

describe('var and std', function()
  it('match the reference with Bessel correction on every layout', function()
    for _, c in ipairs({ 1, 0, 2 }) do
      for _, name in ipairs({ 'var', 'std' }) do
        local ref = R[name](c)
        for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
          H.seed(3)
          for _, v in ipairs(layouts(eighths, dtype)) do
            local lname, x, xt = v[1], v[2], v[3]
            local flat, shape = H.flatten(xt), H.shape_of(xt)
            for _, dim in ipairs({ false, 1, 2 }) do
              for _, keepdim in ipairs({ false, true }) do
                local d = dim or nil
                local got = x[name](x, d, { correction = c, keepdim = keepdim })
                local what = ('%s c=%d %s %s dim=%s'):format(name, c, dtype, lname, tostring(d))
                H.assert_close(got, ref_reduce(flat, shape, d, keepdim, ref), tol[dtype][1],
                  tol[dtype][2], what)
              end
            end
          end
        end
        check_3d(name, ref, 'float64', function(x, dims, keepdim)
          return x[name](x, dims, { correction = c, keepdim = keepdim })
        end)
      end
    end
  end)

  it('accepts unbiased (PyTorch) and defaults to correction 1', function()
    local x = ember.tensor({ { 1, 2, 3, 4 }, { 2, 4, 6, 8 } })
    H.assert_close(x:var(), R.var(1)({ 1, 2, 3, 4, 2, 4, 6, 8 }), 1e-6, 1e-6)
    H.assert_close(x:var(2), { 5 / 3, 20 / 3 }, 1e-6, 1e-6)
    H.assert_close(x:var(2, false), { 1.25, 5 }, 1e-6, 1e-6)
    H.assert_close(x:var(2, true, true), { { 5 / 3 }, { 20 / 3 } }, 1e-6, 1e-6)
    H.assert_close(x:var({ unbiased = false }), R.var(0)({ 1, 2, 3, 4, 2, 4, 6, 8 }), 1e-6, 1e-6)
    H.assert_close(x:std(false), math.sqrt(R.var(0)({ 1, 2, 3, 4, 2, 4, 6, 8 })), 1e-6, 1e-6)
    H.assert_close(x:std(2, { keepdim = true }), { { math.sqrt(5 / 3) }, { math.sqrt(20 / 3) } },
      1e-6, 1e-6)
  end)

  it('is accurate for data far from zero (two-pass, not sum of squares)', function()
    local t = {}
    for i = 1, 1000 do t[i] = 1e8 + (i % 10) end
    local x = ember.tensor(t, { dtype = 'float64' })
    H.assert_close(x:var(), R.var(1)(t), 1e-10, 0)
  end)

  it('gives NaN (not a crash) with too few elements', function()
    assert.is_true(isnan(ember.tensor({ 3 }):var():item()))
    assert.is_true(isnan(ember.zeros(0):var():item()))
    assert.is_true(isnan(ember.zeros(0):std({ correction = 0 }):item()))
    assert.are.equal(inf, ember.tensor({ 1, 2 }):var({ correction = 3 }):item())
    H.assert_close(ember.tensor(5):var({ correction = 0 }), 0)
    local e = ember.zeros(0, 2):var(1)
    assert.is_true(isnan(e[1]) and isnan(e[2]))
  end)

  it('reports bad arguments', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() ember.zeros({ 3 }, { dtype = 'int32' }):var() end,
      'var: expected a floating point tensor, got int32')
    H.assert_error(function() ember.zeros({ 3 }, { dtype = 'int64' }):std() end,
      'std: expected a floating point tensor, got int64')
    H.assert_error(function() x:var({ bias = 1 }) end, 'var: unknown option bias')
    H.assert_error(function() x:var(1, { correction = 1, unbiased = true }) end,
      'var: give correction or unbiased, not both')
    H.assert_error(function() x:var(1, { correction = 'a' }) end,
      'var: expected correction to be a number, got string')
    H.assert_error(function() x:var(1, 5) end,
      'var: expected an options table or unbiased (a boolean), got number')
    H.assert_error(function() x:std(1, { keepdim = true }, true) end,
      'std: keepdim goes in the options table')
    H.assert_error(function() x:var({ correction = inf }) end,
      'var: expected a finite correction, got inf')
    H.assert_error(function() x:var(4) end, 'var: dimension 4 out of range for a 2-d tensor')
  end)
end)

describe('norm', function()
  it('matches the reference for p = 0, 1, 2, 3, 0.5, inf, -inf on every layout', function()
    for _, p in ipairs({ 2, 1, 0, 3, 0.5, inf, -inf }) do
      for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
        H.seed(5)
        for _, v in ipairs(layouts(eighths, dtype)) do
          local lname, x, xt = v[1], v[2], v[3]
          local flat, shape = H.flatten(xt), H.shape_of(xt)
          for _, dim in ipairs({ false, 1, -1 }) do
            for _, keepdim in ipairs({ false, true }) do
              local d = dim or nil
              local what = ('norm p=%s %s %s dim=%s'):format(p, dtype, lname, tostring(d))
              H.assert_close(x:norm(p, d, keepdim), ref_reduce(flat, shape, d, keepdim, R.norm(p)),
                tol[dtype][1], tol[dtype][2], what)
            end
          end
        end
      end
      check_3d('norm', R.norm(p), 'float64', function(x, dims, keepdim)
        return x:norm(p, dims, keepdim)
      end)
    end
  end)

  it('defaults to 2 and accepts names', function()
    local x = ember.tensor({ { 3, -4 }, { 0, 12 } })
    H.assert_close(x:norm(), 13)
    H.assert_close(x:norm('fro'), 13)
    H.assert_close(x:norm('inf'), 12)
    H.assert_close(x:norm('-inf', 2), { 3, 0 })
    H.assert_close(x:norm(math.huge, 1), { 3, 12 })
    H.assert_close(ember.norm(x, 1), 19)
    H.assert_close(x:norm(0), 3)
    H.assert_close(x:dist(ember.zeros(2, 2), 1), 19)
    H.assert_close(ember.zeros(0, 2):norm(), 0)
    H.assert_close(ember.zeros(0, 2):norm(1, 1), { 0, 0 })
  end)

  it('reports bad arguments', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:norm('nuc') end, "norm: unsupported order 'nuc'")
    H.assert_error(function() x:norm({}) end, 'norm: expected p to be a number, got table')
    H.assert_error(function() ember.zeros({ 2 }, { dtype = 'int64' }):norm() end,
      'norm: expected a floating point tensor, got int64')
    H.assert_error(function() ember.zeros(0, 2):norm(inf) end,
      'norm: cannot reduce over an empty dimension (input shape [0,2])')
    H.assert_error(function() ember.zeros(0, 2):norm(-1, 1) end,
      'norm: cannot reduce over an empty dimension (input shape [0,2])')
    H.assert_error(function() x:norm(0 / 0) end, 'norm: expected p to be a number, got nan')
  end)
end)

describe('count_nonzero, nansum, nanmean', function()
  local function with_nans(shape)
    return H.nested(shape, function()
      local r = H.random()
      if r < 0.25 then return nan end
      if r < 0.4 then return 0 end
      return math.floor(H.uniform(-32, 33)) / 8
    end)
  end
  local function no_nan(f)
    return function(v)
      local kept = {}
      for _, x in ipairs(v) do if not isnan(x) then kept[#kept + 1] = x end end
      return f(kept)
    end
  end
  local function count(v)
    local c = 0
    for _, x in ipairs(v) do if x ~= 0 then c = c + 1 end end
    return c
  end

  it('match the reference on every layout', function()
    H.seed(37)
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      for _, v in ipairs(layouts(with_nans, dtype)) do
        local flat, shape = H.flatten(v[3]), H.shape_of(v[3])
        for _, dim in ipairs({ false, 1, -1 }) do
          local d = dim or nil
          local what = v[1] .. ' dim=' .. tostring(d)
          local c = v[2]:count_nonzero(d)
          assert.are.equal('int64', c:dtype())
          H.assert_close(c, ref_reduce(flat, shape, d, false, count), 0, 0,
            'count_nonzero ' .. what)
          for _, keepdim in ipairs({ false, true }) do
            H.assert_close(v[2]:nansum(d, keepdim),
              ref_reduce(flat, shape, d, keepdim, no_nan(R.sum)), 1e-6, 1e-6, 'nansum ' .. what)
            H.assert_close(v[2]:nanmean(d, keepdim),
              ref_reduce(flat, shape, d, keepdim, no_nan(R.mean)), 1e-6, 1e-6, 'nanmean ' .. what)
          end
        end
      end
    end
  end)

  it('handle integers, all-NaN lines and empty inputs', function()
    local i = ember.tensor({ { 1, 0, 3 }, { 0, 0, 5 } }, { dtype = 'int32' })
    H.assert_close(i:count_nonzero(1), { 1, 0, 2 }, 0, 0)
    H.assert_close(i:nansum(2), { 4, 5 }, 0, 0)
    assert.are.equal('int64', i:nansum():dtype())
    local m = ember.tensor({ { nan, nan }, { 1, nan } }):nanmean(2)
    assert.is_true(isnan(m[1]))
    H.assert_close(m[2], 1)
    H.assert_close(ember.zeros(0, 2):nansum(), 0)
    assert.are.equal(0, ember.zeros(0, 2):count_nonzero():item())
  end)

  it('report bad arguments under their own names', function()
    local x = ember.zeros(2, 3)
    H.assert_error(function() x:count_nonzero(3) end, 'count_nonzero: dimension 3 out of range')
    H.assert_error(function() x:nansum(0) end, 'nansum: dimensions are 1-based in Lua; got 0')
    H.assert_error(function() x:nanmean(1, 'no') end, 'nanmean: expected keepdim to be a boolean')
    H.assert_error(function() ember.zeros({ 2 }, { dtype = 'int32' }):nanmean() end,
      'nanmean: expected a floating point tensor, got int32')
  end)
end)

describe('large inputs (accuracy and threads)', function()
  local saved
  before_each(function()
    saved = ember.get_num_threads()
    ember.set_num_threads(4) -- more threads than work units: exercises the split paths too
  end)
  after_each(function() ember.set_num_threads(saved) end)

  it('sums 1e6 float32 values of 0.1 accurately', function()
    local x = ember.full({ 1000000 }, 0.1)
    local s = x:sum():item()
    assert.is_true(math.abs(s - 100000) / 100000 < 1e-6, 'sum was ' .. s)
    assert.is_true(math.abs(x:mean():item() - 0.1) < 1e-7)
    local m = x:view(1000, 1000)
    H.assert_close(m:sum(1), H.nested({ 1000 }, function() return 100 end), 1e-6, 0)
    H.assert_close(m:sum(2), H.nested({ 1000 }, function() return 100 end), 1e-6, 0)
    H.assert_close(m:t():sum(2), H.nested({ 1000 }, function() return 100 end), 1e-6, 0)
  end)

  it('reduces big matrices on every path against plain loops', function()
    local rows, cols = 2000, 300
    local t = {}
    for i = 1, rows do
      local r = {}
      for j = 1, cols do r[j] = ((i * 7 + j * 13) % 23 - 11) * 0.25 end
      t[i] = r
    end
    local x = ember.tensor(t)
    local rs, cs, total = {}, {}, 0
    for j = 1, cols do cs[j] = 0 end
    for i = 1, rows do
      local s = 0
      for j = 1, cols do s = s + t[i][j]; cs[j] = cs[j] + t[i][j] end
      rs[i] = s
      total = total + s
    end
    H.assert_close(x:sum(2), rs, 1e-6, 1e-6, 'row sums')
    H.assert_close(x:sum(1), cs, 1e-6, 1e-6, 'column sums')
    H.assert_close(x:t():sum(1), rs, 1e-6, 1e-6, 'transposed row sums')
    H.assert_close(x:sum(), total, 1e-6, 1e-6, 'total')
    -- tall and narrow: few column groups, rows split across threads
    local narrow = x:narrow(2, 1, 3)
    H.assert_close(narrow:sum(1), { cs[1], cs[2], cs[3] }, 1e-6, 1e-6, 'narrow column sums')
    -- var over the split path (two passes) and amax
    local flat = H.flatten(t)
    H.assert_close(x:var(), R.var(1)(flat), 1e-6, 1e-6, 'var')
    H.assert_close(x:amax(1), ref_reduce(flat, { rows, cols }, 1, false, R.amax), 0, 0, 'amax')
    H.assert_close(x:logsumexp(), R.logsumexp(flat), 1e-6, 1e-6, 'logsumexp')
    -- argmax over a long line: the first of the many maxima
    local big = ember.tensor(flat)
    H.assert_close(big:argmax(), R.argmax(flat), 0, 0, 'argmax')
    H.assert_close(big:argmin(), R.argmin(flat), 0, 0, 'argmin')
    local v, i = x:max(1)
    H.assert_close(i, ref_reduce(flat, { rows, cols }, 1, false, R.argmax), 0, 0, 'max indices')
    H.assert_close(v, ref_reduce(flat, { rows, cols }, 1, false, R.amax), 0, 0, 'max values')
    -- softmax and cumsum across threads
    H.assert_close(x:softmax(2):sum(2), H.nested({ rows }, function() return 1 end), 1e-6, 1e-6)
    H.assert_close(x:cumsum(1)[rows], cs, 1e-6, 1e-6, 'cumsum last row')
  end)

  it('sums int64 exactly on the split path', function()
    local x = ember.full({ 300000 }, 3, { dtype = 'int32' })
    assert.are.equal(900000LL, x:sum():item_int64())
    assert.are.equal(3LL, x:amax():item_int64())
  end)
end)
