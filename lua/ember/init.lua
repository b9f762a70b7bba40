-- ember: tensors, devices and (later) autograd, scripted from LuaJIT.
-- This module gathers the pieces: the FFI binding (ember.core), the tensor metatype
-- (ember.tensor) and the op modules that add methods to it.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
require 'ember.print'

-- Op families: each module adds methods to the tensor metatable and returns its functions,
-- which become ember.<name> as well.
local families = {
  creation,
  require 'ember.ops.pointwise',
  require 'ember.ops.reduce',
  require 'ember.ops.linalg',
  require 'ember.ops.index',
  require 'ember.ops.math_ext',
  require 'ember.ops.reduce_ext',
  require 'ember.ops.search',
  require 'ember.random',
  -- PyTorch's shaping, indexing and linear algebra extras, composed from the ops above.
  require 'ember.ops.shape_ext',
  require 'ember.ops.index_ext',
  require 'ember.ops.linalg_ext',
}

local C = core.C
local ember = { C = C, ffi = ffi, version = '0.1.0' }

-- The metatable is complete once every op module has loaded; LuaJIT fixes it here.
ffi.metatype(core.tensor_ct, tensor.mt)

for _, m in ipairs(families) do
  for k, v in pairs(m) do
    if type(v) == 'function' then ember[k] = v end
  end
end
ember.memory = require 'ember.memory'
ember.profiler = require 'ember.profiler'
ember.autograd = require 'ember.autograd'
ember.nn = require 'ember.nn'
ember.optim = require 'ember.optim'
ember.amp = require 'ember.amp'
ember.progress = require 'ember.progress'
ember.generation = require 'ember.generation'
ember.utils = require 'ember.utils'
ember.linalg = require 'ember.linalg'
ember.no_grad = ember.autograd.no_grad
ember.enable_grad = ember.autograd.enable_grad
ember.set_grad_enabled = ember.autograd.set_grad_enabled
ember.is_grad_enabled = ember.autograd.is_grad_enabled
-- Mixed precision regions: ember.autocast, autocast_enter/exit, is_autocast_enabled.
for k, v in pairs(require 'ember.autocast') do ember[k] = v end
ember.Tensor = tensor.methods
ember.is_tensor = tensor.is_tensor
ember.Size = core.Size

-- Every dtype name is a constant: {dtype = ember.float64}. (ember.bool, ember.long, ember.float
-- ... are the casts, which are accepted as dtypes too.)
for i = 0, C.EM_NUM_DTYPES - 1 do
  local name = core.dtype_names[i]
  if tensor.methods[name] == nil then ember[name] = name end
end

-- Any tensor method is also a function: ember.exp(x) is x:exp(). Any other name is an error
-- that suggests close ones, so that a misspelt ember.flaot64 is not a silent nil.
setmetatable(ember, { __index = function(_, k)
  local m = tensor.methods[k]
  if m ~= nil or type(k) ~= 'string' then return m end
  local names = {}
  for n in pairs(ember) do if type(n) == 'string' then names[#names + 1] = n end end
  for n in pairs(tensor.methods) do names[#names + 1] = n end
  error(("ember: no function or field '%s'%s"):format(k,
    require('ember.util.names').hint(k, names)), 2)
end })

function ember.set_num_threads(n)
  if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
    error('set_num_threads: expected a positive integer, got ' .. tostring(n), 2)
  end
  C.em_set_num_threads(n)
end
function ember.get_num_threads() return C.em_get_num_threads() end

-- Seconds on a monotonic wall clock (os.clock counts CPU time of every thread). Declared with
-- pcall and called through void *: another module may have declared clock_gettime first.
pcall(ffi.cdef, [[
  struct em_lua_timespec { int64_t sec; int64_t nsec; };
  int clock_gettime(int clk, struct em_lua_timespec *ts);
]])
local timespec = ffi.new('struct em_lua_timespec')
local timespec_ptr = ffi.cast('void *', timespec)
function ember.clock()
  ffi.C.clock_gettime(1, timespec_ptr) -- CLOCK_MONOTONIC
  return tonumber(timespec.sec) + tonumber(timespec.nsec) * 1e-9
end

function ember.set_default_dtype(d) core.default_dtype = core.dtype_id(d, 'set_default_dtype') end
function ember.get_default_dtype() return core.dtype_names[core.default_dtype] end
function ember.set_default_device(d) core.check(C.em_set_default_device(core.device_id(d))) end
function ember.get_default_device() return core.device_name(C.em_default_device()) end
-- Devices: listing and choosing them, strict mode, synchronize (docs/devices.md). Loading
-- ember.device applies EMBER_DEVICE.
for k, v in pairs(require 'ember.device') do
  if type(v) == 'function' then ember[k] = v end
end

-- help('zeros') / help(ember.zeros): the reference entry from docs/ (as the REPL's ?zeros).
ember.help = require('ember.repl').help

-- Data loading (ember.data) and checkpoints (ember.save / ember.load, safetensors files).
ember.data = require 'ember.data'
ember.serialize = require 'ember.serialize'
ember.save = ember.serialize.save
ember.load = ember.serialize.load

-- ember.doctor(): the devices, their kernels, threads, BLAS and warnings (ember.doctor, loaded
-- on first use).
function ember.doctor(opts) return require('ember.doctor').doctor(opts) end
-- Pictures: PNG images of tensors (ember.image) and line plots (ember.plot).
ember.image = require 'ember.image'
ember.plot = require 'ember.plot'

-- Block-quantized weights (ember.quant: the GGUF block formats and affine int8/int4).
ember.quant = require 'ember.quant'
ember.gguf = require 'ember.gguf'
ember.distributed = require 'ember.distributed'

return ember
