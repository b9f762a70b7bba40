-- creation_spec: the functions that make tensors (tensor, zeros, ones, full, empty, arange,
-- linspace, eye and the _like forms), against plain-Lua references, with every error case.
local H = require 'tests.lua.helpers'
local ember = H.ember

local DTYPES = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
  'int64', 'bool' }

local function sizes(x)
  local s = {}
  for d = 1, x:dim() do s[d] = x:size(d) end
  return s
end

local function const(shape, v) return H.nested(shape, function() return v end) end

describe('tensor', function()
  it('builds nested tables of any depth, row-major', function()
    local x = ember.tensor({ { { 1, 2 }, { 3, 4 } }, { { 5, 6 }, { 7, 8 } }, { { 9, 10 }, { 11, 12 } } })
    assert.are.same({ 3, 2, 2 }, sizes(x))
    assert.are.equal('float32', x:dtype())
    H.assert_close(x, H.nested({ 3, 2, 2 }, function(i) return i end))
    H.assert_close(ember.tensor({ 1.5, -2.25 }), { 1.5, -2.25 })
    local deep = ember.tensor({ { { { { { { { 42 } } } } } } } })
    assert.are.equal(8, deep:dim())
    assert.are.equal(42, deep:item())
  end)

  it('makes scalars from numbers and booleans', function()
    local s = ember.tensor(3.25)
    assert.are.equal(0, s:dim())
    assert.are.equal(3.25, s:item())
    assert.are.equal('float32', s:dtype())
    local b = ember.tensor(true)
    assert.are.equal('bool', b:dtype())
    assert.are.equal(true, b:item())
    assert.are.equal(7, ember.tensor(7, { dtype = 'int64' }):item())
  end)

  it('infers bool from booleans, and a number among them makes it numeric', function()
    local b = ember.tensor({ { true, false }, { false, true } })
    assert.are.equal('bool', b:dtype())
    assert.are.same({ { true, false }, { false, true } }, b:totable())
    local mixed = ember.tensor({ true, 2, false })
    assert.are.equal('float32', mixed:dtype())
    H.assert_close(mixed, { 1, 2, 0 })
  end)

  it('casts to the dtype option, for every dtype', function()
    local vals = { 0, 1, 2, 100 }
    for _, dt in ipairs(DTYPES) do
      local x = ember.tensor(vals, { dtype = dt })
      assert.are.equal(dt, x:dtype())
      if dt == 'bool' then
        assert.are.same({ false, true, true, true }, x:totable())
      else
        H.assert_close(x, vals, 0, 0, dt)
      end
    end
    H.assert_close(ember.tensor({ 2.7, -2.7 }, { dtype = 'int32' }), { 2, -2 }, 0, 0)
    assert.are.equal('float64', ember.tensor({ 1 }, { dtype = 'double' }):dtype()) -- aliases
    assert.are.equal('int64', ember.tensor({ 1 }, { dtype = 'long' }):dtype())
    assert.are.equal('cpu', ember.tensor({ 1 }, { device = 'cpu' }):device())
  end)

  it('makes empty tensors from empty tables', function()
    assert.are.same({ 0 }, sizes(ember.tensor({})))
    assert.are.same({ 1, 0 }, sizes(ember.tensor({ {} })))
    assert.are.same({ 2, 0 }, sizes(ember.tensor({ {}, {} })))
  end)

  it('reports ragged tables, bad values and bad options', function()
    H.assert_error(function() ember.tensor({ { 1, 2 }, { 3 } }) end,
      'tensor: ragged nested table: expected 2 elements at data[2], got 1')
    H.assert_error(function() ember.tensor({ { 1, 2 }, 3 }) end,
      'tensor: ragged nested table: expected a table at data[2], got number')
    H.assert_error(function() ember.tensor({ { { 1 } }, { { 1, 2 } } }) end, 'ragged nested table')
    H.assert_error(function() ember.tensor({ 1, 'a' }) end, 'tensor: expected a number at data[2], got string')
    H.assert_error(function() ember.tensor('abc') end, 'tensor: expected a number or a nested table of numbers, got string')
    H.assert_error(function() ember.tensor({ 1 }, 'int8') end, 'tensor: expected an options table, got string')
    H.assert_error(function() ember.tensor({ 1 }, { dtype = 'float8' }) end, "unknown dtype 'float8'")
    H.assert_error(function() ember.tensor({ 1 }, { device = 'tpu' }) end, "unknown device 'tpu'")
    H.assert_error(function() ember.tensor({ { { { { { { { { 1 } } } } } } } } }) end,
      'tensor: expected at most 8 dimensions, got 9')
  end)
end)

describe('zeros, ones, full and empty', function()
  it('take sizes as numbers, a table or a Size, and an options table', function()
    for _, f in ipairs({ { 'zeros', 0 }, { 'ones', 1 } }) do
      local name, v = f[1], f[2]
      local a = ember[name](2, 3)
      local b = ember[name]({ 2, 3 })
      local c = ember[name](a:size())
      for _, x in ipairs({ a, b, c }) do
        assert.are.same({ 2, 3 }, sizes(x))
        assert.are.equal('float32', x:dtype())
        H.assert_close(x, const({ 2, 3 }, v), 0, 0, name)
      end
      for _, dt in ipairs(DTYPES) do
        local x = ember[name](3, { dtype = dt })
        assert.are.equal(dt, x:dtype())
        if dt == 'bool' then assert.are.same({ v ~= 0, v ~= 0, v ~= 0 }, x:totable())
        else H.assert_close(x, { v, v, v }, 0, 0, name .. ' ' .. dt) end
      end
    end
  end)

  it('full fills a value, cast to the dtype', function()
    H.assert_close(ember.full({ 2, 2 }, 7), const({ 2, 2 }, 7))
    H.assert_close(ember.full(3, -1.5, { dtype = 'float64' }), { -1.5, -1.5, -1.5 })
    H.assert_close(ember.full({ 2 }, 2.9, { dtype = 'int32' }), { 2, 2 }, 0, 0)
    local b = ember.full({ 2 }, true)
    assert.are.equal('bool', b:dtype())
    assert.are.same({ true, true }, b:totable())
    H.assert_close(ember.full({ 2 }, true, { dtype = 'int8' }), { 1, 1 }, 0, 0)
    H.assert_close(ember.full({ 2 }, 0 / 0), { 0 / 0, 0 / 0 })
    H.assert_error(function() ember.full({ 2 }, 'x') end, 'full: expected a fill value, got string')
    H.assert_error(function() ember.full({ -2 }, 1) end, 'full: expected sizes >= 0, got [-2]')
  end)

  it('empty allocates the shape and dtype', function()
    local e = ember.empty(4, 5, { dtype = 'int16' })
    assert.are.same({ 4, 5 }, sizes(e))
    assert.are.equal('int16', e:dtype())
    assert.is_true(e:is_contiguous())
    e:fill_(3)
    H.assert_close(e, const({ 4, 5 }, 3), 0, 0)
  end)

  it('make rank-0 and zero-size tensors', function()
    local s = ember.zeros()
    assert.are.equal(0, s:dim())
    assert.are.equal(0, s:item())
    assert.are.equal(1, ember.ones({}):item())
    for _, shape in ipairs({ { 0 }, { 0, 3 }, { 3, 0 }, { 2, 0, 4 } }) do
      local z = ember.zeros(shape)
      assert.are.same(shape, sizes(z))
      assert.are.equal(0, z:numel())
      assert.are.equal(0, ember.full(shape, 5):numel())
      assert.are.equal(0, ember.empty(shape):numel())
    end
    local big = ember.ones(1, 2, 1, 2, 1, 2, 1, 2)
    assert.are.equal(8, big:dim())
    assert.are.equal(16, big:numel())
  end)

  it('reject negative sizes, too many dims, bad dtypes and bad options', function()
    H.assert_error(function() ember.zeros(-1) end, 'zeros: expected sizes >= 0, got [-1]')
    H.assert_error(function() ember.ones(2, -3) end, 'ones: expected sizes >= 0, got [2,-3]')
    H.assert_error(function() ember.empty(-1) end, 'empty: expected sizes >= 0, got [-1]')
    H.assert_error(function() ember.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, 'zeros: expected at most 8 dimensions')
    H.assert_error(function() ember.zeros({ 1, 1, 1, 1, 1, 1, 1, 1, 1 }) end,
      'zeros: expected at most 8 dimensions, got 9')
    H.assert_error(function() ember.zeros({ 'a' }) end, 'zeros: expected sizes as numbers, got string')
    H.assert_error(function() ember.zeros(2, { dtype = 'float128' }) end,
      "dtype: unknown dtype 'float128' (expected float32, float64, float16, bfloat16, int8, uint8, int16, int32, int64, bool, or a block dtype: q8_0, q4_0, q4_1, q4_k, q6_k, int8_g32 ... int4_g128_sym)")
    H.assert_error(function() ember.zeros(2, { dtype = {} }) end,
      "zeros: expected a dtype name such as 'float32', got table")
    H.assert_error(function() ember.zeros(2, 'float32') end,
      'zeros: expected an options table {dtype=..., device=...}, got string')
    H.assert_error(function() ember.ones(2, { device = 'gpu9' }) end, "unknown device 'gpu9'")
    H.assert_error(function() ember.zeros(2 ^ 40, 2 ^ 40) end, 'zeros: shape is too large')
  end)
end)

describe('arange', function()
  it('excludes the end, as in PyTorch', function()
    H.assert_close(ember.arange(5), { 0, 1, 2, 3, 4 })
    H.assert_close(ember.arange(2, 6), { 2, 3, 4, 5 })
    H.assert_close(ember.arange(0, 10, 3), { 0, 3, 6, 9 })
    H.assert_close(ember.arange(1.5, 4), { 1.5, 2.5, 3.5 })
    assert.are.equal(0, ember.arange(3, 3):numel())
    assert.are.equal(0, ember.arange(0):numel())
    assert.are.equal('int64', ember.arange(3):dtype())
    assert.are.equal('float32', ember.arange(3.5):dtype())
  end)

  it('counts down with a negative step', function()
    H.assert_close(ember.arange(5, 1, -1), { 5, 4, 3, 2 })
    H.assert_close(ember.arange(10, 0, -3), { 10, 7, 4, 1 })
    H.assert_close(ember.arange(1, -1, -0.5), { 1, 0.5, 0, -0.5 })
  end)

  it('takes float steps: element i is start + i * step', function()
    local x = ember.arange(0, 1, 0.1, { dtype = 'float64' })
    assert.are.equal(10, x:numel())
    local v = x:totable()
    for i = 1, 10 do assert.are.equal((i - 1) * 0.1, v[i]) end
    assert.are.equal(3, ember.arange(0, 0.3, 0.1):numel()) -- ceil((end - start) / step)
    assert.are.equal(4, ember.arange(-1, 1, 0.5):numel())
    H.assert_close(ember.arange(0, 1, 0.25), { 0, 0.25, 0.5, 0.75 }, 0, 0)
  end)

  it('makes any dtype from an options table in any position', function()
    local i = ember.arange(5, { dtype = 'int64' })
    assert.are.equal('int64', i:dtype())
    H.assert_close(i, { 0, 1, 2, 3, 4 }, 0, 0)
    H.assert_close(ember.arange(1, 4, { dtype = 'int8' }), { 1, 2, 3 }, 0, 0)
    H.assert_close(ember.arange(0, 6, 2, { dtype = 'int16' }), { 0, 2, 4 }, 0, 0)
    H.assert_error(function() ember.arange(0, 2, 0.5, { dtype = 'int32' }) end,
      'arange: the step 0.5 truncates to 0 for int32')
    H.assert_close(ember.arange(3, { dtype = 'float16' }), { 0, 1, 2 }, 0, 0)
  end)

  it('rejects a zero step, a step away from the end, and non-numbers', function()
    H.assert_error(function() ember.arange(0, 1, 0) end,
      'arange: expected finite start, end and a nonzero step, got 0, 1, 0')
    H.assert_error(function() ember.arange(0, 1, -1) end, 'arange: the step -1 goes away from end 1 (start 0)')
    H.assert_error(function() ember.arange(5, 1) end, 'arange: the step 1 goes away from end 1 (start 5)')
    H.assert_error(function() ember.arange(0, 1 / 0) end, 'arange: expected finite start, end')
    H.assert_error(function() ember.arange('a') end, 'arange: expected numbers for start, end and step')
    H.assert_error(function() ember.arange(0, 1e300, 1e-300) end, 'arange: ')
    H.assert_error(function() ember.arange(3, { dtype = 'nope' }) end, "unknown dtype 'nope'")
  end)
end)

describe('linspace', function()
  it('includes both ends exactly', function()
    local x = ember.linspace(0.1, 0.7, 7, { dtype = 'float64' })
    local v = x:totable()
    assert.are.equal(7, #v)
    assert.are.equal(0.1, v[1])
    assert.are.equal(0.7, v[7])
    for i = 1, 7 do assert.is_true(math.abs(v[i] - (0.1 + (i - 1) * 0.1)) < 1e-15) end
    H.assert_close(ember.linspace(0, 1, 5), { 0, 0.25, 0.5, 0.75, 1 }, 0, 0)
    H.assert_close(ember.linspace(1, 0, 3), { 1, 0.5, 0 }, 0, 0)
    local f = ember.linspace(-3, 11, 13):totable()
    assert.are.equal(-3, f[1])
    assert.are.equal(11, f[13])
  end)

  it('gives start for one step and nothing for zero', function()
    H.assert_close(ember.linspace(2, 5, 1), { 2 })
    assert.are.equal(0, ember.linspace(0, 1, 0):numel())
    assert.are.equal(100, ember.linspace(0, 1):numel())
    assert.are.equal(100, ember.linspace(0, 1, { dtype = 'float64' }):numel())
  end)

  it('casts to integer dtypes and rejects bad step counts', function()
    local x = ember.linspace(0, 10, 5, { dtype = 'int64' })
    assert.are.equal('int64', x:dtype())
    H.assert_close(x, { 0, 2, 5, 7, 10 }, 0, 0)
    H.assert_error(function() ember.linspace(0, 1, -1) end, 'linspace: expected steps >= 0, got -1')
    H.assert_error(function() ember.linspace(0, 1, 2.5) end, 'linspace: expected an integer number of steps, got 2.5')
    H.assert_error(function() ember.linspace('a', 1, 3) end, 'linspace: expected numbers for start and end')
  end)
end)

describe('eye', function()
  it('puts ones on the diagonal of n x n and n x m matrices', function()
    local function ref(n, m)
      local t = {}
      for i = 1, n do
        t[i] = {}
        for j = 1, m do t[i][j] = i == j and 1 or 0 end
      end
      return t
    end
    H.assert_close(ember.eye(3), ref(3, 3), 0, 0)
    H.assert_close(ember.eye(2, 4), ref(2, 4), 0, 0)
    H.assert_close(ember.eye(4, 2), ref(4, 2), 0, 0)
    local i = ember.eye(3, { dtype = 'int32' })
    assert.are.equal('int32', i:dtype())
    H.assert_close(i, ref(3, 3), 0, 0)
    assert.are.same({ { true, false }, { false, true } }, ember.eye(2, 2, { dtype = 'bool' }):totable())
    assert.are.same({ 0, 0 }, sizes(ember.eye(0)))
    assert.are.same({ 3, 0 }, sizes(ember.eye(3, 0)))
    assert.is_true(ember.eye(3):is_contiguous())
  end)

  it('rejects negative and fractional sizes', function()
    H.assert_error(function() ember.eye(-1) end, 'eye: expected n >= 0, got -1')
    H.assert_error(function() ember.eye(2, -3) end, 'eye: expected m >= 0, got -3')
    H.assert_error(function() ember.eye(2.5) end, 'eye: expected an integer n, got 2.5')
  end)
end)

describe('_like forms', function()
  it('copy shape, dtype and device unless the options say otherwise', function()
    local x = ember.zeros(2, 3, { dtype = 'int8' }):t()
    local checks = {
      { ember.zeros_like(x), 0 }, { ember.ones_like(x), 1 }, { ember.full_like(x, 4), 4 },
    }
    for _, c in ipairs(checks) do
      assert.are.same({ 3, 2 }, sizes(c[1]))
      assert.are.equal('int8', c[1]:dtype())
      assert.are.equal('cpu', c[1]:device())
      assert.is_true(c[1]:is_contiguous())
      H.assert_close(c[1], const({ 3, 2 }, c[2]), 0, 0)
    end
    assert.are.same({ 3, 2 }, sizes(ember.empty_like(x)))
    assert.are.equal('float64', ember.ones_like(x, { dtype = 'float64' }):dtype())
    assert.are.equal('bool', ember.full_like(x, true, { dtype = 'bool' }):dtype())
    assert.are.same({ 0, 4 }, sizes(ember.zeros_like(ember.zeros(0, 4))))
    assert.are.equal(0, ember.zeros_like(ember.tensor(5)):dim())
  end)
end)
