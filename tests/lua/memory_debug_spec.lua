-- ember.memory's debugging tools: summary and census (by size class), record_history and
-- snapshot (where live storages were made), leak_check. On the CPU and on the Vulkan device of
-- the tests (lavapipe) when there is one. The references are independent of the census: sizes
-- computed by hand from the shapes, stats() (kept by alloc.c's own counters), and this file's
-- own line numbers (debug.getinfo) for the sites.
local H = require 'helpers'
local ember = H.ember
local nn = require 'ember.nn'
local optim = require 'ember.optim'
local VK = require('vk_helpers')

-- The caller's position (no tail call, which would drop the caller's frame).
local function here()
  local info = debug.getinfo(2, 'Sl')
  return info
end
local function site_of(info) return info.short_src .. ':' .. info.currentline end
-- A pattern matching s literally.
local function lit(s) return (s:gsub('[%^%$%(%)%%%.%[%]%*%+%-%?]', '%%%0')) end

local devices = { 'cpu' }
if VK.V then devices[2] = VK.V end

for _, dev in ipairs(devices) do
  describe('memory debugging on ' .. dev, function()
    after_each(function() ember.memory.record_history(false) end)

    it('census: live storages by size class agree with stats() and with the sizes made', function()
      ember.memory.collect()
      local before = ember.memory.census(dev)
      local function class_row(c, min)
        for _, row in ipairs(c.classes) do if row.min == min then return row end end
        return { live_blocks = 0, live_bytes = 0 }
      end
      -- 3 x 100 float32 = 400 B each: class [256, 512); one int64 [3,1000] = 24000 B:
      -- class [16384, 32768)
      local keep = { ember.zeros(100, { device = dev }), ember.ones(100, { device = dev }),
                     ember.zeros(100, { device = dev }),
                     ember.zeros(3, 1000, { dtype = 'int64', device = dev }) }
      local c = ember.memory.census(dev)
      local s = ember.memory.stats(dev)
      assert.are.equal(s.allocated, c.live_bytes)
      assert.are.equal(3, class_row(c, 256).live_blocks - class_row(before, 256).live_blocks)
      assert.are.equal(1200, class_row(c, 256).live_bytes - class_row(before, 256).live_bytes)
      assert.are.equal(1, class_row(c, 16384).live_blocks - class_row(before, 16384).live_blocks)
      assert.are.equal(24000, class_row(c, 16384).live_bytes - class_row(before, 16384).live_bytes)
      -- what is cached is what stats() calls cached (Vulkan: less the alignment of live blocks)
      if dev == 'cpu' then
        assert.are.equal(s.cached, c.cached_bytes)
      else
        assert.is_true(c.cached_bytes <= s.cached)
        assert.is_true(s.cached - c.cached_bytes < 4096 * c.live_blocks)
        assert.are.equal(s.reserved, c.segment_bytes)
        assert.is_true(c.segments >= 1)
      end
      keep = nil
      ember.memory.collect()
      local after = ember.memory.census(dev)
      assert.are.equal(before.live_bytes, after.live_bytes)
      assert.are.equal(before.live_blocks, after.live_blocks)
    end)

    it('summary prints the figures of stats() and a row per size class', function()
      ember.memory.collect()
      local x = ember.zeros(1000, { device = dev }) -- 4000 B: class 2 KiB - 4 KiB
      local text = ember.memory.summary(dev)
      local s = ember.memory.stats(dev)
      local h = require('ember.memory.history').human
      assert.is_truthy(text:find('Ember memory summary: ' .. dev, 1, true))
      assert.is_truthy(text:find(lit('allocated (live storages)') .. '%s+' .. lit(h(s.allocated))))
      assert.is_truthy(text:find('peak allocated%s+' .. lit(h(s.peak))))
      assert.is_truthy(text:find('\nreserved%s+' .. lit(h(s.reserved))))
      assert.is_truthy(text:find('\n2 KiB %- 4 KiB%s+%d+'))
      assert.are.equal(4000, x:numel() * 4)
    end)

    it('snapshot lists a tensor made while recording: size, dtype, shape and line', function()
      ember.memory.record_history(true)
      local made = here(); local t = ember.zeros(7, 3, 5, { dtype = 'float64', device = dev })
      local snap = ember.memory.snapshot(dev)
      local found
      for _, e in ipairs(snap) do
        if e.site == site_of(made) then found = e end
      end
      assert.is_not_nil(found)
      assert.are.equal(7 * 3 * 5 * 8, found.bytes)
      assert.are.equal('float64', found.dtype)
      assert.are.same({ 7, 3, 5 }, found.shape)
      assert.are.equal(dev, found.device)
      assert.is_truthy(found.traceback:find(site_of(made), 1, true))
      -- largest first
      for i = 2, #snap do assert.is_true(snap[i - 1].bytes >= snap[i].bytes) end
      -- gone from the next snapshot once the tensor is
      t = nil
      for _, e in ipairs(ember.memory.snapshot(dev)) do
        assert.are_not.equal(site_of(made), e.site)
      end
      -- grouped by site in the printout
      local keep = {}
      local loop = here(); for i = 1, 3 do keep[i] = ember.ones(64, { device = dev }) end
      local snap2 = ember.memory.snapshot(dev)
      local text = tostring(snap2)
      assert.is_truthy(text:find('768 B%s+3 x%s+' .. lit(site_of(loop))))
      -- with tracebacks, and cut to the largest site
      local big = here(); local other = ember.zeros(1000, { device = dev }) -- 4000 B
      text = ember.memory.snapshot(dev):format({ traceback = true, limit = 1 })
      assert.is_truthy(text:find('3.9 KiB     1 x  ' .. site_of(big), 1, true))
      assert.is_truthy(text:find('stack traceback:', 1, true))
      assert.is_truthy(text:find('... 1 more site', 1, true))
      assert.are.equal(1000, other:numel())
    end)

    it('records nothing while off, and counts what it did not record', function()
      ember.memory.record_history(false)
      local none = { blocks = 0, bytes = 0 }
      local before = ember.memory.snapshot(dev).untracked[dev] or none
      local t = ember.zeros(11, 13, { device = dev })
      local snap = ember.memory.snapshot(dev)
      for _, e in ipairs(snap) do
        assert.are_not.same({ 11, 13 }, e.shape)
      end
      local after = snap.untracked[dev] or none
      assert.are.equal(1, after.blocks - before.blocks)
      assert.are.equal(11 * 13 * 4, after.bytes - before.bytes)
      local line = '(made while recording was off, on ' .. dev .. ')'
      assert.is_truthy(tostring(snap):find(line, 1, true))
      assert.is_true(t:numel() == 143)
    end)

    it('leak_check finds a table that keeps every output, and names its line', function()
      local kept = {}
      local w = ember.randn(8, 8, { device = dev })
      local line
      local report = ember.memory.leak_check(function()
        line = here(); kept[#kept + 1] = w * 2
      end, { iterations = 3, device = dev })
      assert.is_false(report.ok)
      assert.are.equal(8 * 8 * 4, report.bytes_per_iteration)
      assert.are.equal(1, report.storages_per_iteration)
      -- the outputs of the first two runs outlived the next run; the third's is the last one's
      assert.are.equal(site_of(line), report.sites[1].site)
      assert.are.equal(2, report.sites[1].count)
      assert.are.equal(1, #report.sites)
      assert.are.same({ 8, 8 }, report.sites[1].entries[1].shape)
      assert.is_truthy(tostring(report):find(site_of(line), 1, true))
      -- and raises when asked
      local ok, err = pcall(ember.memory.leak_check, function() kept[#kept + 1] = w + 1 end,
        { iterations = 2, device = dev, raise = true })
      assert.is_false(ok)
      assert.is_truthy(err:find('memory.leak_check: leak', 1, true))
      -- recording is off again, as it was before
      assert.is_false(require('ember.memory.history').is_recording())
    end)

    it('leak_check reports none for a clean training loop', function()
      H.seed(5)
      local model = nn.Linear(6, 2)
      model:to(dev)
      local opt = optim.SGD(model:parameters(), { lr = 0.01, momentum = 0.9 })
      local x = ember.randn(5, 6, { device = dev })
      local y = ember.randn(5, 2, { device = dev })
      local report = ember.memory.leak_check(function()
        opt:zero_grad()
        local loss = ((model:forward(x) - y) ^ 2):mean()
        loss:backward()
        opt:step()
      end, { iterations = 4, device = dev })
      assert.is_true(report.ok, tostring(report))
      assert.are.equal(0, report.growth_bytes)
      assert.are.equal(4, #report.live_bytes)
      assert.are.equal(0, #report.sites) -- nothing outlived the run after the one that made it
    end)
  end)
end

describe('memory debugging options', function()
  it('misspelt or wrong options are errors at the caller', function()
    local ok, err = pcall(ember.memory.leak_check, function() end, { iteration = 2 })
    assert.is_false(ok)
    assert.is_truthy(err:find('unknown option iteration (did you mean iterations?', 1, true))
    local line
    ok, err = pcall(function()
      line = here(); ember.memory.leak_check(function() end, { iterations = 0 })
    end)
    assert.is_truthy(err:find(site_of(line) .. ': memory.leak_check: expected iterations', 1, true))
    ok, err = pcall(ember.memory.leak_check, 42)
    assert.is_truthy(err:find('expected a function to run, got number', 1, true))
    ok, err = pcall(ember.memory.leak_check, function() end, { tolerance = -1 })
    assert.is_truthy(err:find('expected tolerance', 1, true))
    ok, err = pcall(ember.memory.print_snapshot, nil, { limt = 3 })
    assert.is_truthy(err:find('unknown option limt (did you mean limit?', 1, true))
    ok, err = pcall(ember.memory.record_history, 'yes')
    assert.is_truthy(err:find('memory.record_history: expected true or false, got yes', 1, true))
    ok, err = pcall(ember.memory.record_history, true, { max_entries = 10 })
    assert.is_truthy(err:find('expected one argument (true or false), got 2', 1, true))
    assert.is_false(require('ember.memory.history').is_recording())
    ok, err = pcall(ember.memory.summary, 'nodevice')
    assert.is_false(ok)
  end)

  it('record_history turns the compiler off while on, and back as it was', function()
    local before = jit.status()
    assert.is_false(ember.memory.record_history(true))
    assert.is_false(jit.status())
    assert.is_true(ember.memory.record_history(true)) -- already on
    assert.is_true(ember.memory.record_history(false))
    assert.are.equal(before, jit.status())
  end)

  it('leak_check passes on the error of the function it runs, and stops recording', function()
    local ok, err = pcall(ember.memory.leak_check, function() error('boom') end, { warmup = 0 })
    assert.is_false(ok)
    assert.is_truthy(err:find('boom', 1, true))
    assert.is_false(require('ember.memory.history').is_recording())
  end)

  it('fragmentation: the share of the CPU cache no single request can take whole', function()
    ember.memory.empty_cache('cpu')
    local a = ember.zeros(1024, 1024) -- 4 MiB: a cached class of its own size
    local b = ember.zeros(256, 1024)  -- 1 MiB
    a, b = nil, nil
    ember.memory.collect()
    local c = ember.memory.census('cpu')
    assert.are.equal(5 * 1024 * 1024, c.cached_bytes)
    assert.are.equal(2, c.cached_blocks)
    assert.are.equal(4 * 1024 * 1024, c.largest_free)
    assert.is_true(math.abs(c.fragmentation - 0.2) < 1e-12)
    ember.memory.empty_cache('cpu')
    assert.are.equal(0, ember.memory.census('cpu').cached_bytes)
  end)
end)
