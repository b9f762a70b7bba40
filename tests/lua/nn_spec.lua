-- ember.nn: the Module API, layers, activations, losses and initialization, checked against
-- plain-Lua references and finite differences.
local H = require 'tests.lua.helpers'
local ember = H.ember
local nn = ember.nn
local F = nn.functional

local function f64(t) return ember.tensor(t, { dtype = 'float64' }) end

describe('nn.Module', function()
  it('registers parameters, buffers and children in order', function()
    ember.manual_seed(0)
    local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.BatchNorm1d(4), nn.Linear(4, 2))
    local names = {}
    for _, p in ipairs(m:named_parameters()) do names[#names + 1] = p[1] end
    assert.are.same({ '0.weight', '0.bias', '2.weight', '2.bias', '3.weight', '3.bias' }, names)
    local bnames = {}
    for _, b in ipairs(m:named_buffers()) do bnames[#bnames + 1] = b[1] end
    assert.are.same({ '2.running_mean', '2.running_var', '2.num_batches_tracked' }, bnames)
    assert.are.equal(4, #m:children())
    assert.are.equal(5, #m:modules())
    assert.are.equal(6, #m:parameters())
    for _, p in ipairs(m:parameters()) do assert.is_true(p.requires_grad) end
  end)

  it('switches train and evaluate modes through the tree', function()
    local m = nn.Sequential(nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.2)))
    m:evaluate()
    for _, c in ipairs(m:modules()) do assert.is_false(c.training) end
    m:train()
    for _, c in ipairs(m:modules()) do assert.is_true(c.training) end
    assert.are.equal(m.eval, m.evaluate)
  end)

  it('zeroes gradients', function()
    local m = nn.Linear(3, 2)
    m(ember.randn(4, 3)):sum():backward()
    assert.is_not_nil(m.weight.grad)
    m:zero_grad()
    assert.is_nil(m.weight.grad)
  end)

  it('releases the outputs (and their graphs) that modules keep, through the tree', function()
    -- the memory counts in a fresh process: what earlier specs leave in this one moves them
    local out, err, rc = H.child([[
      local ember = require 'ember'
      local nn = ember.nn
      local function settled()
        local last
        for _ = 1, 10 do
          ember.memory.collect()
          local now = ember.memory.stats('cpu').allocated
          if now == last then return now end
          last = now
        end
        return last
      end
      local m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Sequential(nn.Linear(256, 8)))
      local base = settled()
      m(ember.randn(512, 64)) -- the result is dropped: only the modules hold the step now
      local held = settled() - base
      m:clear_state()
      print(held >= 512 * 256 * 4 * 2, settled() - base)]])
    assert.are.equal(0, rc, err)
    assert.are.equal('true\t0\n', out) -- at least Linear's and ReLU's outputs, then nothing
    local m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Sequential(nn.Linear(256, 8)))
    m(ember.randn(512, 64))
    assert.is_not_nil(m:get(3):get(1).output)
    assert.are.equal(m, m:clear_state())
    for _, c in ipairs(m:modules()) do
      assert.is_nil(rawget(c, 'output'))
      assert.is_nil(rawget(c, 'gradInput'))
    end
    assert.are.equal(m.clear_state, m.clearState)
  end)

  it('round-trips state_dict and reports bad keys clearly', function()
    ember.manual_seed(1)
    local a = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    local b = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    b:load_state_dict(a:state_dict())
    local x = ember.randn(5, 3)
    H.assert_close(b(x), a(x):totable())
    -- nested form, as ember.load returns it
    b:load_state_dict({ ['0'] = { weight = a[1].weight, bias = a[1].bias },
      ['1'] = { weight = a[2].weight, bias = a[2].bias } })
    H.assert_error(function() b:load_state_dict({}) end, 'missing keys: 0.bias, 0.weight, 1.bias, 1.weight')
    local sd = a:state_dict()
    sd['2.weight'] = ember.zeros(1)
    H.assert_error(function() b:load_state_dict(sd) end, 'unexpected keys: 2.weight')
    sd['2.weight'] = nil
    sd['0.weight'] = ember.zeros(2, 2)
    H.assert_error(function() b:load_state_dict(sd) end, 'shape mismatch for 0.weight: checkpoint [2, 2], model [4, 3]')
    local r = b:load_state_dict({ ['0.weight'] = a[1].weight }, false)
    assert.are.equal(3, #r.missing_keys)
  end)

  it('converts dtype in place, keeping the parameter objects', function()
    local m = nn.Linear(3, 2)
    local w = m.weight
    m:double()
    assert.are.equal('float64', m.weight:dtype())
    assert.are.equal(w, m.weight)
    assert.are.equal('float64', w:dtype())
    assert.is_true(w.requires_grad)
  end)

  it('prints the module tree', function()
    local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    assert.are.equal('Sequential(\n  (0): Linear(in_features=3, out_features=4, bias=true)\n  (1): ReLU()\n)', tostring(m))
  end)

  it('supports Torch7 forward/backward, returning gradInput and accumulating gradients', function()
    local m = nn.Linear(3, 2):double()
    local x = f64({ { 1, 2, 3 }, { 4, 5, 6 } })
    local out = m:forward(x)
    assert.are.same({ 2, 2 }, { out:size(1), out:size(2) })
    local go = f64({ { 1, 0 }, { 0, 1 } })
    local gi = m:backward(x, go)
    -- gradInput = go @ W; dW = go^T @ x
    H.assert_close(gi, go:mm(m.weight:detach()):totable(), 1e-12, 1e-12)
    H.assert_close(m.weight.grad, go:t():mm(x):totable(), 1e-12, 1e-12)
    m:backward(x, go)
    H.assert_close(m.weight.grad, (go:t():mm(x) * 2):totable(), 1e-12, 1e-12)
  end)

  it('builds containers', function()
    local l = nn.ModuleList({ nn.Linear(2, 2), nn.ReLU() })
    assert.are.equal(2, l:size())
    l:append(nn.Tanh())
    assert.are.equal(3, #l:children())
    local d = nn.ModuleDict({ b = nn.ReLU(), a = nn.Linear(2, 3) })
    assert.are.same({ 'a', 'b' }, d:keys())
    assert.are.equal(2, #d:parameters())
    local s = nn.Sequential():add(nn.Linear(2, 3)):add(nn.ReLU())
    assert.are.equal(2, s:size())
  end)
end)

describe('nn layers', function()
  it('computes Linear as x W^T + b, for 1-D, 2-D and 3-D inputs', function()
    ember.manual_seed(2)
    local m = nn.Linear(3, 2):double()
    local W, b = m.weight:totable(), m.bias:totable()
    local x = { { 1, -2, 0.5 }, { 0, 3, -1 } }
    local ref = {}
    for i = 1, 2 do
      ref[i] = {}
      for o = 1, 2 do
        local s = b[o]
        for k = 1, 3 do s = s + x[i][k] * W[o][k] end
        ref[i][o] = s
      end
    end
    H.assert_close(m(f64(x)), ref, 1e-12, 1e-12)
    H.assert_close(m(f64(x[1])), ref[1], 1e-12, 1e-12)
    H.assert_close(m(f64({ x, x })), { ref, ref }, 1e-12, 1e-12)
    local nb = nn.Linear(3, 2, { bias = false })
    assert.is_nil(nb.bias)
  end)

  it('initializes like PyTorch (Kaiming-uniform weight, fan-in bias)', function()
    ember.manual_seed(3)
    local m = nn.Linear(100, 50)
    local bound = 1 / math.sqrt(100) -- kaiming_uniform with a = sqrt(5)
    assert.is_true(m.weight:abs():max():item() <= bound)
    assert.is_true(m.weight:abs():max():item() > 0.9 * bound)
    assert.is_true(m.bias:abs():max():item() <= 1 / math.sqrt(100))
    local w = ember.empty(200, 100)
    nn.init.xavier_uniform_(w)
    local a = math.sqrt(6 / 300)
    assert.is_true(w:abs():max():item() <= a and w:abs():max():item() > 0.9 * a)
    nn.init.kaiming_normal_(w, 0, 'fan_in', 'relu')
    H.assert_close(w:std():item(), math.sqrt(2 / 100), 0.05)
    nn.init.zeros_(w)
    assert.are.equal(0, w:abs():sum():item())
    H.assert_error(function() nn.init.xavier_uniform_(ember.empty(3)) end, 'at least 2 dimensions')
  end)

  it('checks gradients of Linear, Bilinear, Flatten and Unflatten', function()
    ember.manual_seed(4)
    local lin = nn.Linear(3, 2):double()
    local x = f64({ { 0.1, -0.2, 0.3 }, { 0.5, 0.4, -0.6 } }):requires_grad_()
    ember.autograd.gradcheck(function(t) return lin(t) end, { x })
    -- a 3-D input takes one [rows, in] addmm; a transposed (non-contiguous) one, matmul + bias
    local x3 = ember.randn(2, 4, 3):double():requires_grad_()
    ember.autograd.gradcheck(function(t) return lin(t) end, { x3 })
    H.assert_close(lin(x3), (x3:matmul(lin.weight:t()) + lin.bias):totable(), 1e-12, 1e-12)
    local xt = ember.randn(4, 2, 3):double():requires_grad_()
    ember.autograd.gradcheck(function(t) return lin(t:transpose(1, 2)) end, { xt })
    assert.are.same({ 2, 4, 2 }, { lin(x3):size(1), lin(x3):size(2), lin(x3):size(3) })
    local bil = nn.Bilinear(3, 2, 4):double()
    local y = f64({ { 0.7, -0.1 }, { 0.2, 0.9 } }):requires_grad_()
    ember.autograd.gradcheck(function(a, b) return bil(a, b) end, { x, y })
    local fl = nn.Flatten()
    assert.are.same({ 2, 12 }, { fl(ember.zeros(2, 3, 4)):size(1), fl(ember.zeros(2, 3, 4)):size(2) })
    local un = nn.Unflatten(2, { 3, 4 })
    assert.are.equal(tostring(ember.zeros(2, 3, 4):size()), tostring(un(ember.zeros(2, 12)):size()))
  end)

  it('validates constructor arguments', function()
    H.assert_error(function() nn.Linear(0, 3) end, 'Linear: expected in_features to be a positive integer')
    H.assert_error(function() nn.Dropout(1.5) end, 'Dropout: expected a probability in [0, 1]')
    H.assert_error(function() nn.Conv2d(3, 4, 3, { groups = 2 }) end, 'must be divisible by groups')
    H.assert_error(function() nn.GroupNorm(3, 8) end, 'GroupNorm: num_channels (8) must be divisible by num_groups (3)')
  end)
end)

describe('activations', function()
  it('computes leaky_relu and elu against references, with gradients', function()
    local x = f64({ -2, -0.5, 0.5, 2 })
    H.assert_close(F.leaky_relu(x, 0.1), { -0.2, -0.05, 0.5, 2 }, 1e-12, 1e-12)
    H.assert_close(F.elu(x, 1.5), { 1.5 * (math.exp(-2) - 1), 1.5 * (math.exp(-0.5) - 1), 0.5, 2 }, 1e-12, 1e-12)
    local xg = f64({ -1.3, -0.4, 0.3, 1.2 }):requires_grad_()
    ember.autograd.gradcheck(function(t) return F.leaky_relu(t, 0.2) + F.elu(t, 0.7) end, { xg })
  end)

  it('wraps functions in modules', function()
    local x = f64({ { -1, 2 }, { 3, -4 } })
    H.assert_close(nn.ReLU()(x), { { 0, 2 }, { 3, 0 } })
    H.assert_close(nn.Softmax(2)(x), x:softmax(2):totable())
    H.assert_close(nn.LogSoftmax(1)(x), x:log_softmax(1):totable())
    H.assert_close(nn.GELU('tanh')(x), x:gelu('tanh'):totable())
    H.assert_close(nn.Tanh()(x), x:tanh():totable())
    H.assert_close(nn.Sigmoid()(x), x:sigmoid():totable())
    H.assert_close(nn.SiLU()(x), x:silu():totable())
  end)
end)

describe('losses', function()
  local logits = { { 1.0, 2.0, 0.5 }, { -1.0, 0.0, 3.0 }, { 0.3, 0.2, 0.1 } }
  local target = { 2, 3, 1 }

  local function log_softmax_row(r)
    local m = math.max(unpack(r))
    local s = 0
    for _, v in ipairs(r) do s = s + math.exp(v - m) end
    local out = {}
    for i, v in ipairs(r) do out[i] = v - m - math.log(s) end
    return out
  end

  it('computes cross_entropy like PyTorch, with weights, ignore_index and label smoothing', function()
    local x = f64(logits)
    local t = ember.tensor(target, { dtype = 'int64' })
    local losses = {}
    for i = 1, 3 do losses[i] = -log_softmax_row(logits[i])[target[i]] end
    H.assert_close(F.cross_entropy(x, t), (losses[1] + losses[2] + losses[3]) / 3, 1e-12, 1e-12)
    H.assert_close(F.cross_entropy(x, t, { reduction = 'sum' }), losses[1] + losses[2] + losses[3], 1e-12, 1e-12)
    H.assert_close(F.cross_entropy(x, t, { reduction = 'none' }), losses, 1e-12, 1e-12)
    local w = { 0.5, 2.0, 1.0 }
    local num = w[2] * losses[1] + w[3] * losses[2] + w[1] * losses[3]
    H.assert_close(F.cross_entropy(x, t, { weight = f64(w) }), num / (w[2] + w[3] + w[1]), 1e-12, 1e-12)
    local ti = ember.tensor({ 2, -100, 1 }, { dtype = 'int64' })
    H.assert_close(F.cross_entropy(x, ti, { ignore_index = -100 }), (losses[1] + losses[3]) / 2, 1e-12, 1e-12)
    -- label smoothing: (1 - e) nll + e * mean_c(-log p_c)
    local e = 0.1
    local sm = 0
    for i = 1, 3 do
      local lp = log_softmax_row(logits[i])
      local u = -(lp[1] + lp[2] + lp[3]) / 3
      sm = sm + (1 - e) * losses[i] + e * u
    end
    H.assert_close(F.cross_entropy(x, t, { label_smoothing = e }), sm / 3, 1e-12, 1e-12)
    -- probability targets
    local p = f64({ { 0, 1, 0 }, { 0, 0, 1 }, { 1, 0, 0 } })
    H.assert_close(F.cross_entropy(x, p), (losses[1] + losses[2] + losses[3]) / 3, 1e-12, 1e-12)
    local xg = f64(logits):requires_grad_()
    ember.autograd.gradcheck(function(a) return F.cross_entropy(a, t, { label_smoothing = 0.2 }) end, { xg })
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 4 }, { dtype = 'int64' })) end,
      'class index 4 is out of range for 3 classes')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 0, 1, 2 }, { dtype = 'int64' })) end,
      'class index 0 is out of range')
    H.assert_error(function() F.cross_entropy(x, t, { reduction = 'avg' }) end, "reduction must be 'mean'")
  end)

  it('computes regression and binary losses against references', function()
    local a, b = { 0.5, -1.0, 2.0 }, { 1.0, 1.0, 1.5 }
    local x, y = f64(a), f64(b)
    H.assert_close(F.mse_loss(x, y), (0.25 + 4 + 0.25) / 3, 1e-12, 1e-12)
    H.assert_close(F.l1_loss(x, y, 'sum'), 0.5 + 2 + 0.5, 1e-12, 1e-12)
    H.assert_close(F.smooth_l1_loss(x, y, 'none'), { 0.125, 1.5, 0.125 }, 1e-12, 1e-12)
    local p, t = f64({ 0.2, 0.9, 0.5 }), f64({ 0, 1, 1 })
    local bce = -(math.log(0.8) + math.log(0.9) + math.log(0.5)) / 3
    H.assert_close(F.binary_cross_entropy(p, t), bce, 1e-12, 1e-12)
    local z = f64({ -1.386294361, 2.197224577, 0 }) -- logits of p
    H.assert_close(F.binary_cross_entropy_with_logits(z, t), bce, 1e-8, 1e-8)
    H.assert_close(F.binary_cross_entropy_with_logits(f64({ 1000, -1000 }), f64({ 1, 0 })), 0, 1e-12, 1e-12)
    local lq = f64({ math.log(0.3), math.log(0.7) })
    local tp = f64({ 0.4, 0.6 })
    H.assert_close(F.kl_div(lq, tp, 'sum'), 0.4 * math.log(0.4 / 0.3) + 0.6 * math.log(0.6 / 0.7), 1e-12, 1e-12)
    H.assert_error(function() F.mse_loss(x, f64({ 1, 2 })) end, 'must have the same shape')
    H.assert_error(function() F.binary_cross_entropy(f64({ 1.5 }), f64({ 1 })) end, 'probabilities in [0, 1]')
    local xg = f64({ 0.3, -0.2, 1.1 }):requires_grad_()
    ember.autograd.gradcheck(function(v)
      return F.smooth_l1_loss(v, y) + F.binary_cross_entropy_with_logits(v, t, { pos_weight = f64({ 2, 1, 1 }) })
    end, { xg })
  end)

  it('wraps losses in modules', function()
    local x = f64(logits)
    local t = ember.tensor(target, { dtype = 'int64' })
    H.assert_close(nn.CrossEntropyLoss()(x, t), F.cross_entropy(x, t):item(), 1e-12, 1e-12)
    H.assert_close(nn.NLLLoss({ reduction = 'sum' })(x:log_softmax(2), t),
      F.cross_entropy(x, t, { reduction = 'sum' }):item(), 1e-12, 1e-12)
    assert.are.equal("CrossEntropyLoss(reduction='mean')", tostring(nn.CrossEntropyLoss()))
  end)
end)

describe('every layer through a checkpoint', function()
  -- name, constructor, input maker
  local cases = {
    { 'Linear', function() return nn.Linear(5, 3) end, function() return ember.randn(4, 5) end },
    { 'Bilinear', function() return nn.Bilinear(3, 2, 4) end, nil },
    { 'Conv1d', function() return nn.Conv1d(2, 3, 3, { padding = 1 }) end, function() return ember.randn(2, 2, 7) end },
    { 'Conv2d', function() return nn.Conv2d(2, 4, 3, { stride = 2, padding = 1 }) end, function() return ember.randn(2, 2, 9, 9) end },
    { 'ConvTranspose2d', function() return nn.ConvTranspose2d(2, 3, 3, { stride = 2 }) end, function() return ember.randn(1, 2, 5, 5) end },
    { 'MaxPool2d', function() return nn.MaxPool2d(2) end, function() return ember.randn(1, 2, 6, 6) end },
    { 'AvgPool2d', function() return nn.AvgPool2d(2) end, function() return ember.randn(1, 2, 6, 6) end },
    { 'AdaptiveAvgPool2d', function() return nn.AdaptiveAvgPool2d(3) end, function() return ember.randn(1, 2, 7, 7) end },
    { 'BatchNorm1d', function() return nn.BatchNorm1d(3) end, function() return ember.randn(8, 3) end },
    { 'BatchNorm2d', function() return nn.BatchNorm2d(3) end, function() return ember.randn(4, 3, 5, 5) end },
    { 'LayerNorm', function() return nn.LayerNorm(6) end, function() return ember.randn(4, 6) end },
    { 'GroupNorm', function() return nn.GroupNorm(2, 4) end, function() return ember.randn(2, 4, 3, 3) end },
    { 'Embedding', function() return nn.Embedding(10, 4) end, function() return ember.tensor({ 1, 5, 10 }, { dtype = 'int64' }) end },
    { 'Dropout', function() return nn.Dropout(0.3) end, function() return ember.randn(4, 5) end },
    { 'Sequential', function() return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.LayerNorm(4)) end, function() return ember.randn(3, 4) end },
  }
  for _, c in ipairs(cases) do
    it('round-trips ' .. c[1], function()
      ember.manual_seed(11)
      local a = c[2]()
      -- change buffers too (running statistics), then put both in evaluation mode
      if c[3] then a(c[3]()) end
      ember.manual_seed(12)
      local b = c[2]()
      local path = os.tmpname()
      ember.save(path, { model = a:state_dict() })
      b:load_state_dict(ember.load(path).model)
      os.remove(path)
      a:evaluate(); b:evaluate()
      for name, t in pairs(a:state_dict()) do
        assert.are.equal(0, (t:double() - b:state_dict()[name]:double()):abs():max():item(), c[1] .. ' ' .. name)
      end
      local x = c[3] and c[3]()
      if c[1] == 'Bilinear' then
        local x1, x2 = ember.randn(2, 3), ember.randn(2, 2)
        H.assert_close(b(x1, x2), a(x1, x2):totable(), 0, 0, c[1])
      else
        H.assert_close(b(x), a(x):totable(), 0, 0, c[1])
      end
    end)
  end

  it('loads a checkpoint written on the CPU onto a Vulkan device and back', function()
    local vk
    for _, d in ipairs(ember.devices()) do if d.type ~= 'cpu' then vk = d.name end end
    if not vk then pending('no Vulkan device') return end
    local m = nn.Linear(3, 2)
    local path = os.tmpname()
    ember.save(path, { model = m:state_dict() })
    local on_gpu = ember.load(path, { device = vk })
    local w = on_gpu.model['weight'] or on_gpu.model.weight
    assert.are.equal(vk, w:device())
    H.assert_close(w:to('cpu'), m.weight:totable(), 0, 0)
    ember.save(path, { w = w })
    H.assert_close(ember.load(path).w, m.weight:totable(), 0, 0)
    os.remove(path)
  end)
end)
