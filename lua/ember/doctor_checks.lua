-- ember.doctor_checks: the warnings of `ember doctor`, as a list of checks over the report that
-- ember.doctor collects (docs/devices.md, "Diagnostics"). Each check reads only the report
-- table, never the machine, so tests feed it made-up reports (a machine without a GPU, a
-- device that failed to start, ...) and every warning can be tested anywhere.
--
--   checks.run(report) -> list of { check = name, level = 'warning' | 'note', device = name
--                                    or nil, message = text }
--   checks.list        -> the checks in order: { name =, level =, about =, run = fn(report, add) }
--
-- A check calls add(message [, device]) once per finding. Warnings are for what will surprise
-- the user (work on a CPU driver, a slow path, a limit past the budget); notes for what is
-- worth knowing but expected (the CPU computes float16 through float32).
--
-- The report fields the checks read (ember.doctor fills them):
--   devices[i]: name, type ('cpu', 'discrete', 'integrated', 'virtual', 'software', 'other'),
--     description, started, error, features (set of names), kernels (['matmul.float16'] = ...),
--     memory, budget, usage, memory_limit, max_tensor_bytes, pipeline_cache,
--     pipeline_cache_exists
--   vulkan_note: why Vulkan found no device, or ''
--   threads: { ember =, blas =, cores = }; blas: { core = }; cpu_flags: set of /proc/cpuinfo flags
--   env: the environment variables that matter (name -> value, absent when unset)
--   device_setting: { value = EMBER_DEVICE or nil, error = why it is unusable or nil,
--                     resolved = the device it picks or nil }
local M = {}

local GiB = 1024 ^ 3

local function fmt_bytes(n)
  if n == nil then return '?' end
  if n >= GiB then return ('%.1f GiB'):format(n / GiB) end
  if n >= 1024 ^ 2 then return ('%.0f MiB'):format(n / 1024 ^ 2) end
  if n >= 1024 then return ('%.0f KiB'):format(n / 1024) end
  return ('%d bytes'):format(n)
end
M.fmt_bytes = fmt_bytes

local function vulkan_devices(r)
  local list = {}
  for _, d in ipairs(r.devices or {}) do
    if d.type ~= 'cpu' then list[#list + 1] = d end
  end
  return list
end

local function gpus(r)
  local list = {}
  for _, d in ipairs(vulkan_devices(r)) do
    if d.type ~= 'software' then list[#list + 1] = d end
  end
  return list
end

local function find(r, name)
  for _, d in ipairs(r.devices or {}) do
    if d.name == name then return d end
  end
end

local function kernel(d, key) return d.kernels and d.kernels[key] end

M.list = {
  {
    name = 'no_vulkan', level = 'warning',
    about = 'no Vulkan device at all: only the CPU runs',
    run = function(r, add)
      if #vulkan_devices(r) > 0 then return end
      local note = r.vulkan_note or ''
      if note:find('loader', 1, true) and (note:find('could not be loaded', 1, true) or
          note:find('not installed', 1, true)) then
        add('no Vulkan loader (' .. note .. '): only the CPU is available; install libvulkan1 ' ..
          'and a driver (the GPU vendor\'s, or mesa-vulkan-drivers)')
      else
        add('no Vulkan device' .. (note ~= '' and (' (' .. note .. ')') or '') ..
          ': only the CPU is available')
      end
    end,
  },
  {
    name = 'cpu_driver_only', level = 'warning',
    about = 'every Vulkan device is a CPU-type driver (lavapipe, SwiftShader)',
    run = function(r, add)
      local vk = vulkan_devices(r)
      if #vk == 0 or #gpus(r) > 0 then return end
      for _, d in ipairs(vk) do
        add(('the only Vulkan device%s a CPU driver: %s is %s, which runs its kernels on this ' ..
          'CPU, slower than Ember\'s own CPU backend; "auto" picks the cpu and %s runs only ' ..
          'when named (tests use it)'):format(#vk > 1 and 's are' or ' is', d.name,
          d.description or '?', d.name), d.name)
      end
    end,
  },
  {
    name = 'start_failed', level = 'warning',
    about = 'a device that failed to start',
    run = function(r, add)
      for _, d in ipairs(r.devices or {}) do
        if d.error and d.error ~= '' then
          local why = d.error:gsub('^' .. d.name:gsub('%p', '%%%0') .. ': ', '')
          add(('%s (%s) failed to start: %s'):format(d.name, d.description or '?', why), d.name)
        end
      end
    end,
  },
  {
    name = 'device_setting', level = 'warning',
    about = 'EMBER_DEVICE names no usable device, or a CPU driver',
    run = function(r, add)
      local s = r.device_setting or {}
      if s.value == nil or s.value == '' then return end
      if s.error then
        local why = s.error:gsub('^EMBER_DEVICE=[^:]*: ', '')
        add(('EMBER_DEVICE=%s cannot be used: %s; scripts stop at start-up with this error'):format(
          s.value, why))
        return
      end
      local d = s.resolved and find(r, s.resolved)
      if d and d.type == 'software' then
        add(('EMBER_DEVICE=%s picks %s (%s), a CPU driver: everything runs on this CPU ' ..
          'through Vulkan, slower than EMBER_DEVICE=cpu'):format(s.value, d.name,
          d.description or '?'), d.name)
      elseif s.value == 'auto' and s.resolved == 'cpu' and #gpus(r) > 0 then
        add('EMBER_DEVICE=auto fell back to the cpu although a GPU is listed (see the ' ..
          'start-up failure above)')
      end
    end,
  },
  {
    name = 'tensor_cores', level = 'warning',
    about = 'float16/bfloat16 products without tensor cores on a GPU',
    run = function(r, add)
      for _, d in ipairs(gpus(r)) do
        if d.started and not d.error then
          local f16, bf16 = kernel(d, 'matmul.float16'), kernel(d, 'matmul.bfloat16')
          local why = {}
          if not (d.features or {}).cooperative_matrix then why[#why + 1] = 'no cooperative matrices' end
          if not (d.features or {}).float16 then why[#why + 1] = 'no 16-bit arithmetic' end
          if f16 == 'tiled' then
            add(('%s: float16 and bfloat16 products take the tiled kernel (%s): expect them ' ..
              'no faster than float32; 16-bit dtypes save memory here, not time'):format(d.name,
              #why > 0 and table.concat(why, ', ') or 'the tensor-core kernels are off or not built'),
              d.name)
          elseif bf16 == 'tiled' then
            add(('%s: bfloat16 products take the tiled kernel (tensor cores for bfloat16 need ' ..
              'the coopmat2 build and VK_KHR_shader_bfloat16); float16 (%s) is the fast ' ..
              '16-bit dtype here'):format(d.name, f16 or '?'), d.name)
          end
        end
      end
    end,
  },
  {
    name = 'float64', level = 'warning',
    about = 'a Vulkan device without float64 arithmetic',
    run = function(r, add)
      for _, d in ipairs(vulkan_devices(r)) do
        if not (d.features or {}).float64 then
          add(('%s has no float64 arithmetic (shaderFloat64): float64 products and many ' ..
            'float64 ops raise "not implemented" there; keep float64 work on the cpu'):format(d.name),
            d.name)
        end
      end
    end,
  },
  {
    name = 'cpu_16bit', level = 'note',
    about = 'the CPU computes float16 (and bfloat16 without AVX512_BF16/AMX) through float32',
    run = function(r, add)
      local d = find(r, 'cpu')
      if not d then return end
      local f16, bf16 = kernel(d, 'matmul.float16'), kernel(d, 'matmul.bfloat16')
      if f16 == 'via-float32' then
        add('cpu: float16 products convert to float32 and back (no float16 arithmetic): ' ..
          'slower than float32', 'cpu')
      end
      if bf16 == 'via-float32' then
        add('cpu: bfloat16 products convert to float32 and back (this CPU has neither ' ..
          'AVX512_BF16 nor AMX, or EMBER_CPU_BF16=0): slower than float32', 'cpu')
      end
    end,
  },
  {
    name = 'max_tensor', level = 'warning',
    about = 'a device whose largest tensor is under 1 GiB',
    run = function(r, add)
      for _, d in ipairs(vulkan_devices(r)) do
        local m = d.max_tensor_bytes
        if m and m < GiB then
          add(('%s: one tensor may hold at most %s there (maxStorageBufferRange): a larger ' ..
            'one (%d float32 elements and up) fails to allocate'):format(d.name, fmt_bytes(m),
            math.floor(m / 4) + 1), d.name)
        end
      end
    end,
  },
  {
    name = 'memory_limit', level = 'warning',
    about = 'a memory limit near or past what the device can give',
    run = function(r, add)
      for _, d in ipairs(r.devices or {}) do
        local limit, budget = d.memory_limit, d.budget
        if limit and limit > 0 and budget and budget > 0 then
          if limit > budget then
            add(('%s: the memory limit (%s) is above the budget (%s available): allocations ' ..
              'will fail in the driver before the limit is reached'):format(d.name,
              fmt_bytes(limit), fmt_bytes(budget)), d.name)
          elseif limit >= 0.9 * budget then
            add(('%s: the memory limit (%s) is within 10%% of the budget (%s available): ' ..
              'other processes or the driver may take the rest first'):format(d.name,
              fmt_bytes(limit), fmt_bytes(budget)), d.name)
          end
        end
      end
    end,
  },
  {
    name = 'memory_taken', level = 'warning',
    about = 'most of a GPU\'s memory already in use by others',
    run = function(r, add)
      for _, d in ipairs(gpus(r)) do
        if d.memory and d.budget and d.memory > 0 and d.budget < 0.1 * d.memory then
          add(('%s: only %s of its %s are available (other processes hold the rest)'):format(
            d.name, fmt_bytes(d.budget), fmt_bytes(d.memory)), d.name)
        end
      end
    end,
  },
  {
    name = 'threads', level = 'warning',
    about = 'one thread on a multi-core machine, or more threads than cores',
    run = function(r, add)
      local t = r.threads or {}
      if not (t.ember and t.cores) then return end
      if t.ember == 1 and t.cores > 1 then
        add(('Ember runs on 1 thread on a %d-core machine%s: CPU work uses one core ' ..
          '(ember.set_num_threads(n) or OMP_NUM_THREADS=n)'):format(t.cores,
          r.env and r.env.OMP_NUM_THREADS and (' (OMP_NUM_THREADS=' .. r.env.OMP_NUM_THREADS .. ')') or ''))
      elseif t.ember > t.cores then
        add(('Ember runs %d threads on %d cores: oversubscribed threads wait for each other ' ..
          '(OMP_NUM_THREADS=%d)'):format(t.ember, t.cores, t.cores))
      end
    end,
  },
  {
    name = 'blas_core', level = 'warning',
    about = 'OpenBLAS running generic kernels on a CPU with AVX2/AVX-512',
    run = function(r, add)
      local core = r.blas and r.blas.core
      local flags = r.cpu_flags or {}
      if not core or not (flags.avx2 or flags.avx512f) then return end
      local generic = { prescott = true, core2 = true, katmai = true, nehalem = true,
                        penryn = true, dunnington = true, atom = true, generic = true }
      if generic[core:lower()] then
        add(('OpenBLAS runs its %s kernels on a CPU with %s (this OpenBLAS does not know the ' ..
          'CPU): float32 products run several times slower; set OPENBLAS_CORETYPE=%s'):format(
          core, flags.avx512f and 'AVX-512' or 'AVX2',
          flags.avx512f and 'Haswell (AVX2) or SkylakeX (AVX-512)' or 'Haswell'))
      end
    end,
  },
  {
    name = 'slow_settings', level = 'warning',
    about = 'environment settings that slow everything down',
    run = function(r, add)
      local env = r.env or {}
      local function on(v) return v ~= nil and v ~= '' and v ~= '0' end
      if on(env.EMBER_VK_PROFILE) then
        add('EMBER_VK_PROFILE is set: every Vulkan dispatch is timed and serialized')
      end
      if on(env.EMBER_VK_VALIDATION) then
        add('EMBER_VK_VALIDATION is set: the Khronos validation layer checks every Vulkan call')
      end
      if env.EMBER_VK_COOPMAT == '0' then
        add('EMBER_VK_COOPMAT=0: the tensor-core kernels are off')
      end
      if env.EMBER_VK_SPECIALIZE == '0' then
        add('EMBER_VK_SPECIALIZE=0: pipelines are never specialized (elementwise kernels ' ..
          'run their generic form, many times slower)')
      end
      if env.EMBER_VK_TEST and env.EMBER_VK_TEST ~= '' then
        add('EMBER_VK_TEST=' .. env.EMBER_VK_TEST .. ': a test hook changes how Vulkan devices behave')
      end
    end,
  },
  {
    name = 'pipeline_cache', level = 'note',
    about = 'no pipeline cache, or none written yet',
    run = function(r, add)
      for _, d in ipairs(vulkan_devices(r)) do
        if d.started and not d.error then
          if (d.pipeline_cache or '') == '' then
            add(d.name .. ': no pipeline cache folder (EMBER_CACHE_DIR, XDG_CACHE_HOME and HOME ' ..
              'are unset): every run compiles its pipelines again', d.name)
          elseif d.pipeline_cache_exists == false then
            add(d.name .. ': no pipeline cache yet (' .. d.pipeline_cache .. '): the first ' ..
              'run compiles its pipelines and writes it', d.name)
          end
        end
      end
    end,
  },
}

-- Runs every check over the report; returns the findings in the order of M.list.
function M.run(report)
  local out = {}
  for _, c in ipairs(M.list) do
    local function add(message, device)
      out[#out + 1] = { check = c.name, level = c.level, device = device, message = message }
    end
    local ok, err = pcall(c.run, report, add)
    if not ok then
      out[#out + 1] = { check = c.name, level = 'note',
                        message = 'the check ' .. c.name .. ' failed: ' .. tostring(err) }
    end
  end
  return out
end

return M
