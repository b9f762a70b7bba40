-- Devices: listing (ember.devices, ember.device), the choice rules of 'auto', 'vulkan' and
-- 'vulkan:N', EMBER_DEVICE at start-up, the fallback to the CPU with one warning line when the
-- GPU auto picks cannot start, strict mode, a machine without a Vulkan loader, synchronize,
-- and a run of tests/lua/vulkan_spec.lua under the Khronos validation layer. Start-up behaviour runs in child processes, each a fresh runtime; a failing
-- GPU start is simulated with the test hook EMBER_VK_TEST=fail-start, and a CPU-type driver
-- (lavapipe) stands in for a GPU with EMBER_VK_TEST=software-as-gpu.
local H = require 'helpers'
local ember = H.ember

local lib = os.getenv('EMBER_LIB') or 'build/libember.so'

-- Runs Lua code in a fresh process with extra environment; returns stdout, stderr, status.
local function child(env, code) return H.child(code, env) end

local function count(s, pattern)
  local n = 0
  for _ in s:gmatch(pattern) do n = n + 1 end
  return n
end

local vulkan = {}
for _, d in ipairs(ember.devices()) do
  if d.type ~= 'cpu' then vulkan[#vulkan + 1] = d end
end

describe('devices', function()
  it('lists the cpu first, with its memory and features', function()
    local list = ember.devices()
    local cpu = list[1]
    assert.are.equal('cpu', cpu.name)
    assert.are.equal('cpu', cpu.type)
    assert.are.equal(0, cpu.id)
    assert.is_true(cpu.memory > 0)
    assert.is_true(cpu.budget > 0 and cpu.budget <= cpu.memory)
    assert.is_true(cpu.features.float64 and cpu.features.int64)
    assert.is_true(cpu.started)
    for i, d in ipairs(list) do
      assert.are.equal(i - 1, d.id)
      if i > 1 then
        assert.are.equal('vulkan:' .. (i - 2), d.name)
        assert.truthy(({ discrete = 1, integrated = 1, virtual = 1, software = 1, other = 1 })[d.type])
        assert.is_true(d.memory > 0)
        assert.truthy(d.description ~= '')
      end
    end
  end)

  it('gives device objects that print as their name and work as device arguments', function()
    local cpu = ember.device('cpu')
    assert.are.equal('cpu', tostring(cpu))
    assert.are.equal(0, cpu.id)
    assert.are.equal(ember.device('cpu'), cpu)
    assert.are.equal('cpu', ember.zeros(2, { device = cpu }):device())
    assert.are.equal('cpu', ember.device(0).name)
    assert.are.equal(ember.get_default_device(), ember.device().name)
    assert.are.equal('cpu', cpu:info().type)
    cpu:synchronize()
    ember.synchronize()
    ember.synchronize('cpu')
  end)

  it('rejects unknown names and devices this machine lacks', function()
    H.assert_error(function() return ember.device('gpu') end,
      "device: unknown device 'gpu' (expected cpu, auto, vulkan or vulkan:N)")
    H.assert_error(function() return ember.zeros(2, { device = 'cuda' }) end,
      "unknown device 'cuda'")
    H.assert_error(function() return ember.device('vulkan:' .. #vulkan) end,
      "device: 'vulkan:" .. #vulkan .. "' is not available")
    H.assert_error(function() return ember.device(99) end, 'invalid device 99')
    H.assert_error(function() return ember.device({}) end, 'expected a device name')
    H.assert_error(function() return ember.set_default_device('nope') end, "unknown device 'nope'")
  end)

  it('auto never picks a CPU-type driver; vulkan picks the best Vulkan device', function()
    local best_gpu
    for _, d in ipairs(vulkan) do
      if d.type ~= 'software' and not best_gpu then best_gpu = d end
    end
    local auto = ember.device('auto')
    if best_gpu then
      assert.are.equal(best_gpu.name, auto.name)
    else
      assert.are.equal('cpu', auto.name)
    end
    if #vulkan > 0 then
      assert.are.equal((best_gpu or vulkan[1]).name, ember.device('vulkan').name)
    else
      H.assert_error(function() return ember.device('vulkan') end, 'device: no Vulkan device')
    end
  end)

  it('toggles strict mode and reports the previous setting', function()
    local was = ember.is_strict_device()
    assert.are.equal(was, ember.set_strict_device(true))
    assert.is_true(ember.is_strict_device())
    assert.is_true(ember.set_strict_device(false))
    assert.is_false(ember.is_strict_device())
    ember.set_strict_device(was)
  end)

  it('sets the default device where creation functions allocate', function()
    local before = ember.get_default_device()
    ember.set_default_device('cpu')
    assert.are.equal('cpu', ember.get_default_device())
    assert.are.equal('cpu', ember.ones(3):device())
    if #vulkan > 0 then
      ember.set_default_device(vulkan[1].name)
      local ok, err = pcall(function()
        assert.are.equal(vulkan[1].name, ember.ones(3):device())
        assert.are.equal(vulkan[1].name, ember.arange(5):device())
        assert.are.equal(vulkan[1].name, ember.tensor({ 1, 2 }):device())
      end)
      ember.set_default_device(before)
      assert(ok, err)
    end
    ember.set_default_device(before)
  end)

  describe('at start-up', function()
    it('EMBER_DEVICE=cpu and auto never load a missing Vulkan loader', function()
      local out, err, rc = child('EMBER_DEVICE=auto EMBER_VK_LOADER=/nonexistent/libvulkan.so.1',
        'local e = require "ember" print(e.get_default_device(), #e.devices())')
      assert.are.equal(0, rc, err)
      assert.are.equal('cpu\t1\n', out)
      assert.are.equal('', err)
      out, err, rc = child('EMBER_VK_LOADER=/nonexistent/libvulkan.so.1', [[
        local e = require "ember"
        print(pcall(e.device, "vulkan"))
        print(pcall(e.device, "vulkan:0"))]])
      assert.are.equal(0, rc, err)
      assert.truthy(out:find('device: no Vulkan device (no Vulkan devices: the Vulkan loader ' ..
        '/nonexistent/libvulkan.so.1 could not be loaded)', 1, true), out)
      assert.truthy(out:find("device: 'vulkan:0' is not available (no Vulkan devices", 1, true), out)
    end)

    it('an unusable EMBER_DEVICE stops loading with the reason', function()
      local out, err, rc = child('EMBER_DEVICE=bogus', 'require "ember" print("ran")')
      assert.are_not.equal(0, rc)
      assert.are.equal('', out)
      assert.truthy(err:find("EMBER_DEVICE=bogus: device: unknown device 'bogus'", 1, true), err)
      out, err, rc = child('EMBER_DEVICE=vulkan:7', 'require "ember" print("ran")')
      assert.are_not.equal(0, rc)
      assert.truthy(err:find("EMBER_DEVICE=vulkan:7: device: 'vulkan:7' is not available", 1, true), err)
    end)

    if #vulkan == 0 then
      it('(the rest needs a Vulkan device)', function() pending('no Vulkan device on this machine') end)
      return
    end
    local V = vulkan[1].name

    it('EMBER_DEVICE=vulkan:N makes it the default device', function()
      local code = ('local e = require "ember" print(e.get_default_device(), e.zeros(2):device(), ' ..
        'e.device(%q).name)'):format(V)
      local out, err, rc = child('EMBER_DEVICE=' .. V, code)
      assert.are.equal(0, rc, err)
      assert.are.equal(('%s\t%s\t%s\n'):format(V, V, V), out)
    end)

    it('falls back from a GPU that cannot start to the cpu, with one warning line', function()
      local out, err, rc = child('EMBER_DEVICE=auto EMBER_VK_TEST=software-as-gpu,fail-start', [[
        local e = require "ember"
        print(e.get_default_device(), e.zeros(2):device(), e.device("auto").name)
        local d = e.devices()[2]
        print(d.started, d.error ~= nil)]])
      assert.are.equal(0, rc, err)
      assert.are.equal('cpu\tcpu\tcpu\nfalse\ttrue\n', out)
      assert.are.equal(1, count(err, '[^\n]*\n'), err)
      assert.truthy(err:find('^ember: warning: ' .. V .. ' cannot start %(' .. V ..
        ': start failed on purpose %(the test hook EMBER_VK_TEST=fail%-start is set%)%); using the cpu\n$'), err)
    end)

    it('raises instead in strict mode, from EMBER_STRICT_DEVICE or set_strict_device', function()
      local out, err, rc = child('EMBER_DEVICE=auto EMBER_STRICT_DEVICE=1 EMBER_VK_TEST=software-as-gpu,fail-start',
        'require "ember" print("ran")')
      assert.are_not.equal(0, rc)
      assert.are.equal('', out)
      assert.truthy(err:find('EMBER_DEVICE=auto: device: auto chose ' .. V ..
        ', which cannot start (strict mode)', 1, true), err)
      out, err, rc = child('EMBER_VK_TEST=software-as-gpu,fail-start', [[
        local e = require "ember"
        e.set_strict_device(true)
        print(pcall(e.device, "auto"))
        e.set_strict_device(false)
        print(e.device("auto").name)
        print(pcall(e.zeros, 2, { device = "]] .. V .. [[" }))]])
      assert.are.equal(0, rc, err)
      local lines = {}
      for l in out:gmatch('[^\n]+') do lines[#lines + 1] = l end
      assert.truthy(lines[1]:find('^false\t[^\t]*device: auto chose ' .. V .. ', which cannot start %(strict mode%)'), out)
      assert.are.equal('cpu', lines[2])
      assert.truthy(lines[3]:find('^false\t.*start failed on purpose'), out)
      assert.are.equal(1, count(err, 'ember: warning'), err)
    end)

    it('a named device that cannot start is an error, even without strict mode', function()
      local out, err, rc = child('EMBER_VK_TEST=fail-start',
        ('local e = require "ember" print(pcall(e.device, %q))'):format(V))
      assert.are.equal(0, rc, err)
      assert.truthy(out:find('^false\t[^\t]*device: ' .. V .. ' cannot start: '), out)
      assert.are.equal('', err)
    end)

    it('the Vulkan suite runs under the Khronos validation layer with zero messages', function()
      -- every vulkan*_spec.lua once more, with EMBER_VK_VALIDATION=1: the validation layer and its
      -- synchronization validation (which checks every barrier) report to Ember, which prints
      -- each message; any message fails this test.
      local layers = io.popen('ls /usr/share/vulkan/explicit_layer.d/ /etc/vulkan/explicit_layer.d/ 2>/dev/null'):read('*a')
      if not layers:find('validation') then return pending('the validation layer is not installed') end
      local errf = os.tmpname()
      local p = io.popen(('env EMBER_VK_SPEC_CHILD=1 EMBER_VK_VALIDATION=1 EMBER_LIB=%q ' ..
        "busted --lua=luajit -o TAP -p 'vulkan.*_spec' tests/lua 2> %q"):format(lib, errf))
      local out = p:read('*a')
      p:close()
      local ef = io.open(errf)
      local err = ef:read('*a')
      ef:close()
      os.remove(errf)
      assert.falsy(err:find('vulkan validation', 1, true), err)
      local planned = tonumber(out:match('1%.%.(%d+)'))
      assert.truthy(planned and planned > 20, out)
      assert.are.equal(planned, count('\n' .. out, '\nok %d+'), out .. err)
      assert.falsy(out:find('not ok', 1, true), out)
      assert.truthy(out:find('validation layer active', 1, true), out)
    end)

    it('EMBER_VK_PROFILE=1 prints GPU time per kernel at exit, counting every dispatch', function()
      -- 7 additions and 3 matrix products: the table's counts must say so, and every timed
      -- kernel took some time; under the validation layer the timestamp commands raise nothing
      local out, err, rc = child('EMBER_VK_PROFILE=1 EMBER_VK_VALIDATION=1', ([[
        local e = require "ember"
        local x = e.rand(64, 64, { device = %q })
        local y = x
        for _ = 1, 7 do y = y + x end
        for _ = 1, 3 do y = y:matmul(x) end
        print(y:sum():item() == y:sum():item())]]):format(V))
      assert.are.equal(0, rc, err)
      assert.are.equal('true\n', out)
      assert.truthy(err:find(V .. ' profile (GPU time per kernel, from the completion of the work before it)', 1, true), err)
      assert.falsy(err:find('vulkan validation', 1, true), err)
      -- rows: the kernel in 32 columns, then calls, total ms, mean us, share
      local calls, rows = {}, 0
      for line in err:gmatch('[^\n]+') do
        local name, n, ms = line:sub(1, 32):match('^(%S+)'), tonumber(line:sub(33, 41)),
          tonumber(line:sub(42, 53))
        if name and n and ms then
          rows = rows + 1
          calls[name] = (calls[name] or 0) + n
          assert.is_true(ms > 0, line)
        end
      end
      assert.are.equal(7, calls.pointwise_F32, err)
      assert.are.equal(3, calls.matmul_F32_S, err)
      assert.is_true(rows >= 3, err)
      assert.truthy(err:find('\ntotal%s+[%d.]+\n'), err)
    end)

    it('Vulkan stays unloaded until a device is listed or named', function()
      local out, err, rc = child('EMBER_DEVICE=cpu', [[
        local e = require "ember"
        local x = e.ones(3) + 1
        local maps = io.open("/proc/self/maps"):read("*a")
        print(maps:find("libvulkan", 1, true) ~= nil)
        e.devices()
        maps = io.open("/proc/self/maps"):read("*a")
        print(maps:find("libvulkan", 1, true) ~= nil)]])
      assert.are.equal(0, rc, err)
      assert.are.equal('false\ntrue\n', out)
    end)
  end)
end)
