-- Optimizers, clipping and Torch7's functional forms against independent references: the
-- update rules written out in plain Lua loops (tests/lua/optim_ref.lua), norms summed by hand,
-- and, when /usr/bin/python3 has torch, torch.optim itself run on the same problem. The
-- schedulers are in lr_scheduler_spec.lua.
local H = require 'tests.lua.helpers'
local R = require 'tests.lua.optim_ref'
local ember = H.ember
local optim = ember.optim
local nn = ember.nn

-- ---- the test problem -------------------------------------------------------------------------
-- Parameters of several layouts: contiguous 2x3, a transposed (strided) 2x3 view, a 0-d scalar,
-- a zero-size [0, 3], and one that never gets a gradient (skipped by step). The gradient of
-- parameter element i is c[i] * p[i] + d[i] (a quadratic bowl), computed in Lua from the
-- current values, so reference and optimizer each follow their own trajectory.

local function flat(x) return H.flatten(x:totable()) end

local function make_params(dtype)
  H.seed(7)
  local a = ember.tensor(H.rand_table({ 2, 3 }), { dtype = dtype })
  local b = ember.tensor(H.rand_table({ 3, 2 }), { dtype = dtype }):t()
  local s = ember.tensor(0.75, { dtype = dtype })
  local z = ember.zeros(0, 3, { dtype = dtype })
  local frozen = ember.tensor({ 1, 2 }, { dtype = dtype })
  local ps = { a, b, s, z, frozen }
  for _, p in ipairs(ps) do p.requires_grad = true end
  return ps
end

local coef = {}
local function coefficients(i, n)
  if not coef[i] then
    H.seed(100 + i)
    local c, d = {}, {}
    for k = 1, n do c[k] = H.uniform(0.5, 2); d[k] = H.uniform(-1, 1) end
    coef[i] = { c, d }
  end
  return coef[i][1], coef[i][2]
end

local function grad_values(i, values)
  local c, d = coefficients(i, #values)
  local g = {}
  for k = 1, #values do g[k] = c[k] * values[k] + d[k] end
  return g
end

-- Gives every parameter but the last its gradient; the transposed one gets a strided gradient.
local function set_grads(ps)
  for i = 1, #ps - 1 do
    local p = ps[i]
    local g = grad_values(i, flat(p))
    local t
    if i == 2 then
      local rows = { { g[1], g[4] }, { g[2], g[5] }, { g[3], g[6] } }
      t = ember.tensor(rows, { dtype = p:dtype() }):t()
    else
      t = ember.tensor(g, { dtype = p:dtype() }):view(p:size())
    end
    p.grad = t
  end
end

local function ref_run(name, o, steps)
  local ps = make_params('float64')
  local vals, states, traj = {}, {}, {}
  for i = 1, #ps do vals[i] = flat(ps[i]); states[i] = {} end
  for s = 1, steps do
    for i = 1, #ps - 1 do R[name](o, vals[i], grad_values(i, vals[i]), states[i]) end
    local snap = {}
    for i = 1, #ps do snap[i] = { unpack(vals[i]) } end
    traj[s] = snap
  end
  return traj
end

local function assert_traj(ps, expected, rtol, what)
  for i = 1, #ps do
    H.assert_close(flat(ps[i]), expected[i], rtol, rtol, what .. ', param ' .. i)
  end
end

-- Every option combination that changes the arithmetic.
local CASES = {
  SGD = {
    { lr = 0.1 },
    { lr = 0.1, momentum = 0.9 },
    { lr = 0.05, momentum = 0.9, dampening = 0.3 },
    { lr = 0.05, momentum = 0.8, nesterov = true },
    { lr = 0.1, weight_decay = 0.1 },
    { lr = 0.05, momentum = 0.9, weight_decay = 0.05, maximize = true },
    { lr = 0.05, momentum = 0.5, nesterov = true, weight_decay = 0.01, maximize = true },
  },
  Adam = {
    { lr = 0.1 },
    { lr = 0.1, weight_decay = 0.1 },
    { lr = 0.1, amsgrad = true },
    { lr = 0.05, betas = { 0.5, 0.9 }, eps = 1e-3, maximize = true },
    { lr = 0.1, amsgrad = true, weight_decay = 0.05, maximize = true },
  },
  AdamW = {
    { lr = 0.1 },
    { lr = 0.1, weight_decay = 0.3, amsgrad = true },
    { lr = 0.05, betas = { 0.8, 0.99 }, eps = 1e-4, maximize = true },
  },
  RMSprop = {
    { lr = 0.01 },
    { lr = 0.01, centered = true },
    { lr = 0.01, momentum = 0.9 },
    { lr = 0.01, alpha = 0.9, centered = true, momentum = 0.5, weight_decay = 0.1 },
    { lr = 0.02, eps = 1e-3, maximize = true },
  },
  Adagrad = {
    { lr = 0.1 },
    { lr = 0.1, lr_decay = 0.1 },
    { lr = 0.1, weight_decay = 0.1 },
    { lr = 0.1, initial_accumulator_value = 0.5, eps = 1e-3 },
    { lr = 0.1, lr_decay = 0.05, maximize = true, weight_decay = 0.01 },
  },
}
local NAMES = { 'SGD', 'Adam', 'AdamW', 'RMSprop', 'Adagrad' }

local function describe_opts(o)
  local keys = {}
  for k in pairs(o) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do
    local v = o[k]
    if type(v) == 'table' then v = '{' .. table.concat(v, ',') .. '}' end
    parts[#parts + 1] = k .. '=' .. tostring(v)
  end
  return table.concat(parts, ' ')
end

-- SGD and Adam(W) run fused C steps where the device has them; both forms are checked.
local Opt = require 'ember.optim.optimizer'
local function with_fused(flag, f)
  return function()
    local saved = Opt.use_fused
    Opt.use_fused = flag
    local ok, err = pcall(f)
    Opt.use_fused = saved
    if not ok then error(err, 0) end
  end
end

describe('optimizers follow the reference update rules', function()
  for _, fused in ipairs({ true, false }) do
    local form = fused and '' or ' (composed ops)'
    for _, name in ipairs(NAMES) do
      for _, o in ipairs(CASES[name]) do
        it(name .. ' ' .. describe_opts(o) .. form, with_fused(fused, function()
          local steps = 5
          local expected = ref_run(name, o, steps)
          local ps = make_params('float64')
          local opt = optim[name](ps, o)
          for s = 1, steps do
            opt:zero_grad()
            set_grads(ps)
            opt:step()
            assert_traj(ps, expected[s], 1e-10, ('step %d'):format(s))
          end
          assert.is_nil(ps[5].grad)
          assert.are.same({ 1, 2 }, ps[5]:totable()) -- no gradient: untouched
          assert.is_true(ps[2]:stride(1) == 1)        -- updated in place, layout kept
        end))
      end
    end

    it('updates float32 parameters' .. form, with_fused(fused, function()
      for _, name in ipairs(NAMES) do
        for _, o in ipairs(CASES[name]) do
          local expected = ref_run(name, o, 3)
          local ps = make_params('float32')
          local opt = optim[name](ps, o)
          for s = 1, 3 do
            set_grads(ps)
            opt:step()
            assert_traj(ps, expected[s], 2e-5, name .. ' float32 step ' .. s)
          end
          assert.are.equal('float32', ps[1]:dtype())
        end
      end
    end))

    it('updates bfloat16 and float16 parameters' .. form, with_fused(fused, function()
      for _, dtype in ipairs({ 'bfloat16', 'float16' }) do
        for _, name in ipairs(NAMES) do
          local o = CASES[name][2]
          local ps = make_params(dtype)
          local opt = optim[name](ps, o)
          -- the reference starts from the values rounded to dtype, as the parameters hold them
          local start = {}
          for i = 1, #ps do start[i] = flat(ps[i]) end
          local vals, st = {}, {}
          for i = 1, #ps - 1 do
            vals[i] = { unpack(start[i]) }
            st[i] = {}
            R[name](o, vals[i], grad_values(i, vals[i]), st[i])
          end
          set_grads(ps)
          opt:step()
          local tol = dtype == 'bfloat16' and 2e-2 or 2e-3
          for i = 1, #ps - 1 do
            H.assert_close(flat(ps[i]), vals[i], tol, tol, name .. ' ' .. dtype .. ' param ' .. i)
          end
        end
      end
    end))
  end

  it('uses per-group options, defaults filling the rest', function()
    local ps = make_params('float64')
    local opt = optim.SGD({ { params = { ps[1], ps[2] }, lr = 0.5 },
      { params = { ps[3], ps[4], ps[5] } } }, { lr = 0.1, momentum = 0.9 })
    assert.are.equal(2, #opt.param_groups)
    assert.are.equal(0.5, opt.param_groups[1].lr)
    assert.are.equal(0.1, opt.param_groups[2].lr)
    assert.are.equal(0.9, opt.param_groups[1].momentum)
    local e1 = ref_run('SGD', { lr = 0.5, momentum = 0.9 }, 2)
    local e2 = ref_run('SGD', { lr = 0.1, momentum = 0.9 }, 2)
    for s = 1, 2 do
      set_grads(ps)
      opt:step()
      H.assert_close(flat(ps[1]), e1[s][1], 1e-10, 1e-10)
      H.assert_close(flat(ps[2]), e1[s][2], 1e-10, 1e-10)
      H.assert_close(ps[3]:item(), e2[s][3][1], 1e-10, 1e-10)
    end
    -- lr changed in the group takes effect on the next step
    opt.param_groups[1].lr = 0
    local before = flat(ps[1])
    opt.param_groups[1].momentum = 0
    set_grads(ps)
    opt:step()
    H.assert_close(flat(ps[1]), before, 0, 0)
  end)

  it('trains a model through autograd, zero_grad clearing the gradients', function()
    H.seed(3)
    local x = ember.tensor(H.rand_table({ 8, 3 }), { dtype = 'float64' })
    local y = x * ember.tensor({ 0.5, -1, 2 }, { dtype = 'float64' }) + 0.25 -- reachable: loss -> 0
    local w = ember.ones(3, { dtype = 'float64' }):requires_grad_()
    local b = ember.zeros(3, { dtype = 'float64' }):requires_grad_()
    local opt = optim.SGD({ w, b }, { lr = 0.05, momentum = 0.9 })
    local function loss_fn()
      local r = x * w + b - y
      return (r * r):mean()
    end
    local first = loss_fn():item()
    local returned
    for _ = 1, 100 do
      opt:zero_grad()
      assert.is_nil(w.grad)
      returned = opt:step(function()
        local l = loss_fn()
        l:backward()
        return l
      end)
    end
    assert.is_true(ember.is_tensor(returned))
    assert.is_true(loss_fn():item() < first * 1e-2)
    assert.is_true(w.requires_grad and w.is_leaf)
    opt:zero_grad(false) -- zero in place
    assert.are.same({ 0, 0, 0 }, w.grad:totable())
  end)

  it('accepts a single tensor, and a module-like object with :parameters()', function()
    local p = ember.tensor({ 1, 2 }, { dtype = 'float64' }):requires_grad_()
    local opt = optim.SGD(p, 0.5)
    p.grad = ember.tensor({ 1, 1 }, { dtype = 'float64' })
    opt:step()
    assert.are.same({ 0.5, 1.5 }, p:totable())
    local q = ember.tensor({ 3 }, { dtype = 'float64' }):requires_grad_()
    local module = { parameters = function() return { q } end }
    local opt2 = optim.Adam(module, { lr = 0.1 })
    assert.are.equal(q, opt2.param_groups[1].params[1])
    assert.is_truthy(tostring(opt2):find('Adam', 1, true))
  end)

  it('add_param_group adds parameters with the defaults', function()
    local ps = make_params('float64')
    local opt = optim.Adagrad({ ps[1] }, { lr = 0.1, initial_accumulator_value = 0.25 })
    opt:add_param_group({ params = { ps[2] }, lr = 0.2 })
    assert.are.equal(0.2, opt.param_groups[2].lr)
    assert.are.equal(0.25, opt.param_groups[2].initial_accumulator_value)
    H.assert_close(opt.state[ps[2]].sum, { { 0.25, 0.25, 0.25 }, { 0.25, 0.25, 0.25 } })
    H.assert_error(function() opt:add_param_group({ params = { ps[1] } }) end, 'more than once')
    H.assert_error(function() opt:add_param_group({ params = { ps[3] }, lr = -1 }) end,
      'invalid learning rate')
  end)
end)

describe('fused steps through the C API', function()
  local C = ember.C
  local ffi = require 'ffi'
  local function sgd_opts(t)
    local o = ffi.new('em_sgd_options')
    o.lr = 0.5
    for k, v in pairs(t or {}) do o[k] = v end
    return o
  end
  local function adam_opts(t)
    local o = ffi.new('em_adam_options')
    o.lr, o.beta1, o.beta2, o.eps, o.step = 0.1, 0.9, 0.999, 1e-8, 1
    for k, v in pairs(t or {}) do o[k] = v end
    return o
  end
  local function last_error() return ffi.string(C.em_last_error()) end
  local function expect_fail(rc, pattern)
    assert.are.equal(-1, rc)
    local msg = last_error()
    assert.is_truthy(msg:find(pattern, 1, true), msg)
  end
  local f64 = { dtype = 'float64' }

  it('reads broadcast gradients, accepts grad aliasing param exactly, bumps versions', function()
    local p = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, f64)
    local g = ember.tensor({ 1, 2, 3 }, f64):expand(2, 3)
    local v0 = tonumber(C.em_storage_version(p.ptr))
    assert.are.equal(0, C.em_sgd_step_(p.ptr, g.ptr, nil, sgd_opts()))
    assert.are.same({ { 0.5, 1, 1.5 }, { 3.5, 4, 4.5 } }, p:totable())
    assert.is_true(tonumber(C.em_storage_version(p.ptr)) > v0)
    assert.are.equal(0, C.em_sgd_step_(p.ptr, p.ptr, nil, sgd_opts()))
    assert.are.same({ { 0.25, 0.5, 0.75 }, { 1.75, 2, 2.25 } }, p:totable())
    local z = ember.zeros(0, 3, f64)
    assert.are.equal(0, C.em_adam_step_(z.ptr, z:clone().ptr, z:clone().ptr, z:clone().ptr, nil, adam_opts()))
  end)

  it('agrees with the composed ops on large tensors (several threads), contiguous or not', function()
    ember.manual_seed(5)
    local function run(fused, name, o, layout)
      local saved = Opt.use_fused
      Opt.use_fused = fused
      ember.manual_seed(5)
      local p = ember.randn(300, 400, f64)
      if layout == 'strided' then p = ember.randn(400, 300, f64):t() end
      p:requires_grad_()
      local opt = optim[name]({ p }, o)
      for _ = 1, 3 do
        p.grad = p:detach() * 0.5 + 0.25
        opt:step()
      end
      Opt.use_fused = saved
      return p
    end
    for _, case in ipairs({ { 'SGD', { lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.1 } },
      { 'Adam', { lr = 0.1, amsgrad = true } }, { 'AdamW', { lr = 0.1, maximize = true } } }) do
      for _, layout in ipairs({ 'contiguous', 'strided' }) do
        local a, b = run(true, case[1], case[2], layout), run(false, case[1], case[2], layout)
        local diff = (a - b):abs():max():item()
        assert.is_true(diff < 1e-12, case[1] .. ' ' .. layout .. ': max difference ' .. diff)
      end
    end
  end)

  it('reports operands that do not fit', function()
    local p = ember.zeros(2, 3, f64)
    expect_fail(C.em_sgd_step_(p.ptr, ember.zeros(3, 2, f64).ptr, nil, sgd_opts()),
      'sgd_step_: expected grad to be a float64 tensor of shape [2,3] on cpu like the parameter, got float64 [3,2]')
    expect_fail(C.em_sgd_step_(p.ptr, ember.zeros(2, 3).ptr, nil, sgd_opts()), 'got float32 [2,3]')
    expect_fail(C.em_sgd_step_(p.ptr, ember.zeros(2, 3, f64).ptr, p.ptr, sgd_opts({ momentum = 0.9 })),
      'sgd_step_: param and momentum_buffer share memory')
    expect_fail(C.em_sgd_step_(p.ptr, p[1]:view(1, 3):expand(2, 3).ptr, nil, sgd_opts()),
      'param and grad share memory')
    expect_fail(C.em_sgd_step_(p.ptr, p.ptr, nil, sgd_opts({ momentum = 0.9 })), 'needs a momentum buffer')
    local e = ember.zeros(1, 3, f64):expand(2, 3)
    expect_fail(C.em_sgd_step_(e.ptr, ember.zeros(2, 3, f64).ptr, nil, sgd_opts()), 'stride-0 (expanded) dimension 0')
    expect_fail(C.em_sgd_step_(ember.zeros(2, { dtype = 'int64' }).ptr, ember.zeros(2, { dtype = 'int64' }).ptr, nil,
      sgd_opts()), 'expected a floating-point parameter, got int64')
    expect_fail(C.em_sgd_step_(p.ptr, p.ptr, nil, sgd_opts({ lr = -1 })), 'sgd_step_: invalid learning rate -1')
    expect_fail(C.em_sgd_step_(p.ptr, p.ptr, nil, sgd_opts({ nesterov = 1 })), 'Nesterov momentum requires')
    expect_fail(C.em_sgd_step_(nil, p.ptr, nil, sgd_opts()), 'expected a parameter, a gradient and options')
    local m, v = ember.zeros(2, 3, f64), ember.zeros(2, 3, f64)
    expect_fail(C.em_adam_step_(p.ptr, p.ptr, m.ptr, v.ptr, nil, adam_opts({ beta1 = 1 })), 'adam_step_: invalid betas (1, 0.999)')
    expect_fail(C.em_adam_step_(p.ptr, p.ptr, m.ptr, v.ptr, nil, adam_opts({ step = 0 })), 'expected step >= 1, got 0')
    expect_fail(C.em_adam_step_(p.ptr, p.ptr, m.ptr, m.ptr, nil, adam_opts()), 'exp_avg and exp_avg_sq share memory')
    expect_fail(C.em_adam_step_(p.ptr, p.ptr, m.ptr, v.ptr, ember.zeros(3, f64).ptr, adam_opts()),
      'expected max_exp_avg_sq to be a float64 tensor of shape [2,3]')
    expect_fail(C.em_adam_step_(p.ptr, p.ptr, m.ptr, v.ptr, nil, adam_opts({ eps = -1 })), 'invalid epsilon')
    local w = ember.zeros(2, f64):requires_grad_()
    expect_fail(C.em_sgd_step_(w.ptr, ember.ones(2, f64).ptr, nil, sgd_opts()),
      'sgd_step_: the parameter requires grad and grad mode is on')
    assert.are.same({ 0, 0 }, w:totable())
  end)
end)

describe('optimizer argument errors', function()
  local p = ember.zeros(2):requires_grad_()
  local cases = {
    { 'SGD', { lr = -0.1 }, 'SGD: invalid learning rate -0.1' },
    { 'SGD', { momentum = -0.5 }, 'SGD: invalid momentum' },
    { 'SGD', { weight_decay = -1 }, 'SGD: invalid weight decay' },
    { 'SGD', { nesterov = true }, 'Nesterov momentum requires a momentum and zero dampening' },
    { 'SGD', { nesterov = true, momentum = 0.9, dampening = 0.1 }, 'zero dampening' },
    { 'SGD', { lr = 'fast' }, 'expected a number for lr' },
    { 'SGD', { maximize = 1 }, 'expected true or false for maximize' },
    { 'SGD', { lrr = 0.1 }, 'unknown option lrr' },
    { 'Adam', { betas = { 1, 0.999 } }, 'invalid beta parameter at index 1' },
    { 'Adam', { betas = { 0.9, -0.1 } }, 'invalid beta parameter at index 2' },
    { 'Adam', { betas = 0.9 }, 'expected betas to be a table of two numbers' },
    { 'Adam', { eps = -1e-8 }, 'Adam: invalid epsilon value' },
    { 'Adam', { lr = -1 }, 'Adam: invalid learning rate' },
    { 'AdamW', { weight_decay = -0.01 }, 'AdamW: invalid weight decay' },
    { 'AdamW', { amsgrad = 'yes' }, 'expected true or false for amsgrad' },
    { 'RMSprop', { alpha = -0.1 }, 'RMSprop: invalid alpha value' },
    { 'RMSprop', { momentum = -1 }, 'RMSprop: invalid momentum' },
    { 'RMSprop', { eps = -1 }, 'RMSprop: invalid epsilon value' },
    { 'Adagrad', { lr_decay = -1 }, 'Adagrad: invalid lr_decay value' },
    { 'Adagrad', { initial_accumulator_value = -1 }, 'invalid initial_accumulator_value' },
    { 'Adagrad', { weight_decay = -1 }, 'invalid weight_decay value' },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ' ' .. c[3], function()
      H.assert_error(function() optim[c[1]]({ p }, c[2]) end, c[3])
    end)
  end

  it('rejects bad parameter lists', function()
    H.assert_error(function() optim.SGD(nil, {}) end, 'SGD: expected parameters')
    H.assert_error(function() optim.SGD({}, {}) end, 'SGD: got an empty parameter list')
    H.assert_error(function() optim.SGD({ p, 3 }, {}) end, 'params[2] is a number, not a tensor')
    H.assert_error(function() optim.SGD({ ember.zeros(2, { dtype = 'int64' }) }, {}) end,
      'only floating-point tensors can be optimized')
    H.assert_error(function() optim.SGD({ p * 2 }, {}) end, 'is not a leaf tensor')
    H.assert_error(function() optim.SGD({ p, p }, {}) end, 'appears more than once')
    H.assert_error(function() optim.SGD({ { params = { p } }, { params = { p } } }, {}) end,
      'appears more than once')
    H.assert_error(function() optim.SGD({ p }, 'fast') end, 'SGD: expected an options table')
    local opt = optim.SGD({ p }, {})
    H.assert_error(function() opt:step(42) end, 'expected a closure function')
    H.assert_error(function() opt:add_param_group(p) end, 'add_param_group expects a table')
  end)

  it('leaves grad mode on after a failing closure', function()
    local opt = optim.SGD({ p }, {})
    H.assert_error(function() opt:step(function() error('boom') end) end, 'boom')
    assert.is_true(ember.is_grad_enabled())
  end)
end)

-- ---- state_dict ----------------------------------------------------------------------------------

local function through_checkpoint(sd) return R.through_checkpoint(ember, sd) end

describe('state_dict', function()
  local cases = {
    { 'SGD', { lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.01 } },
    { 'Adam', { lr = 0.1, amsgrad = true, weight_decay = 0.05 } },
    { 'AdamW', { lr = 0.1, betas = { 0.8, 0.99 } } },
    { 'RMSprop', { lr = 0.01, momentum = 0.5, centered = true } },
    { 'Adagrad', { lr = 0.1, lr_decay = 0.1, initial_accumulator_value = 0.1 } },
  }
  for _, c in ipairs(cases) do
    local name, o = c[1], c[2]
    it(name .. ': k steps, save, load into a new optimizer, N - k more equals N steps', function()
      local N, k = 6, 3
      local full = make_params('float64')
      local opt = optim[name](full, o)
      for _ = 1, N do set_grads(full); opt:step() end

      local ps = make_params('float64')
      local first = optim[name](ps, o)
      for _ = 1, k do set_grads(ps); first:step() end
      local sd = through_checkpoint(first:state_dict())
      local second = optim[name](ps, { lr = 123 }) -- hyperparameters come from the state dict
      second:load_state_dict(sd)
      assert.are.equal(o.lr, second.param_groups[1].lr)
      for _ = k + 1, N do set_grads(ps); second:step() end
      for i = 1, #ps do
        assert.are.same(flat(full[i]), flat(ps[i]), name .. ' param ' .. i)
      end
      local st = second.state[ps[1]]
      assert.is_truthy(next(st))
      assert.are.equal(N, st.step or N)
    end)

    it(name .. ': load_state_dict copies the state tensors', function()
      local ps = make_params('float64')
      local first = optim[name](ps, o)
      set_grads(ps)
      first:step()
      local second = optim[name](ps, o)
      second:load_state_dict(first:state_dict())
      local snapshot = {}
      for k, v in pairs(second.state[ps[1]]) do
        if ember.is_tensor(v) then snapshot[k] = flat(v) end
      end
      assert.is_truthy(next(snapshot))
      set_grads(ps)
      first:step() -- changes first's buffers in place
      for k, v in pairs(snapshot) do
        assert.are.same(v, flat(second.state[ps[1]][k]), k)
      end
    end)
  end

  it('lists state by parameter index and groups with their options', function()
    local ps = make_params('float64')
    local opt = optim.Adam({ { params = { ps[1], ps[2] }, lr = 0.1 }, { params = { ps[3] } } },
      { lr = 0.01 })
    set_grads(ps)
    opt:step()
    local sd = opt:state_dict()
    assert.are.same({ 1, 2 }, sd.param_groups[1].params)
    assert.are.same({ 3 }, sd.param_groups[2].params)
    assert.are.equal(0.1, sd.param_groups[1].lr)
    assert.are.equal(0.01, sd.param_groups[2].lr)
    assert.are.same({ 0.9, 0.999 }, sd.param_groups[1].betas)
    assert.are.equal(1, sd.state[1].step)
    assert.is_true(ember.is_tensor(sd.state[1].exp_avg))
    assert.are.same({ 2, 3 }, { sd.state[2].exp_avg_sq:size(1), sd.state[2].exp_avg_sq:size(2) })
    -- every leaf is a tensor, a number, a boolean or a list of them: what ember.save writes
    local function check(t)
      for _, v in pairs(t) do
        if type(v) == 'table' then check(v)
        else assert.is_true(ember.is_tensor(v) or type(v) == 'number' or type(v) == 'boolean') end
      end
    end
    check(sd)
  end)

  it('accepts values a checkpoint format brings back as strings', function()
    local ps = make_params('float64')
    local opt = optim.SGD(ps, { lr = 0.1, momentum = 0.9 })
    set_grads(ps)
    opt:step()
    local sd = opt:state_dict()
    local g = sd.param_groups[1]
    local stringy = { param_groups = { ['1'] = { lr = '0.25', momentum = '0.9', dampening = '0',
      weight_decay = '0', nesterov = 'false', maximize = 'false',
      params = { ['1'] = '1', ['2'] = '2', ['3'] = '3', ['4'] = '4', ['5'] = '5' } } },
      state = { ['1'] = { momentum_buffer = sd.state[1].momentum_buffer } } }
    local _ = g
    local opt2 = optim.SGD(ps, { lr = 0.1, momentum = 0.9 })
    opt2:load_state_dict(stringy)
    assert.are.equal(0.25, opt2.param_groups[1].lr)
    assert.are.equal(false, opt2.param_groups[1].nesterov)
    H.assert_close(opt2.state[ps[1]].momentum_buffer, sd.state[1].momentum_buffer:totable())
  end)

  it('refuses state dicts that do not fit', function()
    local ps = make_params('float64')
    local opt = optim.Adam(ps, {})
    set_grads(ps)
    opt:step()
    local sd = opt:state_dict()
    local other = optim.Adam({ ps[1] }, {})
    H.assert_error(function() other:load_state_dict(sd) end, 'parameter group 1 has 5 parameters')
    local two = optim.Adam({ { params = { ps[1] } }, { params = { ps[2] } } }, {})
    H.assert_error(function() two:load_state_dict(sd) end, 'has 1 parameter groups, the optimizer 2')
    H.assert_error(function() opt:load_state_dict(42) end, 'expected a table with param_groups')
    local bad = opt:state_dict()
    bad.param_groups[1].lr = -1
    H.assert_error(function() opt:load_state_dict(bad) end, 'invalid learning rate')
    local wrong = opt:state_dict()
    wrong.state[1] = { step = 1, exp_avg = ember.zeros(5), exp_avg_sq = ember.zeros(5) }
    H.assert_error(function() opt:load_state_dict(wrong) end, 'has 5 elements')
    assert.are.equal(1e-3, opt.param_groups[1].lr) -- a failed load changes nothing
  end)
end)

-- ---- Torch7's functional forms -----------------------------------------------------------------

describe('Torch7 functional optim', function()
  local function problem()
    H.seed(11)
    local init = {}
    for i = 1, 7 do init[i] = H.uniform(-1, 1) end
    return init
  end
  local function grad_at(x)
    local c, d = coefficients(99, #x)
    local g = {}
    for i = 1, #x do g[i] = c[i] * x[i] + d[i] end
    return g
  end
  local function loss_at(x)
    local c, d = coefficients(99, #x)
    local l = 0
    for i = 1, #x do l = l + 0.5 * c[i] * x[i] * x[i] + d[i] * x[i] end
    return l
  end

  local configs = {
    sgd = {
      { learningRate = 0.1 },
      { learningRate = 0.1, momentum = 0.9 }, -- Torch7: dampening defaults to the momentum
      { learningRate = 0.1, momentum = 0.9, dampening = 0, nesterov = true, weightDecay = 0.01,
        learningRateDecay = 0.1 },
    },
    adam = {
      { learningRate = 0.1 },
      { learningRate = 0.05, beta1 = 0.8, beta2 = 0.99, epsilon = 1e-4, weightDecay = 0.1,
        learningRateDecay = 0.05 },
    },
  }
  for _, method in ipairs({ 'sgd', 'adam' }) do
    for _, cfg in ipairs(configs[method]) do
      it(method .. ' ' .. describe_opts(cfg), function()
        local init = problem()
        local x = ember.tensor(init, { dtype = 'float64' })
        local ref, ref_state = { unpack(init) }, {}
        local config, state = {}, {}
        for k, v in pairs(cfg) do config[k] = v end
        for _ = 1, 5 do
          local before = loss_at(ref)
          local _, fs = optim[method](function(xx)
            return loss_at(flat(xx)), ember.tensor(grad_at(flat(xx)), { dtype = 'float64' })
          end, x, config, state)
          R['torch7_' .. method](cfg, ref, grad_at(ref), ref_state)
          H.assert_close(flat(x), ref, 1e-10, 1e-10)
          H.assert_close(fs[1], before, 1e-10, 1e-10)
        end
        if method == 'sgd' then assert.are.equal(5, state.evalCounter) else assert.are.equal(5, state.t) end
      end)
    end
  end

  it('sgd with per-element learning rates, state in config when omitted', function()
    local init = problem()
    local x = ember.tensor(init, { dtype = 'float64' })
    local rates = {}
    for i = 1, #init do rates[i] = i / 7 end
    local cfg = { learningRate = 0.1, learningRates = ember.tensor(rates, { dtype = 'float64' }) }
    local ref, st = { unpack(init) }, {}
    for _ = 1, 3 do
      optim.sgd(function(xx) return 0, ember.tensor(grad_at(flat(xx)), { dtype = 'float64' }) end,
        x, cfg)
      R.torch7_sgd({ learningRate = 0.1, learningRates = rates }, ref, grad_at(ref), st)
    end
    H.assert_close(flat(x), ref, 1e-10, 1e-10)
    assert.are.equal(3, cfg.evalCounter)
  end)

  it('does not modify the gradient feval returns', function()
    local x = ember.tensor({ 1, 2 }, { dtype = 'float64' })
    local g = ember.tensor({ 0.5, 0.5 }, { dtype = 'float64' })
    optim.sgd(function() return 1, g end, x, { learningRate = 1, weightDecay = 1, momentum = 0.5,
      dampening = 0, nesterov = true })
    assert.are.same({ 0.5, 0.5 }, g:totable())
  end)

  it('reports bad feval results and configs', function()
    local x = ember.zeros(3)
    H.assert_error(function() optim.sgd(42, x) end, 'optim.sgd: expected feval to be a function')
    H.assert_error(function() optim.adam(function() return 1, ember.zeros(2) end, x) end,
      'optim.adam: dloss/dx has 2 elements, x has 3')
    H.assert_error(function() optim.sgd(function() return 'a', ember.zeros(3) end, x) end,
      'must return the loss as a number')
    H.assert_error(function() optim.sgd(function() return 1 end, x) end,
      'must return dloss/dx')
    H.assert_error(function() optim.sgd(function() return 1, ember.zeros(3) end, x,
      { learningRate = 'x' }) end, 'expected config.learningRate to be a number')
    H.assert_error(function() optim.sgd(function() return 1, ember.zeros(3) end, x,
      { nesterov = true }) end, 'Nesterov momentum requires')
    H.assert_error(function() optim.sgd(function() return 1, ember.zeros(3) end, 'x') end,
      'expected x to be a tensor')
  end)
end)

describe('flatten_parameters', function()
  it('copies parameters into one flat tensor with views and gradient views', function()
    local w = ember.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = 'float64' }):requires_grad_()
    local s = ember.tensor(5, { dtype = 'float64' }):requires_grad_()
    local e = ember.zeros(0, { dtype = 'float64' }):requires_grad_()
    local b = ember.tensor({ 6, 7 }, { dtype = 'float64' }):t():requires_grad_()
    local x, dx, views, gviews = optim.flatten_parameters({ w, s, e, b })
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7 }, x:totable())
    assert.are.same({ 0, 0, 0, 0, 0, 0, 0 }, dx:totable())
    assert.are.same({ { 1, 2 }, { 3, 4 } }, views[1]:totable())
    assert.are.equal(5, views[2]:item())
    assert.are.equal(0, views[3]:numel())
    assert.is_true(views[1]:is_same_storage(x) and gviews[4]:is_same_storage(dx))
    x[1] = 10
    assert.are.equal(10, views[1][1][1])
    assert.are.same({ 1, 2 }, w:totable()[1]) -- the originals are copies

    -- backward through the views accumulates into dx; optim.sgd updates x, so the views
    for step = 1, 2 do
      local _, fs = optim.sgd(function()
        dx:zero_()
        local loss = (views[1] * views[1]):sum() + views[2] * 3 + views[4]:sum()
        loss:backward()
        return loss, dx
      end, x, { learningRate = 0.1 })
      assert.is_number(fs[1])
      if step == 1 then
        -- gradient at x = {10, 2, 3, 4, 5, 6, 7}: 2w, 3, 1, 1
        assert.are.same({ 20, 4, 6, 8, 3, 1, 1 }, dx:totable())
      end
    end
    H.assert_close(views[1], { { 10 * 0.8 * 0.8, 2 * 0.64 }, { 3 * 0.64, 4 * 0.64 } }, 1e-12, 1e-12)
    H.assert_close(views[2]:item(), 5 - 0.6, 1e-12, 1e-12)
  end)

  it('refuses mixed dtypes and empty lists', function()
    H.assert_error(function() optim.flatten_parameters({ ember.zeros(2), ember.zeros(2, { dtype = 'float64' }) }) end,
      'all must share dtype and device')
    H.assert_error(function() optim.flatten_parameters({}) end, 'expected a non-empty list')
    H.assert_error(function() optim.flatten_parameters({ ember.zeros(1), 'w' }) end, 'not a tensor')
  end)
end)

-- ---- clipping ------------------------------------------------------------------------------------

describe('gradient clipping', function()
  local function with_grads(gs)
    local ps = {}
    for i, g in ipairs(gs) do
      local p = ember.zeros(#g, { dtype = 'float64' }):requires_grad_()
      if #g > 0 then p.grad = ember.tensor(g, { dtype = 'float64' }) end
      ps[i] = p
    end
    return ps
  end
  local G = { { 3, -4, 1 }, { 2, 0.5 }, {} }

  local function pnorm(p)
    local all = {}
    for _, g in ipairs(G) do for _, v in ipairs(g) do all[#all + 1] = math.abs(v) end end
    if p == math.huge then return math.max(unpack(all)) end
    local s = 0
    for _, v in ipairs(all) do s = s + v ^ p end
    return s ^ (1 / p)
  end

  for _, p in ipairs({ 2, 1, 3, math.huge }) do
    it('clip_grad_norm_ with norm_type ' .. tostring(p), function()
      local ps = with_grads(G)
      local total = optim.clip_grad_norm_(ps, 1.5, p)
      H.assert_close(total, pnorm(p), 1e-12, 1e-12)
      local coef = 1.5 / (pnorm(p) + 1e-6)
      for i = 1, 2 do
        local expected = {}
        for k, v in ipairs(G[i]) do expected[k] = v * coef end
        H.assert_close(ps[i].grad, expected, 1e-12, 1e-12)
      end
    end)
  end

  it("clip_grad_norm_ leaves small gradients alone; 'inf' names the max norm", function()
    local ps = with_grads(G)
    local total = optim.clip_grad_norm_(ps, 100)
    H.assert_close(total, pnorm(2), 1e-12, 1e-12)
    assert.are.same(G[1], ps[1].grad:totable())
    local t2 = optim.clip_grad_norm_(with_grads(G), 100, 'inf')
    assert.are.equal(4, t2)
    assert.are.equal(0, optim.clip_grad_norm_({ ember.zeros(2):requires_grad_() }, 1))
  end)

  it('clip_grad_norm_ works on float32 strided gradients and a single tensor', function()
    local p = ember.zeros(2, 2):requires_grad_()
    p.grad = ember.tensor({ { 3, 0 }, { 4, 0 } }):t()
    local total = optim.clip_grad_norm_(p, 1)
    H.assert_close(total, 5, 1e-6, 1e-6)
    H.assert_close(p.grad, { { 0.6, 0.8 }, { 0, 0 } }, 1e-5, 1e-6)
  end)

  it('clip_grad_norm_ on non-finite norms', function()
    local ps = with_grads({ { 1, math.huge } })
    H.assert_error(function() optim.clip_grad_norm_(ps, 1, 2, true) end, 'is inf, so they cannot be clipped')
    H.assert_error(function() optim.clip_grad_norm_(ps, 1, 2, { error_if_nonfinite = true }) end,
      'cannot be clipped')
    local total = optim.clip_grad_norm_(ps, 1)
    assert.are.equal(math.huge, total)
    local g = ps[1].grad:totable()
    assert.are.equal(0, g[1])
    assert.is_true(g[2] ~= g[2]) -- inf * 0, as in PyTorch
  end)

  it('clip_grad_value_ clamps each element', function()
    local ps = with_grads(G)
    optim.clip_grad_value_(ps, 1)
    assert.are.same({ 1, -1, 1 }, ps[1].grad:totable())
    assert.are.same({ 1, 0.5 }, ps[2].grad:totable())
    assert.is_nil(ps[3].grad)
  end)

  it('argument errors', function()
    local ps = with_grads(G)
    H.assert_error(function() optim.clip_grad_norm_(ps, 'big') end, 'clip_grad_norm_: expected max_norm to be a number')
    H.assert_error(function() optim.clip_grad_norm_(ps, 1, 'two') end, 'expected norm_type')
    H.assert_error(function() optim.clip_grad_norm_(42, 1) end, 'expected a tensor or a list of tensors')
    H.assert_error(function() optim.clip_grad_norm_({ 1 }, 1) end, 'parameters[1] is a number')
    H.assert_error(function() optim.clip_grad_value_(ps, nil) end, 'clip_grad_value_: expected clip_value')
    H.assert_error(function() optim.clip_grad_value_(ps, -1) end, 'expected clip_value >= 0')
  end)

  it('is reachable as ember.nn.utils', function()
    if not ember.nn or not ember.nn.utils then return pending('ember.nn.utils is not loaded') end
    assert.are.equal(optim.clip_grad_norm_, ember.nn.utils.clip_grad_norm_)
    assert.are.equal(optim.clip_grad_value_, ember.nn.utils.clip_grad_value_)
  end)
end)

-- ---- torch.optim cross-check ----------------------------------------------------------------------
-- Runs the same problem through torch.optim (float64) in one python process and compares every
-- step to 1e-6. Skipped when /usr/bin/python3 or its torch is missing.

describe('torch.optim cross-check', function()
  it('every optimizer matches torch step by step', function()
    if not R.have_torch() then return pending('/usr/bin/python3 with torch is not available') end
    local ps0 = make_params('float64')
    local inits, cs, ds = {}, {}, {}
    for i = 1, 4 do
      inits[i] = flat(ps0[i])
      cs[i], ds[i] = coefficients(i, #inits[i])
    end
    local runs = {}
    for _, name in ipairs(NAMES) do
      for _, o in ipairs(CASES[name]) do runs[#runs + 1] = { name, o } end
    end
    local lines = {
      'import torch', 'torch.set_default_dtype(torch.float64)',
      'inits = ' .. R.py_value(inits), 'cs = ' .. R.py_value(cs), 'ds = ' .. R.py_value(ds),
      'def run(cls, kw, steps=5):',
      '    ps = [torch.tensor(v).requires_grad_() for v in inits]',
      '    opt = cls(ps, **kw)',
      '    for s in range(steps):',
      '        for i, p in enumerate(ps):',
      '            p.grad = torch.tensor(cs[i]) * p.detach() + torch.tensor(ds[i])',
      '        opt.step()',
      "        print(' '.join('%.17g' % v for p in ps for v in p.detach().reshape(-1).tolist()))",
    }
    for _, r in ipairs(runs) do
      lines[#lines + 1] = ('run(torch.optim.%s, dict(%s))'):format(r[1], R.py_kwargs(r[2]))
    end
    local next_numbers = R.run_python(lines)
    for _, r in ipairs(runs) do
      local ps = make_params('float64')
      local opt = optim[r[1]](ps, r[2])
      for s = 1, 5 do
        set_grads(ps)
        opt:step()
        local got = {}
        for i = 1, 4 do for _, v in ipairs(flat(ps[i])) do got[#got + 1] = v end end
        H.assert_close(got, next_numbers(), 1e-6, 1e-6,
          ('%s %s step %d'):format(r[1], describe_opts(r[2]), s))
      end
    end
  end)
end)

describe('a step that runs out of memory', function()
  after_each(function() ember.memory.set_limit('cpu', 0) end)

  it('changes no parameter (the state is made first), and a retried step is exact', function()
    for _, make in ipairs({
      function(ps) return ember.optim.Adam(ps, { lr = 0.1 }) end,
      function(ps) return ember.optim.AdamW(ps, { lr = 0.1, amsgrad = true }) end,
      function(ps) return ember.optim.SGD(ps, { lr = 0.1, momentum = 0.9 }) end,
      function(ps) return ember.optim.RMSprop(ps, { lr = 0.1, momentum = 0.5, centered = true }) end,
    }) do -- (Adagrad makes its state when it is constructed)
      -- 8 parameters of 1 MiB: their state cannot fit under the limit, one of them can
      local ps, want = {}, {}
      for i = 1, 8 do
        ps[i] = ember.randn(512, 512):requires_grad_()
        ps[i].grad = ember.randn(512, 512)
        want[i] = ps[i]:detach():clone()
      end
      local opt = make(ps)
      ember.memory.set_limit('cpu', H.settled_allocated() + 3 * 2 ^ 20)
      local ok, err = pcall(function() opt:step() end)
      assert.is_false(ok)
      assert.truthy(tostring(err):find('out of memory on cpu', 1, true), err)
      ember.memory.set_limit('cpu', 0)
      for i = 1, 8 do
        assert.are.equal(0, (ps[i]:detach() - want[i]):abs():max():item(), 'parameter ' .. i)
      end
      opt:step()
      -- the same step from a fresh optimizer on the same values
      local qs = {}
      for i = 1, 8 do
        qs[i] = want[i]:clone():requires_grad_()
        qs[i].grad = ps[i].grad:clone()
      end
      make(qs):step()
      for i = 1, 8 do
        assert.are.equal(0, (ps[i]:detach() - qs[i]:detach()):abs():max():item(), 'retried ' .. i)
      end
      -- what a checkpoint saves after the failure and the retry matches the fresh optimizer's
      assert.are.equal(#opt:state_dict().state, 8)
    end
  end)
end)

-- ---- 16-bit parameters: float32 state and master copies -------------------------------------------
-- A 16-bit parameter is optimized through a float32 master copy (state.master_param) with float32
-- state: the master must follow exactly the float32 run of the same optimizer fed the same
-- (16-bit) gradients, and the parameter must hold the master rounded to its dtype.

describe('16-bit parameters', function()
  local VKH = require 'vk_helpers'
  local V = VKH.V

  -- The same values as float32 leaves (the twin run) and as dtype leaves.
  local function twins(dtype)
    local ps16 = make_params(dtype)
    local ps32 = {}
    for i, p in ipairs(ps16) do
      ps32[i] = p:detach():to('float32'):clone():requires_grad_()
    end
    return ps16, ps32
  end

  for _, fused in ipairs({ true, false }) do
    local form = fused and '' or ' (composed ops)'
    for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
      it(dtype .. ': every optimizer keeps float32 state and a master copy' .. form,
        with_fused(fused, function()
          for _, name in ipairs(NAMES) do
            for ci, o in ipairs(CASES[name]) do
              local what = ('%s case %d %s'):format(name, ci, dtype)
              local ps16, ps32 = twins(dtype)
              local o16, o32 = optim[name](ps16, o), optim[name](ps32, o)
              for s = 1, 3 do
                set_grads(ps16)
                for i = 1, #ps16 - 1 do ps32[i].grad = ps16[i].grad:to('float32') end
                o16:step()
                o32:step()
                for i = 1, #ps16 - 1 do
                  local st = o16.state[ps16[i]]
                  assert.are.equal('float32', st.master_param:dtype(), what)
                  -- bit for bit: the same float32 arithmetic on the same numbers
                  assert.are.same(flat(ps32[i]), flat(st.master_param), what .. ' step ' .. s .. ' param ' .. i)
                  assert.are.same(flat(st.master_param:to(dtype)), flat(ps16[i]), what .. ' rounding')
                  for k, v in pairs(st) do
                    if ember.is_tensor(v) then assert.are.equal('float32', v:dtype(), what .. ' ' .. k) end
                  end
                end
              end
              -- never stepped: no master yet (Adagrad makes its state, master too, at construction)
              local st5 = o16.state[ps16[5]]
              if name ~= 'Adagrad' then assert.is_true(st5 == nil or st5.master_param == nil) end
            end
          end
        end))
    end
  end

  it('state_dict: master and state round-trip through a checkpoint; N steps = k + (N - k)', function()
    for _, name in ipairs(NAMES) do
      local o = CASES[name][2]
      local N, k = 6, 3
      local full = make_params('float16')
      local opt = optim[name](full, o)
      for _ = 1, N do set_grads(full); opt:step() end

      local ps = make_params('float16')
      local first = optim[name](ps, o)
      for _ = 1, k do set_grads(ps); first:step() end
      local sd = R.through_checkpoint(ember, first:state_dict())
      assert.are.equal('float32', sd.state[1].master_param:dtype(), name)
      local second = optim[name](ps, o)
      second:load_state_dict(sd)
      assert.are.equal('float32', second.state[ps[1]].master_param:dtype(), name)
      for _ = k + 1, N do set_grads(ps); second:step() end
      for i = 1, #ps - 1 do
        assert.are.same(flat(opt.state[full[i]].master_param), flat(second.state[ps[i]].master_param),
          name .. ' master ' .. i)
        assert.are.same(flat(full[i]), flat(ps[i]), name .. ' param ' .. i)
      end
    end
  end)

  it('a state dict crosses dtypes: float32 state into float16 parameters and back', function()
    local p32 = make_params('float32')
    local a = optim.AdamW(p32, { lr = 0.1 })
    set_grads(p32); a:step()
    local p16 = make_params('float16')
    local b = optim.AdamW(p16, { lr = 0.1 })
    b:load_state_dict(a:state_dict())
    local st = b.state[p16[1]]
    assert.are.equal('float32', st.exp_avg:dtype())
    assert.is_nil(st.master_param) -- made from the parameter at the next step
    set_grads(p16); b:step()
    assert.are.equal('float32', b.state[p16[1]].master_param:dtype())
    -- and a 16-bit optimizer's state into float32 parameters: master_param is dropped
    local c = optim.AdamW(make_params('float32'), { lr = 0.1 })
    c:load_state_dict(b:state_dict())
    local cs = c.state[c.param_groups[1].params[1]]
    assert.is_nil(cs.master_param)
    assert.are.equal('float32', cs.exp_avg:dtype())
  end)

  it('a parameter written outside the optimizer re-seeds its master copy', function()
    local ps = make_params('float16')
    local opt = optim.SGD(ps, { lr = 0.1 })
    set_grads(ps); opt:step()
    ember.no_grad(function() ps[1]:fill_(0.5) end)
    set_grads(ps); opt:step()
    -- master = 0.5 - lr * grad at 0.5 (grad rounded to float16), not the stale master's update
    local c, d = coefficients(1, 6)
    local m = flat(opt.state[ps[1]].master_param)
    for k = 1, 6 do
      local g = flat(ember.tensor(c[k] * 0.5 + d[k]):half())[1]
      assert.is_true(math.abs(m[k] - (0.5 - 0.1 * g)) < 1e-6, ('element %d: %g'):format(k, m[k]))
    end
  end)

  -- The regression. In 16 bits Adam's state fails: eps = 1e-8 rounds to 0 in float16 (its
  -- smallest subnormal is 6e-8), so an element whose gradient is 0 (a dead ReLU unit) gets
  -- 0 / 0 = NaN from the composed update; squared gradients below 6e-8 flush to 0; updates
  -- under half an ulp of the parameter round away. The optimizer kept 16-bit state before,
  -- and a float16 ReLU MLP went to NaN at its second AdamW step.
  local function mlp(dtype, device)
    ember.manual_seed(3)
    local model = nn.Sequential():add(nn.Linear(8, 32)):add(nn.ReLU()):add(nn.Linear(32, 1))
    model:to{ dtype = dtype, device = device }
    ember.manual_seed(4)
    local x = ember.randn(64, 8):to{ dtype = dtype, device = device }
    local y = ember.randn(64, 1):to{ dtype = dtype, device = device }
    return model, function() return nn.functional.mse_loss(model:forward(x), y) end
  end

  it('why: Adam in float16 state turns a zero gradient into NaN', function()
    assert.are.equal(0, ember.tensor(1e-8, { dtype = 'float16' }):item())
    -- the composed update of adam.lua, on float16 state as the optimizer used to keep it
    local p = ember.tensor({ 1, 1 }, { dtype = 'float16' })
    local g = ember.tensor({ 0, 1e-3 }, { dtype = 'float16' })
    local m, v = ember.zeros_like(p), ember.zeros_like(p)
    m:mul_(0.9):add_(g, 0.1)
    v:mul_(0.999):addcmul_(g, g, 0.001)
    local denom = v:sqrt():div_(math.sqrt(0.001)):add_(1e-8)
    p:addcdiv_(m, denom, -1e-3 / 0.1)
    local got = flat(p)
    assert.is_true(got[1] ~= got[1], 'zero gradient: NaN')      -- 0 / 0
    assert.is_true(got[2] == -math.huge, 'small gradient: -inf') -- v flushed to 0: m / 0
    -- the optimizer now: a finite step of about lr on both (Adam's first step is lr * sign)
    local q = ember.tensor({ 1, 1 }, { dtype = 'float16' }):requires_grad_()
    q.grad = g
    with_fused(false, function() optim.AdamW(q, { lr = 1e-3, weight_decay = 0 }):step() end)()
    assert.are.same({ 1, flat(ember.tensor(1 - 1e-3):half())[1] }, flat(q))
  end)

  local function train(dtype, device, steps, fused)
    local model, loss_fn = mlp(dtype, device)
    local opt = optim.AdamW(model:parameters(), { lr = 1e-2 })
    local losses = {}
    with_fused(fused, function()
      for i = 1, steps do
        opt:zero_grad()
        local loss = loss_fn()
        loss:backward()
        opt:step()
        losses[i] = loss:item()
      end
    end)()
    return losses
  end

  local devs = { 'cpu' }
  if V then devs[2] = V end
  for _, dev in ipairs(devs) do
    for _, fused in ipairs({ true, false }) do
      it(('%s: float16 and bfloat16 AdamW over 100 steps stay finite and track float32%s'):format(dev,
        fused and '' or ' (composed ops)'), function()
        local steps = 100
        local ref = train('float32', dev, steps, fused)
        for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
          local got = train(dtype, dev, steps, fused)
          for i = 1, steps do
            assert.is_true(got[i] == got[i] and math.abs(got[i]) < math.huge, dtype .. ' finite at ' .. i)
          end
          -- the forward pass itself runs in 16 bits: the losses agree to its precision
          local tol = dtype == 'float16' and 0.02 or 0.1
          for _, i in ipairs({ 10, 30, 60, 100 }) do
            assert.is_true(math.abs(got[i] - ref[i]) <= tol * ref[i] + 1e-3,
              ('%s step %d: %g against float32 %g'):format(dtype, i, got[i], ref[i]))
          end
        end
      end)
    end
  end

  it('parameters sharing one storage keep their masters (no false re-seeding)', function()
    local flat16 = ember.tensor({ 1, 2, 3, 4, 5, 6 }, { dtype = 'float16' })
    local a, b = flat16:narrow(1, 1, 3), flat16:narrow(1, 4, 3)
    local a32, b32 = a:to('float32'):clone(), b:to('float32'):clone()
    for _, p in ipairs({ a, b, a32, b32 }) do p.requires_grad = true end
    local o16 = optim.SGD({ a, b }, { lr = 1e-4 })   -- updates under half a float16 ulp
    local o32 = optim.SGD({ a32, b32 }, { lr = 1e-4 })
    for _ = 1, 4 do
      for _, p in ipairs({ a, b, a32, b32 }) do p.grad = ember.ones({ 3 }, { dtype = p:dtype() }) end
      o16:step()
      o32:step()
    end
    assert.are.same(flat(a32), flat(o16.state[a].master_param))
    assert.are.same(flat(b32), flat(o16.state[b].master_param))
  end)

  it("Torch7's optim.sgd / optim.adam on a 16-bit x follow the float32 run through a master", function()
    for _, method in ipairs({ 'sgd', 'adam' }) do
      local x16 = ember.tensor({ 1, -2, 0.5, 3 }, { dtype = 'float16' })
      local x32 = x16:to('float32')
      local config = { learningRate = 0.01, momentum = 0.9, weightDecay = 0.01 }
      local s16, s32 = {}, {}
      for _ = 1, 5 do
        -- dfdx at the 16-bit values (rounded to float16); element 4's is 0 throughout
        local g = (x16:to('float32') * ember.tensor({ 1, 1, 1, 0 })):half()
        optim[method](function() return 0, g end, x16, config, s16)
        optim[method](function() return 0, g:to('float32') end, x32, config, s32)
      end
      assert.are.same(flat(x32), flat(s16.master_param), method)
      assert.are.same(flat(x32:half()), flat(x16), method)
      for k, v in pairs(s16) do
        if ember.is_tensor(v) then assert.are.equal('float32', v:dtype(), method .. ' ' .. k) end
      end
    end
  end)

  it('a step that runs out of memory changes no 16-bit parameter; the retry is exact', function()
    local ps, want = {}, {}
    ember.manual_seed(9)
    for i = 1, 8 do
      ps[i] = ember.randn(1024, 1024):half():requires_grad_()
      ps[i].grad = ember.randn(1024, 1024):half()
      want[i] = ps[i]:detach():clone()
    end
    local opt = optim.AdamW(ps, { lr = 0.1 })
    -- each parameter needs 12 MiB of float32 (master, exp_avg, exp_avg_sq), 96 MiB in all:
    -- far beyond the limit even if the allocator's out-of-memory collection frees garbage
    -- that earlier specs of the same process left behind
    ember.memory.set_limit('cpu', H.settled_allocated() + 8 * 2 ^ 20)
    local ok, err = pcall(function() opt:step() end)
    ember.memory.set_limit('cpu', 0)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('out of memory on cpu', 1, true), err)
    for i = 1, 8 do
      assert.are.equal(0, (ps[i]:detach() - want[i]):abs():max():item(), 'parameter ' .. i)
    end
    opt:step()
    local qs = {}
    for i = 1, 8 do
      qs[i] = want[i]:clone():requires_grad_()
      qs[i].grad = ps[i].grad:clone()
    end
    optim.AdamW(qs, { lr = 0.1 }):step()
    for i = 1, 8 do
      assert.are.equal(0, (ps[i]:detach() - qs[i]:detach()):abs():max():item(), 'retried ' .. i)
    end
  end)
end)

-- ---- conditional steps (options.found_inf, GradScaler's flag) --------------------------------------
-- With the flag 0 a fused step is bit for bit the unconditional one (itself checked against the
-- references above); with the flag set nothing changes, bit for bit: param and every state
-- tensor. On the CPU and on Vulkan (the flag read on the device), over dtypes, the SGD and Adam
-- forms, a transposed parameter (the Vulkan temporaries' path) and a flag at an offset.
describe('conditional fused steps (found_inf)', function()
  local C = ember.C
  local ffi = require 'ffi'
  local VKH = require 'vk_helpers'
  local V = VKH.V
  local devices = { 'cpu' }
  if V then devices[2] = V end

  local function bits(t) return flat(t:to('cpu')) end

  -- A fresh set of operands: param (transposed when asked), grad, three state tensors.
  local function operands(dev, dtype, transposed)
    ember.manual_seed(11)
    local o = { dtype = dtype, device = dev }
    local p = transposed and ember.randn(4, 3, o):t() or ember.randn(3, 4, o)
    local t = { p = p, g = ember.randn(3, 4, o) }
    t.m = ember.randn(3, 4, o)
    t.v = ember.randn(3, 4, o):abs()
    t.x = ember.randn(3, 4, o):abs()
    return t
  end

  local cases = {
    { 'sgd', { lr = 0.1 } },
    { 'sgd momentum, first step', { lr = 0.1, momentum = 0.9, first_step = 1 } },
    { 'sgd nesterov, weight decay', { lr = 0.1, momentum = 0.9, nesterov = 1, weight_decay = 0.1 } },
    { 'adam', { lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, step = 3 } },
    { 'adamw amsgrad maximize', { lr = 0.01, beta1 = 0.8, beta2 = 0.99, eps = 1e-6, step = 1,
      weight_decay = 0.1, decoupled = 1, maximize = 1 }, true },
  }

  local function run(dev, dtype, transposed, case, flag)
    local t = operands(dev, dtype, transposed)
    local adam = case[1]:sub(1, 4) == 'adam'
    local o = ffi.new(adam and 'em_adam_options' or 'em_sgd_options')
    for k, v in pairs(case[2]) do o[k] = v end
    local holder
    if flag ~= nil then
      holder = ember.zeros(3, { device = dev }) -- the flag at element 2: an offset
      holder[2] = flag
      o.found_inf = holder:narrow(1, 2, 1).ptr
    end
    local rc
    if adam then
      rc = C.em_adam_step_(t.p.ptr, t.g.ptr, t.m.ptr, t.v.ptr, case[3] and t.x.ptr or nil, o)
    else
      rc = C.em_sgd_step_(t.p.ptr, t.g.ptr, (case[2].momentum or 0) ~= 0 and t.m.ptr or nil, o)
    end
    assert.are.equal(0, rc, rc ~= 0 and ffi.string(C.em_last_error()) or nil)
    return { bits(t.p), bits(t.m), bits(t.v), bits(t.x) }
  end

  for _, dev in ipairs(devices) do
    local dtypes = { 'float32', 'float16', 'bfloat16' }
    if dev == 'cpu' or VKH.has_f64 then dtypes[#dtypes + 1] = 'float64' end
    for _, dtype in ipairs(dtypes) do
      it(dev .. ' ' .. dtype .. ': flag 0 steps as without a flag, flag 1 changes nothing', function()
        for _, transposed in ipairs({ false, true }) do
          for _, case in ipairs(cases) do
            local what = ('%s %s'):format(case[1], transposed and 'transposed' or 'contiguous')
            local before = operands(dev, dtype, transposed)
            local unchanged = { bits(before.p), bits(before.m), bits(before.v), bits(before.x) }
            local plain = run(dev, dtype, transposed, case, nil)
            assert.are_not.same(unchanged[1], plain[1], what .. ': the step changes param')
            assert.are.same(plain, run(dev, dtype, transposed, case, 0), what .. ', flag 0')
            assert.are.same(unchanged, run(dev, dtype, transposed, case, 1), what .. ', flag 1')
            assert.are.same(unchanged, run(dev, dtype, transposed, case, 0 / 0), what .. ', flag NaN')
          end
        end
      end)
    end
  end

  it('checks the flag', function()
    local p, g = ember.zeros(2, 3), ember.zeros(2, 3)
    local o = ffi.new('em_sgd_options')
    o.lr = 0.1
    local function fails(flag, pattern)
      o.found_inf = flag.ptr
      assert.are.equal(-1, C.em_sgd_step_(p.ptr, g.ptr, nil, o))
      local msg = ffi.string(C.em_last_error())
      assert.is_truthy(msg:find(pattern, 1, true), msg)
    end
    fails(ember.zeros(2), 'sgd_step_: expected found_inf to be a float32 tensor of one element on ' ..
      "cpu (the parameter's device), got a float32 tensor of 2 elements on cpu")
    fails(ember.zeros(1, { dtype = 'float64' }), 'got a float64 tensor of 1 elements')
    fails(p:view(-1):narrow(1, 1, 1), 'sgd_step_: found_inf shares memory with an operand the step writes')
    if V then fails(ember.zeros(1, { device = V }), 'on ' .. V) end
    local m, v = ember.zeros(2, 3), ember.zeros(2, 3)
    local a = ffi.new('em_adam_options')
    a.lr, a.beta1, a.beta2, a.eps, a.step = 0.1, 0.9, 0.999, 1e-8, 1
    a.found_inf = m:view(-1):narrow(1, 4, 1).ptr
    assert.are.equal(-1, C.em_adam_step_(p.ptr, g.ptr, m.ptr, v.ptr, nil, a))
    assert.is_truthy(ffi.string(C.em_last_error()):find('adam_step_: found_inf shares memory', 1, true))
  end)
end)

-- ---- asynchronous reads (em_read_start / em_read_finish) -------------------------------------------
describe('asynchronous reads', function()
  local C = ember.C
  local ffi = require 'ffi'
  local VKH = require 'vk_helpers'
  local devices = { 'cpu' }
  if VKH.V then devices[2] = VKH.V end
  for _, dev in ipairs(devices) do
    it(dev .. ': the values as recorded, collected with or without waiting', function()
      local x = ember.tensor({ 1.5, -2, 7 }, { device = dev })
      local r = C.em_read_start(x:narrow(1, 2, 2).ptr)
      assert.is_truthy(r ~= nil)
      x:fill_(9) -- after the read: not seen by it
      local buf = ffi.new('float[2]')
      local rc = C.em_read_finish(r, buf, 0)
      while rc == 0 do rc = C.em_read_finish(r, buf, 0) end
      assert.are.equal(1, rc)
      assert.are.same({ -2, 7 }, { buf[0], buf[1] })
      r = C.em_read_start(x:narrow(1, 1, 1).ptr)
      assert.are.equal(1, C.em_read_finish(r, buf, 1))
      assert.are.equal(9, buf[0])
      C.em_read_free(C.em_read_start(x.ptr)) -- dropped unfinished
      assert.is_true(C.em_read_start(ember.zeros(100, { device = dev }).ptr) == nil)
      assert.is_truthy(ffi.string(C.em_last_error()):find('read_start: expected a contiguous tensor of at most 256 bytes, got 400 bytes', 1, true))
      assert.is_true(C.em_read_start(ember.zeros(3, 3, { device = dev }):t().ptr) == nil)
    end)
  end
end)
