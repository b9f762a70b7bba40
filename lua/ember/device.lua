-- ember.device: listing and choosing devices (docs/devices.md, docs/api/device.md).
--   ember.devices()                 every device: cpu, then vulkan:0, vulkan:1, ...
--   ember.device(spec)              a device object for 'cpu', 'auto', 'vulkan', 'vulkan:N'
--   ember.set_default_device(d)     where creation functions allocate
--   ember.get_default_device()      its name
--   ember.set_strict_device(flag)   auto raises instead of falling back to the cpu
--   ember.synchronize([d])          waits for the device's queued work
-- Loading this module applies EMBER_DEVICE and EMBER_STRICT_DEVICE (once per process).
local ffi = require 'ffi'
local core = require 'ember.core'
local C = core.C

local M = {}

local type_names = {
  [C.EM_DEVICE_CPU] = 'cpu',
  [C.EM_DEVICE_DISCRETE_GPU] = 'discrete',
  [C.EM_DEVICE_INTEGRATED_GPU] = 'integrated',
  [C.EM_DEVICE_VIRTUAL_GPU] = 'virtual',
  [C.EM_DEVICE_SOFTWARE_GPU] = 'software',
  [C.EM_DEVICE_OTHER_GPU] = 'other',
}

local feature_bits = {
  { 'float64', C.EM_FEATURE_FLOAT64 },
  { 'int64', C.EM_FEATURE_INT64 },
  { 'float16', C.EM_FEATURE_FLOAT16 },
  { 'storage16', C.EM_FEATURE_STORAGE16 },
  { 'int8', C.EM_FEATURE_INT8 },
  { 'cooperative_matrix', C.EM_FEATURE_COOPERATIVE_MATRIX },
  { 'bfloat16', C.EM_FEATURE_BFLOAT16 },
  { 'memory_budget', C.EM_FEATURE_MEMORY_BUDGET },
  { 'push_descriptors', C.EM_FEATURE_PUSH_DESCRIPTORS },
}

local info_buf = ffi.new('em_device_info')

local function num(v)
  v = tonumber(v)
  if v < 0 then return nil end
  return v
end

-- The device's description as a plain table.
local function describe(id)
  core.check(C.em_device_info_get(id, info_buf))
  local i = info_buf
  local features = {}
  for _, f in ipairs(feature_bits) do
    if bit.band(i.features, f[2]) ~= 0 then features[f[1]] = true end
  end
  return {
    id = id,
    name = ffi.string(i.name),
    type = type_names[tonumber(i.type)] or 'other',
    description = ffi.string(i.description),
    driver = ffi.string(i.driver),
    started = i.started == 1,
    error = i.started == -1 and ffi.string(i.error) or nil,
    features = features,
    subgroup_size = tonumber(i.subgroup_size),
    memory = num(i.memory_total),
    budget = num(i.memory_budget),
    usage = num(i.memory_usage),
    max_tensor_bytes = num(i.max_tensor_bytes),
    validation_messages = i.validation_messages >= 0 and tonumber(i.validation_messages) or nil,
    host_waits = tonumber(i.host_waits),
    dispatches = tonumber(i.dispatches),
    tensor_cores = i.tensor_cores[0] ~= 0 and ffi.string(i.tensor_cores) or nil,
  }
end

-- A device object: prints as its name, compares by id, and is accepted wherever a device is.
local Device = {}
Device.__index = Device
Device.__tostring = function(d) return d.name end
Device.__eq = function(a, b) return a.id == b.id end
function Device:info() return describe(self.id) end
function Device:synchronize() core.check(C.em_synchronize(self.id)) end
M.Device = Device

local function device_object(id)
  local d = describe(id)
  return setmetatable({ id = id, name = d.name, type = d.type, description = d.description }, Device)
end

-- devices() -> list of tables {id, name, type, description, driver, memory, budget, features, ...}
function M.devices()
  local out = {}
  for id = 0, C.em_device_count() - 1 do out[#out + 1] = describe(id) end
  return out
end

-- device([spec]) -> the device spec names (the default device without one).
function M.device(spec)
  if spec ~= nil and type(spec) ~= 'string' and type(spec) ~= 'number' and
      not (type(spec) == 'table' and spec.id) then
    error("device: expected a device name such as 'cpu', 'auto' or 'vulkan:0', got " .. type(spec), 2)
  end
  local id = core.device_id(spec)
  if type(spec) == 'number' and C.em_device_start(id) ~= 0 then core.raise(2) end
  return device_object(id)
end

function M.set_default_device(d)
  local id = core.device_id(d)
  core.check(C.em_set_default_device(id))
end

function M.get_default_device() return core.device_name(C.em_default_device()) end

-- set_strict_device(flag) -> the previous setting.
function M.set_strict_device(flag)
  return C.em_set_strict_device(flag and 1 or 0) ~= 0
end

function M.is_strict_device() return C.em_strict_device() ~= 0 end

-- synchronize([device]) waits for the work queued on the device (every device without one).
function M.synchronize(d)
  local id = d == nil and -1 or core.device_id(d, 'synchronize')
  core.check(C.em_synchronize(id))
end

-- EMBER_DEVICE and EMBER_STRICT_DEVICE take effect when Ember loads: an unusable EMBER_DEVICE
-- stops the program here, before anything runs on the wrong device. (Inside the `ember`
-- program, which links libember, the program applies EMBER_DEVICE itself and reports it.)
local in_program = pcall(function() return ffi.C.em_device_startup end)
if C.em_device_startup() ~= 0 and not in_program then error(ffi.string(C.em_last_error()), 0) end

return M
