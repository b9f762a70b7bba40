-- Module hooks: forward pre-hooks, forward hooks and full backward hooks, through module(x) and
-- module:forward(x); what they capture against the module's own results and an independent
-- computation (autograd.grad on the same function); replaced arguments, outputs and gradients;
-- remove().
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn

local function same(a, b)
  assert.same(a:size(), b:size())
  assert.equal(0, (a - b):abs():max():item())
end

describe('module hooks', function()
  it('a forward hook captures activations, through module(x) and module:forward(x)', function()
    ember.manual_seed(1)
    local net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))
    local layers = net:children()
    local captured, calls = {}, 0
    local h = layers[1]:register_forward_hook(function(m, args, out)
      calls = calls + 1
      assert.equal(layers[1], m)
      captured.input, captured.output = args[1], out
    end)
    local x = ember.randn(3, 4)
    local y = net(x)
    assert.equal(1, calls)
    same(captured.input, x)
    same(captured.output, x:matmul(layers[1].weight:t()) + layers[1].bias)
    same(y, layers[3](captured.output:relu()))
    net:forward(x)
    layers[1]:forward(x)
    layers[1](x)
    assert.equal(4, calls) -- once per call, whichever way it is called
    h:remove()
    net(x)
    assert.equal(4, calls)
    h:remove() -- removing twice is harmless
  end)

  it('hooks run on a forward set on an instance too, and once for a subclass calling its parent', function()
    local m = nn.Module:extend('Plain')()
    function m.forward(self, x) return x * 2 end
    local seen = 0
    m:register_forward_hook(function() seen = seen + 1 end)
    m(ember.ones(2))
    assert.equal(1, seen)
    local Sub = nn.Linear:extend('SubLinear')
    function Sub:forward(x) return nn.Linear.forward(self, x) + 1 end
    local s = Sub(2, 2)
    local n = 0
    s:register_forward_hook(function() n = n + 1 end)
    s(ember.ones(1, 2))
    assert.equal(1, n)
  end)

  it('a forward hook can replace the output, a pre-hook the arguments', function()
    ember.manual_seed(2)
    local lin = nn.Linear(3, 3)
    local x = ember.randn(2, 3)
    local ref = lin(x)
    local h1 = lin:register_forward_hook(function(_, _, out) return out * 10 end)
    same(lin(x), ref * 10)
    local h2 = lin:register_forward_pre_hook(function(_, args) return { args[1] * 0 } end)
    same(lin(x), lin.bias:view(1, 3):expand(2, 3) * 10)
    h2:remove()
    local shifted = lin(x + 1)
    local h3 = lin:register_forward_pre_hook(function(_, args) return args[1] + 1 end) -- one value
    same(lin(x), shifted)
    h3:remove()
    h1:remove()
    same(lin(x), ref)
    -- Hooks run in order, each seeing the previous one's result.
    lin:register_forward_hook(function(_, _, out) return out + 1 end)
    lin:register_forward_hook(function(_, _, out) return out * 2 end)
    same(lin(x), (ref + 1) * 2)
  end)

  it('a full backward hook sees grad_output and grad_input, checked against autograd.grad', function()
    ember.manual_seed(3)
    local lin = nn.Linear(4, 3)
    local gi, go, calls = nil, nil, 0
    local h = lin:register_full_backward_hook(function(m, grad_input, grad_output)
      calls = calls + 1
      assert.equal(lin, m)
      gi, go = grad_input, grad_output
    end)
    local x = ember.randn(5, 4):requires_grad_()
    local w = ember.randn(5, 3)
    local y = lin(x)
    assert.is_true(y.requires_grad)
    ;(y:tanh() * w):sum():backward()
    assert.equal(1, calls)
    -- Independently: the same function without hooks, differentiated by autograd.grad.
    h:remove()
    local x2 = x:detach():requires_grad_()
    local y2 = lin(x2)
    local loss = (y2:tanh() * w):sum()
    local dy = ember.autograd.grad(loss, y2, { retain_graph = true })
    local dx = ember.autograd.grad(loss, x2)
    same(go[1], dy)
    same(gi[1], dx)
    same(x.grad, dx)
    -- removed: no call
    x.grad = nil
    ;(lin(x):tanh() * w):sum():backward()
    assert.equal(1, calls)
  end)

  it('a full backward hook can replace grad_input', function()
    local lin = nn.Linear(2, 2)
    lin:register_full_backward_hook(function(_, grad_input)
      return { grad_input[1] * 0 + 7 }
    end)
    local x = ember.randn(3, 2):requires_grad_()
    lin(x):sum():backward()
    same(x.grad, ember.full({ 3, 2 }, 7))
    -- the parameters' gradients are not the hook's business
    assert.is_not_nil(lin.weight.grad)
  end)

  it('a full backward hook runs with an empty grad_input when no argument needs a gradient', function()
    local lin = nn.Linear(2, 2)
    local gi, go
    lin:register_full_backward_hook(function(_, grad_input, grad_output) gi, go = grad_input, grad_output end)
    lin(ember.ones(1, 2)):sum():backward()
    assert.same({}, gi)
    same(go[1], ember.ones(1, 2))
    -- and under no_grad, nothing is wrapped
    local y = ember.no_grad(function() return lin(ember.ones(1, 2)) end)
    assert.is_false(y.requires_grad)
  end)

  it('checks its argument', function()
    local lin = nn.Linear(2, 2)
    assert.has_error(function() lin:register_forward_hook(3) end,
      'register_forward_hook: expected a function, got number')
  end)
end)
