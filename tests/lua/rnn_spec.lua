-- nn.RNN, nn.LSTM, nn.GRU and their cells against PyTorch (tests/lua/golden/make_sequence.py wrote
-- the state_dicts by PyTorch's key names, inputs, initial states, outputs and the gradients of
-- a scalar loss, all in float64), against finite differences, and their argument errors.
-- CPU against Vulkan is in vulkan_rnn_spec.lua.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn

local g, state_dict, G = H.golden('tests/lua/golden/sequence.safetensors')

local function close(actual, expected, what, tol)
  tol = tol or 1e-10
  assert.are.same(expected:size(), actual:size(), what)
  local diff = (actual:to('float64') - expected):abs():max():item()
  assert(diff <= tol, ('%s: max difference %g (tolerance %g)'):format(what or '', diff, tol))
end

-- Runs a case as make_sequence.py did: loads the state_dict, runs forward from the golden input and
-- states, compares outputs, then the gradients of the same scalar loss.
local function check_case(case, m, is_cell)
  m:double()
  m:load_state_dict(state_dict(case))
  local x = g(case .. '.x'):clone():requires_grad_(true)
  local h0 = G[case .. '.h0'] and g(case .. '.h0'):clone():requires_grad_(true)
  local c0 = G[case .. '.c0'] and g(case .. '.c0'):clone():requires_grad_(true)
  local lstm = m.mode == 'LSTM'
  local hx = h0
  if lstm then hx = h0 and { h0, c0 } or nil end
  local y, hn, cn
  if is_cell then
    y, cn = m(x, hx)
    hn = y
  else
    local h
    y, h = m(x, hx)
    if lstm then hn, cn = h[1], h[2] else hn = h end
  end
  close(y, g(case .. '.y'), case .. ' output')
  close(hn, g(case .. '.hn'), case .. ' h_n')
  if lstm then close(cn, g(case .. '.cn'), case .. ' c_n') end
  local loss = (y * g(case .. '.ry')):sum() + (hn * g(case .. '.rh')):sum()
  if lstm then loss = loss + (cn * g(case .. '.rc')):sum() end
  loss:backward()
  close(x.grad, g(case .. '.grad.x'), case .. ' grad input')
  if h0 then close(h0.grad, g(case .. '.grad.h0'), case .. ' grad h0') end
  if c0 then close(c0.grad, g(case .. '.grad.c0'), case .. ' grad c0') end
  local n = 0
  for _, p in ipairs(m:named_parameters()) do
    close(p[2].grad, g(case .. '.grad.' .. p[1]), case .. ' grad ' .. p[1])
    n = n + 1
  end
  assert.is_true(n > 0)
end

describe('nn recurrent layers against PyTorch', function()
  it('RNN: 2 layers, bidirectional, tanh, sequence-first, h0', function()
    check_case('rnn', nn.RNN(3, 4, 2, { bidirectional = true }))
  end)
  it('RNN: relu, batch_first, no bias, no h0', function()
    check_case('rnn_relu', nn.RNN(3, 4, { nonlinearity = 'relu', batch_first = true, bias = false }))
  end)
  it('LSTM: 2 layers, bidirectional, batch_first, {h0, c0}', function()
    check_case('lstm', nn.LSTM(3, 4, { num_layers = 2, bidirectional = true, batch_first = true }))
  end)
  it('LSTM: unbatched 2-D input', function()
    check_case('lstm_unbatched', nn.LSTM(3, 4, 2))
  end)
  it('GRU: 2 layers, bidirectional, sequence-first, h0', function()
    check_case('gru', nn.GRU(3, 4, 2, { bidirectional = true }))
  end)
  it('GRU: batch_first, no bias', function()
    check_case('gru_bf', nn.GRU(3, 5, { batch_first = true, bias = false }))
  end)
  it('cells: RNNCell (tanh, relu), LSTMCell, GRUCell (batched, unbatched)', function()
    check_case('rnn_cell', nn.RNNCell(3, 4), true)
    check_case('rnn_cell_relu', nn.RNNCell(3, 4, { nonlinearity = 'relu' }), true)
    check_case('lstm_cell', nn.LSTMCell(3, 4), true)
    check_case('gru_cell', nn.GRUCell(3, 4), true)
    check_case('gru_cell_unbatched', nn.GRUCell(3, 4, { bias = false }), true)
  end)
end)

describe('nn recurrent layers', function()
  it('have PyTorch parameter names, shapes and initialization bounds', function()
    ember.manual_seed(3)
    local m = nn.LSTM(5, 6, 2, { bidirectional = true })
    local names = {}
    for _, p in ipairs(m:named_parameters()) do names[#names + 1] = p[1] end
    assert.are.same({ 'weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0',
      'weight_ih_l0_reverse', 'weight_hh_l0_reverse', 'bias_ih_l0_reverse', 'bias_hh_l0_reverse',
      'weight_ih_l1', 'weight_hh_l1', 'bias_ih_l1', 'bias_hh_l1',
      'weight_ih_l1_reverse', 'weight_hh_l1_reverse', 'bias_ih_l1_reverse', 'bias_hh_l1_reverse' }, names)
    assert.are.same({ 24, 5 }, m.weight_ih_l0:size())
    assert.are.same({ 24, 12 }, m.weight_ih_l1:size())
    assert.are.same({ 24, 6 }, m.weight_hh_l1_reverse:size())
    local bound = 1 / math.sqrt(6)
    for _, p in ipairs(m:parameters()) do
      assert.is_true(p:abs():max():item() <= bound)
      assert.is_true(p:abs():max():item() > bound * 0.5)
    end
    assert.are.same({ 9, 4 }, nn.GRU(4, 3).weight_ih_l0:size())
    assert.are.same({ 3, 4 }, nn.RNNCell(4, 3).weight_ih:size())
    assert.are.equal('LSTM(5, 6, num_layers=2, bidirectional=true)', tostring(m))
  end)

  it('return PyTorch shapes, batched and unbatched', function()
    local m = nn.GRU(3, 4, 3, { bidirectional = true, batch_first = true })
    local y, h = m(ember.randn(2, 7, 3))
    assert.are.same({ 2, 7, 8 }, y:size())
    assert.are.same({ 6, 2, 4 }, h:size())
    y, h = m(ember.randn(7, 3), ember.zeros(6, 4))
    assert.are.same({ 7, 8 }, y:size())
    assert.are.same({ 6, 4 }, h:size())
    local l = nn.LSTM(3, 4)
    local _, hc = l(ember.randn(5, 2, 3))
    assert.are.same({ 1, 2, 4 }, hc[1]:size())
    assert.are.same({ 1, 2, 4 }, hc[2]:size())
    -- the state goes back in as it came out
    local y2 = l(ember.randn(5, 2, 3), hc)
    assert.are.same({ 5, 2, 4 }, y2:size())
    local c = nn.LSTMCell(3, 4)
    local h1, c1 = c(ember.randn(3))
    assert.are.same({ 4 }, h1:size())
    assert.are.same({ 4 }, c1:size())
  end)

  it('equal their cell stepped by hand over a long sequence (both directions), with gradients', function()
    ember.manual_seed(6)
    for _, kind in ipairs({ 'LSTM', 'GRU', 'RNN' }) do
      local m = nn[kind](3, 4, { bidirectional = true }):double()
      local T = 11 -- blocks of 4, 4, 3
      local x = ember.randn(T, 2, 3, { dtype = 'float64' }):requires_grad_(true)
      local y, h = m(x)
      local ys = {}
      for d, suffix in ipairs({ '_l0', '_l0_reverse' }) do
        local cell = nn[kind .. 'Cell'](3, 4):double()
        for _, n in ipairs({ 'weight_ih', 'weight_hh', 'bias_ih', 'bias_hh' }) do
          ember.no_grad(function() cell[n]:copy_(m[n .. suffix]) end)
        end
        local hh, cc = nil, nil
        ys[d] = {}
        for s = 1, T do
          local t = d == 1 and s or T - s + 1
          if kind == 'LSTM' then hh, cc = cell(x[t], hh and { hh, cc }) else hh = cell(x[t], hh) end
          ys[d][t] = hh
        end
      end
      local want = ember.cat({ ember.stack(ys[1], 1), ember.stack(ys[2], 1) }, 3)
      close(y, want, kind .. ' output', 1e-12)
      local hn = kind == 'LSTM' and h[1] or h
      close(hn, ember.stack({ ys[1][T], ys[2][1] }, 1), kind .. ' h_n', 1e-12)
      local w = ember.randn(T, 2, 8, { dtype = 'float64' })
      local gx = ember.autograd.grad({ (y * w):sum() }, { x })[1]
      local gx_want = ember.autograd.grad({ (want * w):sum() }, { x })[1]
      close(gx, gx_want, kind .. ' grad input', 1e-12)
    end
  end)

  it('gradcheck in float64: cells and a bidirectional 2-layer GRU', function()
    ember.manual_seed(4)
    for _, make in ipairs({
      function() return nn.LSTMCell(2, 3) end,
      function() return nn.GRUCell(2, 3) end,
      function() return nn.RNNCell(2, 3) end,
    }) do
      local m = make():double()
      local x = ember.randn(2, 2, { dtype = 'float64' }):requires_grad_(true)
      local h = ember.randn(2, 3, { dtype = 'float64' }):requires_grad_(true)
      local hx = m.mode == 'LSTM' and { h, ember.randn(2, 3, { dtype = 'float64' }) } or h
      local ok = ember.autograd.gradcheck(function(a, b, w)
        local _ = w
        local state = m.mode == 'LSTM' and { b, hx[2] } or b
        local r1, r2 = m(a, state)
        if r2 then return r1 + r2 * 2 end -- an LSTMCell's h and c
        return r1
      end, { x, h, m.weight_hh })
      assert.is_true(ok, m.__name)
    end
    local m = nn.GRU(2, 2, 2, { bidirectional = true }):double()
    local x = ember.randn(3, 1, 2, { dtype = 'float64' }):requires_grad_(true)
    assert.is_true(ember.autograd.gradcheck(function(a, _)
      local y, h = m(a)
      return y:sum() + h:sum()
    end, { x, m.weight_ih_l1_reverse }))
  end)

  it('drop out between layers only, in training mode only', function()
    ember.manual_seed(5)
    local m = nn.RNN(3, 4, 2, { dropout = 1 }):double()
    local x = ember.randn(4, 2, 3, { dtype = 'float64' })
    -- dropout 1 zeroes the first layer's output: the second layer sees zeros, and its own
    -- output is not dropped
    local y, h = m(x)
    local second = nn.RNN(4, 4):double()
    second:load_state_dict({ weight_ih_l0 = m.weight_ih_l1, weight_hh_l0 = m.weight_hh_l1,
      bias_ih_l0 = m.bias_ih_l1, bias_hh_l0 = m.bias_hh_l1 })
    local want = second(ember.zeros(4, 2, 4, { dtype = 'float64' }))
    close(y, want, 'dropout between layers', 1e-12)
    assert.is_true(h[1]:abs():sum():item() > 0)
    m:evaluate()
    local ye = m(x)
    assert.is_true((ye - y):abs():max():item() > 1e-3)
  end)

  it('raise clearly on bad arguments', function()
    H.assert_error(function() nn.LSTM(3, 4, { proj_size = 2 }) end, 'LSTM: proj_size is not implemented')
    H.assert_error(function() nn.GRU(3, 4, { bidirectonal = true }) end, 'GRU: unknown option bidirectonal')
    H.assert_error(function() nn.RNN(3, 4, { nonlinearity = 'sigmoid' }) end, "RNN: expected nonlinearity 'tanh' or 'relu'")
    H.assert_error(function() nn.RNN(0, 4) end, 'RNN: expected input_size to be a positive integer, got 0')
    H.assert_error(function() nn.GRU(3, 4, { dropout = 2 }) end, 'GRU: expected dropout to be a probability')
    H.assert_error(function() nn.LSTMCell(3, 4, { nonlinearity = 'relu' }) end, 'LSTMCell: unknown option nonlinearity')
    local m = nn.GRU(3, 4, 2)
    H.assert_error(function() m(ember.randn(5, 2, 4)) end, 'GRU: expected input with 3 features in its last dimension, got 4')
    H.assert_error(function() m(ember.randn(5, 2, 3), ember.zeros(1, 2, 4)) end,
      'GRU: expected h0 of shape [2, 2, 4], got [1, 2, 4]')
    H.assert_error(function() m(ember.randn(5)) end, 'GRU: expected a 2-D (unbatched) or 3-D input, got 1-D')
    H.assert_error(function() m(ember.randn(0, 2, 3)) end, 'GRU: expected a sequence length larger than 0')
    local l = nn.LSTM(3, 4)
    H.assert_error(function() l(ember.randn(5, 2, 3), ember.zeros(1, 2, 4)) end,
      'LSTM: expected the initial state as a table {h0, c0}')
    H.assert_error(function() nn.LSTMCell(3, 4)(ember.randn(2, 3), ember.zeros(2, 4)) end,
      'LSTMCell: expected the state as a table {h, c}')
  end)
end)
