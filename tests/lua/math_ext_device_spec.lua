-- The math API on Vulkan against the CPU: the special unary ops (kernels/special.comp, float32,
-- float16 and float64 where the device has it) on special values, random values and strided
-- views, with their gradients; and the compositions (math_ext, reduce_ext, search), which must
-- run on the device from existing kernels and give the CPU's results there.
-- tests/lua/device_spec.lua's pattern: the device is lavapipe when present.
local VK = require('vk_helpers').open('vulkan math API')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local on, agree = VK.on, VK.agree

local unary = { 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'log2',
  'log10', 'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma' }

local inf = math.huge
local special = { -inf, -30, -10, -2.5, -1, -0.75, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.25, 0.5, 0.9,
  0.999, 1, 1.001, 1.4616, 1.5, 1.999, 2, 2.001, 2.5, 3.7, 7.999, 8, 10, 30, 100, inf, 0 / 0 }

-- float32 results from float-only arithmetic (the CPU's libm is correctly rounded): lgamma and
-- digamma near their roots hold only absolutely; erfc's tail and erfinv near 1 to ~1e-6.
local tol32 = { 3e-6, 2e-6 }
-- (per-op exceptions to tol32: none)
local tol = {}
local tol64 = { 2e-13, 1e-14 }

describe('vulkan special functions', function()
  it('match the CPU on special and random values in float32', function()
    local xs = ember.cat({ ember.tensor(special), ember.tensor(H.rand_table({ 200 }, -6, 6)) })
    for _, name in ipairs(unary) do
      local want = xs[name](xs)
      agree(on(xs)[name](on(xs)), want, name, tol[name] or tol32)
    end
  end)

  it("keep lgamma's relative accuracy near its roots 1 and 2", function()
    local near = ember.tensor({ 0.999, 1.0001, 1.001, 1.3, 1.6, 1.999, 2.0001, 2.01, 3.1, 7.5 })
    agree(on(near):lgamma(), near:lgamma(), 'lgamma near roots', { 2e-6, 0 })
    if VK.has_f64 then
      local d = near:double()
      agree(on(d):lgamma(), d:lgamma(), 'float64 lgamma near roots', { 1e-13, 0 })
    end
  end)

  it('match the CPU in float64', function()
    if not VK.has_f64 then return pending('no shaderFloat64') end
    local xs = ember.cat({ ember.tensor(special, { dtype = 'float64' }),
      ember.tensor(H.rand_table({ 200 }, -6, 6), { dtype = 'float64' }),
      ember.tensor(H.rand_table({ 50 }, -1, 1), { dtype = 'float64' }) })
    for _, name in ipairs(unary) do
      agree(on(xs)[name](on(xs)), xs[name](xs), name, tol64)
    end
  end)

  it('read float16 and strided inputs, and run in place', function()
    local base = ember.tensor(H.rand_table({ 6, 7 }, 0.1, 0.9))
    for _, name in ipairs({ 'asin', 'erfinv', 'lgamma' }) do
      local h = base:half()
      agree(on(h)[name](on(h)), h:float()[name](h:float()):half(), name .. ' float16', { 1e-3, 1e-3 })
      agree(on(base):t()[name](on(base):t()), base:t()[name](base:t()), name .. ' transposed',
        tol[name] or tol32)
      local c = on(base):clone()
      c[name .. '_'](c)
      agree(c, base[name](base), name .. '_', tol[name] or tol32)
    end
    local i = ember.tensor({ 0, 1, 2 }, { dtype = 'int32' })
    agree(on(i):exp2(), i:exp2(), 'int32 exp2', tol32)
  end)

  it('have the CPU gradients', function()
    local x = ember.tensor(H.rand_table({ 3, 4 }, 0.2, 0.8))
    for _, name in ipairs({ 'asin', 'acosh', 'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma' }) do
      local a = (name == 'acosh' and x + 1 or x):clone():requires_grad_()
      local b = on(a:detach()):requires_grad_()
      a[name](a):sum():backward()
      b[name](b):sum():backward()
      agree(b.grad, a.grad, name .. ' grad', tol32)
    end
  end)
end)

describe('vulkan compositions', function()
  local x = ember.tensor(H.rand_table({ 5, 6 }, -2, 2))
  local y = ember.tensor(H.rand_table({ 5, 6 }, -2, 2))
  local vx, vy = on(x), on(y)

  it('elementwise math and comparisons stay on the device', function()
    local p = ember.tensor(H.rand_table({ 5, 6 }, 0.05, 0.95))
    agree(on(p):logit(), p:logit(), 'logit', tol32)
    agree(vx:frac(), x:frac(), 'frac')
    agree(vx:hypot(vy), x:hypot(y), 'hypot', tol32)
    agree(vx:copysign(vy), x:copysign(y), 'copysign')
    agree(vx:logaddexp(vy), x:logaddexp(y), 'logaddexp', tol32)
    agree(ember.xlogy(vx, on(p)), ember.xlogy(x, p), 'xlogy', tol32)
    local n = ember.tensor({ 0 / 0, 1, inf, -inf, 2 })
    agree(on(n):fmax(on(n):flip(1)), n:fmax(n:flip(1)), 'fmax')
    agree(on(n):nan_to_num(), n:nan_to_num(), 'nan_to_num')
    agree(on(n):heaviside(on(ember.tensor({ 0.5 }))), n:heaviside(ember.tensor({ 0.5 })), 'heaviside')
    local a = ember.tensor({ 12, 18, -7, 0, 1071 }, { dtype = 'int64' })
    local b = ember.tensor({ 8, 27, 21, 5, 462 }, { dtype = 'int64' })
    agree(on(a):gcd(on(b)), a:gcd(b), 'gcd')
    agree(on(a):lcm(on(b)), a:lcm(b), 'lcm')
    agree(vx:isclose(vx + 1e-6), x:isclose(x + 1e-6), 'isclose')
    assert.is_true(ember.allclose(vx, vx))
    assert.is_true(ember.equal(vx, vx:clone()))
    agree(ember.isin(vx:round(), on(ember.tensor({ 0.0, 1.0, 0 / 0 }))),
      ember.isin(x:round(), ember.tensor({ 0.0, 1.0, 0 / 0 })), 'isin')
  end)

  it('order statistics, paired reductions and scans', function()
    local function pair(name, a, b)
      agree(a, b, name, tol32)
    end
    local v, i = vx:median(2)
    local cv, ci = x:median(2)
    pair('median', v, cv)
    pair('median indices', i, ci)
    v, i = vx:kthvalue(2, 1)
    cv, ci = x:kthvalue(2, 1)
    pair('kthvalue', v, cv)
    pair('kthvalue indices', i, ci)
    local r = x:round()
    v, i = on(r):mode(2)
    cv, ci = r:mode(2)
    pair('mode', v, cv)
    pair('mode indices', i, ci)
    local q = ember.tensor({ 0.1, 0.5, 0.9 })
    pair('quantile', vx:quantile(on(q), 2), x:quantile(q, 2))
    pair('var_mean', select(1, vx:var_mean(1)), select(1, x:var_mean(1)))
    pair('aminmax', select(2, vx:aminmax()), select(2, x:aminmax()))
    for _, name in ipairs({ 'cummax', 'cummin' }) do
      v, i = vx[name](vx, 2)
      cv, ci = x[name](x, 2)
      pair(name, v, cv)
      pair(name .. ' indices', i, ci)
    end
    pair('logcumsumexp', vx:logcumsumexp(1), x:logcumsumexp(1))
    pair('diff', vx:diff(2, 1), x:diff(2, 1))
    local g = vx:clone():requires_grad_()
    local cg = x:clone():requires_grad_()
    ;(g:cummax(2) + g:median(1, true) + g:logcumsumexp(2)):sum():backward()
    ;(cg:cummax(2) + cg:median(1, true) + cg:logcumsumexp(2)):sum():backward()
    pair('scan gradients', g.grad, cg.grad)
  end)

  it('searching and counting', function()
    local seq = ember.tensor({ -1.0, 0.0, 0.5, 2.0 })
    local vals = ember.cat({ x:reshape(-1), seq, ember.tensor({ -inf, inf, 0 / 0 }) })
    agree(on(seq):searchsorted(on(vals)), seq:searchsorted(vals), 'searchsorted')
    agree(on(vals):bucketize(on(seq), { right = true }), vals:bucketize(seq, { right = true }), 'bucketize')
    local ints = ember.tensor({ 3, 0, 1, 3, 3, 7 }, { dtype = 'int64' })
    agree(on(ints):bincount(), ints:bincount(), 'bincount')
    local w = ember.tensor(H.rand_table({ 6 }, 0, 1))
    agree(on(ints):bincount(on(w)), ints:bincount(w), 'bincount weights', tol32)
    agree(vx:histc(6, -2, 2), x:histc(6, -2, 2), 'histc')
    local u = ember.tensor({ 1.0, 1.0, 2.0, 2.0, 3.0, 1.0 })
    local a1, a2, a3 = on(u):unique_consecutive({ return_inverse = true, return_counts = true })
    local b1, b2, b3 = u:unique_consecutive({ return_inverse = true, return_counts = true })
    agree(a1, b1, 'unique_consecutive')
    agree(a2, b2, 'unique_consecutive inverse')
    agree(a3, b3, 'unique_consecutive counts')
    local m = ember.tensor({ { 1, 1, 2 }, { 3, 3, 1 } }, { dtype = 'int64' })
    agree(on(m):unique_consecutive({ dim = 2 }), m:unique_consecutive({ dim = 2 }), 'unique_consecutive dim')
  end)
end)
