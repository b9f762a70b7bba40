-- Autograd: the tape, the engine, and every differentiable op checked against central finite
-- differences in float64 (ember.autograd.gradcheck).
local H = require 'tests.lua.helpers'
local ember = H.ember
local gradcheck = ember.autograd.gradcheck

local function leaf(t) return ember.tensor(t, { dtype = 'float64' }):requires_grad_() end
local function rand64(...)
  H.seed(select('#', ...) * 7 + 3)
  local shape = { ... }
  return leaf(H.rand_table(shape, -1, 1))
end

describe('autograd basics', function()
  it('accumulates gradients into leaves', function()
    local x = leaf({ 1, 2, 3 })
    local y = (x * x):sum()
    y:backward()
    H.assert_close(x.grad, { 2, 4, 6 })
    local y2 = (x * 3):sum()
    y2:backward()
    H.assert_close(x.grad, { 5, 7, 9 })
    x.grad = nil
    assert.is_nil(x.grad)
  end)

  it('tracks requires_grad, is_leaf and grad_fn', function()
    local x = leaf({ 1, 2 })
    local c = ember.tensor({ 3, 4 }, { dtype = 'float64' })
    local y = x * c
    assert.is_true(x.requires_grad)
    assert.is_true(x.is_leaf)
    assert.is_false(c.requires_grad)
    assert.is_true(y.requires_grad)
    assert.is_false(y.is_leaf)
    assert.are.equal('MulBackward', y.grad_fn)
    assert.is_nil(x.grad_fn)
    assert.is_false((c * 2).requires_grad)
  end)

  it('takes an explicit gradient for non-scalar outputs', function()
    local x = leaf({ 1, 2, 3 })
    local y = x * 2
    H.assert_error(function() y:backward() end, 'grad can be created implicitly only for outputs with one element')
    y:backward(ember.tensor({ 1, 10, 100 }, { dtype = 'float64' }))
    H.assert_close(x.grad, { 2, 20, 200 })
  end)

  it('frees the graph after backward unless retain_graph', function()
    local x = leaf({ 1, 2 })
    local y = (x * x):sum()
    y:backward({ retain_graph = true })
    y:backward()
    H.assert_close(x.grad, { 4, 8 })
    H.assert_error(function() y:backward() end, 'backward through the graph a second time')
  end)

  it('stops recording under no_grad and restores the mode after errors', function()
    local x = leaf({ 1, 2 })
    local y = ember.no_grad(function() return x * 2 end)
    assert.is_false(y.requires_grad)
    assert.is_true(ember.is_grad_enabled())
    pcall(ember.no_grad, function() error('boom') end)
    assert.is_true(ember.is_grad_enabled())
  end)

  it('detaches', function()
    local x = leaf({ 1, 2 })
    local d = (x * 2):detach()
    assert.is_false(d.requires_grad)
    assert.is_true(d:is_same_storage(d))
  end)

  it('refuses in-place changes to a leaf that requires grad', function()
    local x = leaf({ 1, 2 })
    H.assert_error(function() x:add_(1) end, 'a leaf tensor that requires grad cannot be modified in place')
    ember.no_grad(function() x:add_(1) end)
    H.assert_close(x, { 2, 3 })
  end)

  it('detects a saved tensor modified in place (version counter)', function()
    local x = leaf({ 1, 2 })
    local a = x * 1
    local y = (a * a):sum() -- saves a
    ember.no_grad(function() a:add_(1) end)
    H.assert_error(function() y:backward() end, 'was modified by an in-place operation')
  end)

  it('records in-place ops on non-leaf tensors', function()
    local x = leaf({ 1, 2, 3 })
    local a = x * 2
    a:mul_(3)
    a:sum():backward()
    H.assert_close(x.grad, { 6, 6, 6 })
  end)

  it('flows through views', function()
    local x = rand64(3, 4)
    gradcheck(function(t) return t:narrow(2, 2, 2) * 2 end, { x })
    gradcheck(function(t) return t:select(1, 2) end, { x })
    gradcheck(function(t) return t:t():contiguous():view(12) end, { x })
    gradcheck(function(t) return t[{ {}, { 1, -1, 2 } }] end, { x })
    gradcheck(function(t) return t:permute(2, 1):unsqueeze(1):squeeze(1) end, { x })
    gradcheck(function(t) return t:unsqueeze(2):expand(3, 5, 4) end, { x })
    gradcheck(function(t) return t:unfold(2, 2, 1) end, { x })
    gradcheck(function(t) return t:reshape(2, 6):flatten() end, { x })
    gradcheck(function(t) return t:clone() * 2 end, { x })
  end)

  it('casts gradients back to the input dtype', function()
    local x = leaf({ 1, 2 })
    local y = x:float() * 3
    assert.are.equal('float32', y:dtype())
    y:sum():backward()
    assert.are.equal('float64', x.grad:dtype())
    H.assert_close(x.grad, { 3, 3 })
  end)

  it('runs hooks and lets them replace the gradient', function()
    local x = leaf({ 1, 2 })
    local seen
    local h = x:register_hook(function(g) seen = g:totable(); return g * 10 end)
    ;(x * 3):sum():backward()
    assert.are.same({ 3, 3 }, seen)
    H.assert_close(x.grad, { 30, 30 })
    h.remove()
    x.grad = nil
    ;(x * 3):sum():backward()
    H.assert_close(x.grad, { 3, 3 })
  end)

  it('reports errors raised inside hooks', function()
    local x = leaf({ 1, 2 })
    x:register_hook(function() error('hook failed') end)
    H.assert_error(function() (x * 3):sum():backward() end, 'hook failed')
  end)

  it('retains gradients of non-leaf tensors on request', function()
    local x = leaf({ 1, 2 })
    local a = x * 2
    a:retain_grad()
    ;(a * a):sum():backward()
    H.assert_close(a.grad, { 4, 8 })
  end)

  it('computes gradients with autograd.grad without touching .grad', function()
    local x = leaf({ 1, 2, 3 })
    local y = (x * x):sum()
    local g = ember.autograd.grad(y, x)
    H.assert_close(g, { 2, 4, 6 })
    assert.is_nil(x.grad)
  end)

  it('supports double backward where it comes for free', function()
    local x = leaf({ 1, 2, 3 })
    local y = (x * x * x):sum()
    local g = ember.autograd.grad(y, x, { create_graph = true })
    H.assert_close(g, { 3, 12, 27 })
    g:sum():backward()
    H.assert_close(x.grad, { 6, 12, 18 })
  end)
end)

describe('gradcheck', function()
  it('catches a wrong gradient', function()
    local x = rand64(3)
    local wrong = function(t)
      -- the backward of sign is zero, so adding sign(x) * x^2 with x detached breaks the gradient
      return t * 2 + (t:detach() * t:detach())
    end
    gradcheck(function(t) return t * 2 end, { x })
    local ok = pcall(gradcheck, function(t) return wrong(t) + t:detach() * t end, { x })
    assert.is_false(ok)
  end)

  local unary = { 'neg', 'abs', 'exp', 'log1p', 'expm1', 'sin', 'cos', 'tan', 'tanh', 'sigmoid',
    'relu', 'gelu', 'silu', 'softplus', 'square', 'erf', 'reciprocal' }
  for _, name in ipairs(unary) do
    it('checks ' .. name, function()
      local x = rand64(2, 3)
      gradcheck(function(t) return t[name](t) end, { x })
    end)
  end

  it('checks log, sqrt, rsqrt on positive inputs', function()
    for _, name in ipairs({ 'log', 'sqrt', 'rsqrt' }) do
      local x = leaf({ { 0.5, 1.5 }, { 2.5, 3.0 } })
      gradcheck(function(t) return t[name](t) end, { x })
    end
  end)

  it('checks gelu with the tanh approximation', function()
    gradcheck(function(t) return t:gelu('tanh') end, { rand64(4) })
  end)

  it('checks binary ops with broadcasting', function()
    local a, b = rand64(3, 4), rand64(4)
    for _, name in ipairs({ 'add', 'sub', 'mul', 'atan2' }) do
      gradcheck(function(x, y) return x[name](x, y) end, { a, b })
    end
    local pos = leaf({ 0.5, 1.5, 2.0, 2.5 })
    gradcheck(function(x, y) return x:div(y) end, { a, pos })
    gradcheck(function(x, y) return y:pow(x) end, { rand64(4), pos })
    gradcheck(function(x, y) return x:add(y, 2.5) end, { a, b })
    gradcheck(function(x, y) return x:maximum(y) + x:minimum(y) * 2 end, { a, b })
    gradcheck(function(x, y) return x:fmod(y) + x:remainder(y) end, { a, pos })
  end)

  it('checks scalar operands on both sides', function()
    local x = rand64(5)
    gradcheck(function(t) return 2 - t * 3 + t / 4 end, { x })
    gradcheck(function(t) return (t:abs() + 0.5) ^ 2.5 end, { x })
    gradcheck(function(t) return 2 / (t:abs() + 1) end, { x })
  end)

  it('checks where, clamp, lerp, addcmul, addcdiv', function()
    local a, b, w = rand64(2, 3), rand64(2, 3), rand64(3)
    local cond = ember.tensor({ { true, false, true }, { false, false, true } })
    gradcheck(function(x, y) return ember.where(cond, x, y) end, { a, b })
    gradcheck(function(x) return x:clamp(-0.3, 0.4) end, { a })
    gradcheck(function(x, lo, hi) return x:clamp(lo, hi) end, { a, b * 0 - 0.5, w * 0 + 0.5 })
    gradcheck(function(x, y, z) return x:lerp(y, z) end, { a, b, w })
    gradcheck(function(x, y, z) return x:addcmul(y, z, 0.5) end, { a, b, w })
    gradcheck(function(x, y, z) return x:addcdiv(y, z:abs() + 1, 0.5) end, { a, b, w })
  end)
end)

describe('gradcheck of reductions', function()
  it('checks sum, mean, prod, amax, amin, logsumexp over dims', function()
    local x = rand64(3, 4)
    for _, name in ipairs({ 'sum', 'mean', 'prod', 'amax', 'amin', 'logsumexp' }) do
      gradcheck(function(t) return t[name](t) end, { x })
      gradcheck(function(t) return t[name](t, 2) end, { x })
      gradcheck(function(t) return t[name](t, 1, true) end, { x })
      if name ~= 'logsumexp' then gradcheck(function(t) return t[name](t, { 1, 2 }) end, { x }) end
    end
  end)

  it('checks prod through zeros exactly', function()
    local x = leaf({ { 1, 0, 3 }, { 0, 0, 2 }, { 4, 5, 6 } })
    gradcheck(function(t) return t:prod(2) end, { x })
    gradcheck(function(t) return t:prod() end, { leaf({ 2, 0, 3 }) })
  end)

  it('shares the gradient of amax between ties', function()
    local x = leaf({ 1, 3, 3 })
    x:amax():backward()
    H.assert_close(x.grad, { 0, 0.5, 0.5 })
  end)

  it('checks var, std and norm', function()
    local x = rand64(3, 4)
    gradcheck(function(t) return t:var() end, { x })
    gradcheck(function(t) return t:var(2, { correction = 0 }) end, { x })
    gradcheck(function(t) return t:std(1) end, { x })
    for _, p in ipairs({ 1, 2, 3, 1.5 }) do
      gradcheck(function(t) return t:norm(p) end, { x })
      gradcheck(function(t) return t:norm(p, 2) end, { x })
    end
    gradcheck(function(t) return t:norm(math.huge, 2) end, { x })
  end)

  it('checks max and min along a dim', function()
    local x = rand64(3, 4)
    gradcheck(function(t) local v = t:max(2); return v end, { x })
    gradcheck(function(t) local v = t:min(1, true); return v end, { x })
  end)

  it('checks cumsum, cumprod, softmax, log_softmax', function()
    local x = rand64(3, 4)
    gradcheck(function(t) return t:cumsum(2) end, { x })
    gradcheck(function(t) return t:cumsum(1) end, { x })
    gradcheck(function(t) return t:cumprod(2) end, { x })
    gradcheck(function(t) return t:softmax(2) end, { x })
    gradcheck(function(t) return t:log_softmax(1) end, { x })
  end)
end)

describe('gradcheck of indexing, joining and sorting', function()
  local function idx(t) return ember.tensor(t, { dtype = 'int64' }) end

  it('checks index_select and gather with repeated indices', function()
    local x = rand64(4, 3)
    gradcheck(function(t) return t:index_select(1, idx({ 1, 3, 3 })) end, { x })
    gradcheck(function(t) return t:index_select(2, idx({ 2 })) end, { x })
    gradcheck(function(t) return t:gather(2, idx({ { 1, 1 }, { 3, 2 }, { 2, 2 }, { 1, 3 } })) end, { x })
  end)

  it('checks scatter, scatter_add, index_add, index_copy, index_fill', function()
    local x, src = rand64(4, 3), rand64(2, 3)
    local i2 = idx({ { 1, 2, 3 }, { 4, 1, 2 } })
    gradcheck(function(a, s) return a:scatter(1, i2, s) end, { x, src })
    gradcheck(function(a, s) return a:scatter_add(1, i2, s) end, { x, src })
    local rows = idx({ 4, 2 })
    gradcheck(function(a, s) return a:index_add(1, rows, s, 2.5) end, { x, src })
    gradcheck(function(a, s) return a:index_copy(1, rows, s) end, { x, src })
    gradcheck(function(a) return a:index_fill(2, idx({ 1, 3 }), 7) end, { x })
  end)

  it('checks masked_select and masked_fill', function()
    local x = rand64(2, 3)
    local m = ember.tensor({ { true, false, true }, { false, true, true } })
    gradcheck(function(a) return a:masked_select(m) end, { x })
    gradcheck(function(a) return a:masked_fill(m, 0.5) end, { x })
  end)

  it('checks cat, stack, split and chunk', function()
    local a, b = rand64(2, 3), rand64(1, 3)
    gradcheck(function(p, q) return ember.cat({ p, q }, 1) end, { a, b })
    gradcheck(function(p, q) return ember.cat({ p:t(), q:t() }, 2) end, { a, b })
    gradcheck(function(p) return ember.stack({ p, p * 2 }, 2) end, { a })
    gradcheck(function(p) local parts = p:split(2, 2); return parts[2] * 3 + 1 end, { a })
  end)

  it('checks flip, roll, repeat, tril, triu', function()
    local x = rand64(3, 4)
    gradcheck(function(t) return t:flip({ 1, 2 }) end, { x })
    gradcheck(function(t) return t:roll(1, 2) end, { x })
    gradcheck(function(t) return t:roll(5) end, { x })
    gradcheck(function(t) return t:repeat_tensor(2, 1, 3) end, { x })
    gradcheck(function(t) return t:tril(1) + t:triu(-1) end, { x })
  end)

  it('checks sort and topk values', function()
    local x = rand64(3, 4)
    gradcheck(function(t) local v = t:sort(2); return v end, { x })
    gradcheck(function(t) local v = t:sort(1, true); return v end, { x })
    gradcheck(function(t) local v = t:topk(2, 2); return v end, { x })
  end)
end)

describe('gradcheck of matrix products', function()
  it('checks mm, mv, dot, outer, bmm and addmm', function()
    local a, b = rand64(3, 4), rand64(4, 2)
    local v, w = rand64(4), rand64(3)
    gradcheck(function(x, y) return x:mm(y) end, { a, b })
    gradcheck(function(x, y) return x:mv(y) end, { a, v })
    gradcheck(function(x, y) return x:dot(y) end, { v, rand64(4) })
    gradcheck(function(x, y) return x:outer(y) end, { w, v })
    gradcheck(function(x, y) return x:bmm(y) end, { rand64(2, 3, 4), rand64(2, 4, 2) })
    gradcheck(function(c, x, y) return c:addmm(x, y, { beta = 0.5, alpha = 2 }) end, { rand64(2), a, b })
  end)

  it('checks matmul with vectors and broadcast batches', function()
    gradcheck(function(x, y) return x:matmul(y) end, { rand64(4), rand64(2, 4, 3) })
    gradcheck(function(x, y) return x:matmul(y) end, { rand64(2, 3, 4), rand64(4) })
    gradcheck(function(x, y) return x:matmul(y) end, { rand64(3, 4), rand64(2, 4, 2) })
    gradcheck(function(x, y) return x:matmul(y) end, { rand64(1, 3, 4), rand64(2, 1, 4, 2) })
    gradcheck(function(x, y) return x:t():matmul(y) end, { rand64(4, 3), rand64(4, 2) })
  end)
end)

describe('gradient ownership', function()
  it('never lets two leaves share one gradient tensor', function()
    local x, y = leaf({ 1, 2 }), leaf({ 3, 4 })
    ;(x + y):sum():backward()
    ember.no_grad(function() x.grad:add_(100) end)
    H.assert_close(y.grad, { 1, 1 })
    ;(x * y):sum():backward()
    H.assert_close(x.grad, { 104, 105 })
    H.assert_close(y.grad, { 2, 3 })
  end)
end)
