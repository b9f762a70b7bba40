-- ddp_spec: DistributedDataParallel's mechanics in one process, and autograd.queue_callback.
--
-- ember.distributed is replaced by a recording stand-in for a job of one process: its
-- all_reduce keeps the tensor (the average over one rank) and logs when each bucket's
-- reduction starts and is waited for. The gradients must equal those of the bare model (an
-- independent backward); the log shows buckets in reverse order of registration, started
-- during backward (before the last gradient arrives), all waited for before backward returns.
-- The equivalence across real ranks is tests/distributed/ddp_equivalence.lua, under mpirun.
local H = require 'tests.lua.helpers'
local ember = H.ember
local nn = ember.nn

local log
local fake = {
  is_initialized = function() return true end,
  world_size = function() return 1 end,
  rank = function() return 0 end,
  barrier = function() log[#log + 1] = 'barrier' end,
  broadcast = function(t, root)
    log[#log + 1] = 'broadcast ' .. t:numel() .. ' ' .. root
    return t
  end,
  all_reduce = function(t, opts)
    local n = t:numel()
    if not opts.async then
      log[#log + 1] = 'reduce ' .. n .. ' ' .. opts.op
      return t
    end
    log[#log + 1] = 'start ' .. n .. ' ' .. opts.op
    local done = false
    return {
      wait = function()
        if not done then log[#log + 1] = 'wait ' .. n end
        done = true
        return t
      end,
      is_completed = function() return done end,
    }
  end,
}

local function with_fake(f)
  local was = package.loaded['ember.distributed']
  package.loaded['ember.distributed'] = fake
  local ok, err = pcall(f)
  package.loaded['ember.distributed'] = was
  if not ok then error(err, 0) end
end

local function model(seed)
  ember.manual_seed(seed)
  return nn.Sequential():add(nn.Linear(6, 5)):add(nn.Tanh()):add(nn.Linear(5, 3))
end

local function grads(m)
  local r = {}
  for i, p in ipairs(m:parameters()) do r[i] = p.grad and p.grad:totable() or false end
  return r
end

local function close(a, b)
  assert.are.equal(#a, #b)
  for i = 1, #a do H.assert_close(a[i], b[i], 1e-6) end
end

describe('autograd.queue_callback', function()
  it('runs after every gradient is in .grad, once, before backward returns', function()
    local w = ember.randn(3):requires_grad_()
    local seen = {}
    w:register_hook(function(g)
      ember.autograd.queue_callback(function() seen[#seen + 1] = w.grad:totable() end)
    end)
    local loss = (w * 2):sum()
    loss:backward()
    assert.are.same({ { 2, 2, 2 } }, seen)
  end)

  it('raises the error of a callback from backward, placed once', function()
    local w = ember.randn(2):requires_grad_()
    w:register_hook(function()
      ember.autograd.queue_callback(function() error('late failure') end)
    end)
    local ok, err = pcall(function() (w * 1):sum():backward() end)
    assert.is_false(ok)
    assert.truthy(err:find('ddp_spec.lua:%d+: late failure$'), err)
    assert.is_nil(err:find('ddp_spec.lua:%d+: .*ddp_spec.lua'), err)
  end)

  it('is an error outside backward', function()
    assert.has_error(function() ember.autograd.queue_callback(function() end) end,
      'queue_callback: expected to be called during backward (from a gradient hook)')
  end)
end)

describe('DistributedDataParallel (one process, recorded collectives)', function()
  before_each(function() log = {} end)

  it('needs ember.distributed initialized', function()
    local was = package.loaded['ember.distributed']
    package.loaded['ember.distributed'] = { is_initialized = function() return false end }
    local ok, err = pcall(nn.DistributedDataParallel, model(1))
    package.loaded['ember.distributed'] = was
    assert.is_false(ok)
    assert.truthy(err:find('ember.distributed is not initialized', 1, true))
  end)

  it('gives the bare model gradients, bucketed in reverse order and started during backward', function()
    with_fake(function()
      local x = ember.randn(4, 6)
      local ref = model(3)
      ref(x):pow(2):sum():backward()
      local m = model(3)
      -- a bucket of at most ~80 bytes: the 3x5 weight (60 B) and 3 biases together, then
      -- each of the rest
      m:parameters()[1]:register_hook(function() log[#log + 1] = 'grad 30' end)
      local ddp = nn.DistributedDataParallel(m, { bucket_mb = 80 / 2 ^ 20 })
      assert.are.same({ 'broadcast 30 0', 'broadcast 5 0', 'broadcast 15 0', 'broadcast 3 0' }, log)
      log = {}
      ddp(x):pow(2):sum():backward()
      close(grads(ref), grads(m))
      -- the first bucket started before the last gradient (the first layer's weight) came
      local at = {}
      for i, e in ipairs(log) do at[e] = i end
      assert.is_true(at['start 18 avg'] < at['grad 30'])
      assert.is_true(at['grad 30'] < at['start 30 avg'])
      table.remove(log, at['grad 30'])
      assert.are.same({ 'start 18 avg', 'start 5 avg', 'start 30 avg',
        'wait 18', 'wait 5', 'wait 30' }, log)
    end)
  end)

  it('accumulates under no_sync and averages the sum at the next synchronized backward', function()
    with_fake(function()
      local x1, x2 = ember.randn(4, 6), ember.randn(4, 6)
      local ref = model(5)
      ref(x1):sum():backward()
      ref(x2):sum():backward()
      local m = model(5)
      local ddp = nn.DistributedDataParallel(m)
      log = {}
      ddp:no_sync(function() ddp(x1):sum():backward() end)
      assert.are.same({}, log)
      ddp(x2):sum():backward()
      close(grads(ref), grads(m))
      assert.are.same({ 'start 53 avg', 'wait 53' }, log)
    end)
  end)

  it('does not hang on a parameter without a gradient: it joins with zeros', function()
    with_fake(function()
      local a, b = nn.Linear(3, 2), nn.Linear(3, 2)
      local holder = nn.Sequential():add(a):add(b)
      local ddp = nn.DistributedDataParallel(holder, { bucket_mb = 1e-5 }) -- one per tensor
      log = {}
      a(ember.randn(2, 3)):sum():backward() -- b unused
      assert.are.same({ 'start 2 avg', 'start 6 avg', 'start 2 avg', 'start 6 avg',
        'wait 2', 'wait 6', 'wait 2', 'wait 6' }, log)
      assert.are.same({ { 0, 0, 0 }, { 0, 0, 0 } }, b.weight.grad:totable())
      local _ = ddp
    end)
  end)

  it('leaves .grad nil for a parameter no rank used, with find_unused_parameters', function()
    with_fake(function()
      local a, b = nn.Linear(3, 2), nn.Linear(3, 2)
      local ddp = nn.DistributedDataParallel(nn.Sequential():add(a):add(b),
        { find_unused_parameters = true })
      log = {}
      a(ember.randn(2, 3)):sum():backward()
      assert.are.same({ 'start 16 avg', 'reduce 4 max', 'wait 16' }, log)
      assert.is_nil(b.weight.grad)
      assert.is_nil(b.bias.grad)
      assert.truthy(a.weight.grad)
      local _ = ddp
    end)
  end)

  it('lets clip_grad_norm_ and the optimizer see the reduced gradients', function()
    with_fake(function()
      local m = model(7)
      local ddp = nn.DistributedDataParallel(m)
      local opt = ember.optim.SGD(ddp:parameters(), { lr = 0.1 })
      log = {}
      ddp(ember.randn(4, 6)):sum():backward()
      local norm = ember.optim.clip_grad_norm_(ddp:parameters(), 0.5)
      assert.is_true(norm > 0)
      opt:step()
      assert.are.same({ 'start 53 avg', 'wait 53' }, log)
    end)
  end)

  it('saves the bare model state and checks its options', function()
    with_fake(function()
      local m = model(2)
      local ddp = nn.DistributedDataParallel(m)
      local sd = ddp:state_dict()
      assert.truthy(sd['0.weight'])
      assert.is_nil(sd['module.0.weight'])
      assert.has_error(function() nn.DistributedDataParallel(m, { bucket_m = 1 }) end)
      assert.has_error(function() nn.DistributedDataParallel(m, { bucket_mb = 0 }) end,
        'DistributedDataParallel: expected bucket_mb to be a number > 0, got 0')
      local ok, err = pcall(function() ddp:backward(ember.randn(2, 6), ember.randn(2, 3)) end)
      assert.is_false(ok)
      assert.truthy(err:find('DistributedDataParallel:backward: not implemented', 1, true))
    end)
  end)
end)
