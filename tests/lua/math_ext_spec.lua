-- The elementwise math and comparisons of ember.ops.math_ext against PyTorch's results
-- (tests/lua/golden/make_math_api.py: float64 on random values and on special values: inf,
-- NaN, signed zeros, arguments outside the domains), float32 against those float64 values,
-- gradients against finite differences (gradcheck), strided and zero-size inputs, dtypes, and
-- the argument errors. Vulkan against the CPU: tests/lua/math_ext_device_spec.lua.
local H = require 'helpers'
local ember = H.ember
local g = H.golden('tests/lua/golden/math_api.safetensors')
local gradcheck = ember.autograd.gradcheck

local unary = { 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'log2',
  'log10', 'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma', 'frac' }

-- lgamma and digamma have roots where only an absolute tolerance can hold.
local function tol64(name) return 1e-12, (name == 'lgamma' or name == 'digamma') and 1e-13 or 0 end

describe('unary math against PyTorch', function()
  it('matches float64 results, special values included', function()
    for _, name in ipairs(unary) do
      for _, input in ipairs({ 'special', 'rnd' }) do
        local x = g(input)
        local rtol, atol = tol64(name)
        H.assert_close(x[name](x), g(name .. '.' .. input):totable(), rtol, atol, name .. '.' .. input)
        H.assert_close(ember[name](x), g(name .. '.' .. input):totable(), rtol, atol, name)
      end
    end
  end)

  it('float32 rounds the float64 result', function()
    for _, name in ipairs(unary) do
      local x = g('special'):float()
      local want = g(name .. '.special')
      -- the float64 function of the float32-rounded inputs
      local ref = x:double()[name](x:double())
      H.assert_close(x[name](x), ref:totable(), 2e-6, 1e-6, name)
      assert.are.equal('float32', x[name](x):dtype())
      local _ = want
    end
  end)

  it('keeps signed zeros, infinities and NaN at the edges of the domains', function()
    local t = ember.tensor({ -0.0, 1, -1, 2, math.huge, -math.huge }, { dtype = 'float64' })
    local r = t:asin():totable()
    assert.are.equal(-math.huge, 1 / r[1])
    assert.is_true(r[4] ~= r[4])
    assert.are.same({ math.huge, -math.huge }, { t:atanh():totable()[2], t:atanh():totable()[3] })
    assert.are.same({ math.huge, -math.huge }, { t:erfinv():totable()[2], t:erfinv():totable()[3] })
    assert.are.equal(-math.huge, ember.tensor({ 0.0 }, { dtype = 'float64' }):digamma():item())
    assert.are.equal(math.huge, ember.tensor({ -0.0 }, { dtype = 'float64' }):digamma():item())
    assert.are.equal(math.huge, ember.tensor({ -3.0 }):lgamma():item())
    assert.are.equal(3, ember.tensor({ 8.0 }):log2():item())
    assert.are.equal(1024, ember.tensor({ 10.0 }):exp2():item())
  end)

  it('computes integer and bool inputs in float32', function()
    local i = ember.tensor({ 0, 1, 2 }, { dtype = 'int64' })
    for _, name in ipairs({ 'asin', 'cosh', 'log2', 'exp2', 'erfc', 'lgamma', 'digamma' }) do
      local r = i[name](i)
      assert.are.equal('float32', r:dtype(), name)
      H.assert_close(r, i:double()[name](i:double()):totable(), 1e-6, 1e-6, name)
    end
    assert.are.equal('float32', ember.tensor({ true, false }):erfinv():dtype())
  end)

  it('works on strided, broadcast and zero-size inputs, and in place', function()
    local base = g('rnd')
    for _, name in ipairs({ 'atan', 'sinh', 'asinh', 'erfc', 'lgamma' }) do
      local v = base:t()
      H.assert_close(v[name](v), base[name](base):t():contiguous():totable(), 0, 0, name)
      local b = base:narrow(1, 2, 1):expand(3, 5)
      H.assert_close(b[name](b), base:narrow(1, 2, 1)[name](base:narrow(1, 2, 1)):expand(3, 5):totable(), 0, 0, name)
      local e = ember.zeros(0, 3)
      assert.are.same({ 0, 3 }, { e[name](e):size(1), e[name](e):size(2) })
      local c = base:clone()
      c[name .. '_'](c)
      H.assert_close(c, base[name](base):totable(), 0, 0, name .. '_')
    end
    assert.are.equal(ember.asin, ember.arcsin)
  end)

  it('has gradients that match finite differences', function()
    local inside = {
      asin = { -0.9, 0.9 }, acos = { -0.9, 0.9 }, atan = { -3, 3 }, sinh = { -3, 3 },
      cosh = { -3, 3 }, asinh = { -3, 3 }, acosh = { 1.2, 4 }, atanh = { -0.9, 0.9 },
      log2 = { 0.2, 5 }, log10 = { 0.2, 5 }, exp2 = { -3, 3 }, erfc = { -2, 2 },
      erfinv = { -0.95, 0.95 }, lgamma = { 0.2, 6 }, frac = { 0.1, 0.9 },
    }
    for name, r in pairs(inside) do
      local x = ember.tensor(H.rand_table({ 3, 4 }, r[1], r[2]), { dtype = 'float64' }):requires_grad_()
      assert.is_true(gradcheck(function(t) return t[name](t) end, { x }), name)
    end
    local n = ember.tensor({ -2.5, -0.3 }, { dtype = 'float64' }):requires_grad_()
    assert.is_true(gradcheck(function(t) return t:lgamma() end, { n }))
    local y = ember.tensor({ 1.5 }):requires_grad_()
    assert.are.equal('AsinhBackward', y:asinh().grad_fn)
  end)

  it("has PyTorch's gradients", function()
    local w = g('grad.w')
    for _, name in ipairs({ 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh',
      'log2', 'log10', 'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma', 'frac', 'logit' }) do
      local x = g('grad.' .. name .. '.x'):clone():requires_grad_()
      ;(x[name](x) * w):sum():backward()
      -- PyTorch's trigamma (digamma's gradient) stops its series early: about 1e-9 relative
      local rtol = name == 'digamma' and 1e-8 or 1e-10
      H.assert_close(x.grad, g('grad.' .. name):totable(), rtol, 1e-12, name)
    end
  end)

  it('runs in float32 under autocast where PyTorch does (its FP32 list)', function()
    local x = ember.tensor({ 0.25, 0.5 }, { dtype = 'bfloat16' })
    ember.autocast({ device = 'cpu' }, function()
      for _, name in ipairs({ 'acos', 'asin', 'cosh', 'sinh', 'erfinv', 'log2', 'log10' }) do
        assert.are.equal('float32', x[name](x):dtype(), name)
      end
      assert.are.equal('bfloat16', x:atan():dtype())
    end)
  end)

  it('differentiates digamma (trigamma) on both sides of 0', function()
    local x = ember.tensor({ -2.7, -0.4, 0.05, 0.7, 3.3, 12.5, 40 }, { dtype = 'float64' }):requires_grad_()
    assert.is_true(gradcheck(function(t) return t:digamma() end, { x }, { rtol = 1e-6 }))
    -- trigamma(1) = pi^2 / 6, trigamma(1/2) = pi^2 / 2
    local y = ember.tensor({ 1, 0.5 }, { dtype = 'float64' }):requires_grad_()
    y:digamma():sum():backward()
    H.assert_close(y.grad, { math.pi ^ 2 / 6, math.pi ^ 2 / 2 }, 1e-12, 0)
  end)
end)

describe('composed math against PyTorch', function()
  local s = g('special')
  local a, b = s:view(-1, 1), s:view(1, -1)

  it('matches logit, nan_to_num and the binary functions on special values', function()
    H.assert_close(ember.logit(s), g('logit.special'):totable(), 1e-12, 0, 'logit')
    H.assert_close(s:logit(0.1), g('logit.eps'):totable(), 1e-12, 0, 'logit eps')
    H.assert_close(s:nan_to_num(), g('nan_to_num.special'):totable(), 0, 0, 'nan_to_num')
    H.assert_close(s:nan_to_num(7, 100, -100), g('nan_to_num.args'):totable(), 0, 0)
    H.assert_close(s:nan_to_num({ nan = 7, posinf = 100, neginf = -100 }),
      g('nan_to_num.args'):totable(), 0, 0)
    for _, name in ipairs({ 'hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin' }) do
      H.assert_close(ember[name](a, b), g(name .. '.pairs'):totable(), 1e-12, 1e-300, name)
    end
    H.assert_close(ember.heaviside(a, b), g('heaviside.pairs'):totable(), 0, 0, 'heaviside')
  end)

  it('takes numbers and keeps float32 with a number operand', function()
    local x = ember.tensor({ -2.0, 0.5 })
    assert.are.equal('float32', x:hypot(2):dtype())
    H.assert_close(x:copysign(-0.0), { -2, -0.5 }, 0, 0)
    H.assert_close(x:copysign(1), { 2, 0.5 }, 0, 0)
    H.assert_close(ember.xlogy(2, ember.tensor({ 1.0, math.exp(1) })), { 0, 2 }, 1e-6, 1e-6)
    H.assert_close(x:logaddexp(0.5), { math.log(math.exp(-2) + math.exp(0.5)), 0.5 + math.log(2) }, 1e-6, 0)
    H.assert_close(x:fmax(0), { 0, 0.5 }, 0, 0)
    local f16 = ember.tensor({ math.huge, -math.huge }, { dtype = 'float16' })
    H.assert_close(f16:nan_to_num(), { 65504, -65504 }, 0, 0)
    H.assert_close(ember.tensor({ 1, 2 }, { dtype = 'int64' }):nan_to_num(), { 1, 2 }, 0, 0)
  end)

  it('has in-place forms', function()
    local x = ember.tensor({ 0.25, 0.5 })
    local want = x:logit()
    assert.are.equal(x, x:logit_())
    H.assert_close(x, want:totable(), 0, 0)
    local y = ember.tensor({ -1.5, 2.25 })
    y:frac_()
    H.assert_close(y, { -0.5, 0.25 }, 0, 0)
    y:copysign_(-1)
    H.assert_close(y, { -0.5, -0.25 }, 0, 0)
    local i = ember.tensor({ 12, 18 }, { dtype = 'int64' })
    i:gcd_(8)
    H.assert_close(i, { 4, 2 }, 0, 0)
  end)

  it('gcd and lcm of integers, and refuses floats', function()
    H.assert_close(ember.gcd(g('gcd.a'):long(), g('gcd.b'):long()), g('gcd'):totable(), 0, 0)
    local la, lb = g('gcd.a'):long():narrow(1, 1, 9), g('gcd.b'):long():narrow(1, 1, 9)
    H.assert_close(la:lcm(lb), g('lcm'):totable(), 0, 0)
    assert.are.equal('int64', la:gcd(lb):dtype())
    H.assert_close(ember.tensor({ 12, 18 }, { dtype = 'int32' }):gcd(8), { 4, 2 }, 0, 0)
    H.assert_error(function() ember.gcd(ember.tensor({ 1.5 }), ember.tensor({ 2.0 })) end,
      'gcd: expected integer tensors, got float32')
  end)

  it("has PyTorch's gradients", function()
    local w = g('grad.w')
    for _, name in ipairs({ 'hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin' }) do
      local a = g('grad.' .. name .. '.a'):clone():requires_grad_()
      local b = g('grad.y'):clone():requires_grad_()
      ;(ember[name](a, b) * w):sum():backward()
      H.assert_close(a.grad, g('grad.' .. name .. '.da'):totable(), 1e-12, 1e-14, name)
      local db = g('grad.' .. name .. '.db')
      H.assert_close(b.grad or ember.zeros_like(db), db:totable(), 1e-12, 1e-14, name .. ' (b)')
    end
  end)

  it('has gradients through the compositions', function()
    local x = ember.tensor(H.rand_table({ 3, 4 }, 0.1, 0.9), { dtype = 'float64' }):requires_grad_()
    local y = ember.tensor(H.rand_table({ 3, 4 }, -2, 2), { dtype = 'float64' }):requires_grad_()
    assert.is_true(gradcheck(function(t) return t:logit() end, { x }))
    assert.is_true(gradcheck(function(t, u) return t:hypot(u) end, { x, y }))
    assert.is_true(gradcheck(function(t, u) return t:logaddexp(u) end, { x, y }))
    assert.is_true(gradcheck(function(t, u) return ember.xlogy(u, t) end, { x, y }))
    assert.is_true(gradcheck(function(t, u) return t:copysign(u) end, { x, y }))
    assert.is_true(gradcheck(function(t, u) return t:fmax(u) end, { x, y }))
    -- xlogy's gradient for x is 0 at x = 0 (PyTorch's xlogy(x ~= 0, y)); nan_to_num passes
    -- finite elements only
    local z = ember.tensor({ 0.0, 2.0 }, { dtype = 'float64' }):requires_grad_()
    ember.xlogy(z, ember.tensor({ 0.5, 0.5 }, { dtype = 'float64' })):sum():backward()
    H.assert_close(z.grad, { 0, math.log(0.5) }, 1e-12, 0)
    local w = ember.tensor({ 1.0, math.huge, 0 / 0 }, { dtype = 'float64' }):requires_grad_()
    w:nan_to_num():sum():backward()
    H.assert_close(w.grad, { 1, 0, 0 }, 0, 0)
  end)

  it("names the function called in errors its ops raise, at the caller's line", function()
    local ok, err = pcall(function() return ember.hypot(ember.zeros(2, 3), ember.zeros(4)) end)
    assert.is_false(ok)
    assert.truthy(err:find('math_ext_spec.lua:%d+: hypot: shapes %[2,3%] and %[4%] cannot broadcast'), err)
    H.assert_error(function() ember.xlogy(ember.zeros(2), ember.zeros(3)) end, 'xlogy: shapes')
  end)

  it('checks its arguments', function()
    H.assert_error(function() ember.tensor({ 1.0 }):logit('x') end, 'logit: expected eps to be a number')
    H.assert_error(function() ember.tensor({ 1, 2 }, { dtype = 'int64' }):frac() end,
      'frac: expected a floating-point tensor, got int64')
    H.assert_error(function() ember.tensor({ 1.0 }):nan_to_num({ nann = 1 }) end,
      'nan_to_num: unknown option nann')
  end)
end)

describe('comparisons against PyTorch', function()
  local s = g('special')
  local a, b = s:view(-1, 1), s:view(1, -1)

  it('isclose with and without equal_nan', function()
    H.assert_close(ember.isclose(a, b):double(), g('isclose.pairs'):totable(), 0, 0)
    H.assert_close(a:isclose(b, 0.1, 0.01, true):double(), g('isclose.nan'):totable(), 0, 0)
    H.assert_close(a:isclose(b, { rtol = 0.1, atol = 0.01, equal_nan = true }):double(),
      g('isclose.nan'):totable(), 0, 0)
    local i = ember.tensor({ 1, 2, 3 }, { dtype = 'int64' })
    H.assert_close(i:isclose(ember.tensor({ 1, 3, 3 }, { dtype = 'int64' })), { true, false, true })
    H.assert_error(function() a:isclose(b, -1) end, 'isclose: expected non-negative rtol')
    H.assert_error(function() a:isclose(b, { rtoll = 1 }) end, 'isclose: unknown option rtoll')
  end)

  it('allclose and equal give Lua booleans', function()
    local x = g('rnd')
    assert.is_true(ember.allclose(x, x + 1e-9))
    assert.is_false(x:allclose(x + 1e-3))
    assert.is_true(x:allclose(x + 1e-3, 1e-2, 1e-2))
    assert.is_true(ember.equal(x, x:clone()))
    assert.is_false(ember.equal(x, x:t()))
    assert.is_false(ember.equal(x, x:narrow(1, 1, 2)))
    local n = ember.tensor({ 0 / 0 })
    assert.is_false(ember.equal(n, n))
    assert.is_true(ember.equal(ember.zeros(0, 2), ember.zeros(0, 2)))
  end)

  it('isin', function()
    H.assert_close(ember.isin(g('isin.el'), g('isin.te')):double(), g('isin'):totable(), 0, 0)
    H.assert_close(ember.isin(g('isin.el'), g('isin.te'), { invert = true }):double(),
      g('isin'):eq(0):double():totable(), 0, 0)
    H.assert_close(ember.isin(g('isin.el'), ember.zeros(0)), H.nested({ 3, 3 }, function() return false end))
    H.assert_close(ember.isin(ember.tensor({ 1, 5, 7 }, { dtype = 'int64' }), 5), { false, true, false })
  end)
end)
