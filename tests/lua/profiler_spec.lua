-- ember.profiler: the ops and kernels a small model runs per step, counted by hand; module
-- and user ranges; the schedule's phases and on_trace_ready; the key_averages table; the
-- Chrome trace read back by Python's json; call sites; the GPU times against a synchronized
-- wall clock on Vulkan (lavapipe here), and a run under the validation layer.
local H = require 'helpers'
local ember = H.ember
local VK = require('vk_helpers')
local V = VK.V

local profiler = ember.profiler

-- Linear(3, 2) then ReLU, the sum of its output, backward: one training step's autograd work.
local function tiny_model(device)
  ember.manual_seed(1)
  local m = ember.nn.Sequential():add(ember.nn.Linear(3, 2)):add(ember.nn.ReLU())
  return m:to(device), ember.rand(5, 3, { device = device })
end

local function step(m, x)
  local loss = m(x):sum()
  loss:backward()
  return loss
end

-- name -> how many events of that name (of kind `kind`, or all).
local function tally(events, kind)
  local n = {}
  for _, e in ipairs(events) do
    if kind == nil or e.kind == kind then n[e.name] = (n[e.name] or 0) + 1 end
  end
  return n
end

-- The ops one step runs, by hand (the kernel table names each op's kernel call):
--   forward  Linear: addmm; on the CPU copy (the bias broadcast into the output) then gemm
--            (beta 1); on Vulkan one gemm_add (the bias added by the product kernel);
--            ReLU: relu; the loss: sum
--   backward the seed gradient of the loss: fill (ones);
--            ReluBackward: fill (the 0 it compares with), gt, where;
--            AddmmBackward: gemm (the weight's gradient, g^T x) and sum (the bias's);
--            the input needs no gradient, so no third product;
--            AccumulateGrad: from the second step on, add (the new gradient into .grad) for
--            the weight and the bias.
local function ops_per_step(device, accumulating)
  local ops = { relu = 1, sum = 2, fill = 2, gt = 1, where = 1 }
  if device == 'cpu' then
    ops.copy, ops.gemm = 1, 2
  else
    ops.gemm_add, ops.gemm = 1, 1
  end
  if accumulating then ops.add = 2 end
  return ops
end
local function total(ops)
  local n = 0
  for _, k in pairs(ops) do n = n + k end
  return n
end
local NODES_PER_STEP = { SumBackward = 1, ReluBackward = 1, AddmmBackward = 1,
  AccumulateGrad = 2 }

local function per_step(events, steps, kind, expected)
  local got = tally(events, kind)
  for name, n in pairs(expected) do
    assert.are.equal(n * steps, got[name] or 0, name)
  end
end

describe('ember.profiler', function()
  it('raises on misspelt options, activities, schedule keys and sort columns', function()
    local function msg(f) local ok, e = pcall(f) assert.is_false(ok) return tostring(e) end
    assert.truthy(msg(function() profiler.profile({ record_shape = true }, function() end) end)
      :find('profiler.profile: unknown option record_shape (did you mean record_shapes?', 1, true))
    assert.truthy(msg(function() profiler.profile({ activities = { 'cpu', 'vulcan' } }, function() end) end)
      :find("activities[2]: unknown activity vulcan (did you mean 'vulkan'?); expected 'cpu' or 'vulkan'", 1, true))
    assert.truthy(msg(function() profiler.profile({ schedule = { wiat = 1 } }, function() end) end)
      :find('unknown option wiat (did you mean wait?', 1, true))
    assert.truthy(msg(function() profiler.profile({ schedule = { active = 0 } }, function() end) end)
      :find('schedule.active: expected at least 1 step, got 0', 1, true))
    local p = profiler.profile({ activities = { 'cpu' } }, function() local _ = ember.ones(2) + 1 end)
    assert.truthy(msg(function() p:key_averages():table({ sort_by = 'self_cpu_time' }) end)
      :find("sort_by: unknown column self_cpu_time (did you mean 'self_cpu_time_total'", 1, true))
    assert.truthy(msg(function() p:key_averages({ group_by_shape = true }) end)
      :find('unknown option group_by_shape', 1, true))
    assert.truthy(msg(function() p:export_chrom_trace('x') end)
      :find("no method export_chrom_trace (did you mean 'export_chrome_trace'?)", 1, true))
    -- one profile records at a time
    local outer = profiler.profile({ activities = { 'cpu' } }):start()
    assert.truthy(msg(function() profiler.profile({}, function() end) end)
      :find('profiler: another profile is already recording', 1, true))
    outer:stop()
    -- an error inside the profiled function is the one raised, and the profiler stops
    assert.truthy(msg(function() profiler.profile({}, function() error('boom') end) end):find('boom'))
    assert.is_false(profiler.is_recording())
  end)

  it('records only the active steps of the schedule, one trace per cycle', function()
    local m, x = tiny_model('cpu')
    local traces = {}
    profiler.profile({ activities = { 'cpu' }, schedule = { wait = 1, warmup = 1, active = 2, ['repeat'] = 2 },
      on_trace_ready = function(p)
        local steps = {}
        for _, e in ipairs(p:events()) do
          if e.name:find('^ProfilerStep#') then steps[#steps + 1] = e.name end
        end
        traces[#traces + 1] = { steps = table.concat(steps, ' '), events = p:events() }
      end }, function(prof)
      for _ = 1, 10 do
        step(m, x)
        prof:step()
      end
    end)
    -- cycles of 4 steps: wait (0), warmup (1), active (2, 3); then 4..7; repeat = 2 ends it
    assert.are.equal(2, #traces)
    assert.are.equal('ProfilerStep#2 ProfilerStep#3', traces[1].steps)
    assert.are.equal('ProfilerStep#6 ProfilerStep#7', traces[2].steps)
    for _, t in ipairs(traces) do
      per_step(t.events, 2, 'op', ops_per_step('cpu', true))
      per_step(t.events, 2, 'range', NODES_PER_STEP)
      local ops = 0
      for _, n in pairs(tally(t.events, 'op')) do ops = ops + n end
      assert.are.equal(2 * 12, ops) -- nothing else ran: the twelve ops above, twice
    end
    -- without a schedule the whole run is one trace, handed over at the end
    local n = 0
    profiler.profile({ activities = { 'cpu' }, on_trace_ready = function() n = n + 1 end },
      function(prof) step(m, x) prof:step() step(m, x) end)
    assert.are.equal(1, n)
  end)

  it('names module calls by the module tree and nests ops under ranges', function()
    local m, x = tiny_model('cpu')
    local outer = ember.nn.Sequential():add(m)
    local p = profiler.profile({ activities = { 'cpu' }, record_shapes = true }, function()
      local y = profiler.record('forward pass', function() return outer(x) end)
      assert.are.same({ 5, 2 }, y:shape())
    end)
    local ev = p:events()
    local counts = tally(ev, 'range')
    assert.are.equal(1, counts['forward pass'])
    assert.are.equal(1, counts['Sequential'])
    assert.are.equal(1, counts['Sequential.0'])
    assert.are.equal(1, counts['Sequential.0.0']) -- the Linear
    assert.are.equal(1, counts['Sequential.0.1']) -- the ReLU
    for _, e in ipairs(ev) do
      if e.name == 'gemm' then
        assert.are.equal('Sequential.0.0', ev[e.parent].name)
        assert.are.equal('[1,5,3] float32, [1,3,2] float32', e.shapes)
      elseif e.name == 'relu' then
        assert.are.equal('Sequential.0.1', ev[e.parent].name)
        assert.are.equal(e.duration, e.self)
        assert.is_true(ev[e.parent].duration >= e.duration)
      end
    end
    -- Torch7's module:backward is a range too, around the autograd nodes it runs
    local q = profiler.profile({ activities = { 'cpu' } }, function()
      outer:backward(x, ember.ones(5, 2))
    end)
    local bw
    for i, e in ipairs(q:events()) do if e.name == 'Sequential.backward' then bw = i end end
    assert.truthy(bw)
    local nodes = 0
    for _, e in ipairs(q:events()) do
      if e.parent == bw and e.name:find('Backward$') then nodes = nodes + 1 end
    end
    assert.is_true(nodes >= 2) -- ReluBackward, AddmmBackward
    -- record returns what its function returns, and outside a profile just calls it
    assert.are.same({ 1, 2 }, { profiler.record('r', function(a, b) return a, b end, 1, 2) })
  end)

  it('records the user\'s file:line with with_stack', function()
    local p = profiler.profile({ activities = { 'cpu' }, with_stack = true }, function()
      local a = ember.ones(3)
      local b = a * 2 local c = b + 1 -- one line: the site of mul and add
      return c
    end)
    local want = 'profiler_spec.lua:' .. (debug.getinfo(1, 'l').currentline - 3)
    local seen = 0
    for _, e in ipairs(p:events()) do
      if e.name == 'mul' or e.name == 'add' then
        assert.truthy(e.site and e.site:sub(-#want) == want, tostring(e.site) .. ' vs ' .. want)
        seen = seen + 1
      end
    end
    assert.are.equal(2, seen)
  end)

  it('prints key_averages like PyTorch, sorted by any column, grouped by input shape', function()
    local m, x = tiny_model('cpu')
    local p = profiler.profile({ activities = { 'cpu' }, record_shapes = true, profile_memory = true },
      function() step(m, x) step(m, x) end)
    local avg = p:key_averages()
    local gemm
    for _, r in ipairs(avg.rows) do if r.key == 'gemm' then gemm = r end end
    assert.are.equal(4, gemm.count)
    assert.is_true(gemm.cpu_time_total >= gemm.self_cpu_time_total)
    local text = avg:table({ sort_by = 'count', row_limit = 3 })
    assert.truthy(text:find('Name%s+Self CPU %%%s+Self CPU%s+CPU total %%%s+CPU total%s+CPU time avg'), text)
    assert.truthy(text:find('# of Calls', 1, true))
    assert.truthy(text:find('Self CPU time total: ', 1, true))
    local rows = {}
    for l in text:gmatch('[^\n]+') do
      local name, n = l:match('^(%S+)%s.-(%d+)%s*$')
      if name and not l:find('^%-') and name ~= 'Name' then rows[#rows + 1] = { name, tonumber(n) } end
    end
    assert.are.equal(3, #rows) -- row_limit
    assert.is_true(rows[1][2] >= rows[2][2] and rows[2][2] >= rows[3][2])
    -- grouped by shape, the two products of a step are two rows
    local by_shape = p:key_averages({ group_by_input_shape = true })
    local shapes = {}
    for _, r in ipairs(by_shape.rows) do
      if r.key == 'gemm' then shapes[#shapes + 1] = r.input_shapes end
    end
    table.sort(shapes)
    assert.are.same({ '[1,2,5] float32, [1,5,3] float32', '[1,5,3] float32, [1,3,2] float32' }, shapes)
    assert.truthy(by_shape:table():find('Input Shapes', 1, true))
    -- each forward allocates the relu's output (5 x 2 float32)
    for _, r in ipairs(avg.rows) do
      if r.key == 'relu' then assert.are.equal(2 * 40, r.self_cpu_memory_usage) end
    end
  end)

  it('writes a Chrome trace that parses as JSON with the documented events', function()
    local m, x = tiny_model(V or 'cpu')
    local p = profiler.profile({ activities = { 'cpu', 'vulkan' }, record_shapes = true },
      function() step(m, x) end)
    per_step(p:events(), 1, 'op', ops_per_step(V or 'cpu', false))
    local path, cpath = os.tmpname(), os.tmpname()
    assert.are.equal(path, p:export_chrome_trace(path))
    -- the runtime's writer, for C programs, on the same (last) profile
    assert.are.equal(0, require('ember.core').C.em_profiler_export_chrome_trace(cpath))
    local function summary(file)
      local py = io.popen(([[/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
phases = sorted(set(e["ph"] for e in ev))
x = [e for e in ev if e["ph"] == "X"]
assert all("pid" in e and "tid" in e and e["dur"] >= 0 for e in x)
meta = sorted(set(e["name"] for e in ev if e["ph"] == "M"))
starts = sorted(e["id"] for e in ev if e["ph"] == "s")
ends = sorted(e["id"] for e in ev if e["ph"] == "f")
assert starts == ends
print(" ".join(phases), len(x), len(starts), " ".join(meta))
' %q]]):format(file))
      local s = py:read('*a')
      py:close()
      os.remove(file)
      return s
    end
    local out = summary(path)
    assert.are.equal(out, summary(cpath))
    local cpu_meta = 'process_name process_sort_index thread_name'
    if V then
      -- the first step's ops, each one dispatch: a kernel and an arrow each
      local ph, nx, nflows, meta = out:match('^(%S+ %S+ %S+ %S+) (%d+) (%d+) (.-)\n$')
      assert.are.equal('M X f s', ph, out)
      assert.are.equal(total(ops_per_step(V, false)), tonumber(nflows), out)
      assert.are.equal(cpu_meta, meta)
      assert.is_true(tonumber(nx) > 20, out)
    else
      assert.truthy(out:find('^M X %d+ 0 ' .. cpu_meta .. '\n$'), out)
    end
  end)
end)

describe('ember.profiler on Vulkan', function()
  if V == nil then
    pending('no Vulkan device: ' .. tostring(VK.why))
    return
  end

  it('charges one kernel to each op of a step, on the device track', function()
    local m, x = tiny_model(V)
    step(m, x) -- pipelines built before the profile
    local p = profiler.profile({ activities = { 'cpu', 'vulkan' }, profile_memory = true },
      function(prof) step(m, x); prof:step(); step(m, x) end)
    local ev = p:events()
    per_step(ev, 2, 'op', ops_per_step(V, true))
    local kernels_of = {}
    local nkernels = 0
    for i, e in ipairs(ev) do
      if e.kind == 'kernel' then
        nkernels = nkernels + 1
        assert.are.equal(V, e.device)
        assert.truthy(e.op, e.name)
        assert.are.equal('op', ev[e.op].kind)
        kernels_of[e.op] = (kernels_of[e.op] or 0) + 1
        assert.is_true(e.duration >= 0)
        -- on the host's clock: no kernel runs before the op that recorded it
        assert.is_true(e.start >= ev[e.op].start, e.name .. ' starts before its op')
      end
    end
    assert.are.equal(2 * total(ops_per_step(V, true)), nkernels)
    for i, e in ipairs(ev) do
      if e.kind == 'op' then assert.are.equal(1, kernels_of[i], e.name) end
    end
    local row, relu
    for _, r in ipairs(p:key_averages().rows) do
      if r.key == 'gemm' then row = r end
      if r.key == 'relu' then relu = r end
    end
    assert.is_true(row.self_vulkan_time_total > 0)
    -- each relu's output (5 x 2 float32) in the device's memory, none in the host's
    assert.are.equal(2 * 40, relu.self_vulkan_memory_usage)
    assert.are.equal(0, relu.self_cpu_memory_usage)
    assert.truthy(p:key_averages():table({ sort_by = 'self_vulkan_time_total' })
      :find('Self Vulkan time total', 1, true))
  end)

  it('gives GPU times whose sum is within a synchronized wall-clock time', function()
    local function now_us() return ember.clock() * 1e6 end -- monotonic
    local a = ember.rand(256, 256, { device = V })
    local _ = a:matmul(a):sum():item() -- pipelines built
    ember.synchronize(V)
    local c = a
    local t0 = now_us()
    local p = profiler.profile({ activities = { 'cpu', 'vulkan' } }, function()
      for _ = 1, 4 do c = c:matmul(a) end
    end) -- stopping waits for the device
    local wall = now_us() - t0
    local sum, n = 0, 0
    for _, e in ipairs(p:events()) do
      if e.kind == 'kernel' then sum, n = sum + e.duration, n + 1 end
    end
    -- a read waits for the work before it: on the host's clock the GPU's last kernel ends
    -- before the read returns
    local q = profiler.profile({ activities = { 'cpu', 'vulkan' } }, function()
      local _ = c:sum():item()
    end)
    local read_end, gpu_end = nil, 0
    for _, e in ipairs(q:events()) do
      if e.name == 'copy_to_host' and e.kind == 'op' then read_end = e.start + e.duration end
      if e.kind == 'kernel' then gpu_end = math.max(gpu_end, e.start + e.duration) end
    end
    assert.is_true(gpu_end > 0 and gpu_end <= read_end, gpu_end .. ' > ' .. tostring(read_end))
    assert.are.equal(4, n)
    assert.is_true(sum > 0)
    -- the intervals tile the queue's busy time: never more than the wall clock, and with
    -- four products of 256 x 256 the queue is busy for a good part of it
    assert.is_true(sum <= wall, sum .. ' > ' .. wall)
    assert.is_true(sum * 20 >= wall, sum .. ' vs ' .. wall)
  end)

  it('runs under the validation layer with zero messages', function()
    local layers = io.popen('ls /usr/share/vulkan/explicit_layer.d/ /etc/vulkan/explicit_layer.d/ 2>/dev/null'):read('*a')
    if not layers:find('validation') then return pending('the validation layer is not installed') end
    local out, err, rc = H.child(([[
      local e = require "ember"
      local m = e.nn.Sequential():add(e.nn.Linear(3, 2)):add(e.nn.ReLU()):to(%q)
      local x = e.rand(5, 3, { device = %q })
      local p = e.profiler.profile({ activities = { "cpu", "vulkan" } }, function(prof)
        for _ = 1, 2 do m(x):sum():backward() prof:step() end
      end)
      local k = 0
      for _, ev in ipairs(p:events()) do if ev.kind == "kernel" then k = k + 1 end end
      print(k, e.device(%q):info().validation_messages)]]):format(V, V, V), 'EMBER_VK_VALIDATION=1')
    assert.are.equal(0, rc, err)
    -- a kernel per op: the first step's, then the second's (the gradients accumulate)
    local kernels = total(ops_per_step(V, false)) + total(ops_per_step(V, true))
    assert.are.equal(kernels .. '\t0\n', out, err)
    assert.falsy(err:find('vulkan validation', 1, true), err)
  end)
end)
