-- The sequence layers on Vulkan against the CPU: RNN, LSTM and GRU (one configuration each,
-- forward and the gradients of a scalar loss), a cell of each kind, RMSNorm and the rotary
-- embedding. The recurrent forward must queue every time step without the host waiting
-- (counted by the device's host_waits).
local VK = require('vk_helpers').open('vulkan sequence layers')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local nn = ember.nn
local F = nn.functional

-- float32 products summed in another order than the CPU's
local tol = { 2e-5, 2e-5 }

local function waits() return ember.device(V):info().host_waits end

-- Builds the module twice with the same weights, on the CPU and on Vulkan; runs both on the
-- same input and state; compares outputs and gradients.
local function check(make, x_shape, states)
  ember.manual_seed(11)
  local cpu = make()
  local vk = make()
  vk:load_state_dict(cpu:state_dict())
  vk:to(V)
  local x = ember.randn(x_shape)
  local s = {}
  for i, shape in ipairs(states or {}) do s[i] = ember.randn(shape) end
  local function run(m, on)
    local xi = on(x):requires_grad_(true)
    local si = {}
    for i, t in ipairs(s) do si[i] = on(t):requires_grad_(true) end
    local hx = si[1]
    if m.mode == 'LSTM' and si[1] then hx = { si[1], si[2] } end
    local before = on == VK.on and waits()
    local y, h = m(xi, hx)
    if before then assert.are.equal(before, waits(), m.__name .. ': the forward waited for the device') end
    local parts = { y }
    if type(h) == 'table' then parts[2], parts[3] = h[1], h[2] elseif h then parts[2] = h end
    local loss
    for i, p in ipairs(parts) do
      local w = on(ember.arange(1, p:numel() + 1):view(p:size()):mul(0.01 * i):sin())
      local term = (p * w):sum()
      loss = loss and loss + term or term
    end
    loss:backward()
    return parts, xi, si
  end
  local on_cpu = function(t) return t end
  local pc, xc, sc = run(cpu, on_cpu)
  local pv, xv, sv = run(vk, VK.on)
  for i = 1, #pc do VK.agree(pv[i], pc[i], cpu.__name .. ' result ' .. i, tol) end
  VK.agree(xv.grad, xc.grad, cpu.__name .. ' grad input', tol)
  for i = 1, #sc do VK.agree(sv[i].grad, sc[i].grad, cpu.__name .. ' grad state ' .. i, tol) end
  local pvs = vk:named_parameters()
  for i, p in ipairs(cpu:named_parameters()) do
    VK.agree(pvs[i][2].grad, p[2].grad, cpu.__name .. ' grad ' .. p[1], tol)
  end
end

describe('vulkan recurrent layers against the CPU', function()
  it('RNN: 2 layers, bidirectional, h0', function()
    check(function() return nn.RNN(5, 6, 2, { bidirectional = true }) end, { 7, 3, 5 }, { { 4, 3, 6 } })
  end)
  it('LSTM: batch_first, 2 layers, {h0, c0}', function()
    check(function() return nn.LSTM(5, 6, 2, { batch_first = true }) end, { 3, 7, 5 }, { { 2, 3, 6 }, { 2, 3, 6 } })
  end)
  it('GRU: bidirectional, unbatched', function()
    check(function() return nn.GRU(5, 6, { bidirectional = true }) end, { 7, 5 })
  end)
  it('cells', function()
    check(function() return nn.RNNCell(5, 6, { nonlinearity = 'relu' }) end, { 3, 5 }, { { 3, 6 } })
    check(function() return nn.LSTMCell(5, 6) end, { 3, 5 }, { { 3, 6 }, { 3, 6 } })
    check(function() return nn.GRUCell(5, 6) end, { 3, 5 }, { { 3, 6 } })
  end)
end)

describe('vulkan RMSNorm and rotary embedding against the CPU', function()
  it('RMSNorm forward and backward', function()
    ember.manual_seed(12)
    local x = ember.randn(4, 3, 16)
    local w = ember.randn(3, 16)
    local xc, wc = x:clone():requires_grad_(true), w:clone():requires_grad_(true)
    local xv, wv = VK.on(x):requires_grad_(true), VK.on(w):requires_grad_(true)
    local yc, yv = F.rms_norm(xc, { 3, 16 }, wc), F.rms_norm(xv, { 3, 16 }, wv)
    VK.agree(yv, yc, 'rms_norm', tol)
    yc:square():sum():backward()
    yv:square():sum():backward()
    VK.agree(xv.grad, xc.grad, 'rms_norm grad input', { 1e-4, 1e-5 })
    VK.agree(wv.grad, wc.grad, 'rms_norm grad weight', { 1e-4, 1e-5 })
  end)

  it('rotary embedding with an offset', function()
    ember.manual_seed(13)
    local rope = nn.RotaryEmbedding(8, { max_len = 32 })
    local x = ember.randn(2, 3, 5, 8)
    VK.agree(rope(VK.on(x), { offset = 4 }), rope(x, { offset = 4 }), 'rotary', tol)
  end)
end)
