-- ember.nn.functional: normalization, dropout, embedding, class losses and the half-precision
-- paths, against independent references (tests/lua/nn_ref.lua, values computed by hand) and
-- finite differences (ember.autograd.gradcheck, float64).
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = require 'ember.nn.functional'
local R = require 'tests.lua.nn_ref'

local gradcheck = ember.autograd.gradcheck
local rnd, leaf, flat, check = R.rnd, R.leaf, R.flat, R.check
local channel_stats, bn_ref, ce_ref, reduce_ref = R.channel_stats, R.bn_ref, R.ce_ref, R.reduce_ref

describe('batch_norm', function()
  it('normalizes with batch statistics and updates the running ones (training)', function()
    for _, shape in ipairs({ { 4, 3, 5, 2 }, { 6, 4 }, { 3, 2, 7 } }) do
      H.seed(30)
      local x = rnd(shape)
      local C = shape[2]
      local w, b = rnd({ C }), rnd({ C })
      local rm, rv = rnd({ C }), rnd({ C }):abs() + 0.5
      local rm0, rv0 = flat(rm), flat(rv)
      local y = F.batch_norm(x, rm, rv, w, b, true, 0.3, 1e-3)
      local mean, var, count = channel_stats(x)
      check(y, bn_ref(x, mean, var, w, b, 1e-3), shape, 1e-10, 'output')
      local em, ev = {}, {}
      for c = 1, C do
        em[c] = 0.7 * rm0[c] + 0.3 * mean[c]
        ev[c] = 0.7 * rv0[c] + 0.3 * var[c] * count / (count - 1) -- unbiased, as PyTorch
      end
      check(rm, em, { C }, 1e-12, 'running_mean')
      check(rv, ev, { C }, 1e-12, 'running_var')
    end
  end)

  it('uses the running statistics in evaluation mode, and leaves them alone', function()
    H.seed(31)
    local x, rm, rv = rnd({ 3, 2, 4 }), rnd({ 2 }), rnd({ 2 }):abs() + 0.2
    local w, b = rnd({ 2 }), rnd({ 2 })
    local y = F.batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5)
    check(y, bn_ref(x, flat(rm), flat(rv), w, b, 1e-5), { 3, 2, 4 }, 1e-12)
    local before = flat(rm)
    F.batch_norm(x, rm, rv, nil, nil)
    check(rm, before, { 2 }, 0)
  end)

  it('works without affine parameters or running statistics, and in float32', function()
    H.seed(32)
    local x = rnd({ 5, 3, 2, 2 }, 'float32')
    local mean, var = channel_stats(x)
    check(F.batch_norm(x, nil, nil, nil, nil, true), bn_ref(x, mean, var, nil, nil, 1e-5), { 5, 3, 2, 2 }, 1e-5)
  end)

  it('has gradients in training and evaluation modes, first and second order', function()
    H.seed(33)
    gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end, { leaf({ 3, 2, 2, 2 }), leaf({ 2 }), leaf({ 2 }) })
    gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end, { leaf({ 4, 3 }), leaf({ 3 }), leaf({ 3 }) })
    local rm, rv = rnd({ 2 }), rnd({ 2 }):abs() + 0.5
    gradcheck(function(x, w, b) return F.batch_norm(x, rm, rv, w, b, false) end, { leaf({ 2, 2, 3 }), leaf({ 2 }), leaf({ 2 }) })
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.batch_norm(x, nil, nil, w, nil, true)
        local gx, gw = unpack(ember.autograd.grad((y * y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 3, 2, 2 }), leaf({ 2 }) })
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), nil, nil) end,
      'batch_norm: running_mean and running_var are needed in evaluation mode')
    H.assert_error(function() F.batch_norm(ember.randn(1, 3), nil, nil, nil, nil, true) end,
      'batch_norm: expected more than 1 value per channel when training, got input [1,3]')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), ember.zeros(2), ember.ones(2)) end,
      'batch_norm: expected running_mean of shape [3], got [2]')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), nil, nil, ember.ones(4), nil, true) end,
      'batch_norm: expected a weight of shape [3], got [4]')
    H.assert_error(function() F.batch_norm(ember.randn(4), nil, nil, nil, nil, true) end,
      'batch_norm: expected an input with at least 2 dims, got 1-D')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), ember.zeros(3), nil, nil, nil, true) end,
      'batch_norm: expected both running_mean and running_var, or neither')
  end)
end)

describe('layer_norm and group_norm', function()
  -- rows of D elements normalized; affine by position in the row (layer) or channel (group)
  local function norm_rows_ref(xf, rows, D, eps, affine_of)
    local out = {}
    for r = 0, rows - 1 do
      local s = 0
      for i = 1, D do s = s + xf[r * D + i] end
      local m = s / D
      local q = 0
      for i = 1, D do q = q + (xf[r * D + i] - m) ^ 2 end
      local rs = 1 / math.sqrt(q / D + eps)
      for i = 1, D do
        local w, b = affine_of(r, i - 1)
        out[r * D + i] = (xf[r * D + i] - m) * rs * w + b
      end
    end
    return out
  end

  it('layer_norm over the last one and two dims', function()
    H.seed(40)
    local x = rnd({ 3, 4, 5 })
    local w, b = rnd({ 5 }), rnd({ 5 })
    local wf, bf = flat(w), flat(b)
    check(F.layer_norm(x, 5, w, b, 1e-5), norm_rows_ref(flat(x), 12, 5, 1e-5, function(_, i) return wf[i + 1], bf[i + 1] end), { 3, 4, 5 }, 1e-12)
    local w2 = rnd({ 4, 5 })
    local w2f = flat(w2)
    check(F.layer_norm(x, { 4, 5 }, w2, nil, 1e-3), norm_rows_ref(flat(x), 3, 20, 1e-3, function(_, i) return w2f[i + 1], 0 end), { 3, 4, 5 }, 1e-12)
    check(F.layer_norm(x:float(), 5), norm_rows_ref(flat(x:float()), 12, 5, 1e-5, function() return 1, 0 end), { 3, 4, 5 }, 1e-5)
  end)

  it('group_norm', function()
    H.seed(41)
    local x = rnd({ 2, 6, 3, 2 })
    local w, b = rnd({ 6 }), rnd({ 6 })
    local wf, bf = flat(w), flat(b)
    -- 3 groups of 2 channels of 6 elements: rows of 12
    local ref = norm_rows_ref(flat(x), 6, 12, 1e-5, function(r, i)
      local c = (r % 3) * 2 + math.floor(i / 6)
      return wf[c + 1], bf[c + 1]
    end)
    check(F.group_norm(x, 3, w, b), ref, { 2, 6, 3, 2 }, 1e-12)
    local x2 = rnd({ 3, 4 }) -- no spatial dims
    check(F.group_norm(x2, 2), norm_rows_ref(flat(x2), 6, 2, 1e-5, function() return 1, 0 end), { 3, 4 }, 1e-12)
  end)

  it('instance_norm is group_norm with a group per channel', function()
    H.seed(42)
    local x = rnd({ 2, 3, 4 })
    check(F.instance_norm(x), norm_rows_ref(flat(x), 6, 4, 1e-5, function() return 1, 0 end), { 2, 3, 4 }, 1e-12)
    H.assert_error(function() F.instance_norm(x, ember.zeros(3), ember.ones(3)) end, 'instance_norm: running statistics are not supported')
  end)

  it('layer_norm in float32 (vectorized rows) agrees with float64, forward and backward', function()
    H.seed(44)
    -- rows of 37 (8-lane body and a tail) and 8 (no tail); with and without the affine terms
    for _, d in ipairs({ 37, 8 }) do
      for _, affine in ipairs({ true, false }) do
        local x64 = rnd({ 5, d }) * 3 + 1
        local w64, b64 = affine and rnd({ d }) or nil, affine and rnd({ d }) or nil
        local g64 = rnd({ 5, d })
        local function run(dtype)
          local x = x64:to(dtype):detach():requires_grad_(true)
          local w = w64 and w64:to(dtype):detach():requires_grad_(true)
          local b = b64 and b64:to(dtype):detach():requires_grad_(true)
          local y = F.layer_norm(x, d, w, b)
          y:backward(g64:to(dtype))
          return y, x.grad, w and w.grad, b and b.grad
        end
        local r32, r64 = { run('float32') }, { run('float64') }
        for i = 1, 4 do
          if r64[i] then H.assert_close(r32[i]:to('float64'), r64[i]:totable(), 2e-5, 2e-5, 'layer_norm ' .. d .. ' ' .. i) end
        end
      end
    end
  end)

  it('have gradients, first and second order', function()
    H.seed(43)
    gradcheck(function(x, w, b) return F.layer_norm(x, { 2, 3 }, w, b) end, { leaf({ 2, 2, 3 }), leaf({ 2, 3 }), leaf({ 2, 3 }) })
    gradcheck(function(x, w, b) return F.group_norm(x, 2, w, b) end, { leaf({ 2, 4, 3 }), leaf({ 4 }), leaf({ 4 }) })
    gradcheck(function(x) return F.group_norm(x, 1) end, { leaf({ 2, 3, 2 }) })
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.layer_norm(x, 3, w)
        local gx, gw = unpack(ember.autograd.grad((y * y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 2, 3 }), leaf({ 3 }) })
  end)

  it('report bad arguments', function()
    H.assert_error(function() F.layer_norm(ember.randn(3, 4), 5) end,
      'layer_norm: expected an input whose trailing dims are [5], got [3,4]')
    H.assert_error(function() F.layer_norm(ember.randn(3, 4), 4, ember.ones(3)) end,
      'layer_norm: expected a weight of shape [4], got [3]')
    H.assert_error(function() F.group_norm(ember.randn(2, 6, 4), 4) end,
      'group_norm: expected the 6 channels to be divisible by num_groups (4)')
    H.assert_error(function() F.group_norm(ember.randn(2, 6, 4), 3, ember.ones(3)) end,
      'group_norm: expected a weight of shape [6], got [3]')
  end)
end)

describe('float16 and bfloat16', function()
  it('pool, normalize and take losses through float32, keeping the dtype', function()
    H.seed(70)
    local x = rnd({ 2, 4, 6, 6 })
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      local tol = dt == 'float16' and 5e-3 or 3e-2
      local xh = x:to(dt)
      local xr = xh:double() -- the values the half tensor holds
      local cases = {
        { F.max_pool2d(xh, 2), F.max_pool2d(xr, 2) },
        { F.avg_pool2d(xh, 3, { stride = 2, padding = 1 }), F.avg_pool2d(xr, 3, { stride = 2, padding = 1 }) },
        { F.adaptive_avg_pool2d(xh, 4), F.adaptive_avg_pool2d(xr, 4) },
        { F.batch_norm(xh, nil, nil, nil, nil, true), F.batch_norm(xr, nil, nil, nil, nil, true) },
        { F.group_norm(xh, 2), F.group_norm(xr, 2) },
        { F.layer_norm(xh, 6), F.layer_norm(xr, 6) },
      }
      for i, c in ipairs(cases) do
        assert.equal(dt, c[1]:dtype())
        check(c[1]:double(), flat(c[2]), c[2]:size(), tol, dt .. ' case ' .. i)
      end
      local t = ember.tensor({ 1, 3 }, { dtype = 'int64' })
      local l = F.cross_entropy(xh[{ {}, {}, 1, 1 }], t)
      assert.equal(dt, l:dtype())
      check(l:double(), { F.cross_entropy(xr[{ {}, {}, 1, 1 }], t):item() }, {}, tol)
      -- gradients reach a half leaf
      local leafh = xh:clone():requires_grad_()
      F.max_pool2d(leafh, 2):sum():backward()
      assert.equal(dt, leafh.grad:dtype())
      assert.equal(72, leafh.grad:sum():item())
    end
  end)
end)

-- ---- dropout, embedding ----------------------------------------------------------------------------------

describe('dropout', function()
  it('zeroes about p of the elements and scales the rest by 1 / (1 - p)', function()
    ember.manual_seed(123)
    local n = 20000
    for _, p in ipairs({ 0.1, 0.5, 0.8 }) do
      local x = ember.ones(n) * 2
      local y = F.dropout(x, p, true)
      local zeros = y:eq(0):sum():item()
      local sd = math.sqrt(n * p * (1 - p))
      assert(math.abs(zeros - n * p) < 4 * sd, ('p = %g: %d zeros of %d'):format(p, zeros, n))
      local kept = y:ne(0)
      assert.near(2 / (1 - p), y:masked_select(kept):min():item(), 1e-5)
      assert.near(2 / (1 - p), y:masked_select(kept):max():item(), 1e-5)
    end
  end)

  it('is the identity when not training or p = 0, and zero when p = 1', function()
    local x = ember.randn(5, 4)
    assert.is_true(F.dropout(x, 0.5, false):is_same_storage(x))
    check(F.dropout(x, 0, true), flat(x), { 5, 4 }, 0)
    check(F.dropout(x, 1, true), flat(x * 0), { 5, 4 }, 0)
  end)

  it('follows manual_seed', function()
    ember.manual_seed(7)
    local a = F.dropout(ember.ones(100), 0.5)
    ember.manual_seed(7)
    local b = F.dropout(ember.ones(100), 0.5)
    check(a, flat(b), { 100 }, 0)
    local c = F.dropout(ember.ones(100), 0.5)
    assert.is_true(a:ne(c):any():item())
  end)

  it('backpropagates the same mask, scaled', function()
    ember.manual_seed(9)
    local x = (ember.rand(200):double() + 0.5):requires_grad_()
    local y = F.dropout(x, 0.3)
    y:sum():backward()
    -- y = x * mask / (1 - p), so dy/dx = y / x
    check(x.grad, flat(y:detach() / x:detach()), { 200 }, 1e-12)
  end)

  it('dropout2d drops whole channels', function()
    ember.manual_seed(11)
    local y = F.dropout2d(ember.ones(8, 16, 3, 3), 0.5)
    local t = y:totable()
    for n = 1, 8 do
      for c = 1, 16 do
        local v = t[n][c][1][1]
        assert(v == 0 or v == 2)
        for i = 1, 3 do for j = 1, 3 do assert.equal(v, t[n][c][i][j]) end end
      end
    end
  end)

  it('reports bad p', function()
    H.assert_error(function() F.dropout(ember.ones(3), 1.5) end, 'dropout: expected p between 0 and 1, got 1.5')
    H.assert_error(function() F.dropout(ember.ones(3, { dtype = 'int64' }), 0.5) end, 'dropout: expected a floating point input, got int64')
  end)
end)

describe('embedding', function()
  it('picks rows by 1-based index, in the indices\' shape', function()
    H.seed(50)
    local w = rnd({ 5, 3 })
    local idx = ember.tensor({ { 1, 5 }, { 3, 3 } }, { dtype = 'int64' })
    local wf = flat(w)
    local ref = {}
    for _, i in ipairs({ 1, 5, 3, 3 }) do for j = 1, 3 do ref[#ref + 1] = wf[(i - 1) * 3 + j] end end
    check(F.embedding(idx, w), ref, { 2, 2, 3 }, 0)
    check(F.embedding(ember.tensor({ 2, 4 }, { dtype = 'int32' }), w), { wf[4], wf[5], wf[6], wf[10], wf[11], wf[12] }, { 2, 3 }, 0)
  end)

  it('adds the gradients of repeated indices and skips padding_idx', function()
    H.seed(51)
    local w = leaf({ 4, 2 })
    local idx = ember.tensor({ 2, 4, 2, 1, 2 }, { dtype = 'int64' })
    local g = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 }, { 9, 10 } }, { dtype = 'float64' })
    F.embedding(idx, w, { padding_idx = 1 }):backward(g)
    check(w.grad, { 0, 0, 15, 18, 0, 0, 3, 4 }, { 4, 2 }, 0)
    w.grad = nil
    F.embedding(idx, w, { padding_idx = -1 }):backward(g) -- the last row
    check(w.grad, { 7, 8, 15, 18, 0, 0, 0, 0 }, { 4, 2 }, 0)
    gradcheck(function(a) return F.embedding(idx, a) end, { leaf({ 4, 2 }) })
    gradcheck(function(a)
      return ember.enable_grad(function()
        local y = F.embedding(idx, a, { padding_idx = 2 })
        local g = ember.autograd.grad((y * y * y):sum(), a, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 4, 2 }) })
  end)

  it('reports bad indices', function()
    local w = ember.randn(4, 2)
    H.assert_error(function() F.embedding(ember.tensor({ 1, 5 }, { dtype = 'int64' }), w) end,
      'embedding: index 5 is out of range for a weight of 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 0, 1 }, { dtype = 'int64' }), w) end,
      'embedding: index 0 is out of range for a weight of 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 1.0 }), w) end, 'embedding: expected integer indices, got float32')
    H.assert_error(function() F.embedding(ember.tensor({ 1 }, { dtype = 'int64' }), w, { padding_idx = 5 }) end,
      'embedding: padding_idx 5 is out of range for 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 1 }, { dtype = 'int64' }), ember.randn(4)) end,
      'embedding: expected a 2-D weight, got 1-D')
  end)
end)

describe('cross_entropy and nll_loss', function()
  local function rows_of(x) return x:totable() end

  local cases = {
    { 'plain', {} },
    { 'class weights', { weight = { 0.5, 2, 1, 0.25, 3 } } },
    { 'ignore_index', { ignore_index = 3 } },
    { 'label smoothing and weights', { label_smoothing = 0.2, weight = { 1, 2, 3, 4, 5 } } },
    { 'label smoothing and ignore_index', { label_smoothing = 0.1, ignore_index = 2 } },
  }
  for _, c in ipairs(cases) do
    for _, reduction in ipairs({ 'mean', 'sum', 'none' }) do
      it(('%s, reduction %s'):format(c[1], reduction), function()
        H.seed(60)
        local x = rnd({ 6, 5 })
        local targets = { 1, 3, 5, 2, 3, 4 }
        local t = ember.tensor(targets, { dtype = 'int64' })
        local o = { reduction = reduction, ignore_index = c[2].ignore_index, label_smoothing = c[2].label_smoothing }
        if c[2].weight then o.weight = ember.tensor(c[2].weight, { dtype = 'float64' }) end
        local losses, denom = ce_ref(rows_of(x), targets, c[2])
        local ref = reduce_ref(losses, denom, reduction)
        local y = F.cross_entropy(x, t, o)
        check(y, ref, reduction == 'none' and { 6 } or {}, 1e-12, 'cross_entropy')
        if not c[2].label_smoothing then
          local lp = x:log_softmax(2)
          local nl, nd = ce_ref(rows_of(lp), targets, c[2], true)
          check(F.nll_loss(lp, t, o), reduce_ref(nl, nd, reduction), reduction == 'none' and { 6 } or {}, 1e-12, 'nll_loss')
        end
        gradcheck(function(a) return F.cross_entropy(a, t, o) end, { x:clone():requires_grad_() })
      end)
    end
  end

  it('supports double backward (create_graph through the loss)', function()
    H.seed(64)
    local t = ember.tensor({ 2, 1, 3, 3 }, { dtype = 'int64' })
    local w = ember.tensor({ 0.5, 2, 1 }, { dtype = 'float64' })
    for _, o in ipairs({ {}, { weight = w, ignore_index = 1, label_smoothing = 0.3 }, { reduction = 'sum' } }) do
      gradcheck(function(x)
        return ember.enable_grad(function()
          local l = F.cross_entropy(x, t, o)
          local g = ember.autograd.grad(l, x, { create_graph = true })
          return (g * g):sum() + (g * x):sum()
        end)
      end, { leaf({ 4, 3 }) })
    end
    -- spatial targets and nll_loss, whose gradient is linear in the loss gradient only
    local ts = ember.tensor({ { 1, 2 }, { 2, 2 } }, { dtype = 'int64' })
    gradcheck(function(x)
      return ember.enable_grad(function()
        local g = ember.autograd.grad(F.cross_entropy(x, ts, { weight = w }), x, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 2, 3, 2 }) })
    -- the composed gradient (create_graph) equals the fused kernel's
    local x = leaf({ 4, 3 })
    local o = { weight = w, ignore_index = 1, label_smoothing = 0.3 }
    local g = ember.autograd.grad(F.cross_entropy(x, t, o) * 3, x, { create_graph = true })
    check(g, flat(ember.autograd.grad(F.cross_entropy(x, t, o) * 3, x)), { 4, 3 }, 1e-12)
    g = ember.autograd.grad(F.nll_loss(x, t, { weight = w }) * 3, x, { create_graph = true })
    check(g, flat(ember.autograd.grad(F.nll_loss(x, t, { weight = w }) * 3, x)), { 4, 3 }, 1e-12)
  end)

  it('handles spatial targets [N, d1, d2] and unbatched input', function()
    H.seed(61)
    local x = rnd({ 2, 3, 2, 2 })
    local targets = { { { 1, 2 }, { 3, 3 } }, { { 2, 1 }, { 1, 3 } } }
    local t = ember.tensor(targets, { dtype = 'int64' })
    -- the same rows laid out [N * d1 * d2, C]
    local rows, tl = {}, {}
    local xt = x:totable()
    for n = 1, 2 do for i = 1, 2 do for j = 1, 2 do
      rows[#rows + 1] = { xt[n][1][i][j], xt[n][2][i][j], xt[n][3][i][j] }
      tl[#tl + 1] = targets[n][i][j]
    end end end
    local losses, denom = ce_ref(rows, tl, {})
    check(F.cross_entropy(x, t, { reduction = 'none' }), losses, { 2, 2, 2 }, 1e-12)
    check(F.cross_entropy(x, t), reduce_ref(losses, denom, 'mean'), {}, 1e-12)
    gradcheck(function(a) return F.cross_entropy(a, t, { label_smoothing = 0.1 }) end, { x:clone():requires_grad_() })
    local x1 = rnd({ 4 })
    local l1 = ce_ref({ x1:totable() }, { 3 }, {})
    check(F.cross_entropy(x1, ember.tensor(3, { dtype = 'int64' })), l1, {}, 1e-12)
  end)

  it('takes class probabilities as targets', function()
    H.seed(62)
    local x, p = rnd({ 3, 4 }), rnd({ 3, 4 }):abs()
    p = p / p:sum(2, true)
    local xt, pt = x:totable(), p:totable()
    local s = 0
    for r = 1, 3 do
      local m, z = -math.huge, 0
      for c = 1, 4 do m = math.max(m, xt[r][c]) end
      for c = 1, 4 do z = z + math.exp(xt[r][c] - m) end
      for c = 1, 4 do s = s - pt[r][c] * (xt[r][c] - m - math.log(z)) end
    end
    check(F.cross_entropy(x, p), { s / 3 }, {}, 1e-12)
  end)

  it('float32 rows (vectorized log-sum-exp and softmax) agree with float64, gradients too', function()
    H.seed(46)
    for _, C in ipairs({ 37, 8 }) do
      local x64 = rnd({ 6, C }) * 4
      local y = ember.tensor({ 1, C, 2, 3, 1, C }, { dtype = 'int64' })
      for _, opts in ipairs({ {}, { ignore_index = 2, reduction = 'sum' } }) do
        local function run(dtype)
          local x = x64:to(dtype):detach():requires_grad_(true)
          local loss = F.cross_entropy(x, y, opts)
          loss:backward()
          return loss, x.grad
        end
        local l32, g32 = run('float32')
        local l64, g64 = run('float64')
        H.assert_close(l32:to('float64'), l64:item(), 1e-5, 1e-5, 'loss C=' .. C)
        H.assert_close(g32:to('float64'), g64:totable(), 1e-5, 1e-6, 'grad C=' .. C)
      end
    end
  end)

  it('mean over all-ignored targets is NaN, as in PyTorch; float32 agrees with float64', function()
    H.seed(63)
    local y = F.cross_entropy(rnd({ 2, 3 }), ember.tensor({ 2, 2 }, { dtype = 'int64' }), { ignore_index = 2 })
    assert.is_true(y:item() ~= y:item())
    local x = rnd({ 8, 10 })
    local t = ember.tensor({ 1, 2, 3, 4, 5, 6, 7, 10 }, { dtype = 'int64' })
    local x32 = x:float():requires_grad_()
    local x64 = x:clone():requires_grad_()
    F.cross_entropy(x32, t):backward()
    F.cross_entropy(x64, t):backward()
    check(x32.grad, flat(x64.grad), { 8, 10 }, 1e-5)
  end)

  it('reports bad targets', function()
    local x = ember.randn(3, 5)
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 6, 2 }, { dtype = 'int64' })) end,
      'cross_entropy: class index 6 is out of range for 5 classes')
    H.assert_error(function() F.nll_loss(x, ember.tensor({ 0, 1, 2 }, { dtype = 'int64' })) end,
      'nll_loss: class index 0 is out of range for 5 classes')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2 }, { dtype = 'int64' })) end,
      'cross_entropy: expected a target of shape [3] for input [3,5], got [2]')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 })) end,
      'cross_entropy: expected integer class targets, got float32 (use target:long())')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { reduction = 'avg' }) end,
      "cross_entropy: reduction must be 'mean', 'sum' or 'none', got avg")
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { weight = ember.ones(4) }) end,
      'cross_entropy: expected a class weight of shape [5], got [4]')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { label_smoothing = 2 }) end,
      'cross_entropy: expected label_smoothing between 0 and 1, got 2')
  end)
end)
