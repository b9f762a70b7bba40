-- ember.doctor: `ember doctor` and ember.doctor(), one report of what Ember runs on here
-- (docs/devices.md, "Diagnostics"; docs/api/diagnostics.md):
--   * every device: driver, type, memory and budget, features, subgroup size, the tensor-core
--     shapes it lists and the kernels Ember picks there (em_device_plan_get), its pipeline cache;
--   * the thread settings and the BLAS in use; Ember's and LuaJIT's versions and the optional
--     kernel builds compiled in (em_runtime_info_get);
--   * warnings about what will surprise the user (ember.doctor_checks: a list of checks over
--     this report, testable with made-up reports).
--
--   ember.doctor([{start =, quiet =}]) -> report   (prints it unless quiet)
--   doctor.collect([{start =}]) -> report           doctor.format(report) -> text
-- start (default true) starts every Vulkan device first: the tensor-core kernels are chosen at
-- start, and a device that cannot start says why.
local ffi = require 'ffi'
local core = require 'ember.core'
local checks = require 'ember.doctor_checks'
local C = core.C

local M = {}
M.checks = checks

-- The environment variables that change what Ember does (docs/devices.md, docs/performance.md).
M.env_names = {
  'EMBER_DEVICE', 'EMBER_STRICT_DEVICE', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',
  'OMP_WAIT_POLICY', 'GOMP_SPINCOUNT', 'OPENBLAS_THREAD_TIMEOUT', 'OPENBLAS_CORETYPE',
  'EMBER_CPU_BF16', 'EMBER_CACHE_DIR', 'EMBER_VK_LOADER', 'EMBER_VK_COOPMAT',
  'EMBER_VK_SPECIALIZE', 'EMBER_VK_ATTENTION_COOP', 'EMBER_VK_ATTENTION_CM2', 'EMBER_VK_CONV_COLS',
  'EMBER_VK_MATMUL_TILE', 'EMBER_VK_PROFILE', 'EMBER_VK_VALIDATION', 'EMBER_VK_TEST',
}

local feature_order = { 'float64', 'int64', 'float16', 'storage16', 'bfloat16', 'int8',
                        'cooperative_matrix', 'push_descriptors', 'memory_budget' }

-- "a=b; c=d" -> { a = 'b', c = 'd' } and the keys in order.
local function parse_pairs(text)
  local map, order = {}, {}
  for entry in (text .. ';'):gmatch('%s*([^;]+);') do
    local k, v = entry:match('^([^=]+)=(.*)$')
    if k then
      map[k], order[#order + 1] = v, k
    end
  end
  return map, order
end

-- The CPU's feature flags (Linux's /proc/cpuinfo), as a set; empty elsewhere.
local function cpu_flags()
  local set = {}
  local f = io.open('/proc/cpuinfo', 'r')
  if not f then return set end
  for line in f:lines() do
    local flags = line:match('^flags%s*:%s*(.*)$')
    if flags then
      for w in flags:gmatch('%S+') do set[w] = true end
      break
    end
  end
  f:close()
  return set
end

local function file_size(path)
  local f = path ~= '' and io.open(path, 'rb')
  if not f then return nil end
  local n = f:seek('end')
  f:close()
  return n
end

local function device_entry(d, start)
  local entry = {}
  for k, v in pairs(d) do entry[k] = v end
  local plan = ffi.new('em_device_plan')
  core.check(C.em_device_plan_get(d.id, plan))
  entry.kernels, entry.kernel_order = parse_pairs(ffi.string(plan.kernels))
  entry.pipeline_cache = d.type ~= 'cpu' and ffi.string(plan.pipeline_cache) or nil
  if entry.pipeline_cache then
    entry.pipeline_cache_bytes = file_size(entry.pipeline_cache)
    entry.pipeline_cache_exists = entry.pipeline_cache_bytes ~= nil
  end
  -- the allocator's limit: asked only of the CPU and started devices (asking starts none)
  if d.type == 'cpu' or d.started then
    local ok, stats = pcall(require('ember.memory').stats, d.id)
    if ok and stats.limit and stats.limit > 0 then entry.memory_limit = stats.limit end
  end
  entry.start_requested = start
  return entry
end

-- EMBER_DEVICE, and what it resolves to (or why it cannot be used).
local function device_setting()
  local value = os.getenv('EMBER_DEVICE')
  local s = { value = value }
  if C.em_device_startup() ~= 0 then
    s.error = ffi.string(C.em_last_error())
  elseif value and value ~= '' then
    s.resolved = core.device_name(C.em_default_device())
  end
  return s
end

-- Gathers the report (a plain table; ember.doctor_checks lists the fields its checks read).
function M.collect(opts)
  opts = require('ember.util.names').check_options('doctor', opts, { 'start', 'quiet' }, 2)
  local start = opts.start ~= false
  local info = ffi.new('em_runtime_info')
  core.check(C.em_runtime_info_get(info))
  local report = {
    ember = ffi.string(info.version),
    luajit = jit and jit.version or _VERSION,
    glslang = ffi.string(info.glslang),
    shader_builds = {},
    blas = { config = ffi.string(info.blas_config), core = ffi.string(info.blas_core),
             threads = tonumber(info.blas_threads) },
    threads = { ember = tonumber(info.threads), blas = tonumber(info.blas_threads),
                cores = tonumber(info.cpu_cores) },
    vulkan_note = ffi.string(info.vulkan_note),
    cpu_flags = cpu_flags(),
    env = {},
    devices = {},
  }
  for w in ffi.string(info.shader_builds):gmatch('%S+') do
    report.shader_builds[#report.shader_builds + 1] = w
  end
  for _, name in ipairs(M.env_names) do report.env[name] = os.getenv(name) end
  report.device_setting = device_setting()
  if start then
    for id = 1, C.em_device_count() - 1 do C.em_device_start(id) end -- failures: in the info
  end
  for _, d in ipairs(require('ember.device').devices()) do
    report.devices[#report.devices + 1] = device_entry(d, start)
  end
  report.default_device = report.device_setting.error == nil and
      core.device_name(C.em_default_device()) or nil
  report.warnings = checks.run(report)
  return report
end

-- ---- the text --------------------------------------------------------------------------------

local fmt_bytes = checks.fmt_bytes

local function features_line(d)
  local have, missing = {}, {}
  for _, f in ipairs(feature_order) do
    if d.features and d.features[f] then have[#have + 1] = f else missing[#missing + 1] = f end
  end
  local s = #have > 0 and table.concat(have, ' ') or 'none'
  if d.type ~= 'cpu' and #missing > 0 then s = s .. '; missing: ' .. table.concat(missing, ' ') end
  return s
end

-- "matmul.float32=tiled; matmul.float16=x; conv.float32=y" ->
-- "matmul float32=tiled float16=x; conv float32=y" (one group per op).
local function kernels_lines(d)
  local groups, order = {}, {}
  for _, key in ipairs(d.kernel_order or {}) do
    if key == 'started' then goto continue end -- the state row says it
    local op, dt = key:match('^([^.]+)%.(.+)$')
    op, dt = op or key, dt
    if not groups[op] then
      groups[op] = {}
      order[#order + 1] = op
    end
    local g = groups[op]
    g[#g + 1] = dt and (dt .. '=' .. d.kernels[key]) or d.kernels[key]
    ::continue::
  end
  local lines = {}
  for _, op in ipairs(order) do lines[#lines + 1] = op .. ' ' .. table.concat(groups[op], ' ') end
  return lines
end

-- text on lines of at most `width` (96) characters, the first after `first`, the rest indented.
local function wrap(text, first, indent, width)
  width = width or 96
  local lines, line = {}, first
  for word in text:gmatch('%S+') do
    if #line > #first and #line + 1 + #word > width then
      lines[#lines + 1] = line
      line = indent .. word
    else
      line = line .. ((#line > #first and line ~= indent) and ' ' or '') .. word
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, '\n')
end

local type_words = {
  cpu = 'the host CPU', discrete = 'discrete GPU', integrated = 'integrated GPU',
  virtual = 'virtual GPU', software = 'CPU-type Vulkan driver', other = 'other',
}

local function device_text(out, d)
  local function row(k, v) out[#out + 1] = ('  %-15s %s'):format(k, v) end
  out[#out + 1] = ('%s  %s'):format(d.name, d.description ~= '' and d.description or '?')
  row('type', type_words[d.type] or d.type)
  if d.driver and d.driver ~= '' then row('driver', d.driver) end
  if d.type ~= 'cpu' then
    row('state', d.error and ('failed to start: ' .. d.error) or d.started and 'started' or
      'not started (the tensor-core kernels are chosen at start)')
  end
  local mem = ('%s total, %s %s'):format(fmt_bytes(d.memory), fmt_bytes(d.budget),
    d.type == 'cpu' and 'available' or 'budget')
  if d.usage then mem = mem .. ', ' .. fmt_bytes(d.usage) .. ' in use' end
  mem = mem .. '; limit ' .. (d.memory_limit and fmt_bytes(d.memory_limit) or 'none')
  if d.max_tensor_bytes then mem = mem .. '; largest tensor ' .. fmt_bytes(d.max_tensor_bytes) end
  row('memory', mem)
  row('features', features_line(d))
  if d.type ~= 'cpu' then
    row('subgroup size', tostring(d.subgroup_size))
    row('tensor cores', d.tensor_cores or 'none')
  end
  for i, line in ipairs(kernels_lines(d)) do row(i == 1 and 'kernels' or '', line) end
  if d.pipeline_cache then
    row('pipeline cache', d.pipeline_cache == '' and 'none (no cache folder)' or
      ('%s (%s)'):format(d.pipeline_cache, d.pipeline_cache_exists and
        fmt_bytes(d.pipeline_cache_bytes) or 'not written yet'))
  end
end

function M.format(r)
  local out = {}
  out[#out + 1] = ('Ember %s, %s'):format(r.ember, r.luajit)
  out[#out + 1] = ('shaders: glslang %s; optional kernels built: %s'):format(
    r.glslang ~= '' and r.glslang or '?',
    #r.shader_builds > 0 and table.concat(r.shader_builds, ' ') or 'none')
  out[#out + 1] = ('BLAS: %s (core %s, %d threads)'):format(r.blas.config, r.blas.core,
    r.blas.threads)
  local set = {}
  for _, name in ipairs(M.env_names) do
    if r.env[name] then set[#set + 1] = name .. '=' .. r.env[name] end
  end
  out[#out + 1] = ('threads: %d (%d cores)'):format(r.threads.ember, r.threads.cores)
  out[#out + 1] = 'environment: ' .. (#set > 0 and table.concat(set, ' ') or 'nothing Ember reads is set')
  out[#out + 1] = 'default device: ' .. (r.default_device or
    ('none (EMBER_DEVICE: ' .. tostring(r.device_setting.error) .. ')'))
  if r.vulkan_note ~= '' then out[#out + 1] = 'Vulkan: ' .. r.vulkan_note end
  for _, d in ipairs(r.devices) do
    out[#out + 1] = ''
    device_text(out, d)
  end
  for _, level in ipairs({ 'warning', 'note' }) do
    local first = true
    for _, w in ipairs(r.warnings) do
      if w.level == level then
        if first then
          out[#out + 1] = ''
          out[#out + 1] = level .. 's:'
          first = false
        end
        out[#out + 1] = wrap(w.message, level == 'warning' and '  ! ' or '  - ', '    ')
      end
    end
  end
  if #r.warnings == 0 then
    out[#out + 1] = ''
    out[#out + 1] = 'no warnings'
  end
  return table.concat(out, '\n')
end

-- ember.doctor([opts]): collects, prints (unless quiet) and returns the report.
function M.doctor(opts)
  local report = M.collect(opts)
  if not (opts and opts.quiet) then print(M.format(report)) end
  return report
end

-- `ember doctor [--no-start]`.
function M.main(args)
  local cli = require 'ember.util.cli'
  local opts, help = cli.parse(args or {}, {
    { 'start', true, 'start every Vulkan device (the tensor-core kernels are chosen at start)' },
  }, 'usage: ember doctor [options]\n' ..
    'Prints the devices, their features and kernels, the threads and BLAS, and warnings.')
  if not opts then print(help) return end
  return M.doctor({ start = opts.start })
end

return M
