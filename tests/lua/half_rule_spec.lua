-- float16 / bfloat16 follow Ember's rule "compute in float32, round once" in their gradients
-- too: each result is compared with the float64 computation on the same (16-bit) inputs,
-- rounded once to the 16-bit type, and must be within 1 ulp of it. (Rounding intermediates,
-- such as the 16-bit output y in tanh's 1 - y^2, was off by up to hundreds of ulps.)
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = ember.nn.functional

-- The distance from got to want in units of want's spacing in dt (1 ulp = one step).
local function ulps(got, want, dt)
  if got == want then return 0 end
  local mant = dt == 'float16' and 10 or 7
  local _, e = math.frexp(want)
  local sp = 2 ^ (e - 1 - mant)
  if dt == 'float16' then sp = math.max(sp, 2 ^ -24) end
  if want == 0 then sp = dt == 'float16' and 2 ^ -24 or 2 ^ -133 end
  return math.abs(got - want) / sp
end

local function assert_within_1ulp(got, want64, dt, what)
  local want = want64:to(dt):double():reshape(-1)
  local g = got:double():reshape(-1)
  for i = 1, want:numel() do
    local u = ulps(g[i], want[i], dt)
    if u > 1 then
      error(('%s %s: element %d is %.9g, float64 rounded once gives %.9g (%.1f ulp)')
        :format(what, dt, i, g[i], want[i], u), 2)
    end
  end
end

local function table_of(shape, lo, hi)
  return H.nested(shape, function() return H.uniform(lo, hi) end)
end

-- f's gradients for inputs in dt against f's float64 gradients of the same rounded inputs
-- (gy, the upstream gradient, also rounded to dt first).
local function check_grads(what, dt, f, tables)
  local hs, ds = {}, {}
  for i, t in ipairs(tables) do
    local h = ember.tensor(t, { dtype = dt })
    ds[i] = h:double():requires_grad_() -- (before h requires grad: a separate leaf)
    hs[i] = h:requires_grad_()
  end
  local yh, yd = f(unpack(hs)), f(unpack(ds))
  H.seed(11)
  local gy = ember.tensor(table_of(yh:size(), -1, 1), { dtype = dt })
  if yh:dim() == 0 then gy = ember.tensor(H.uniform(-1, 1), { dtype = dt }) end
  yh:backward(gy)
  yd:backward(gy:double())
  for i = 1, #tables do
    if ds[i].grad then assert_within_1ulp(hs[i].grad, ds[i].grad, dt, what .. ' input ' .. i) end
  end
end

for _, dt in ipairs({ 'float16', 'bfloat16' }) do
  describe(dt .. ' gradients round once', function()
    before_each(function() H.seed(5) end)

    it('tanh and sigmoid', function()
      check_grads('tanh', dt, function(x) return x:tanh() end, { table_of({ 64 }, -4, 4) })
      check_grads('sigmoid', dt, function(x) return x:sigmoid() end, { table_of({ 64 }, -6, 6) })
    end)

    it('softmax, log_softmax and cross_entropy', function()
      check_grads('softmax', dt, function(x) return x:softmax(2) end, { table_of({ 6, 17 }, -3, 3) })
      check_grads('log_softmax', dt, function(x) return x:log_softmax(2) end, { table_of({ 6, 17 }, -3, 3) })
      local t = ember.tensor({ 1, 4, 2, 7, 3, 5 }, { dtype = 'int64' })
      check_grads('cross_entropy', dt, function(x) return F.cross_entropy(x, t, { reduction = 'none' }) end,
        { table_of({ 6, 7 }, -4, 4) })
      check_grads('cross_entropy smoothed', dt,
        function(x) return F.cross_entropy(x, t, { label_smoothing = 0.1 }) end, { table_of({ 6, 7 }, -4, 4) })
    end)

    it('broadcast div (the divisor sums its terms before rounding)', function()
      check_grads('div', dt, function(a, b) return a / b end,
        { table_of({ 16, 9 }, -2, 2), table_of({ 1, 9 }, 0.5, 2) })
    end)

    it('prod has no overflow in intermediates', function()
      -- the product of 12 values near 3 is 5e5, past float16's largest 65504; the gradient
      -- (the product of the others) is too, but every one of them is finite in float32
      check_grads('prod', dt, function(a) return a:prod(2) end, { table_of({ 3, 12 }, 0.4, 0.9) })
      check_grads('prod of 40', dt, function(a) return a:prod(2) end, { table_of({ 4, 40 }, 0.6, 1.5) })
      local x = ember.tensor({ { 1e-3, 2e-3, 4e3, 8e2 } }, { dtype = dt }):requires_grad_()
      local l = x:prod(2):sum()
      l:backward()
      local xd = x:detach():double():requires_grad_() -- a separate leaf
      local ld = xd:prod(2):sum()
      ld:backward()
      assert_within_1ulp(x.grad, xd.grad, dt, 'prod of large and small')
    end)
  end)
end

describe('bfloat16 softplus(beta, threshold)', function()
  it('does not round beta * x first', function()
    local xs = {}
    for i = 1, 40 do xs[i] = -3 + i * 0.0731 end
    local x = ember.tensor(xs, { dtype = 'bfloat16' })
    local want = x:double():softplus(3, 10)
    assert_within_1ulp(x:softplus(3, 10), want, 'bfloat16', 'softplus')
  end)
end)
