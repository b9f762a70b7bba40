-- ternary_spec: where, clamp, lerp, addcmul, addcdiv and masked_fill against plain-Lua
-- references in double precision, on every layout (contiguous, transposed, sliced, broadcast,
-- zero-size), in several dtypes, with numbers as operands, in place, and every error.
local H = require 'tests.lua.helpers'
local ember = H.ember

local nan = 0 / 0

local tol = {
  float32 = { 2e-6, 1e-6 }, float64 = { 1e-12, 1e-14 }, float16 = { 2e-3, 1e-3 },
  bfloat16 = { 1.6e-2, 1e-2 }, int8 = { 0, 0 }, uint8 = { 0, 0 }, int16 = { 0, 0 },
  int32 = { 0, 0 }, int64 = { 0, 0 },
}

-- Values exact in every dtype of the test: quarters for floats, integers otherwise.
local function values(shape, dtype, lo, hi)
  local int = not (dtype:find('float') or dtype == 'bfloat16')
  return H.nested(shape, function()
    local v = H.uniform(lo or -4, hi or 4)
    return int and math.floor(v) or math.floor(v * 4 + 0.5) / 4
  end)
end

-- 0/1 numbers for conditions and masks (H.map cannot carry `false` through its tables).
local function bits(shape)
  return H.nested(shape, function() return H.random() < 0.5 and 1 or 0 end)
end

-- f(x) for every layout of table t against ref, plus a zero-size input.
local function check_layouts(what, t, dtype, f, ref, out_dtype, empty)
  for _, v in ipairs(H.variants(t, { dtype = dtype })) do
    local layout, x, xt = v[1], v[2], v[3]
    local label = ('%s %s %s'):format(what, dtype, layout)
    local r = f(x)
    assert.are.equal(out_dtype or dtype, r:dtype(), label)
    H.assert_close(r, ref(xt), tol[dtype] and tol[dtype][1] or 0, tol[dtype] and tol[dtype][2] or 0,
      label)
  end
  if empty ~= false then
    local e = f(H.empty_variant(3, { dtype = dtype }))
    assert.are.same({ 0, 3 }, { e:size(1), e:size(2) }, what .. ' zero-size')
  end
end

describe('where', function()
  it('selects on every layout of each operand, in every dtype', function()
    H.seed(41)
    local ct = bits({ 5, 7 })
    local sel = function(c, a, b) return c == 1 and a or b end
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64' }) do
      local at, bt = values({ 5, 7 }, dtype, 0, 9), values({ 5, 7 }, dtype, 0, 9)
      local c, a, b = ember.tensor(ct, { dtype = 'bool' }), ember.tensor(at, { dtype = dtype }),
        ember.tensor(bt, { dtype = dtype })
      check_layouts('where a', at, dtype, function(x)
        if x:numel() == 0 then return ember.where(x:ne(x), x, x) end
        return ember.where(c, x, b)
      end, function(xt) return H.map(sel, ct, xt, bt) end)
      check_layouts('where b', bt, dtype, function(x)
        if x:numel() == 0 then return ember.where(x:eq(x), x, x) end
        return ember.where(c, a, x)
      end, function(xt) return H.map(sel, ct, at, xt) end, nil, false)
      check_layouts('where cond', ct, 'bool', function(x) return ember.where(x, a, b):to('float64') end,
        function(xt) return H.map(sel, xt, at, bt) end, 'float64', false)
    end
  end)

  it('broadcasts all three operands and takes numbers', function()
    local c = ember.tensor({ { 1 }, { 0 } }, { dtype = 'bool' })
    local a = ember.tensor({ { 1, 2, 3 } })
    H.assert_close(ember.where(c, a, -1), { { 1, 2, 3 }, { -1, -1, -1 } })
    H.assert_close(ember.where(c, 7, a), { { 7, 7, 7 }, { 1, 2, 3 } })
    local x = ember.tensor({ 1, -2, nan, 4 })
    H.assert_close(x:where(x:gt(0), 0), { 1, 0, 0, 4 }) -- x:where(cond, y) is where(cond, x, y)
    H.assert_close(ember.where(x:ne(x), 99, x), { 1, -2, 99, 4 })
    assert.are.equal('int64', ember.where(c, 1, 2):dtype())
    assert.are.equal('float32', ember.where(c, 1.5, 2.5):dtype())
    assert.are.same({ { 1.5 }, { 2.5 } }, ember.where(c, 1.5, 2.5):totable())
  end)

  it('promotes a and b like a binary op', function()
    local c = ember.tensor({ true, false })
    local i32 = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    assert.are.equal('float32', ember.where(c, i32, ember.tensor({ 0.5, 0.5 })):dtype())
    assert.are.equal('float32', ember.where(c, i32, 2.5):dtype())
    assert.are.same({ 1, 2.5 }, ember.where(c, i32, 2.5):totable())
    assert.are.equal('int32', ember.where(c, i32, 2):dtype())
    assert.are.equal('int64', ember.where(c, i32, ember.tensor({ 3, 4 }, { dtype = 'int64' })):dtype())
    assert.are.equal('float64', ember.where(c, ember.zeros(2, { dtype = 'float64' }), 1):dtype())
  end)

  it('accepts a uint8 condition and refuses others', function()
    local a, b = ember.tensor({ 1, 2, 3 }), ember.tensor({ 7, 8, 9 })
    H.assert_close(ember.where(ember.tensor({ 2, 0, 1 }, { dtype = 'uint8' }), a, b), { 1, 8, 3 })
    H.assert_error(function() return ember.where(ember.ones(3), a, b) end,
      'where: expected a bool condition, got float32')
    H.assert_error(function() return ember.where(ember.ones(3, { dtype = 'int64' }), a, b) end,
      'where: expected a bool condition, got int64')
    H.assert_error(function() return ember.where(a:gt(1), ember.zeros(2), b) end,
      'where: shapes [3] and [2] cannot broadcast')
    H.assert_error(function() return ember.where(a:gt(1), 'x', b) end,
      'where: expected a tensor or a number for the second argument, got string')
    H.assert_error(function() return ember.where(true, a, b) end,
      'where: expected a tensor for the condition, got boolean')
  end)
end)

local function clamp_ref(v, lo, hi)
  if v ~= v or (lo and lo ~= lo) or (hi and hi ~= hi) then return nan end
  if lo and v < lo then v = lo end
  if hi and v > hi then v = hi end
  return v
end

describe('clamp', function()
  it('bounds every layout with numbers, in every dtype', function()
    H.seed(42)
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
      local lo0 = dtype == 'uint8' and 0 or -4
      local t = values({ 5, 7 }, dtype, lo0, 6)
      local lo, hi = dtype == 'uint8' and 2 or -1, 3
      check_layouts('clamp', t, dtype, function(x) return x:clamp(lo, hi) end,
        function(xt) return H.map(function(v) return clamp_ref(v, lo, hi) end, xt) end)
      check_layouts('clamp min', t, dtype, function(x) return x:clamp_min(lo) end,
        function(xt) return H.map(function(v) return clamp_ref(v, lo, nil) end, xt) end)
      check_layouts('clamp max', t, dtype, function(x) return x:clamp(nil, hi) end,
        function(xt) return H.map(function(v) return clamp_ref(v, nil, hi) end, xt) end)
    end
  end)

  it('takes tensor bounds that broadcast, on every layout', function()
    H.seed(43)
    local t = values({ 5, 7 }, 'float64')
    local lt, ht = values({ 5, 7 }, 'float64', -3, 0), values({ 1, 7 }, 'float64', 0, 3)
    local lo, hi = ember.tensor(lt, { dtype = 'float64' }), ember.tensor(ht, { dtype = 'float64' })
    local hrows = {}
    for i = 1, 5 do hrows[i] = ht[1] end
    check_layouts('clamp tensors', t, 'float64', function(x)
      if x:numel() == 0 then return x:clamp(x, x) end
      return x:clamp(lo, hi)
    end, function(xt) return H.map(clamp_ref, xt, lt, hrows) end)
    -- the bounds' own layouts
    for _, v in ipairs(H.variants(lt, { dtype = 'float64' })) do
      H.assert_close(ember.tensor(t, { dtype = 'float64' }):clamp(v[2], nil),
        H.map(function(a, b) return clamp_ref(a, b, nil) end, t, v[3]), 0, 0, 'lo ' .. v[1])
    end
  end)

  it('propagates NaN from the input and from either bound, and lets max win over min', function()
    for _, dtype in ipairs({ 'float32', 'float64', 'float16' }) do
      local x = ember.tensor({ nan, 1, 5, -5 }, { dtype = dtype })
      H.assert_close(x:clamp(0, 2), { nan, 1, 2, 0 })
      H.assert_close(x:clamp(ember.tensor({ 0, nan, 0, 0 }, { dtype = dtype }), 2), { nan, nan, 2, 0 })
      H.assert_close(x:clamp(0, ember.tensor({ 2, 2, nan, 2 }, { dtype = dtype })), { nan, 1, nan, 0 })
      H.assert_close(x:clamp(3, 1), { nan, 1, 1, 1 }) -- min > max: every value becomes max
    end
  end)

  it('promotes with its bounds and writes in place through views', function()
    local i = ember.tensor({ -3, 0, 9 }, { dtype = 'int32' })
    assert.are.equal('int32', i:clamp(0, 5):dtype())
    assert.are.equal('float32', i:clamp(0.5, 5):dtype())
    H.assert_close(i:clamp(0.5, 5), { 0.5, 0.5, 5 })
    local base = ember.tensor({ { -2, 5 }, { 9, -7 } })
    base[{ {}, 1 }]:clamp_(-1, 1)
    H.assert_close(base, { { -1, 5 }, { 1, -7 } })
    base:clamp_max_(0)
    H.assert_close(base, { { -1, 0 }, { 0, -7 } })
    base:clamp_min_(-2)
    H.assert_close(base, { { -1, 0 }, { 0, -2 } })
    H.assert_close(ember.clip(ember.tensor({ -3, 3 }), -1, 1), { -1, 1 })
    H.assert_error(function() i:clamp_(0.5, 5) end,
      'clamp_: result type float32 cannot be stored in place into a int32 tensor')
  end)

  it('reports its errors', function()
    H.assert_error(function() return ember.ones(2):clamp() end, 'clamp: expected at least one of min and max')
    H.assert_error(function() return ember.ones(2):clamp_() end, 'clamp_: expected at least one of min and max')
    local b = ember.tensor({ true })
    H.assert_error(function() return b:clamp(ember.tensor(false), ember.tensor(true)) end,
      'clamp: not supported for bool tensors')
    assert.are.equal('int64', b:clamp(0, 1):dtype()) -- number bounds promote bool to int64
    H.assert_error(function() return ember.ones(2):clamp(ember.zeros(3)) end,
      'clamp: shapes [2] and [3] cannot broadcast')
    H.assert_error(function() return ember.ones(2):clamp('a') end,
      'clamp: expected a tensor or a number for min, got string')
  end)
end)

describe('lerp', function()
  local function lerp_ref(s, e, w) return s + w * (e - s) end
  it('interpolates every layout with number and tensor weights', function()
    H.seed(44)
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
      local st, et = values({ 5, 7 }, dtype), values({ 5, 7 }, dtype)
      local wt = H.nested({ 5, 7 }, function() return math.floor(H.uniform(-1, 2) * 8) / 8 end)
      local e, w = ember.tensor(et, { dtype = dtype }), ember.tensor(wt, { dtype = dtype })
      for _, wv in ipairs({ 0.25, 0.75 }) do -- both branches of the stable formula
        check_layouts('lerp ' .. wv, st, dtype, function(x)
          if x:numel() == 0 then return x:lerp(x, wv) end
          return x:lerp(e, wv)
        end, function(xt) return H.map(function(s, en) return lerp_ref(s, en, wv) end, xt, et) end)
      end
      check_layouts('lerp tensor weight', st, dtype, function(x)
        if x:numel() == 0 then return x:lerp(x, x) end
        return ember.lerp(x, e, w)
      end, function(xt) return H.map(lerp_ref, xt, et, wt) end)
    end
  end)

  it('is exact at the ends and works in place', function()
    local s = ember.tensor({ 0.1, 1e10, -3 }, { dtype = 'float64' })
    local e = ember.tensor({ 0.3, 1, 7 }, { dtype = 'float64' })
    assert.are.same(e:totable(), s:lerp(e, 1):totable())
    assert.are.same(s:totable(), s:lerp(e, 0):totable())
    local base = ember.zeros(2, 2)
    base[1]:lerp_(ember.tensor({ 4, 8 }), 0.5)
    H.assert_close(base, { { 2, 4 }, { 0, 0 } })
    H.assert_error(function() return ember.ones(2, { dtype = 'int64' }):lerp(ember.ones(2), 0.5) end,
      'lerp: expected floating-point tensors, got int64')
    H.assert_error(function() return ember.ones(2):lerp(ember.ones(2, { dtype = 'int32' }), 1) end,
      'lerp: expected floating-point tensors, got int32')
    H.assert_error(function() return ember.ones(2):lerp(ember.ones(2), ember.ones(2, { dtype = 'bool' })) end,
      'lerp: expected floating-point tensors, got bool')
    H.assert_close(ember.ones(2):lerp(ember.zeros(2), 1), { 0, 0 }) -- an integral number weight is fine
    H.assert_error(function() return ember.ones(2):lerp(ember.ones(3), 0.5) end,
      'lerp: shapes [2] and [3] cannot broadcast')
  end)
end)

describe('addcmul and addcdiv', function()
  it('match x + value * t1 (* or /) t2 on every layout', function()
    H.seed(45)
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'int32', 'int64', 'int16' }) do
      local xt, at = values({ 5, 7 }, dtype), values({ 5, 7 }, dtype)
      local bt = H.map(function(v) return v == 0 and 2 or v end, values({ 5, 7 }, dtype))
      local a, b = ember.tensor(at, { dtype = dtype }), ember.tensor(bt, { dtype = dtype })
      local float = dtype:find('float') ~= nil
      local v = float and 0.5 or 3
      check_layouts('addcmul', xt, dtype, function(x)
        if x:numel() == 0 then return x:addcmul(x, x, v) end
        return x:addcmul(a, b, v)
      end, function(t) return H.map(function(x, p, q) return x + v * p * q end, t, at, bt) end)
      if float then
        check_layouts('addcdiv', xt, dtype, function(x)
          if x:numel() == 0 then return x:addcdiv(x, x, v) end
          return x:addcdiv(a, b, v)
        end, function(t) return H.map(function(x, p, q) return x + v * p / q end, t, at, bt) end)
      end
    end
  end)

  it('take a default value, Torch7 argument order, and work in place', function()
    local x, a, b = ember.tensor({ 1, 2 }), ember.tensor({ 3, 4 }), ember.tensor({ 2, 8 })
    H.assert_close(x:addcmul(a, b), { 7, 34 })
    H.assert_close(x:addcmul(2, a, b), { 13, 66 })
    H.assert_close(ember.addcdiv(x, a, b, -2), { -2, 1 })
    x:addcdiv_(a, b)
    H.assert_close(x, { 2.5, 2.5 })
    x:addcmul_(0.5, a, b)
    H.assert_close(x, { 5.5, 18.5 })
    local i = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    assert.are.equal('float32', i:addcmul(ember.tensor({ 1, 1 }), i, 2):dtype())
  end)

  it('refuse what PyTorch refuses', function()
    local i = ember.tensor({ 1, 2 }, { dtype = 'int64' })
    H.assert_error(function() return i:addcdiv(i, i) end, 'addcdiv: integer division is not supported')
    H.assert_error(function() return i:addcmul(i, i, 0.5) end,
      'addcmul: value must be an integer for int64 tensors, got 0.5')
    H.assert_error(function() i:addcmul_(i, i, 0.5) end, 'addcmul_: value must be an integer')
    local b = ember.tensor({ true })
    H.assert_error(function() return b:addcmul(b, b) end, 'addcmul: not supported for bool tensors')
    H.assert_error(function() return ember.ones(2):addcmul(ember.ones(3), ember.ones(2)) end,
      'addcmul: shapes [2] and [3] cannot broadcast')
    H.assert_error(function() return ember.ones(2):addcmul(ember.ones(2), 'x') end,
      'addcmul: expected a tensor for tensor2, got string')
  end)
end)

describe('masked_fill', function()
  it('fills where the mask is true on every layout, in every dtype', function()
    H.seed(46)
    local mt = bits({ 5, 7 })
    local mask = ember.tensor(mt, { dtype = 'bool' })
    local row = ember.tensor({ mt[1] }, { dtype = 'bool' })
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int32', 'int64' }) do
      local t = values({ 5, 7 }, dtype, 0, 9)
      check_layouts('masked_fill', t, dtype, function(x)
        if x:numel() == 0 then return x:masked_fill(x:eq(x), 3) end
        return x:masked_fill(mask, 3)
      end, function(xt) return H.map(function(m, v) return m == 1 and 3 or v end, mt, xt) end)
      check_layouts('masked_fill row', t, dtype, function(x)
        if x:numel() == 0 then return x:masked_fill(x:eq(x), 3) end
        return x:masked_fill(row, 3)
      end, function(xt)
        local o = {}
        for r = 1, #xt do
          o[r] = {}
          for c = 1, #xt[r] do o[r][c] = mt[1][c] == 1 and 3 or xt[r][c] end
        end
        return o
      end, nil, false)
    end
  end)

  it('converts the value to the tensor dtype and accepts booleans and 0-dim tensors', function()
    local m = ember.tensor({ true, false, true })
    assert.are.same({ 2, 1, 2 }, ember.tensor({ 1, 1, 1 }, { dtype = 'int32' }):masked_fill(m, 2.5):totable())
    assert.are.equal('int32', ember.tensor({ 1, 1, 1 }, { dtype = 'int32' }):masked_fill(m, 2.5):dtype())
    assert.are.same({ true, false, true }, ember.zeros(3, { dtype = 'bool' }):masked_fill(m, true):totable())
    H.assert_close(ember.zeros(3):masked_fill(m, ember.tensor(-1.5)), { -1.5, 0, -1.5 })
    H.assert_close(ember.zeros(3):masked_fill(m, 0 / 0), { nan, 0, nan })
    -- out of place, x and the mask broadcast together (PyTorch)
    H.assert_close(ember.zeros(2):masked_fill(ember.tensor({ { true, false }, { false, true } }), 1),
      { { 1, 0 }, { 0, 1 } })
  end)

  it('writes in place through views and through x[mask] = v', function()
    local base = ember.zeros(2, 3)
    base[2]:masked_fill_(ember.tensor({ true, false, true }), 5)
    H.assert_close(base, { { 0, 0, 0 }, { 5, 0, 5 } })
    base[base:gt(1)] = -1
    H.assert_close(base, { { 0, 0, 0 }, { -1, 0, -1 } })
    base:masked_fill_(ember.tensor({ { true }, { false } }), 7) -- the mask broadcasts to x
    H.assert_close(base, { { 7, 7, 7 }, { -1, 0, -1 } })
  end)

  it('reports its errors', function()
    local x = ember.zeros(3)
    H.assert_error(function() return x:masked_fill(ember.ones(3, { dtype = 'uint8' }), 1) end,
      'masked_fill: expected a bool mask, got uint8')
    H.assert_error(function() return x:masked_fill(ember.ones(3), 1) end,
      'masked_fill: expected a bool mask, got float32')
    H.assert_error(function() x:masked_fill_(ember.ones(2, 3, { dtype = 'bool' }), 1) end,
      "masked_fill_: the result's shape [2,3] does not match the in-place tensor's shape [3]")
    H.assert_error(function() return x:masked_fill(ember.ones(2, { dtype = 'bool' }), 1) end,
      'masked_fill: shapes [2] and [3] cannot broadcast')
    H.assert_error(function() return x:masked_fill(x:gt(0), 'a') end,
      'masked_fill: expected a number, a boolean or a 0-dim tensor as the value, got string')
    H.assert_error(function() return x:masked_fill(x:gt(0), ember.ones(2)) end,
      'masked_fill: expected a number, a boolean or a 0-dim tensor as the value, got a 1-d tensor')
  end)
end)
