-- Shared by the Vulkan specs (tests/lua/vulkan*_spec.lua): the device under test, and the
-- comparison of a Vulkan result with the CPU's.
--
-- The device is lavapipe (llvmpipe) by name when present, else vulkan:0; M.V is nil when the
-- machine has no Vulkan device at all (M.why says why), and a spec is then pending. A spec
-- starts with
--   local VK = require('vk_helpers').open('vulkan conv')
--   if not VK then return end
local H = require 'helpers'
local assert = require 'luassert'
local ember = H.ember
local M = { H = H, ember = ember }

local function find_device()
  local first
  for _, d in ipairs(ember.devices()) do
    if d.type ~= 'cpu' then
      if d.description:find('llvmpipe', 1, true) then return d.name end
      first = first or d.name
    end
  end
  return first
end

local V = find_device()
M.V = V

-- M, or nil after registering one pending test named `name` when there is no Vulkan device.
function M.open(name)
  if V ~= nil then return M end
  describe(name, function() pending('no Vulkan device: ' .. M.why) end)
  return nil
end

-- Runs f with the environment variable `name` set to value (read by the runtime when it
-- decides, e.g. EMBER_VK_MATMUL_TILE), then unsets it, also when f raises.
local ffi = require 'ffi'
pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
function M.with_env(name, value, f)
  ffi.C.setenv(name, value, 1)
  local ok, err = pcall(f)
  ffi.C.unsetenv(name)
  if not ok then error(err, 0) end
end

if V == nil then
  local _, why = pcall(ember.device, 'vulkan')
  M.why = tostring(why)
  return M
end
M.info = ember.device(V):info()
M.has_f64 = M.info.features.float64
M.nested = os.getenv('EMBER_VK_SPEC_CHILD') ~= nil -- run by device_spec under validation

function M.on(t) return t:to(V) end

-- Per-dtype tolerances: exact for integers and bool, last-bit differences for floats (GPU
-- division and transcendental functions are not correctly rounded), one 16-bit ulp.
M.tolerances = {
  float32 = { 2e-6, 1e-6 }, float64 = { 1e-12, 1e-14 }, float16 = { 1e-3, 1e-4 },
  bfloat16 = { 8e-3, 1e-3 },
}
M.approx_tol = { float32 = { 3e-5, 3e-6 }, float64 = { 1e-12, 1e-14 },
  float16 = { 2e-3, 2e-4 }, bfloat16 = { 1.6e-2, 2e-3 } }

-- Asserts that the Vulkan result matches the CPU's: same dtype, shape and values. `tol` is
-- true for the approximate tolerances, or a {rtol, atol} pair of one's own.
function M.agree(got, want, what, tol)
  assert.are.equal(V, got:device(), what)
  assert.are.equal(want:dtype(), got:dtype(), what .. ': dtype')
  if type(tol) ~= 'table' then
    tol = (tol and M.approx_tol or M.tolerances)[want:dtype()] or { 0, 0 }
  end
  H.assert_close(got:to('cpu'), want:totable(), tol[1], tol[2], what)
end

function M.is_float(dtype) return ember.tensor(0, { dtype = dtype }):is_floating_point() end

-- Random data of a dtype as a CPU tensor; lo/hi bound the values.
function M.data(dtype, shape, lo, hi)
  local t = H.rand_table(shape, lo or -3, hi or 3)
  if dtype == 'bool' then
    return ember.tensor(H.map(function(v) return v > 0 end, t))
  end
  if not M.is_float(dtype) then
    t = H.map(function(v) return math.floor(v) end, t)
  end
  return ember.tensor(t, { dtype = dtype })
end

-- A random int64 index tensor (1-based, a CPU tensor) of a shape with values in [1, hi].
function M.rand_index(shape, hi)
  for _, n in ipairs(shape) do
    if n == 0 then return ember.zeros(shape, { dtype = 'int64' }) end
  end
  local t = H.rand_table(shape, 0, 1)
  t = H.map(function(v) return math.min(hi, 1 + math.floor(v * hi)) end, t)
  return ember.tensor(t, { dtype = 'int64' })
end

-- The same logical input laid out several ways, built with the same view ops on both devices.
-- Each entry: name, cpu tensor, vulkan tensor. `make(shape)` gives a contiguous CPU tensor.
function M.layouts(make, rows, cols)
  local out = {}
  local function add(name, base, view)
    out[#out + 1] = { name, view(base), view(M.on(base)) }
  end
  add('contiguous', make({ rows, cols }), function(t) return t end)
  add('transposed', make({ cols, rows }), function(t) return t:t() end)
  add('sliced', make({ rows, 2 * cols }), function(t) return t[{ {}, { 1, -1, 2 } }] end)
  add('offset', make({ rows + 1, cols }), function(t) return t:narrow(1, 2, rows) end)
  add('broadcast', make({ 1, cols }), function(t) return t:expand(rows, cols) end)
  add('zero-size', make({ 0, cols }), function(t) return t end)
  add('large', make({ 97, 301 }), function(t) return t end)
  return out
end

return M
