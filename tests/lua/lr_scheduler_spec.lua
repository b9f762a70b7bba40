-- Learning-rate schedulers against learning rates computed by hand and in closed form
-- (tests/lua/optim_ref.lua), and against torch.optim.lr_scheduler itself when /usr/bin/python3
-- has torch.
local H = require 'tests.lua.helpers'
local R = require 'tests.lua.optim_ref'
local ember = H.ember
local optim = ember.optim
local lr_scheduler = optim.lr_scheduler

local function through_checkpoint(sd) return R.through_checkpoint(ember, sd) end

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

describe('torch.optim.lr_scheduler cross-check', function()
  it('every scheduler matches torch epoch by epoch', function()
    if not R.have_torch() then return pending('/usr/bin/python3 with torch is not available') end
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
    local lines = {
      'import torch', 'from torch.optim import lr_scheduler as L',
      'def sched(make, n):',
      '    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1, momentum=0.9)',
      '    s = make(opt)',
      '    out = [opt.param_groups[0]["lr"]]',
      '    for _ in range(n):',
      '        opt.step(); s.step(); out.append(opt.param_groups[0]["lr"])',
      "    print(' '.join('%.17g' % v for v in out))",
    }
    for _, sc in ipairs(scheds) do lines[#lines + 1] = ('sched(lambda o: %s, 12)'):format(sc[1]) end
    local next_numbers = R.run_python(lines)
    for _, sc in ipairs(scheds) do
      local got = run_sched(sc[2], 12)
      local exp = next_numbers()
      assert.are.equal(#exp, #got, sc[1])
      for i = 1, #exp do
        assert.is_true(math.abs(got[i] - exp[i]) <= 1e-6 * math.max(1, math.abs(exp[i])),
          ('%s epoch %d: %.17g vs torch %.17g'):format(sc[1], i - 1, got[i], exp[i]))
      end
    end
  end)
end)
