-- ember.autograd.Function: custom functions' gradients against central finite differences in
-- float64 (on the CPU and on the Vulkan device when there is one), several outputs, non-tensor
-- arguments, ctx's fields, errors raised in backward, wrong gradients, and the Lua registry
-- emptied as graphs go.
local H = require 'helpers'
local ember = H.ember
local VKH = require 'vk_helpers'
local Function = ember.autograd.Function

local DEVICES = { 'cpu' }
if VKH.V and VKH.has_f64 then DEVICES[2] = VKH.V end

local Exp = Function{
  name = 'Exp',
  forward = function(ctx, x)
    local y = x:exp()
    ctx:save_for_backward(y)
    return y
  end,
  backward = function(ctx, gy)
    local y = ctx:saved()
    return gy * y
  end,
}

-- (a * b, a + b): two outputs.
local MulAdd = Function{
  name = 'MulAdd',
  forward = function(ctx, a, b)
    ctx:save_for_backward(a, b)
    return a * b, a + b
  end,
  backward = function(ctx, gp, gs)
    local a, b = unpack(ctx.saved_tensors)
    local ga, gb
    if gp then ga, gb = gp * b, gp * a end
    if gs then ga, gb = ga and ga + gs or gs, gb and gb + gs or gs end
    return ga, gb
  end,
}

-- x ^ p with p a number: its "gradient" is nil.
local Pow = Function{
  name = 'Pow',
  forward = function(ctx, x, p)
    ctx.p = p
    ctx:save_for_backward(x)
    return x:pow(p)
  end,
  backward = function(ctx, g)
    local x = ctx:saved()
    return g * x:pow(ctx.p - 1) * ctx.p, nil
  end,
}

-- Checks the gradient of sum(w * f(inputs...)) (w fixed, random) with respect to each input
-- against central differences, on `device`. inputs: CPU float64 tensors; extra: non-tensor
-- arguments appended to the call.
local function fd_check(device, f, inputs, extra)
  extra = extra or {}
  local function call(xs)
    local args = {}
    for i, x in ipairs(xs) do args[i] = x end
    for _, e in ipairs(extra) do args[#args + 1] = e end
    return f(unpack(args))
  end
  local xs = {}
  for i, x in ipairs(inputs) do xs[i] = x:to(device):requires_grad_() end
  local out = call(xs)
  local w = ember.rand(out:size(), { dtype = 'float64' }):to(device)
  local loss = (out * w):sum()
  loss:backward()
  local eps = 1e-6
  for i, x in ipairs(inputs) do
    local g = xs[i].grad:to('cpu'):reshape(-1):totable()
    local flat = x:clone():reshape(-1)
    for k = 1, flat:numel() do
      local orig = flat[k]
      local function at(v)
        flat[k] = v
        local p = {}
        for j, y in ipairs(inputs) do p[j] = (j == i and flat:view(x:size()) or y):to(device) end
        return ember.no_grad(function() return (call(p) * w):sum():item() end)
      end
      local numeric = (at(orig + eps) - at(orig - eps)) / (2 * eps)
      flat[k] = orig
      assert.is_true(math.abs(g[k] - numeric) <= 1e-6 + 1e-5 * math.abs(numeric),
        ('%s input %d element %d: autograd %.10g, finite differences %.10g'):format(device, i, k,
          g[k], numeric))
    end
  end
end

local function data(...) return ember.randn(...):double() end

describe('autograd.Function', function()
  for _, device in ipairs(DEVICES) do
    describe('on ' .. device, function()
      it('exp with its saved output: gradcheck', function()
        ember.manual_seed(1)
        fd_check(device, function(x) return Exp(x) end, { data(2, 3) })
        local x = data(4):to(device):requires_grad_()
        local y = Exp.apply(x)
        assert.equal('ExpBackward', y.grad_fn)
        assert.is_true(y.requires_grad and not y.is_leaf)
      end)

      it('two outputs: gradcheck, and one output unused gets a nil gradient', function()
        ember.manual_seed(2)
        fd_check(device, function(a, b)
          local p, s = MulAdd(a, b)
          return p * 3 + s:exp()
        end, { data(3, 2), data(3, 2) })
        fd_check(device, function(a, b) local p = MulAdd(a, b); return p end,
          { data(2, 2), data(2, 2) })
        fd_check(device, function(a, b) local _, s = MulAdd(a, b); return s end,
          { data(2, 2), data(2, 2) })
      end)

      it('a non-tensor argument passes through', function()
        ember.manual_seed(3)
        fd_check(device, function(x, p) return Pow(x, p) end, { data(5):abs() + 0.5 }, { 3 })
      end)
    end)
  end

  it('gives ctx needs_input_grad, and runs forward without recording', function()
    local seen, mode
    local F = Function{
      forward = function(ctx, a, b, n)
        seen = ctx.needs_input_grad
        mode = ember.is_grad_enabled()
        local r = a * b
        assert.is_false(r.requires_grad)
        return r
      end,
      backward = function(ctx, g) return g, g, nil end,
    }
    local a = ember.randn(2):requires_grad_()
    local y = F(a, ember.randn(2), 7)
    assert.same({ true, false, false }, seen)
    assert.is_false(mode)
    assert.equal('FunctionBackward', y.grad_fn)
    -- Without an input that requires grad, nothing records.
    assert.is_false(F(ember.randn(2), ember.randn(2), 7).requires_grad)
    ember.no_grad(function() assert.is_false(F(a, a, 1).requires_grad) end)
  end)

  it('mark_non_differentiable and integer outputs get no grad_fn', function()
    local Sort = Function{
      forward = function(ctx, x)
        local v, i = x:sort()
        ctx:mark_non_differentiable(i)
        ctx.i = i
        return v, i
      end,
      backward = function(ctx, gv, gi)
        assert.is_nil(gi)
        return ember.zeros_like(gv):scatter(1, ctx.i, gv)
      end,
    }
    local x = ember.tensor({ 3, 1, 2 }):requires_grad_()
    local v, i = Sort(x)
    assert.is_false(i.requires_grad)
    assert.is_true(v.requires_grad)
    ;(v * ember.tensor({ 1, 10, 100 })):sum():backward()
    assert.same({ 100, 1, 10 }, x.grad:totable())
  end)

  it('an input returned as it is becomes a view with the function as grad_fn', function()
    local Id = Function{ forward = function(ctx, x) return x end,
      backward = function(ctx, g) return g * 2 end }
    local x = ember.ones(3):requires_grad_()
    local y = Id(x)
    assert.is_true(x.is_leaf)
    assert.equal('FunctionBackward', y.grad_fn)
    y:sum():backward()
    assert.same({ 2, 2, 2 }, x.grad:totable())
  end)

  it('the same tensor returned twice, or a leaf parameter returned, are views', function()
    local w = ember.ones(2):requires_grad_()
    local Two = Function{ forward = function(ctx, x) local y = x * 3; return y, y, w end,
      backward = function(ctx, g1, g2, g3)
        assert.is_nil(g3)
        return (g1 or 0) + (g2 or 0) * 10
      end }
    local x = ember.ones(2):requires_grad_()
    local a, b, c = Two(x)
    assert.is_true(w.is_leaf)
    assert.equal('FunctionBackward', c.grad_fn)
    ;(a + b):sum():backward()
    assert.same({ 11, 11 }, x.grad:totable())
    assert.is_nil(w.grad)
  end)

  it('backward may use autograd ops (create_graph: double backward)', function()
    local Sq = Function{
      forward = function(ctx, x) ctx:save_for_backward(x); return x * x end,
      backward = function(ctx, g) local x = ctx:saved(); return g * 2 * x end,
    }
    local x = ember.tensor({ 1.5, -2 }, { dtype = 'float64' }):requires_grad_()
    local gx = ember.autograd.grad(Sq(x):sum(), x, { create_graph = true })
    assert.same({ 3, -4 }, gx:totable())
    local ggx = ember.autograd.grad(gx:sum(), x)
    assert.same({ 2, 2 }, ggx:totable())
  end)

  it('an error raised in backward comes out of backward() with its message', function()
    local Bad = Function{ name = 'Bad', forward = function(ctx, x) return x * 2 end,
      backward = function() error('no gradient today') end }
    local x = ember.ones(2):requires_grad_()
    local ok, err = pcall(function() Bad(x):sum():backward() end)
    assert.is_false(ok)
    assert.matches('backward: Bad: .*no gradient today', err)
    -- an error in forward is raised as it is
    local BadF = Function{ forward = function() error('forward failed here') end,
      backward = function() end }
    assert.has_error(function() BadF(x) end)
  end)

  it('wrong gradients are clear errors naming the function and the input', function()
    local function fails(ret, pattern)
      local F = Function{ name = 'Wrong', forward = function(ctx, x, n) return x * 1 end,
        backward = function(ctx, g) return ret(g) end }
      local x = ember.ones(2, 3):requires_grad_()
      local ok, err = pcall(function() F(x, 1):sum():backward() end)
      assert.is_false(ok)
      assert.matches(pattern, err)
    end
    fails(function(g) return g:t(), nil end,
      'Wrong: backward returned a gradient of shape %[3,2%] for input 1, expected the input\'s shape %[2,3%]')
    fails(function(g) return g:double(), nil end,
      'Wrong: backward returned a float64 gradient for input 1, expected the input\'s dtype float32')
    fails(function(g) return g, g end, 'Wrong: backward returned a gradient for input 2, which is not a tensor')
    fails(function(g) return g end, 'Wrong: backward returned 1 value, expected 2')
    fails(function(g) return 'x', nil end, 'Wrong: backward returned a string for input 1')
  end)

  it('refuses a second backward, and a saved tensor modified in place', function()
    local x = ember.ones(2):requires_grad_()
    local y = Exp(x):sum()
    y:backward()
    assert.has_error(function() y:backward() end)
    local ok, err = pcall(function() y:backward() end)
    assert.matches('second time', err)
    local Keep = Function{ forward = function(ctx, a) ctx:save_for_backward(a); return a * 2 end,
      backward = function(ctx, g) return g * 2 end }
    local a = ember.ones(2)
    local b = a:clone():requires_grad_()
    local a2 = b * 1
    local out = Keep(a2)
    ember.no_grad(function() a2:add_(1) end)
    ok, err = pcall(function() out:sum():backward() end)
    assert.is_false(ok)
    assert.matches('modified by an in%-place operation', err)
  end)

  it('checks its definition', function()
    assert.has_error(function() Function{ forward = function() end } end,
      'Function: forward and backward must be functions')
    assert.has_error(function()
      Function{ forward = function() end, backward = function() end, backwards = 1 }
    end, 'Function: unknown key backwards (expected forward, backward, name)')
  end)

  it('frees its registry entries with the graphs (no leak)', function()
    -- In a fresh process: the count relies on collections freeing the unused graphs, which
    -- handles left by earlier specs in this process would blur.
    local out, err, rc = H.child([[
      local ember = require 'ember'
      local Function = ember.autograd.Function
      local Exp = Function{ forward = function(ctx, x) local y = x:exp(); ctx:save_for_backward(y); return y end,
        backward = function(ctx, g) return g * ctx:saved() end }
      local Two = Function{ forward = function(ctx, a, b) ctx:save_for_backward(a, b); return a * b, a + b end,
        backward = function(ctx, gp, gs) return gp, gs end }
      local x = ember.randn(4):requires_grad_()
      for i = 1, 300 do
        local p, s = Two(x, x)
        if i % 2 == 0 then (p + s):sum():backward() end -- half go with a backward, half unused
        local _ = Exp(x)
      end
      local during = ember.autograd.function_registry_size()
      for _ = 1, 4 do ember.memory.collect() end
      print(during, ember.autograd.function_registry_size())
    ]])
    assert.equal(0, rc, err)
    local during, after = out:match('(%d+)%s+(%d+)')
    assert.is_true(tonumber(during) > 0) -- unused graphs wait for the collector
    assert.equal(0, tonumber(after))
    -- retain_graph keeps the entry until a backward without it. Earlier specs' graphs are
    -- collected first: the apply below drains what their collection queued, so the count
    -- taken right after it moves only with this graph.
    for _ = 1, 4 do ember.memory.collect() end
    local x = ember.randn(4):requires_grad_()
    local y = Exp(x):sum()
    local with_y = ember.autograd.function_registry_size()
    assert.is_true(with_y >= 1)
    y:backward({ retain_graph = true })
    assert.equal(with_y, ember.autograd.function_registry_size())
    y:backward()
    assert.equal(with_y - 1, ember.autograd.function_registry_size())
  end)
end)
