-- In-place writes into views whose positions share memory are refused, on every device, as
-- add_ and the other in-place ops already were for expanded views: which position's value
-- would be kept depends on the order a kernel visits them (the CPU and Vulkan disagreed).
-- Views that do not overlap (slices with steps, transposes, unfold with step >= size) are
-- still written, checked against plain-Lua loops.
local H = require 'tests.lua.helpers'
local ember = H.ember

local function devices()
  local ds = { 'cpu' }
  for _, d in ipairs(ember.devices()) do
    if d.type ~= 'cpu' then ds[#ds + 1] = d.name; break end
  end
  return ds
end

for _, dev in ipairs(devices()) do
  describe('overlapping in-place writes on ' .. dev, function()
    local function expanded() return ember.zeros({ 1, 3 }, { device = dev }):expand(2, 3) end
    local function windows() return ember.arange(0, 6, 1, { dtype = 'float32' }):to(dev):unfold(1, 3, 1) end

    it('copy_, fill_ and zero_ into an expanded view are refused like add_', function()
      local src = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }):to(dev)
      H.assert_error(function() expanded():copy_(src) end, 'copy_: cannot write in place into an expanded tensor')
      H.assert_error(function() expanded():fill_(1) end, 'fill_: cannot write in place into an expanded tensor')
      H.assert_error(function() expanded():zero_() end, 'zero_: cannot write in place into an expanded tensor')
      H.assert_error(function() expanded():add_(1) end, 'add: cannot write in place into an expanded tensor')
    end)

    it('in-place ops on overlapping unfold windows are refused (disjoint views are written)', function()
      local base = ember.arange(0, 6, 1, { dtype = 'float32' }):to(dev)
      local w = base:unfold(1, 3, 1)
      local msg = 'cannot write in place into a tensor whose elements overlap in memory'
      H.assert_error(function() w:add_(1) end, 'add: ' .. msg)
      H.assert_error(function() w:mul_(2) end, msg)
      H.assert_error(function() w:fill_(1) end, 'fill_: ' .. msg)
      H.assert_error(function() w:zero_() end, 'zero_: ' .. msg)
      H.assert_error(function() w:copy_(ember.ones(4, 3):to(dev)) end, 'copy_: ' .. msg)
      H.assert_error(function() w:uniform_() end, 'overlapping windows')
      H.assert_error(function() windows():scatter_(2, ember.zeros({ 4, 1 }, { dtype = 'int64' }):to(dev),
        ember.ones(4, 1):to(dev)) end, msg)
      H.assert_close(base:to('cpu'), { 0, 1, 2, 3, 4, 5 }, 0, 0)

      -- views that do not overlap are still written in place
      base = ember.arange(0, 12, 1, { dtype = 'float32' }):to(dev)
      w = base:unfold(1, 3, 3) -- step = size: disjoint windows
      w:add_(1)
      local s = base:view(3, 4):t():slice(1, 1, 4, 2) -- transposed, every other row
      s:fill_(-1)
      local want = {}
      for i = 0, 11 do
        local v = i + 1
        if i % 4 == 0 or i % 4 == 2 then v = -1 end
        want[i + 1] = v
      end
      H.assert_close(base:to('cpu'), want, 0, 0)
    end)
  end)
end
