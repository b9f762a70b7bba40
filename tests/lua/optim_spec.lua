-- Optimizers, schedulers, clipping and Torch7's functional forms against independent
-- references: the update rules written out in plain Lua loops (tests/lua/optim_ref.lua),
-- learning rates in closed form, norms summed by hand, and, when /usr/bin/python3 has torch,
-- torch.optim itself run on the same problem.
local H = require 'tests.lua.helpers'
local R = require 'tests.lua.optim_ref'
local ember = H.ember
local optim = ember.optim
local lr_scheduler = optim.lr_scheduler

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

-- A round trip through ember.save / ember.load when they exist (else the table itself).
local function through_checkpoint(sd)
  if not ember.save then return sd end
  local path = os.tmpname()
  ember.save(path, { optim = sd })
  local back = ember.load(path)
  os.remove(path)
  return back.optim
end

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

-- ---- schedulers ----------------------------------------------------------------------------------

local function sgd_for_sched(lrs)
  local groups = {}
  for i, lr in ipairs(lrs or { 1 }) do
    groups[i] = { params = { ember.zeros(1):requires_grad_() }, lr = lr }
  end
  return optim.SGD(groups, { momentum = 0.9 })
end

-- lrs[e + 1] for epochs 0..n (construction is epoch 0).
local function run_sched(make, n, opt)
  opt = opt or sgd_for_sched()
  local s = make(opt)
  local out = { s:get_last_lr()[1] }
  for _ = 1, n do
    opt:step()
    s:step()
    out[#out + 1] = s:get_last_lr()[1]
    assert.are.equal(out[#out], opt.param_groups[1].lr)
  end
  return out, s, opt
end

local function assert_seq(got, expected, what)
  assert.are.equal(#expected, #got, what .. ': length')
  for i = 1, #expected do
    if math.abs(got[i] - expected[i]) > 1e-12 * math.max(1, math.abs(expected[i])) then
      error(('%s: epoch %d: got %.17g, expected %.17g'):format(what, i - 1, got[i], expected[i]), 2)
    end
  end
end

describe('lr schedulers', function()
  it('StepLR', function()
    local got = run_sched(function(o) return lr_scheduler.StepLR(o, { step_size = 3, gamma = 0.5 }) end, 10)
    local exp = {}
    for e = 0, 10 do exp[e + 1] = R.step_lr(1, e, 3, 0.5) end
    assert_seq(got, exp, 'StepLR')
    -- hand-computed and positional options
    got = run_sched(function(o) return lr_scheduler.StepLR(o, { 2, 0.1 }) end, 4)
    assert_seq(got, { 1, 1, 0.1, 0.1, 0.01 }, 'StepLR positional')
  end)

  it('CosineAnnealingLR, past T_max too', function()
    local got = run_sched(function(o) return lr_scheduler.CosineAnnealingLR(o, { T_max = 5, eta_min = 0.1 }) end, 12)
    local exp = {}
    for e = 0, 12 do exp[e + 1] = R.cosine_lr(1, e, 5, 0.1) end
    assert_seq(got, exp, 'CosineAnnealingLR')
    got = run_sched(function(o) return lr_scheduler.CosineAnnealingLR(o, { T_max = 2 }) end, 2)
    assert_seq(got, { 1, 0.5, 0 }, 'CosineAnnealingLR by hand')
  end)

  it('LinearLR warm-up', function()
    local got = run_sched(function(o)
      return lr_scheduler.LinearLR(o, { start_factor = 0.25, end_factor = 1, total_iters = 4 })
    end, 7)
    assert_seq(got, { 0.25, 0.4375, 0.625, 0.8125, 1, 1, 1, 1 }, 'LinearLR by hand')
    got = run_sched(function(o) return lr_scheduler.LinearLR(o) end, 6)
    local exp = {}
    for e = 0, 6 do exp[e + 1] = R.linear_lr(1, e, 1 / 3, 1, 5) end
    assert_seq(got, exp, 'LinearLR defaults')
  end)

  for _, strategy in ipairs({ 'cos', 'linear' }) do
    it('OneCycleLR ' .. strategy .. ', cycling momentum', function()
      local o = { max_lr = 2, total_steps = 10, anneal_strategy = strategy }
      local opt = sgd_for_sched()
      local s = lr_scheduler.OneCycleLR(opt, o)
      for e = 0, 10 do
        if e > 0 then s:step() end
        local lr, m = R.one_cycle(e, o)
        assert_seq({ opt.param_groups[1].lr, opt.param_groups[1].momentum }, { lr, m },
          'OneCycleLR epoch ' .. e)
      end
      H.assert_error(function() s:step() end, 'tried to step 12 times; total_steps is 10')
    end)
  end

  it('OneCycleLR: hand values, Adam betas, epochs * steps_per_epoch', function()
    local opt = sgd_for_sched()
    local s = lr_scheduler.OneCycleLR(opt, { max_lr = 1, total_steps = 5, pct_start = 0.4,
      anneal_strategy = 'linear', div_factor = 10, final_div_factor = 100 })
    -- warm-up ends at step 0.4 * 5 - 1 = 1; then down to 0.1 / 100 by step 4
    local got = { opt.param_groups[1].lr }
    for _ = 1, 4 do s:step(); got[#got + 1] = opt.param_groups[1].lr end
    assert_seq(got, { 0.1, 1, 1 - 0.999 / 3, 1 - 2 * 0.999 / 3, 0.001 }, 'OneCycleLR by hand')
    local p = ember.zeros(1):requires_grad_()
    local adam = optim.Adam({ p }, { lr = 1 })
    lr_scheduler.OneCycleLR(adam, { max_lr = 0.5, epochs = 2, steps_per_epoch = 5 })
    assert.are.same({ 0.95, 0.999 }, adam.param_groups[1].betas)
    H.assert_close(adam.param_groups[1].lr, 0.02, 1e-15, 0)
  end)

  it('per-group lrs, MultiStepLR, ExponentialLR, LambdaLR', function()
    local opt = sgd_for_sched({ 1, 0.5 })
    local s = lr_scheduler.MultiStepLR(opt, { milestones = { 2, 4, 4 }, gamma = 0.1 })
    local got = {}
    for _ = 1, 5 do s:step(); got[#got + 1] = s:get_last_lr() end
    assert_seq({ got[1][1], got[2][1], got[3][1], got[4][1], got[5][1] }, { 1, 0.1, 0.1, 0.001, 0.001 }, 'MultiStepLR')
    assert_seq({ got[1][2], got[5][2] }, { 0.5, 0.0005 }, 'MultiStepLR group 2')
    local e = run_sched(function(o) return lr_scheduler.ExponentialLR(o, { gamma = 0.5 }) end, 3)
    assert_seq(e, { 1, 0.5, 0.25, 0.125 }, 'ExponentialLR')
    local l = run_sched(function(o) return lr_scheduler.LambdaLR(o, { lr_lambda = function(ep) return 1 / (ep + 1) end }) end, 3)
    assert_seq(l, { 1, 1 / 2, 1 / 3, 1 / 4 }, 'LambdaLR')
  end)

  it('SequentialLR: linear warm-up, then cosine', function()
    local opt = sgd_for_sched()
    local warm = lr_scheduler.LinearLR(opt, { start_factor = 0.5, total_iters = 2 })
    local cos = lr_scheduler.CosineAnnealingLR(opt, { T_max = 4 })
    local s = lr_scheduler.SequentialLR(opt, { schedulers = { warm, cos }, milestones = { 2 } })
    local got = { s:get_last_lr()[1] }
    for _ = 1, 6 do s:step(); got[#got + 1] = opt.param_groups[1].lr end
    local exp = { 0.5, 0.75, R.cosine_lr(1, 0, 4, 0) }
    for ep = 1, 4 do exp[#exp + 1] = R.cosine_lr(1, ep, 4, 0) end
    assert_seq(got, exp, 'SequentialLR')
  end)

  it('ConstantLR, PolynomialLR, ChainedScheduler by hand', function()
    assert_seq(run_sched(function(o) return lr_scheduler.ConstantLR(o, { factor = 0.5, total_iters = 2 }) end, 3),
      { 0.5, 0.5, 1, 1 }, 'ConstantLR')
    assert_seq(run_sched(function(o) return lr_scheduler.PolynomialLR(o, { total_iters = 4 }) end, 5),
      { 1, 0.75, 0.5, 0.25, 0, 0 }, 'PolynomialLR')
    local got = run_sched(function(o)
      return lr_scheduler.ChainedScheduler({ lr_scheduler.ConstantLR(o, { factor = 0.5, total_iters = 1 }),
        lr_scheduler.ExponentialLR(o, { gamma = 0.5 }) })
    end, 3)
    assert_seq(got, { 0.5, 0.5, 0.25, 0.125 }, 'ChainedScheduler')
  end)

  it('CosineAnnealingWarmRestarts, by epoch and by fractional epoch', function()
    local got = run_sched(function(o) return lr_scheduler.CosineAnnealingWarmRestarts(o, { T_0 = 2 }) end, 4)
    assert_seq(got, { 1, 0.5, 1, 0.5, 1 }, 'restarts every 2 epochs')
    local exp = {}
    for e = 0, 6 do
      local T_i, T_cur = 1, e -- cycles of 1, 2, 4 epochs start at 0, 1, 3
      if e >= 3 then T_i, T_cur = 4, e - 3 elseif e >= 1 then T_i, T_cur = 2, e - 1 end
      exp[#exp + 1] = R.cosine_lr(1, T_cur, T_i, 0.1)
    end
    got = run_sched(function(o) return lr_scheduler.CosineAnnealingWarmRestarts(o, { T_0 = 1, T_mult = 2, eta_min = 0.1 }) end, 6)
    assert_seq(got, exp, 'T_mult = 2')
    local opt = sgd_for_sched()
    local s = lr_scheduler.CosineAnnealingWarmRestarts(opt, { T_0 = 4 })
    s:step(1.5)
    assert_seq({ opt.param_groups[1].lr }, { R.cosine_lr(1, 1.5, 4, 0) }, 'fractional epoch')
    s:step(5)
    assert_seq({ opt.param_groups[1].lr }, { R.cosine_lr(1, 1, 4, 0) }, 'epoch 5 of cycles of 4')
    H.assert_error(function() s:step(-1) end, 'expected an epoch >= 0')
    H.assert_error(function() lr_scheduler.CosineAnnealingWarmRestarts(opt, { T_0 = 0 }) end, 'expected an integer T_0 >= 1')
  end)

  it('ReduceLROnPlateau', function()
    local opt = sgd_for_sched()
    local s = lr_scheduler.ReduceLROnPlateau(opt, { patience = 1, factor = 0.5, cooldown = 1, min_lr = 0.2 })
    local lrs = {}
    for _, metric in ipairs({ 1, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6 }) do
      s:step(metric)
      lrs[#lrs + 1] = opt.param_groups[1].lr
    end
    -- bad epochs after 0.5: 1, 2 (cut), cooldown, 1, 2 (cut), cooldown, 1, 2 (cut to min 0.2)...
    assert_seq(lrs, { 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2 }, 'ReduceLROnPlateau')
    s:step(ember.tensor(0.1, { dtype = 'float64' }))
    assert.are.equal(0.1, s.best)
    H.assert_error(function() s:step('low') end, 'expected the metric as a number')
  end)

  it('state_dict resumes a schedule exactly', function()
    local makers = {
      function(o) return lr_scheduler.StepLR(o, { step_size = 2, gamma = 0.7 }) end,
      function(o) return lr_scheduler.CosineAnnealingLR(o, { T_max = 6, eta_min = 0.01 }) end,
      function(o) return lr_scheduler.LinearLR(o, { start_factor = 0.1, total_iters = 5 }) end,
      function(o) return lr_scheduler.OneCycleLR(o, { max_lr = 1, total_steps = 10 }) end,
      function(o) return lr_scheduler.CosineAnnealingWarmRestarts(o, { T_0 = 2, T_mult = 2 }) end,
      function(o)
        return lr_scheduler.SequentialLR(o, { schedulers = { lr_scheduler.LinearLR(o, { total_iters = 3 }),
          lr_scheduler.ExponentialLR(o, { gamma = 0.9 }) }, milestones = { 3 } })
      end,
    }
    for i, make in ipairs(makers) do
      local full = run_sched(make, 9)
      local partial, s1, opt1 = run_sched(make, 4)
      local osd = through_checkpoint(opt1:state_dict())
      local ssd = through_checkpoint(s1:state_dict())
      local opt2 = sgd_for_sched()
      opt2:load_state_dict(osd)
      local s2 = make(opt2)
      s2:load_state_dict(ssd)
      opt2:load_state_dict(osd) -- the new scheduler's first step rewrote lr: restore it
      for _ = 1, 5 do s2:step(); partial[#partial + 1] = s2:get_last_lr()[1] end
      assert_seq(partial, full, 'scheduler ' .. i)
    end
  end)

  it('argument errors', function()
    local opt = sgd_for_sched()
    H.assert_error(function() lr_scheduler.StepLR(opt, {}) end, 'StepLR: missing required option step_size')
    H.assert_error(function() lr_scheduler.StepLR(opt, { step_size = 0 }) end, 'expected an integer step_size >= 1')
    H.assert_error(function() lr_scheduler.StepLR({}, { step_size = 1 }) end, 'StepLR: expected an optimizer')
    H.assert_error(function() lr_scheduler.StepLR(opt, { step_size = 1, gamma = 'x' }) end, 'expected a number for gamma')
    H.assert_error(function() lr_scheduler.LinearLR(opt, { start_factor = 0 }) end, 'start_factor must be in (0, 1]')
    H.assert_error(function() lr_scheduler.LinearLR(opt, { end_factor = 1.5 }) end, 'end_factor must be in [0, 1]')
    H.assert_error(function() lr_scheduler.CosineAnnealingLR(opt, { T_max = 0 }) end, 'expected an integer T_max >= 1')
    H.assert_error(function() lr_scheduler.OneCycleLR(opt, { max_lr = 1 }) end, 'give either total_steps or both')
    H.assert_error(function() lr_scheduler.OneCycleLR(opt, { max_lr = 1, total_steps = 10, pct_start = 1.5 }) end,
      'pct_start must be in [0, 1]')
    H.assert_error(function() lr_scheduler.OneCycleLR(opt, { max_lr = 1, total_steps = 10, anneal_strategy = 'exp' }) end,
      "anneal_strategy must be 'cos' or 'linear'")
    H.assert_error(function() lr_scheduler.OneCycleLR(opt, { max_lr = { 1, 2 }, total_steps = 10 }) end,
      'expected 1 values for max_lr')
    local ada = optim.Adagrad({ ember.zeros(1):requires_grad_() }, {})
    H.assert_error(function() lr_scheduler.OneCycleLR(ada, { max_lr = 1, total_steps = 10 }) end,
      'neither momentum nor betas')
    H.assert_error(function() lr_scheduler.MultiStepLR(opt, { milestones = { 3, 1 } }) end, 'milestones must be increasing')
    H.assert_error(function() lr_scheduler.LambdaLR(opt, { lr_lambda = 3 }) end, 'expected lr_lambda to be a function')
    H.assert_error(function() lr_scheduler.ConstantLR(opt, { factor = 2 }) end, 'factor must be in [0, 1]')
    H.assert_error(function() lr_scheduler.ChainedScheduler({}) end, 'expected a list of schedulers')
    H.assert_error(function() lr_scheduler.ReduceLROnPlateau(opt, { mode = 'up' }) end, "mode must be 'min' or 'max'")
    H.assert_error(function() lr_scheduler.ReduceLROnPlateau(opt, { factor = 1 }) end, 'factor must be < 1')
    local fresh = sgd_for_sched()
    H.assert_error(function() lr_scheduler.StepLR(fresh, { step_size = 1, last_epoch = 3 }) end, 'has no initial_lr')
    local s = lr_scheduler.StepLR(opt, { step_size = 1 })
    H.assert_error(function() s:step(3) end, 'the epoch argument is deprecated')
    H.assert_error(function() lr_scheduler.SequentialLR(opt, { schedulers = { s }, milestones = { 1 } }) end,
      'expected 0 milestones')
  end)
end)

-- ---- torch.optim cross-check ----------------------------------------------------------------------
-- Runs the same problem through torch.optim (float64) in one python process and compares every
-- step to 1e-6. Skipped when /usr/bin/python3 or its torch is missing.

local function have_torch()
  local ok = os.execute('/usr/bin/python3 -c "import torch" >/dev/null 2>&1')
  return ok == 0 or ok == true
end

local function py_value(v)
  if type(v) == 'boolean' then return v and 'True' or 'False' end
  if type(v) == 'table' then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = py_value(x) end
    return '(' .. table.concat(parts, ', ') .. ')'
  end
  if type(v) == 'string' then return "'" .. v .. "'" end
  return ('%.17g'):format(v)
end

local function py_kwargs(o)
  local parts = {}
  for k, v in pairs(o) do parts[#parts + 1] = k .. '=' .. py_value(v) end
  table.sort(parts)
  return table.concat(parts, ', ')
end

describe('torch.optim cross-check', function()
  it('every optimizer and scheduler matches torch step by step', function()
    if not have_torch() then return pending('/usr/bin/python3 with torch is not available') end
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
      'import warnings', "warnings.filterwarnings('ignore')",
      'import torch', 'torch.set_default_dtype(torch.float64)',
      'inits = ' .. py_value(inits), 'cs = ' .. py_value(cs), 'ds = ' .. py_value(ds),
      'def run(cls, kw, steps=5):',
      '    ps = [torch.tensor(v).requires_grad_() for v in inits]',
      '    opt = cls(ps, **kw)',
      '    for s in range(steps):',
      '        for i, p in enumerate(ps):',
      '            p.grad = torch.tensor(cs[i]) * p.detach() + torch.tensor(ds[i])',
      '        opt.step()',
      "        print(' '.join('%.17g' % v for p in ps for v in p.detach().reshape(-1).tolist()))",
      'from torch.optim import lr_scheduler as L',
      'def sched(make, n):',
      '    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1, momentum=0.9)',
      '    s = make(opt)',
      '    out = [opt.param_groups[0]["lr"]]',
      '    for _ in range(n):',
      '        opt.step(); s.step(); out.append(opt.param_groups[0]["lr"])',
      "    print(' '.join('%.17g' % v for v in out))",
    }
    for _, r in ipairs(runs) do
      lines[#lines + 1] = ('run(torch.optim.%s, dict(%s))'):format(r[1], py_kwargs(r[2]))
    end
    local scheds = {
      { 'L.StepLR(o, step_size=3, gamma=0.5)', function(o) return lr_scheduler.StepLR(o, { step_size = 3, gamma = 0.5 }) end },
      { 'L.CosineAnnealingLR(o, T_max=5, eta_min=0.1)', function(o) return lr_scheduler.CosineAnnealingLR(o, { T_max = 5, eta_min = 0.1 }) end },
      { 'L.LinearLR(o, start_factor=0.2, end_factor=0.9, total_iters=6)', function(o) return lr_scheduler.LinearLR(o, { start_factor = 0.2, end_factor = 0.9, total_iters = 6 }) end },
      { 'L.OneCycleLR(o, max_lr=0.5, total_steps=12)', function(o) return lr_scheduler.OneCycleLR(o, { max_lr = 0.5, total_steps = 12 }) end },
      { "L.OneCycleLR(o, max_lr=0.5, total_steps=12, anneal_strategy='linear', three_phase=True, pct_start=0.25)",
        function(o) return lr_scheduler.OneCycleLR(o, { max_lr = 0.5, total_steps = 12, anneal_strategy = 'linear', three_phase = true, pct_start = 0.25 }) end },
      { 'L.SequentialLR(o, [L.LinearLR(o, start_factor=0.5, total_iters=3), L.StepLR(o, step_size=2, gamma=0.5)], milestones=[3])',
        function(o) return lr_scheduler.SequentialLR(o, { schedulers = { lr_scheduler.LinearLR(o, { start_factor = 0.5, total_iters = 3 }),
          lr_scheduler.StepLR(o, { step_size = 2, gamma = 0.5 }) }, milestones = { 3 } }) end },
    }
    local more = {
      { 'L.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.3)', function(o) return lr_scheduler.MultiStepLR(o, { milestones = { 2, 5, 5 }, gamma = 0.3 }) end },
      { 'L.ExponentialLR(o, gamma=0.8)', function(o) return lr_scheduler.ExponentialLR(o, { gamma = 0.8 }) end },
      { 'L.ConstantLR(o, factor=0.25, total_iters=3)', function(o) return lr_scheduler.ConstantLR(o, { factor = 0.25, total_iters = 3 }) end },
      { 'L.PolynomialLR(o, total_iters=8, power=2.0)', function(o) return lr_scheduler.PolynomialLR(o, { total_iters = 8, power = 2 }) end },
      { 'L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.05)',
        function(o) return lr_scheduler.CosineAnnealingWarmRestarts(o, { T_0 = 3, T_mult = 2, eta_min = 0.05 }) end },
      { 'L.ChainedScheduler([L.ConstantLR(o, factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9)])',
        function(o) return lr_scheduler.ChainedScheduler({ lr_scheduler.ConstantLR(o, { factor = 0.5, total_iters = 2 }),
          lr_scheduler.ExponentialLR(o, { gamma = 0.9 }) }) end },
      { 'L.SequentialLR(o, [L.ConstantLR(o, factor=0.5, total_iters=2), L.CosineAnnealingWarmRestarts(o, T_0=4)], milestones=[3])',
        function(o) return lr_scheduler.SequentialLR(o, { schedulers = { lr_scheduler.ConstantLR(o, { factor = 0.5, total_iters = 2 }),
          lr_scheduler.CosineAnnealingWarmRestarts(o, { T_0 = 4 }) }, milestones = { 3 } }) end },
    }
    for _, m in ipairs(more) do scheds[#scheds + 1] = m end
    for _, sc in ipairs(scheds) do lines[#lines + 1] = ('sched(lambda o: %s, 12)'):format(sc[1]) end
    local script = os.tmpname()
    local f = assert(io.open(script, 'w'))
    f:write(table.concat(lines, '\n'), '\n')
    f:close()
    local pipe = assert(io.popen('/usr/bin/python3 ' .. script .. ' 2>&1'))
    local out = {}
    for line in pipe:lines() do out[#out + 1] = line end
    pipe:close()
    os.remove(script)
    local li = 0
    local function next_numbers()
      li = li + 1
      local t = {}
      for v in (out[li] or ''):gmatch('%S+') do
        local x = tonumber(v)
        if x == nil then error('python said: ' .. table.concat(out, '\n')) end
        t[#t + 1] = x
      end
      return t
    end
    for _, r in ipairs(runs) do
      local ps = make_params('float64')
      local opt = optim[r[1]](ps, r[2])
      for s = 1, 5 do
        set_grads(ps)
        opt:step()
        local got = {}
        for i = 1, 4 do for _, v in ipairs(flat(ps[i])) do got[#got + 1] = v end end
        H.assert_close(ember.tensor(got, { dtype = 'float64' }), next_numbers(), 1e-6, 1e-6,
          ('%s %s step %d'):format(r[1], describe_opts(r[2]), s))
      end
    end
    for _, sc in ipairs(scheds) do
      local got = run_sched(sc[2], 12)
      local exp = next_numbers()
      for i = 1, #exp do
        assert.is_true(math.abs(got[i] - exp[i]) <= 1e-6 * math.max(1, math.abs(exp[i])),
          ('%s epoch %d: %.17g vs torch %.17g'):format(sc[1], i - 1, got[i], exp[i]))
      end
    end
  end)
end)
