-- Torch7's names and habits: x:fill(v) and x:zero() in place, nn.LookupTable, and the
-- criterion idiom crit:forward(out, target) / crit:backward(out, target) on every loss module,
-- checked against autograd through the functional loss and a central finite difference.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn

describe('Torch7 tensor methods', function()
  it('fill(v) and zero() write in place and return the tensor', function()
    local x = ember.ones(2, 3)
    local view = x:narrow(2, 2, 2)
    assert.are.equal(view, view:fill(7))
    assert.are.same({ { 1, 7, 7 }, { 1, 7, 7 } }, x:totable())
    assert.are.equal(x, x:zero())
    assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, x:totable())
    assert.are.same({ 5, 5 }, ember.fill(ember.zeros(2), 5):totable())
  end)
end)

describe('nn.LookupTable', function()
  it('is Embedding with Torch7 arguments: 1-based rows of an nIndex x nOutput weight', function()
    local lt = nn.LookupTable(10, 3)
    assert.are.same({ 10, 3 }, lt.weight:size())
    local idx = ember.tensor({ 1, 10, 4 }, { dtype = 'int64' })
    local out = lt:forward(idx)
    for i, r in ipairs({ 1, 10, 4 }) do
      H.assert_close(out[i], lt.weight[r]:totable(), 0, 0)
    end
    local batch = lt:forward(ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = 'int64' }))
    assert.are.same({ 2, 2, 3 }, batch:size())
    assert.is_truthy(tostring(lt):find('LookupTable(10, 3)', 1, true))
  end)

  it('takes paddingValue: that row gets no gradient (0 means none)', function()
    local lt = nn.LookupTable(5, 2, 2)
    local out = lt:forward(ember.tensor({ 2, 3, 2 }, { dtype = 'int64' }))
    out:sum():backward()
    assert.are.same({ 0, 0 }, lt.weight.grad[2]:totable())
    assert.are.same({ 1, 1 }, lt.weight.grad[3]:totable())
    assert.is_nil(nn.LookupTable(5, 2, 0).padding_idx)
  end)

  it('refuses an options table, maxNorm, and a bad paddingValue', function()
    H.assert_error(function() nn.LookupTable(5, 2, { padding_idx = 1 }) end, 'use nn.Embedding')
    H.assert_error(function() nn.LookupTable(5, 2, 0, 1.0) end, 'LookupTable: maxNorm is not implemented')
    H.assert_error(function() nn.LookupTable(5, 2, 9) end, 'expected paddingValue to be 0 or an index in 1 .. 5, got 9')
  end)
end)

describe('the criterion idiom', function()
  ember.manual_seed(3)
  local out = ember.randn(4, 3, { dtype = 'float64' })
  local classes = ember.tensor({ 1, 3, 2, 3 }, { dtype = 'int64' })
  local probs = ember.rand(4, 3, { dtype = 'float64' })
  local logp = ember.randn(4, 3, { dtype = 'float64' }):log_softmax(2)
  local cases = {
    { 'MSELoss', nn.MSELoss(), out, ember.randn(4, 3, { dtype = 'float64' }) },
    { 'L1Loss', nn.L1Loss(), out, ember.randn(4, 3, { dtype = 'float64' }) },
    { 'SmoothL1Loss', nn.SmoothL1Loss({ beta = 0.5 }), out, ember.randn(4, 3, { dtype = 'float64' }) },
    { 'NLLLoss', nn.NLLLoss(), logp, classes },
    { 'CrossEntropyLoss', nn.CrossEntropyLoss({ label_smoothing = 0.1 }), out, classes },
    { 'BCELoss', nn.BCELoss(), ember.rand(4, 3, { dtype = 'float64' }) * 0.8 + 0.1, probs },
    { 'BCEWithLogitsLoss', nn.BCEWithLogitsLoss(), out, probs },
    { 'KLDivLoss', nn.KLDivLoss({ reduction = 'batchmean' }), logp, probs },
    { 'MSELoss none', nn.MSELoss({ reduction = 'none' }), out, ember.randn(4, 3, { dtype = 'float64' }) },
  }
  for _, c in ipairs(cases) do
    local name, crit, x, t = c[1], c[2], c[3], c[4]
    it(name .. ': forward(out, target) is the loss, backward(out, target) its gradient', function()
      local loss = crit:forward(x, t)
      assert.is_true(ember.is_tensor(loss))
      local total = function(v) return crit:forward(v, t):sum():item() end
      local g = crit:backward(x, t)
      assert.are.equal(g, crit.gradInput)
      assert.are.same(x:size(), g:size())
      assert.is_nil(x.grad)
      -- central differences of the (summed) loss, in float64
      local xs, gs = x:totable(), g:totable()
      local h = 1e-6
      for i = 1, #xs do
        for j = 1, #xs[i] do
          local p = x:clone()
          p[i][j] = xs[i][j] + h
          local fp = total(p)
          p[i][j] = xs[i][j] - h
          local fm = total(p)
          local fd = (fp - fm) / (2 * h)
          assert(math.abs(fd - gs[i][j]) < 1e-5 * math.max(1, math.abs(fd)),
            ('%s [%d][%d]: finite difference %g, backward %g'):format(name, i, j, fd, gs[i][j]))
        end
      end
    end)
  end
end)

describe('the criterion idiom on losses of several inputs', function()
  ember.manual_seed(5)
  local function f64(...) return ember.randn({ ... }, { dtype = 'float64' }) end
  local y = ember.tensor({ 1, -1, 1 }, { dtype = 'float64' })
  local cases = {
    { 'HuberLoss', nn.HuberLoss({ delta = 0.5 }), f64(3, 2), { f64(3, 2) } },
    { 'PoissonNLLLoss', nn.PoissonNLLLoss(), f64(3, 2), { ember.rand(3, 2, { dtype = 'float64' }) } },
    { 'GaussianNLLLoss', nn.GaussianNLLLoss(), f64(3, 2), { f64(3, 2), ember.rand(3, 2, { dtype = 'float64' }) + 0.5 } },
    { 'MarginRankingLoss', nn.MarginRankingLoss({ margin = 0.1 }), { f64(3), f64(3) }, { y } },
    { 'CosineEmbeddingLoss', nn.CosineEmbeddingLoss(), { f64(3, 4), f64(3, 4) }, { y } },
    { 'TripletMarginLoss', nn.TripletMarginLoss(), { f64(3, 4), f64(3, 4), f64(3, 4) }, {} },
  }
  for _, c in ipairs(cases) do
    local name, crit, input, rest = c[1], c[2], c[3], c[4]
    it(name .. ': backward(input, ...) is the gradient of forward(input, ...) (a table for a table input)', function()
      local tabled = type(input) == 'table'
      local xs = tabled and input or { input }
      local function total(list)
        local args = {}
        for i, v in ipairs(list) do args[i] = v end
        for i, v in ipairs(rest) do args[#list + i] = v end
        return crit:forward(unpack(args)):sum():item()
      end
      local g = crit:backward(input, unpack(rest))
      local gs = tabled and g or { g }
      assert.are.equal(#xs, #gs)
      for k, x in ipairs(xs) do
        local flat, gflat = x:reshape(-1), gs[k]:reshape(-1):totable()
        for j = 1, flat:numel() do
          local h, v = 1e-6, flat[j]
          local list = {}
          for m, z in ipairs(xs) do list[m] = z end
          local p = x:clone(); list[k] = p
          local pf = p:view(-1)
          pf[j] = v + h
          local fp = total(list)
          pf[j] = v - h
          local fm = total(list)
          local fd = (fp - fm) / (2 * h)
          assert(math.abs(fd - gflat[j]) < 1e-5 * math.max(1, math.abs(fd)),
            ('%s input %d [%d]: finite difference %g, backward %g'):format(name, k, j, fd, gflat[j]))
        end
      end
    end)
  end
end)
