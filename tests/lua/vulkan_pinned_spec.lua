-- Pinned memory (runtime/src/vulkan/vk_pinned.c): CPU tensors in a Vulkan device's
-- host-visible memory, which copies to that device read directly (no staging copy, no wait),
-- and the DataLoader's pin_memory option that builds batches there.
local VK = require('vk_helpers').open('vulkan pinned memory')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V

local function device_info()
  for _, d in ipairs(ember.devices()) do
    if d.name == V then return d end
  end
end

describe('pinned memory (' .. V .. ')', function()
  it('pin_memory gives a pinned CPU copy with the same values, in any dtype and shape', function()
    for _, dtype in ipairs({ 'float32', 'float64', 'int64', 'uint8', 'bool', 'float16' }) do
      for _, shape in ipairs({ { 0 }, { 1 }, { 7, 3 }, { 2, 3, 5 } }) do
        local x = (ember.rand(shape) * 50):to(dtype)
        local p = x:pin_memory(V)
        assert.is_true(p:is_pinned())
        assert.is_false(x:is_pinned())
        assert.are.equal('cpu', p:device())
        assert.are.equal(dtype, p:dtype())
        assert.are.same(x:totable(), p:totable())
        assert.are.equal(p, p:pin_memory(V)) -- pinned already: itself
        assert.are.same(x:totable(), p:to(V):to('cpu'):totable(), dtype)
        -- views of a pinned tensor are pinned; strided ones are copied the usual way
        if #shape == 2 then
          assert.is_true(p:t():is_pinned())
          assert.are.same(x:t():totable(), p:t():to(V):to('cpu'):totable())
        end
      end
    end
  end)

  it('copies to the device straight from the pinned buffer, recorded without waiting', function()
    local x = ember.rand(64, 1024) -- 256 KiB: beyond the inline writes of small tensors
    local p = x:pin_memory(V)
    ember.synchronize(V)
    local waits = device_info().host_waits
    local g = p:to(V)
    assert.are.equal(waits, device_info().host_waits)
    -- The copy reads the pinned buffer when the device runs it: a write to the source before
    -- then is seen by it (PyTorch's non_blocking semantics; a staged copy would have taken
    -- the old values). The batch is not submitted before the read below: one recorded copy
    -- stays under the early-submit threshold.
    p:fill_(7)
    H.assert_close(g:to('cpu'), ember.full({ 64, 1024 }, 7):totable(), 0, 0)
    -- an ordinary tensor is staged: writing it after the call changes nothing
    local y = ember.rand(64, 1024)
    local gy = y:to(V)
    local want = y:clone()
    y:fill_(-1)
    H.assert_close(gy:to('cpu'), want:totable(), 0, 0)
  end)

  it('reuses a released pinned buffer only after the copies reading it are done', function()
    local results, wants = {}, {}
    for i = 1, 40 do
      local p = ember.full({ 256, 256 }, i):pin_memory(V)
      results[i] = p:to(V) * 1
      wants[i] = i
      p = nil -- released at once: the next round may take its buffer, but not while queued
      collectgarbage()
    end
    for i = 1, 40 do
      local v = results[i]:to('cpu')
      assert.are.equal(wants[i], v:min():item(), 'round ' .. i)
      assert.are.equal(wants[i], v:max():item(), 'round ' .. i)
    end
  end)

  it('reads from the device straight into pinned memory, in parts, after a pending copy out', function()
    local n = 3000
    local x = ember.rand(n):to(V)
    local p = ember.zeros(n, { device = 'cpu' }):pin_memory(V)
    -- the part [1001, 2000] first goes to a device tensor (a copy recorded, not yet run), then
    -- is overwritten by a read: the copy out must still see the old values
    local old = p:narrow(1, 1001, 1000):clone()
    local y = ember.empty(1000, { device = V })
    y:copy_(p:narrow(1, 1001, 1000))
    for _, part in ipairs({ { 1, 1000 }, { 1001, 1000 }, { 2001, 1000 } }) do
      p:narrow(1, part[1], part[2]):copy_(x:narrow(1, part[1], part[2]))
    end
    assert.are.same(x:to('cpu'):totable(), p:totable())
    assert.are.same(old:totable(), y:to('cpu'):totable())
    assert.is_true(p:is_pinned())
  end)

  it('counts pinned bytes as CPU memory while the tensor lives', function()
    -- through the C calls alone, so that no Lua collection frees anything in between
    local C = require('ember.core').C
    local ffi = require 'ffi'
    local sizes = ffi.new('int64_t[2]', 1024, 1024)
    local id = ember.device(V).id
    local before = ember.memory.stats('cpu').allocated
    local t = C.em_empty_pinned(2, sizes, C.EM_FLOAT32, id)
    assert.is_true(t ~= nil)
    local during = ember.memory.stats('cpu').allocated
    assert.are.equal(id, C.em_pinned_device(t))
    C.em_release(t)
    local after = ember.memory.stats('cpu').allocated
    assert.are.equal(4 * 2 ^ 20, during - before)
    assert.are.equal(4 * 2 ^ 20, during - after)
    ember.memory.empty_cache(V)
  end)

  it('refuses the CPU as the pinning device and GPU tensors as the source', function()
    local x = ember.rand(3)
    H.assert_error(function() return x:pin_memory('cpu') end,
      'pin_memory: expected a device with pinned memory (a Vulkan GPU), got cpu')
    H.assert_error(function() return x:to(V):pin_memory() end,
      'pin_memory: expected a cpu tensor, got one on ' .. V)
    H.assert_error(function() return x:pin_memory('vulkan:99') end, 'vulkan:99')
  end)

  it('DataLoader{pin_memory} builds pinned batches, with workers and in the main thread', function()
    local xs, ys = ember.rand(103, 5), ember.arange(103)
    local ds = ember.data.TensorDataset(xs, ys)
    for _, workers in ipairs({ 0, 2 }) do
      local L = ember.data.DataLoader(ds, { batch_size = 16, num_workers = workers,
        pin_memory = V, shuffle = true, seed = 3 })
      local ref = ember.data.DataLoader(ds, { batch_size = 16, num_workers = workers,
        shuffle = true, seed = 3 })
      local got = {}
      for a, b in L:iter() do
        assert.is_true(a:is_pinned() and b:is_pinned())
        got[#got + 1] = { a:to(V), b:to(V) }
      end
      local i = 0
      for a, b in ref:iter() do
        i = i + 1
        assert.are.same(a:totable(), got[i][1]:to('cpu'):totable())
        assert.are.same(b:totable(), got[i][2]:to('cpu'):totable())
      end
      assert.are.equal(7, i)
    end
    -- a custom collate runs in the main thread; its tensors are pinned after it
    local L = ember.data.DataLoader(ds, { batch_size = 10, pin_memory = V,
      collate = function(samples) return ember.stack((function()
        local t = {}
        for k, s in ipairs(samples) do t[k] = s[1] end
        return t
      end)()) end })
    for a in L:iter() do assert.is_true(a:is_pinned()) end
    -- pin_memory = true follows the default device: nothing to pin on a CPU run
    local cpu_run = ember.data.DataLoader(ds, { batch_size = 50, pin_memory = true })
    for a in cpu_run:iter() do assert.is_false(a:is_pinned()) end
    H.assert_error(function() ember.data.DataLoader(ds, { pin_memory = 3 }) end,
      'DataLoader: expected pin_memory to be a boolean or a device name, got number')
  end)
end)
