-- ember.utils.checkpoint: the same gradients, to the last bit, and the same dropout masks as
-- without checkpointing (on the CPU and on the Vulkan device when there is one); functions of
-- several tensors and of non-tensor arguments; and the memory it saves on a deep MLP (peak
-- allocator bytes of a training step, measured in a fresh process).
local H = require 'helpers'
local ember = H.ember
local VKH = require 'vk_helpers'
local nn = ember.nn

local DEVICES = { 'cpu' }
if VKH.V then DEVICES[2] = VKH.V end

-- A model of `n` blocks (Linear, ReLU, Dropout, Linear, Tanh); forward hooks on the dropouts
-- note each mask they draw (as a table of 0/1).
local function model(device, n, masks)
  ember.manual_seed(7)
  local blocks = {}
  for b = 1, n do
    local drop = nn.Dropout(0.4)
    drop:register_forward_hook(function(_, _, out)
      local m = masks[b] or {}
      masks[b] = m
      m[#m + 1] = out:to('cpu'):ne(0):totable()
    end)
    -- (On lavapipe the first elementwise activation compiles its kernel for seconds: the
    -- Vulkan model does without one.)
    blocks[b] = device == 'cpu'
      and nn.Sequential(nn.Linear(6, 6), nn.ReLU(), drop, nn.Linear(6, 6), nn.Tanh())
      or nn.Sequential(nn.Linear(6, 6), drop, nn.Linear(6, 6)):to(device)
  end
  return blocks
end

-- One step: returns the loss, x's gradient (or nil) and every parameter's gradient, on the CPU.
local function step(device, checkpointed, x_requires_grad, masks)
  local blocks = model(device, 3, masks)
  ember.manual_seed(11)
  local x = ember.randn(4, 6):to(device)
  if x_requires_grad then x:requires_grad_() end
  local h = x
  for _, b in ipairs(blocks) do
    h = checkpointed and ember.utils.checkpoint(b, h) or b(h)
  end
  local loss = (h * h):sum()
  loss:backward()
  local grads = {}
  for _, b in ipairs(blocks) do
    for _, p in ipairs(b:parameters()) do grads[#grads + 1] = p.grad:to('cpu') end
  end
  return loss:to('cpu'), x.grad and x.grad:to('cpu'), grads, ember.get_rng_state()
end

local function same_bits(a, b)
  assert.same(a:size(), b:size())
  assert.equal(0, (a - b):abs():max():item())
  assert.same(a:totable(), b:totable())
end

describe('utils.checkpoint', function()
  for _, device in ipairs(DEVICES) do
    it('gives the same gradients and dropout masks as without it on ' .. device, function()
      for _, x_grad in ipairs({ true, false }) do
        local plain_masks, ck_masks = {}, {}
        local l1, gx1, g1, rng1 = step(device, false, x_grad, plain_masks)
        local l2, gx2, g2, rng2 = step(device, true, x_grad, ck_masks)
        same_bits(l1, l2)
        if x_grad then same_bits(gx1, gx2) else assert.is_nil(gx2) end
        assert.equal(#g1, #g2)
        for i = 1, #g1 do same_bits(g1[i], g2[i]) end
        -- The recomputation drew the forward's masks, and left the generator where it was.
        assert.same(rng1, rng2)
        for b = 1, 3 do
          assert.equal(1, #plain_masks[b])
          assert.equal(2, #ck_masks[b]) -- forward, then the backward's recomputation
          assert.same(plain_masks[b][1], ck_masks[b][1])
          assert.same(plain_masks[b][1], ck_masks[b][2])
        end
      end
    end)
  end

  it('recomputes under the forward\'s autocast region', function()
    local function run(ck)
      ember.manual_seed(5)
      local blocks = { nn.Linear(8, 8), nn.Linear(8, 8) }
      local x = ember.randn(4, 8):requires_grad_()
      local out = ember.autocast({ device = 'cpu', dtype = 'bfloat16' }, function()
        local h = x
        for _, b in ipairs(blocks) do
          h = ck and ember.utils.checkpoint(b, h) or b(h)
        end
        return h
      end)
      assert.equal('bfloat16', out:dtype())
      out:float():pow(2):sum():backward()
      return x.grad, blocks[1].weight.grad
    end
    local x1, w1 = run(false)
    local x2, w2 = run(true)
    same_bits(x1, x2)
    same_bits(w1, w2)
    assert.is_false(ember.is_autocast_enabled('cpu'))
  end)

  it('takes several tensors and non-tensor arguments, and returns several outputs', function()
    local function f(a, b, s) return a * b * s, (a + b):exp() end
    local function run(ck)
      ember.manual_seed(3)
      local a = ember.randn(3, { dtype = 'float64' }):requires_grad_()
      local b = ember.randn(3, { dtype = 'float64' }):requires_grad_()
      local p, q
      if ck then p, q = ember.utils.checkpoint(f, a, b, 2.5) else p, q = f(a, b, 2.5) end
      ;(p:sum() + (q * q):sum()):backward()
      return a.grad, b.grad
    end
    local a1, b1 = run(false)
    local a2, b2 = run(true)
    same_bits(a1, a2)
    same_bits(b1, b2)
    -- One output unused: its gradient is absent, the other still flows.
    local a = ember.ones(2):requires_grad_()
    local _, q = ember.utils.checkpoint(f, a, ember.ones(2), 1)
    q:sum():backward()
    assert.near(math.exp(2), a.grad[1], 1e-5)
  end)

  it('does not record under no_grad, and checks its arguments', function()
    local x = ember.ones(2):requires_grad_()
    local y = ember.no_grad(function() return ember.utils.checkpoint(function(v) return v * 2 end, x) end)
    assert.is_false(y.requires_grad)
    assert.has_error(function() ember.utils.checkpoint(3, x) end,
      'checkpoint: expected a function (or a module) as argument 1, got number')
  end)

  it('saves memory on a deep MLP', function()
    -- Each run measures the peak allocated bytes above what the model holds, over one step.
    -- Each block's function lets Lua collect what it dropped, so that the peak counts what the
    -- graph keeps, not garbage waiting for the collector.
    local code = [[
      local ember = require 'ember'
      local nn = ember.nn
      local ckpt = os.getenv('CKPT') == '1'
      ember.manual_seed(0)
      local blocks = {}
      for b = 1, 8 do
        local layers = {}
        for _ = 1, 4 do layers[#layers + 1] = nn.Linear(64, 64); layers[#layers + 1] = nn.Tanh() end
        blocks[b] = nn.Sequential(unpack(layers))
      end
      local x = ember.randn(512, 64)
      local kept
      local function step()
        local h = x
        for b = 1, 8 do
          local f = function(v)
            local o = blocks[b](v)
            blocks[b]:clear_state()
            ember.memory.collect()
            return o
          end
          h = ckpt and ember.utils.checkpoint(f, h) or f(h)
        end
        ember.memory.collect()
        kept = ember.memory.stats().allocated
        h:pow(2):mean():backward()
      end
      step()
      ember.memory.collect()
      local base = ember.memory.stats().allocated
      ember.memory.reset_peak()
      step()
      print(ember.memory.stats().peak - base, kept - base)
    ]]
    local function measure(ck)
      local out, err, rc = H.child(code, 'CKPT=' .. ck)
      assert.equal(0, rc, err)
      local peak, kept = out:match('(%d+)%s+(%d+)')
      return tonumber(peak), tonumber(kept)
    end
    local peak_plain, kept_plain = measure('0')
    local peak_ck, kept_ck = measure('1')
    -- Without: 32 layers' activations of 128 KiB each stay until the backward. With: the 8
    -- blocks' inputs, plus one block's activations at a time during the backward.
    assert.is_true(kept_plain > 3.5e6, tostring(kept_plain))
    assert.is_true(kept_ck < 0.4 * kept_plain, ('kept %d vs %d'):format(kept_ck, kept_plain))
    assert.is_true(peak_ck < 0.7 * peak_plain, ('peak %d vs %d'):format(peak_ck, peak_plain))
  end)
end)
