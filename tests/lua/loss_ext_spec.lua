-- The losses of ember/nn/loss_ext.lua (huber, margin ranking, triplet margin, cosine
-- embedding, Poisson NLL, Gaussian NLL, CTC) against PyTorch's values and gradients
-- (tests/lua/golden/make_nn_functional.py), finite differences, a brute-force CTC over every
-- alignment, and the same calls on the Vulkan device (lavapipe), CTC's kernel included.
local G = require 'nn_golden'
local H = require 'helpers'
local ember = G.ember
local nn = ember.nn
local F = nn.functional
local gradcheck = ember.autograd.gradcheck

local calls = {
  margin_ranking = { { 'x1', 'x2', 'y' }, function(t) return F.margin_ranking_loss(t.x1, t.x2, t.y, 0.3) end },
  margin_ranking_none = { { 'x1', 'x2', 'y' }, function(t)
    return F.margin_ranking_loss(t.x1, t.x2, t.y, { reduction = 'none' })
  end },
  triplet = { { 'an', 'po', 'ne' }, function(t) return F.triplet_margin_loss(t.an, t.po, t.ne, { margin = 0.5 }) end },
  triplet_swap_p1 = { { 'an', 'po', 'ne' }, function(t)
    return F.triplet_margin_loss(t.an, t.po, t.ne, 1.5, 1, nil, true, 'none')
  end },
  cosine_embedding = { { 'a', 'b', 'y' }, function(t) return F.cosine_embedding_loss(t.a, t.b, t.y, 0.2) end },
  cosine_embedding_none = { { 'a', 'b', 'y' }, function(t)
    return F.cosine_embedding_loss(t.a, t.b, t.y, { reduction = 'none' })
  end },
  poisson_log = { { 'a', 't' }, function(t) return F.poisson_nll_loss(t.a, t.t) end },
  -- PyTorch 1.13's gradient with respect to a target 0 is NaN here (0 * log 0 through its
  -- masked_fill); Ember's is the derivative (checked by finite differences below).
  poisson_full = { { 'a', 't' }, function(t)
    return F.poisson_nll_loss(t.a, t.t, { log_input = false, full = true, reduction = 'sum' })
  end, nil, { t = true } },
  gaussian = { { 'a', 'b', 'v' }, function(t) return F.gaussian_nll_loss(t.a, t.b, t.v) end },
  gaussian_col_full = { { 'a', 'b', 'v' }, function(t)
    return F.gaussian_nll_loss(t.a, t.b, t.v, { full = true, reduction = 'none' })
  end },
  gaussian_eps = { { 'a', 'b', 'v' }, function(t)
    return F.gaussian_nll_loss(t.a, t.b, t.v, false, 0.1, 'sum')
  end },
}
for _, red in ipairs({ 'mean', 'sum', 'none' }) do
  calls['huber_' .. red] = { { 'a', 'b' }, function(t) return F.huber_loss(t.a, t.b, red, 0.7) end }
end

-- CTC (CPU only): targets are 1-based classes, blank 1 is PyTorch's blank 0.
local ctc_ints = { t = true, il = true, tl = true }
local ctc_calls = {}
for _, red in ipairs({ 'mean', 'sum', 'none' }) do
  ctc_calls['ctc_' .. red] = { { 'z', 't', 'il', 'tl' }, function(t)
    return F.ctc_loss(t.z:log_softmax(3), t.t + 1, t.il, t.tl, { reduction = red })
  end, ctc_ints }
end
ctc_calls.ctc_concat_blank = { { 'z', 't', 'il', 'tl' }, function(t)
  return F.ctc_loss(t.z:log_softmax(3), t.t + 1, t.il, t.tl, 5, 'none')
end, ctc_ints }
ctc_calls.ctc_zero_inf = { { 'z', 't', 'il', 'tl' }, function(t)
  return F.ctc_loss(t.z:log_softmax(3), t.t + 1, t.il, t.tl, { reduction = 'none', zero_infinity = true })
end, ctc_ints }

local function sorted(t)
  local n = {}
  for k in pairs(t) do n[#n + 1] = k end
  table.sort(n)
  return n
end

describe('losses against PyTorch', function()
  for _, set in ipairs({ calls, ctc_calls }) do
    for _, name in ipairs(sorted(set)) do
      local c = set[name]
      it(name, function() G.check(name, c[1], c[2], { ints = c[3], skip_grad = c[4] }) end)
    end
  end
  it('covers every golden loss case', function()
    for _, prefix in ipairs({ 'huber', 'margin', 'triplet', 'cosine_emb', 'poisson', 'gaussian', 'ctc' }) do
      for _, c in ipairs(G.cases(prefix)) do assert(calls[c] or ctc_calls[c], 'no call for ' .. c) end
    end
  end)
end)

-- -log p(target) by enumerating every path of length T over C classes (tiny sizes only): a
-- path maps to the target when collapsing repeats and dropping blanks gives it.
local function brute_ctc(lp, target, blank)
  local T, C = #lp, #lp[1]
  local total, path = 0, {}
  local function collapse()
    local out, prev = {}, nil
    for i = 1, T do
      local c = path[i]
      if c ~= prev and c ~= blank then out[#out + 1] = c end
      prev = c
    end
    return out
  end
  local function walk(t)
    if t > T then
      local o = collapse()
      if #o ~= #target then return end
      for i = 1, #o do if o[i] ~= target[i] then return end end
      local p = 0
      for i = 1, T do p = p + lp[i][path[i]] end
      total = total + math.exp(p)
      return
    end
    for c = 1, C do path[t] = c; walk(t + 1) end
  end
  walk(1)
  return -math.log(total)
end

describe('ctc_loss', function()
  it('equals the sum over every alignment', function()
    local T, C = 5, 3
    local lp = ember.randn({ T, 1, C }, { dtype = 'float64' }):log_softmax(3)
    local rows = lp:squeeze(2):totable()
    for _, target in ipairs({ { 2 }, { 2, 3 }, { 2, 2 }, { 3, 2, 3 }, {} }) do
      local tt = #target > 0 and ember.tensor({ target }, { dtype = 'int64' }) or ember.zeros({ 1, 0 }, { dtype = 'int64' })
      local got = F.ctc_loss(lp, tt, { T }, { #target }, { reduction = 'sum' }):item()
      local want = brute_ctc(rows, target, 1)
      assert(math.abs(got - want) < 1e-9, ('target {%s}: %g vs %g'):format(table.concat(target, ','), got, want))
    end
  end)
  it('gradchecks with respect to log_probs (unnormalized too)', function()
    local lp = ember.randn({ 6, 2, 4 }, { dtype = 'float64' }):requires_grad_()
    local tg = ember.tensor({ { 2, 3, 3 }, { 4, 2, 1 } }, { dtype = 'int64' })
    assert(gradcheck(function(a) return F.ctc_loss(a, tg, { 6, 5 }, { 3, 2 }, { reduction = 'none' }) end, { lp }))
    assert(gradcheck(function(a) return F.ctc_loss(a:log_softmax(3), tg, { 6, 4 }, { 3, 1 }) end, { lp }))
  end)
  it('takes unbatched input and float32', function()
    local lp = ember.randn({ 5, 4 }):log_softmax(2)
    local l = F.ctc_loss(lp, ember.tensor({ 2, 3 }, { dtype = 'int64' }), 5, 2, { reduction = 'none' })
    assert.are.equal(0, l:dim())
    local b = F.ctc_loss(lp:unsqueeze(2), ember.tensor({ { 2, 3 } }, { dtype = 'int64' }), { 5 }, { 2 }, { reduction = 'none' })
    H.assert_close(l, b:select(1, 1):item(), 1e-6)
  end)
  it('gives inf for an impossible alignment unless zero_infinity', function()
    local lp = ember.randn({ 2, 1, 3 }, { dtype = 'float64' }):log_softmax(3)
    local tg = ember.tensor({ { 2, 2 } }, { dtype = 'int64' })
    assert.are.equal(math.huge, F.ctc_loss(lp, tg, { 2 }, { 2 }, { reduction = 'sum' }):item())
    assert.are.equal(0, F.ctc_loss(lp, tg, { 2 }, { 2 }, { reduction = 'sum', zero_infinity = true }):item())
  end)
  it('reports bad targets and lengths in Lua terms', function()
    local lp = ember.randn({ 4, 2, 3 }):log_softmax(3)
    local tg = ember.tensor({ { 2, 3 }, { 4, 1 } }, { dtype = 'int64' })
    H.assert_error(function() F.ctc_loss(lp, tg, { 4, 4 }, { 2, 2 }) end, 'class index 4 is out of range for 3 classes')
    H.assert_error(function() F.ctc_loss(lp, tg, { 5, 4 }, { 2, 2 }) end, 'input length 5 of batch element 1')
    H.assert_error(function() F.ctc_loss(lp, tg, { 4, 4 }, { 1, 3 }) end, 'target length 3 of batch element 2')
    H.assert_error(function() F.ctc_loss(lp, tg, { 4, 4 }, { 2, 2 }, { blank = 4 }) end, 'blank 4 is out of range')
    H.assert_error(function() F.ctc_loss(lp, tg:double(), { 4, 4 }, { 2, 2 }) end, 'expected integer targets')
    H.assert_error(function() F.ctc_loss(lp, tg, { 4, 4 }, { 2, 2 }, { blnk = 1 }) end, 'unknown option blnk')
  end)
  it('refuses a double backward', function()
    local lp = ember.randn({ 3, 1, 3 }, { dtype = 'float64' }):requires_grad_()
    local l = F.ctc_loss(lp, ember.tensor({ { 2 } }, { dtype = 'int64' }), { 3 }, { 1 })
    H.assert_error(function() ember.autograd.grad(l, { lp }, { create_graph = true }) end, 'double backward')
  end)
end)

describe('losses by finite differences', function()
  local function x64(...) return ember.randn({ ... }, { dtype = 'float64' }):requires_grad_() end
  it('each loss', function()
    local a, b = x64(4, 3), x64(4, 3)
    local y = ember.tensor({ 1.0, -1.0, -1.0, 1.0 }, { dtype = 'float64' })
    local v = (ember.rand({ 4, 3 }, { dtype = 'float64' }) + 0.2):requires_grad_()
    assert(gradcheck(function(p, q) return F.huber_loss(p, q, 'sum', 0.5) end, { a, b }))
    assert(gradcheck(function(p, q) return F.margin_ranking_loss(p:select(2, 1), q:select(2, 1), y, 0.1) end, { a, b }))
    assert(gradcheck(function(p, q, r) return F.triplet_margin_loss(p, q, r, { margin = 3, swap = true }) end, { a, b, x64(4, 3) }))
    assert(gradcheck(function(p, q) return F.cosine_embedding_loss(p, q, y, { margin = -0.5 }) end, { a, b }))
    assert(gradcheck(function(p) return F.poisson_nll_loss(p, b:detach():abs()) end, { a }))
    local tgt = (ember.rand({ 4, 3 }, { dtype = 'float64' }) * 2 + 1.2):requires_grad_() -- away from the jump at 1
    assert(gradcheck(function(p, q)
      return F.poisson_nll_loss(p, q, { log_input = false, full = true })
    end, { (a:detach():abs() + 0.1):requires_grad_(), tgt }))
    assert(gradcheck(function(p, q, r) return F.gaussian_nll_loss(p, q, r, { full = true }) end, { a, b, v }))
  end)
end)

describe('loss arguments and modules', function()
  it('refuses misspelt options and bad shapes', function()
    local a = ember.randn({ 3, 2 })
    H.assert_error(function() F.huber_loss(a, a, { reduce = 'sum' }) end, 'unknown option reduce')
    H.assert_error(function() F.huber_loss(a, a, 'avg') end, "reduction must be 'mean'")
    H.assert_error(function() F.huber_loss(a, a:t()) end, 'must have the same shape')
    H.assert_error(function() F.gaussian_nll_loss(a, a, ember.ones({ 2, 2 })) end, 'does not match')
    H.assert_error(function() F.gaussian_nll_loss(a, a, -ember.ones({ 3, 2 })) end, 'negative')
    H.assert_error(function() F.triplet_margin_loss(a, a, a, { margin = 0 }) end, 'margin > 0')
  end)
  it('modules call their function', function()
    local a, b, c = ember.randn({ 4, 3 }), ember.randn({ 4, 3 }), ember.randn({ 4, 3 })
    local y = ember.tensor({ 1.0, -1.0, 1.0, -1.0 })
    local cases = {
      { nn.HuberLoss('sum', 0.5):forward(a, b), F.huber_loss(a, b, 'sum', 0.5) },
      { nn.HuberLoss({ delta = 2 }):forward(a, b), F.huber_loss(a, b, { delta = 2 }) },
      { nn.MarginRankingLoss(0.2):forward(a:select(2, 1), b:select(2, 1), y),
        F.margin_ranking_loss(a:select(2, 1), b:select(2, 1), y, 0.2) },
      { nn.TripletMarginLoss({ p = 1 }):forward(a, b, c), F.triplet_margin_loss(a, b, c, { p = 1 }) },
      { nn.CosineEmbeddingLoss():forward(a, b, y), F.cosine_embedding_loss(a, b, y) },
      { nn.PoissonNLLLoss():forward(a, b:abs()), F.poisson_nll_loss(a, b:abs()) },
      { nn.GaussianNLLLoss():forward(a, b, c:abs()), F.gaussian_nll_loss(a, b, c:abs()) },
    }
    for i, t in ipairs(cases) do H.assert_close(t[1], t[2]:item(), 1e-6, 1e-7, 'case ' .. i) end
    local lp = ember.randn({ 5, 2, 4 }):log_softmax(3)
    local tg = ember.tensor({ { 2, 3 }, { 4, 4 } }, { dtype = 'int64' })
    H.assert_close(nn.CTCLoss({ reduction = 'sum' }):forward(lp, tg, { 5, 5 }, { 2, 2 }),
      F.ctc_loss(lp, tg, { 5, 5 }, { 2, 2 }, { reduction = 'sum' }):item(), 1e-6)
    assert(tostring(nn.HuberLoss()):find('delta=1', 1, true))
  end)
end)

local VK = require('vk_helpers').open('losses on vulkan')
if VK then
  describe('losses on ' .. VK.V .. ' against PyTorch', function()
    for _, set in ipairs({ calls, ctc_calls }) do
      for _, name in ipairs(sorted(set)) do
        local c = set[name]
        it(name, function()
          G.check(name, c[1], c[2], { ints = c[3], skip_grad = c[4], device = VK.V, dtype = 'float32',
            rtol = 2e-4, atol = 2e-5 })
        end)
      end
    end
    it('ctc_loss: long targets (more states than a workgroup has lanes) as the CPU', function()
      local T, N, C, L = 330, 2, 6, 150
      local z = ember.randn({ T, N, C })
      local tg = ember.randint(2, C + 1, { N, L })
      local a, b = z:clone():requires_grad_(), z:to(VK.V):requires_grad_()
      local la = F.ctc_loss(a:log_softmax(3), tg, { T, T - 7 }, { L, L - 20 }, { reduction = 'sum' })
      local lb = F.ctc_loss(b:log_softmax(3), tg, { T, T - 7 }, { L, L - 20 }, { reduction = 'sum' })
      la:backward()
      lb:backward()
      -- float32 log-space sums over 330 frames: the losses (hundreds) agree to about 1e-6
      -- relative, and the gradients, exp of a difference of such sums, to about 1e-2
      H.assert_close(lb:cpu(), la:item(), 1e-4)
      H.assert_close(b.grad:cpu(), a.grad:totable(), 2e-2, 1e-4)
    end)
    it('ctc_loss refuses float64 there', function()
      local lp = ember.randn({ 4, 1, 3 }, { dtype = 'float64' }):log_softmax(3):to(VK.V)
      H.assert_error(function()
        F.ctc_loss(lp, ember.tensor({ { 2 } }, { dtype = 'int64' }), { 4 }, { 1 })
      end, 'ctc_loss: not implemented on ' .. VK.V .. ' for float64 log_probs')
    end)
  end)
end
