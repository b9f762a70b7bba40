-- The choice of tensor-core kernels (runtime/src/vulkan/vk_matmul_coop.c) on a device without
-- them, which is what CI has (lavapipe): the device reports none (em_device_info.tensor_cores),
-- and every EMBER_VK_COOPMAT setting, forced flavors included, falls back to the tiled kernel
-- with the same products. The kernels themselves are checked on a GPU by tests/gpu/matmul.lua.
local VK = require('vk_helpers').open('vulkan tensor cores')
if not VK then return end
local ember, V = VK.ember, VK.V
local with_env = VK.with_env

describe('vulkan tensor cores', function()
  it('are reported only where the device has cooperative matrices', function()
    ember.zeros(1):to(V) -- started: the report then names the kernels in use
    local info = ember.device(V):info()
    if info.features.cooperative_matrix then
      assert.is_string(info.tensor_cores)
      assert.truthy(info.tensor_cores:match('^kernels:'), info.tensor_cores)
    else
      assert.is_nil(info.tensor_cores)
    end
    assert.is_nil(ember.device('cpu'):info().tensor_cores)
  end)

  it('fall back to the tiled kernel with every EMBER_VK_COOPMAT setting', function()
    local a = (ember.rand(130, 70) * 6 - 3):to('float16')
    local b = (ember.rand(70, 90) * 6 - 3):to('float16')
    local want = a:matmul(b):double()
    for _, v in ipairs({ '1', 'auto', '0', 'cm2', 'khr', 'nv', 'tiled' }) do
      with_env('EMBER_VK_COOPMAT', v, function()
        local got = a:to(V):matmul(b:to(V)):to('cpu'):double()
        local bad = ((got - want):abs() - want:abs() * 2e-3 - 0.05):gt(0):sum():item()
        assert.are.equal(0, bad, 'EMBER_VK_COOPMAT=' .. v)
      end)
    end
  end)
end)
