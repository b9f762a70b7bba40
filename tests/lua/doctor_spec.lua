-- `ember doctor` / ember.doctor() and `ember bench --ops`.
--  * The program's report names every device ember.devices() lists, and on a machine whose
--    only Vulkan device is lavapipe it warns that it is a CPU driver.
--  * The report agrees with independent sources: nproc, the pipeline cache file on disk.
--  * Conditions this machine can be put in from outside (no Vulkan loader, EMBER_DEVICE naming
--    nothing, a device that fails to start, one thread) give their warnings in the program.
--  * Every check (ember.doctor_checks) is fed made-up reports: each fires on its condition and
--    stays quiet on a healthy GPU machine.
--  * bench --ops prints, per device, a copy bandwidth and one product per dtype, all positive
--    numbers (no timing thresholds), and refuses misspelt or misplaced options.
local H = require 'helpers'
local ember = H.ember
local checks = require 'ember.doctor_checks'
local bench_ops = require 'ember.bench_ops'

local BIN = os.getenv('EMBER_BIN') or 'build/ember'

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute('mkdir -p ' .. q(tmpdir)) == 0)

local function read_file(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('*a')
  f:close()
  return s
end

-- Runs `ember <args>` with env (VAR=value words); returns stdout, stderr and the exit status.
local function run(args, env)
  local out, err = tmpdir .. '/out', tmpdir .. '/err'
  os.execute(('env -u EMBER_DEVICE -u OMP_NUM_THREADS %s %s %s > %s 2> %s < /dev/null; echo $? > %s/rc')
    :format(env or '', q(BIN), args, q(out), q(err), q(tmpdir)))
  return read_file(out), read_file(err), tonumber(read_file(tmpdir .. '/rc'))
end

local function contains(haystack, needle)
  if not haystack:find(needle, 1, true) then
    error(('expected to find %q in:\n%s'):format(needle, haystack), 2)
  end
end

local function lacks(haystack, needle)
  if haystack:find(needle, 1, true) then
    error(('did not expect %q in:\n%s'):format(needle, haystack), 2)
  end
end

-- The warnings section of a report's text, lines joined (the report wraps long ones).
local function warnings_text(out)
  local w = out:match('\nwarnings:\n(.-)\n\n') or out:match('\nwarnings:\n(.*)$') or ''
  return (w:gsub('\n%s+', ' '))
end

local devices = ember.devices()
local software = nil -- lavapipe, when this machine has it
local gpu = false
for _, d in ipairs(devices) do
  if d.type == 'software' and not software then software = d end
  if d.type ~= 'cpu' and d.type ~= 'software' then gpu = true end
end

local function nproc()
  local p = io.popen('nproc')
  local n = tonumber(p:read('*l'))
  p:close()
  return n
end

describe('ember doctor', function()

  it('lists every device, and warns when the only Vulkan device is a CPU driver', function()
    local version = run('--version'):match('^ember (%S+)')
    local out, err, rc = run('doctor')
    assert.are.equal(0, rc, err)
    contains(out, 'Ember ' .. version .. ', ' .. jit.version)
    contains(out, 'BLAS: OpenBLAS')
    for _, d in ipairs(devices) do
      assert.truthy(out:find('\n' .. d.name:gsub('%p', '%%%0') .. '  ', 1), 'no section for ' .. d.name)
      contains(out, d.description)
    end
    contains(out, '\ncpu  ')
    if software and not gpu then
      local w = warnings_text(out)
      contains(w, 'the only Vulkan device is a CPU driver: ' .. software.name)
      contains(out, 'CPU-type Vulkan driver')
      contains(out, 'matmul float32=tiled') -- its kernels
    end
  end)

  it('returns the report as data, in agreement with nproc and ember.devices()', function()
    local r = ember.doctor({ quiet = true })
    assert.are.equal(#devices, #r.devices)
    for i, d in ipairs(devices) do
      assert.are.equal(d.name, r.devices[i].name)
      assert.are.equal(d.type, r.devices[i].type)
      assert.truthy(r.devices[i].kernels['matmul.float32'])
    end
    assert.are.equal('openblas', r.devices[1].kernels['matmul.float32'])
    assert.are.equal(nproc(), r.threads.cores)
    assert.are.equal(ember.get_num_threads(), r.threads.ember)
    assert.are.equal(run('--version'):match('^ember (%S+)'), r.ember)
    assert.are.equal(jit.version, r.luajit)
    assert.is_table(r.warnings)
    for _, w in ipairs(r.warnings) do
      assert.truthy(w.level == 'warning' or w.level == 'note')
      assert.falsy(w.message:find('failed: ', 1, true), w.message) -- no check crashed
    end
    assert.has_error(function() ember.doctor({ quite = true }) end,
      'doctor: unknown option quite (did you mean quiet? expected one of start, quiet)')
  end)

  it('names the pipeline cache file that the device then writes', function()
    if not software then return pending('no Vulkan device') end
    local dir = tmpdir .. '/cache'
    local env = 'EMBER_CACHE_DIR=' .. q(dir)
    local out = run('doctor', env)
    local path = out:match('pipeline cache%s+(' .. dir:gsub('%p', '%%%0') .. '/vulkan%-[%x%-]+%.bin)')
    assert.truthy(path, out)
    contains(out, 'not written yet')
    -- a program that runs a kernel (a copy: quick to compile) writes the cache at exit, where
    -- the doctor said
    local _, err, rc = run(('-e %s'):format(q(("ember.zeros(4, 4, {device = '%s'}):t():contiguous()")
      :format(software.name))), env)
    assert.are.equal(0, rc, err)
    assert.truthy(io.open(path, 'rb'), 'no cache file at ' .. path)
    out = run('doctor', env)
    lacks(out, 'not written yet')
  end)

  it('warns about no Vulkan loader, an unusable EMBER_DEVICE and one thread', function()
    local out, err, rc = run('doctor', 'EMBER_VK_LOADER=/nonexistent/libvulkan.so.1')
    assert.are.equal(0, rc, err)
    contains(warnings_text(out), 'no Vulkan loader (the Vulkan loader /nonexistent/libvulkan.so.1 could not be loaded)')
    out, err, rc = run('doctor', 'EMBER_DEVICE=gpu')
    assert.are.equal(0, rc, err) -- the doctor reports it instead of stopping
    contains(warnings_text(out), "EMBER_DEVICE=gpu cannot be used: device: unknown device 'gpu'")
    if nproc() > 1 then
      out = run('doctor', 'OMP_NUM_THREADS=1')
      contains(warnings_text(out), ('Ember runs on 1 thread on a %d-core machine'):format(nproc()))
    end
  end)

  it('reports a device that fails to start, with its error', function()
    if not software then return pending('no Vulkan device') end
    local out, err, rc = run('doctor', 'EMBER_VK_TEST=fail-start')
    assert.are.equal(0, rc, err)
    contains(out, 'failed to start: ' .. software.name .. ': start failed on purpose')
    contains(warnings_text(out), software.name .. ' (' .. software.description ..
      ') failed to start: start failed on purpose')
  end)

  it('is documented for the REPL', function()
    local text = require('ember.repl').help_text('ember.doctor')
    contains(text, 'ember.doctor([{start = true, quiet = false}])')
    contains(text, 'ember doctor')
  end)
end)

-- ---- the checks, on made-up reports -----------------------------------------------------------

local GiB = 1024 ^ 3

local function cpu_entry()
  return { name = 'cpu', type = 'cpu', description = 'A CPU', started = true,
           features = { float64 = true, int64 = true, storage16 = true, int8 = true },
           kernels = { ['matmul.float32'] = 'openblas', ['matmul.float16'] = 'via-float32',
                       ['matmul.bfloat16'] = 'amx' },
           memory = 64 * GiB, budget = 60 * GiB }
end

local function h100_entry()
  return { name = 'vulkan:0', type = 'discrete', description = 'NVIDIA H100 80GB HBM3', started = true,
           features = { float64 = true, int64 = true, float16 = true, storage16 = true,
                        int8 = true, cooperative_matrix = true, bfloat16 = true },
           kernels = { ['matmul.float32'] = 'tiled', ['matmul.float16'] = 'coopmat-cm2',
                       ['matmul.bfloat16'] = 'coopmat2-bf16' },
           memory = 80 * GiB, budget = 79 * GiB, max_tensor_bytes = 4 * GiB - 1,
           pipeline_cache = '/home/u/.cache/ember/vulkan-10de-2330-00.bin',
           pipeline_cache_exists = true }
end

local function lavapipe_entry()
  return { name = 'vulkan:1', type = 'software', description = 'llvmpipe (LLVM 15.0.6, 256 bits)',
           started = true, features = { float64 = true, int64 = true, float16 = true },
           kernels = { ['matmul.float32'] = 'tiled', ['matmul.float16'] = 'tiled',
                       ['matmul.bfloat16'] = 'tiled' },
           memory = 2 * GiB, budget = 2 * GiB, max_tensor_bytes = 2 * GiB,
           pipeline_cache = '/c/x.bin', pipeline_cache_exists = true }
end

-- A machine with nothing to warn about: an H100, 8 threads on 8 cores, OpenBLAS's own kernels.
local function healthy()
  return { devices = { cpu_entry(), h100_entry() }, vulkan_note = '',
           threads = { ember = 8, blas = 8, cores = 8 }, blas = { core = 'SkylakeX' },
           cpu_flags = { avx2 = true, avx512f = true }, env = {}, device_setting = {} }
end

-- The findings of one check on a report.
local function findings(report, name)
  local out = {}
  for _, w in ipairs(checks.run(report)) do
    assert.falsy(w.message:find('^the check'), w.message) -- no check crashed
    if w.check == name then out[#out + 1] = w end
  end
  return out
end

local function one(report, name)
  local f = findings(report, name)
  assert.are.equal(1, #f, name .. ': expected one finding, got ' .. #f)
  return f[1]
end

describe('ember.doctor_checks', function()
  it('finds nothing on a healthy machine but the CPU\'s float16 note', function()
    local f = checks.run(healthy())
    assert.are.equal(1, #f)
    assert.are.equal('cpu_16bit', f[1].check)
    assert.are.equal('note', f[1].level)
  end)

  it('no_vulkan: the loader missing, or no device', function()
    local r = healthy()
    r.devices = { cpu_entry() }
    r.vulkan_note = 'the Vulkan loader libvulkan.so.1 could not be loaded'
    local w = one(r, 'no_vulkan')
    assert.are.equal('warning', w.level)
    assert.truthy(w.message:find('^no Vulkan loader %(the Vulkan loader libvulkan.so.1'))
    r.vulkan_note = 'the Vulkan loader found no devices'
    assert.truthy(one(r, 'no_vulkan').message:find('^no Vulkan device %(the Vulkan loader found no devices%)'))
  end)

  it('cpu_driver_only: lavapipe alone, not lavapipe beside a GPU', function()
    local r = healthy()
    r.devices = { cpu_entry(), lavapipe_entry() }
    local w = one(r, 'cpu_driver_only')
    assert.are.equal('vulkan:1', w.device)
    assert.truthy(w.message:find('the only Vulkan device is a CPU driver: vulkan:1 is llvmpipe', 1, true))
    r.devices[3] = h100_entry()
    assert.are.equal(0, #findings(r, 'cpu_driver_only'))
  end)

  it('start_failed: names the device and its error', function()
    local r = healthy()
    r.devices[2].started, r.devices[2].error = false, 'vulkan:0: vkCreateDevice failed (VK_ERROR_DEVICE_LOST)'
    assert.are.equal('vulkan:0 (NVIDIA H100 80GB HBM3) failed to start: vkCreateDevice failed ' ..
      '(VK_ERROR_DEVICE_LOST)', one(r, 'start_failed').message)
  end)

  it('device_setting: an unusable EMBER_DEVICE, or one that picks a CPU driver', function()
    local r = healthy()
    r.device_setting = { value = 'cuda', error = "EMBER_DEVICE=cuda: device: unknown device 'cuda'" }
    assert.truthy(one(r, 'device_setting').message:find("^EMBER_DEVICE=cuda cannot be used: device: unknown device 'cuda'"))
    r.devices[3] = lavapipe_entry()
    r.device_setting = { value = 'vulkan:1', resolved = 'vulkan:1' }
    assert.truthy(one(r, 'device_setting').message:find('^EMBER_DEVICE=vulkan:1 picks vulkan:1 %(llvmpipe'))
    r.device_setting = { value = 'auto', resolved = 'cpu' }
    assert.truthy(one(r, 'device_setting').message:find('^EMBER_DEVICE=auto fell back to the cpu'))
    r.device_setting = { value = 'auto', resolved = 'vulkan:0' }
    assert.are.equal(0, #findings(r, 'device_setting'))
  end)

  it('tensor_cores: 16-bit products on the tiled kernel of a GPU', function()
    local r = healthy()
    local d = r.devices[2]
    d.features.cooperative_matrix, d.features.float16 = nil, nil
    d.kernels['matmul.float16'], d.kernels['matmul.bfloat16'] = 'tiled', 'tiled'
    local m = one(r, 'tensor_cores').message
    assert.truthy(m:find('vulkan:0: float16 and bfloat16 products take the tiled kernel (no cooperative ' ..
      'matrices, no 16-bit arithmetic)', 1, true), m)
    r = healthy()
    r.devices[2].kernels['matmul.bfloat16'] = 'tiled'
    assert.truthy(one(r, 'tensor_cores').message:find('^vulkan:0: bfloat16 products take the tiled kernel'))
    -- a CPU driver has no tensor cores to miss: the cpu_driver_only warning covers it
    r.devices[2] = lavapipe_entry()
    assert.are.equal(0, #findings(r, 'tensor_cores'))
  end)

  it('float64: a Vulkan device without it', function()
    local r = healthy()
    r.devices[2].features.float64 = nil
    assert.truthy(one(r, 'float64').message:find('^vulkan:0 has no float64 arithmetic'))
  end)

  it('cpu_16bit: notes for float16 and for bfloat16 through float32', function()
    local r = healthy()
    r.devices[1].kernels['matmul.bfloat16'] = 'via-float32'
    local f = findings(r, 'cpu_16bit')
    assert.are.equal(2, #f)
    assert.are.equal('note', f[1].level)
    assert.truthy(f[1].message:find('^cpu: float16 products convert to float32'))
    assert.truthy(f[2].message:find('^cpu: bfloat16 products convert to float32'))
  end)

  it('max_tensor: a largest tensor under 1 GiB', function()
    local r = healthy()
    r.devices[2].max_tensor_bytes = 128 * 1024 * 1024
    assert.truthy(one(r, 'max_tensor').message:find('^vulkan:0: one tensor may hold at most 128 MiB'))
  end)

  it('memory_limit: above the budget, or within 10% of it', function()
    local r = healthy()
    r.devices[2].memory_limit = 90 * GiB
    assert.truthy(one(r, 'memory_limit').message:find(
      '^vulkan:0: the memory limit %(90.0 GiB%) is above the budget %(79.0 GiB available%)'))
    r.devices[2].memory_limit = 75 * GiB
    assert.truthy(one(r, 'memory_limit').message:find('is within 10% of the budget', 1, true))
    r.devices[2].memory_limit = 40 * GiB
    assert.are.equal(0, #findings(r, 'memory_limit'))
  end)

  it('memory_taken: a GPU whose memory others hold', function()
    local r = healthy()
    r.devices[2].budget = 2 * GiB
    assert.truthy(one(r, 'memory_taken').message:find('^vulkan:0: only 2.0 GiB of its 80.0 GiB are available'))
  end)

  it('threads: one thread on many cores, more threads than cores', function()
    local r = healthy()
    r.threads.ember = 1
    r.env.OMP_NUM_THREADS = '1'
    assert.truthy(one(r, 'threads').message:find('^Ember runs on 1 thread on a 8%-core machine %(OMP_NUM_THREADS=1%)'))
    r.threads.ember = 16
    assert.truthy(one(r, 'threads').message:find('^Ember runs 16 threads on 8 cores'))
    r.threads = { ember = 1, blas = 1, cores = 1 }
    assert.are.equal(0, #findings(r, 'threads'))
  end)

  it('blas_core: OpenBLAS on generic kernels of a CPU with AVX2', function()
    local r = healthy()
    r.blas.core = 'Prescott'
    assert.truthy(one(r, 'blas_core').message:find('^OpenBLAS runs its Prescott kernels on a CPU with AVX%-512'))
    r.cpu_flags = {}
    assert.are.equal(0, #findings(r, 'blas_core')) -- an old CPU: Prescott is right
  end)

  it('slow_settings: profiling, validation, kernels turned off, test hooks', function()
    local r = healthy()
    r.env = { EMBER_VK_PROFILE = '1', EMBER_VK_VALIDATION = '1', EMBER_VK_COOPMAT = '0',
              EMBER_VK_SPECIALIZE = '0', EMBER_VK_TEST = 'fail-start' }
    assert.are.equal(5, #findings(r, 'slow_settings'))
    r.env = { EMBER_VK_PROFILE = '0' }
    assert.are.equal(0, #findings(r, 'slow_settings'))
  end)

  it('pipeline_cache: none known, or not written yet', function()
    local r = healthy()
    r.devices[2].pipeline_cache = ''
    assert.truthy(one(r, 'pipeline_cache').message:find('^vulkan:0: no pipeline cache folder'))
    r.devices[2].pipeline_cache, r.devices[2].pipeline_cache_exists = '/c/v.bin', false
    assert.truthy(one(r, 'pipeline_cache').message:find('no pipeline cache yet (/c/v.bin)', 1, true))
  end)

  it('formats a made-up report with its findings', function()
    local r = healthy()
    r.ember, r.luajit, r.glslang, r.shader_builds = '9.9', 'LuaJIT 2.1', '15.2.0', { 'coopmat-khr' }
    r.blas = { config = 'OpenBLAS 0.3.21', core = 'Prescott', threads = 8 }
    r.devices[2].kernel_order = { 'matmul.float32', 'matmul.float16', 'matmul.bfloat16' }
    r.warnings = checks.run(r)
    local text = require('ember.doctor').format(r)
    contains(text, 'Ember 9.9, LuaJIT 2.1')
    contains(text, 'optional kernels built: coopmat-khr')
    contains(text, 'vulkan:0  NVIDIA H100 80GB HBM3')
    contains(text, 'matmul float32=tiled float16=coopmat-cm2 bfloat16=coopmat2-bf16')
    contains(warnings_text(text), 'OpenBLAS runs its Prescott kernels')
  end)
end)

-- ---- bench --ops ----------------------------------------------------------------------------------

describe('ember bench --ops', function()
  teardown(function() os.execute('rm -rf ' .. q(tmpdir)) end)
  it('prints a copy bandwidth and a product per dtype for each device, all positive', function()
    local list = { 'cpu' }
    if software then list[2] = software.name end
    local out, err, rc = run(('bench --ops --devices %s --size 16 --copy-mb 1 --repeats 1'):format(
      table.concat(list, ',')))
    assert.are.equal(0, rc, err)
    local seen, current = {}, nil
    for line in out:gmatch('[^\n]+') do
      local dev = line:match('^(%S+)%s')
      if dev and (dev == 'cpu' or dev:match('^vulkan')) then current = dev end
      local copy = line:match('copy 1 MiB%s+(%S+) GB/s%s+unknown')
      local dt, mm = line:match('matmul (%w+) n=16%s+(%S+) TF/s%s+unknown')
      if copy then seen[current .. ' copy'] = tonumber(copy) end
      if dt then seen[current .. ' ' .. dt] = tonumber(mm) end
    end
    for _, d in ipairs(list) do
      for _, what in ipairs({ 'copy', 'float32', 'float16', 'bfloat16' }) do
        local v = seen[d .. ' ' .. what]
        assert.truthy(v and v > 0, ('no positive %s figure for %s in:\n%s'):format(what, d, out))
      end
    end
  end)

  it('knows the peaks of the GPUs by name, the specific names first', function()
    assert.are.equal(3350, bench_ops.peak_for('NVIDIA H100 80GB HBM3').bandwidth)
    assert.are.equal(756, bench_ops.peak_for('NVIDIA H100 PCIe').float16)
    assert.are.equal(835, bench_ops.peak_for('NVIDIA H100 NVL').bfloat16)
    assert.are.equal(4800, bench_ops.peak_for('NVIDIA H200').bandwidth)
    assert.is_nil(bench_ops.peak_for('llvmpipe (LLVM 15.0.6, 256 bits)'))
  end)

  it('refuses misspelt and misplaced options', function()
    local _, err, rc = run('bench --ops --sise 16')
    assert.are.equal(1, rc)
    contains(err, 'unknown option sise')
    _, err, rc = run('bench --size 16 --devices cpu')
    assert.are.equal(1, rc)
    contains(err, 'bench: --size and --copy-mb go with --ops')
    _, err, rc = run('bench --ops --size 2.5 --devices cpu')
    assert.are.equal(1, rc)
    contains(err, 'bench: --size and --copy-mb: expected integers >= 0, got 2.5 and 0')
  end)
end)
