-- autocast (runtime/src/autocast.c, runtime/src/ops/autocast_policy.c, lua/ember/autocast.lua):
-- result dtypes against PyTorch's (golden/autocast_dtypes.lua, from torch.autocast('cpu',
-- bfloat16) by golden/make_autocast.py), with Ember's deliberate differences listed; gradients
-- under autocast against float32 ones; nested, disabled and failing regions; the errors; and
-- autocast on Vulkan through the plain kernels (lavapipe).
local H = require 'helpers'
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional
local ffi = require 'ffi'
local C = ember.C

local golden = dofile('tests/lua/golden/autocast_dtypes.lua')

-- Where Ember's result dtype differs from PyTorch 1.13's CPU autocast, and why. Ember has one
-- table for every device (the same script behaves the same on the CPU and a GPU), and it is
-- PyTorch's CUDA table: its CPU table keeps softmax, sums, norms and exp/log in bfloat16.
local CUDA_FP32 = "PyTorch's CUDA list runs it in float32; its CPU list leaves it in bfloat16"
local differs = {
  ['mv/f32'] = { 'bfloat16', "PyTorch's CUDA list has mv; 1.13's CPU list does not" },
  ['conv_transpose1d/f32'] = { 'bfloat16', "in PyTorch's CUDA list (and the CPU list since 2.0)" },
  ['conv_transpose2d/f32'] = { 'bfloat16', "in PyTorch's CUDA list (and the CPU list since 2.0)" },
  ['exp/bf16'] = { 'float32', CUDA_FP32 },
  ['log/bf16'] = { 'float32', CUDA_FP32 },
  ['log1p/bf16'] = { 'float32', CUDA_FP32 },
  ['expm1/bf16'] = { 'float32', CUDA_FP32 },
  ['rsqrt/bf16'] = { 'float32', CUDA_FP32 },
  ['reciprocal/bf16'] = { 'float32', CUDA_FP32 },
  ['tan/bf16'] = { 'float32', CUDA_FP32 },
  ['softplus/bf16'] = { 'float32', CUDA_FP32 },
  ['pow/bf16,scalar'] = { 'float32', CUDA_FP32 },
  ['pow/bf16,bf16'] = { 'float32', CUDA_FP32 },
  ['softmax/bf16'] = { 'float32', CUDA_FP32 },
  ['log_softmax/bf16'] = { 'float32', CUDA_FP32 },
  ['sum/bf16'] = { 'float32', CUDA_FP32 },
  ['cumsum/bf16'] = { 'float32', CUDA_FP32 },
  ['cumprod/bf16'] = { 'float32', CUDA_FP32 },
  ['logsumexp/bf16'] = { 'float32', CUDA_FP32 },
  ['norm/bf16'] = { 'float32', CUDA_FP32 },
  ['layer_norm/bf16'] = { 'float32', CUDA_FP32 },
  ['layer_norm/bf16,w32'] = { 'float32', CUDA_FP32 .. ' (and refuses a float32 weight)' },
  ['group_norm/bf16'] = { 'float32', CUDA_FP32 },
  ['scatter_add/f32,bf16'] = { 'float32', "PyTorch's CUDA list promotes; its CPU one refuses "
    .. 'mixed dtypes' },
  ['binary_cross_entropy/bf16,bf16'] = { 'error', "PyTorch's CUDA autocast refuses it as unsafe "
    .. "(a 16-bit sigmoid rounds to 0 or 1); its CPU autocast runs it in float32" },
}

-- The cases of make_autocast.py, in Ember. on(t) puts a tensor on the device under test.
local function cases(on)
  local function r(...) return on(ember.randn(...)) end
  local function pr(...) return on(ember.rand(...)) end
  local x = r(4, 6)
  local xb = x:bfloat16()
  local w, v = r(6, 3), r(6)
  local vb = v:bfloat16()
  local b3, w3 = r(2, 4, 6), r(2, 6, 3)
  local img = r(2, 3, 5, 5)
  local imgb = img:bfloat16()
  local sig = r(2, 3, 7)
  local cw, cw1, ctw, ctw1 = r(4, 3, 3, 3), r(4, 3, 3), r(3, 4, 3, 3), r(3, 4, 3)
  local cls = on(ember.tensor({ 1, 3, 6, 2 }, { dtype = 'int64' }))
  local idx = on(ember.tensor({ 1, 3 }, { dtype = 'int64' }))
  local p = pr(4, 6)
  local pb = p:bfloat16()
  local function linear(input)
    local m = nn.Linear(6, 3):to(x:device())
    return m:forward(input)
  end
  return {
    ['matmul/f32'] = function() return x:matmul(w) end,
    ['matmul/bf16,f32'] = function() return xb:matmul(w) end,
    ['matmul/f64'] = function() return x:double():matmul(w:double()) end,
    ['matmul/i64'] = function() return x:long():matmul(w:long()) end,
    ['mm/f32'] = function() return x:mm(w) end,
    ['mv/f32'] = function() return x:mv(v) end,
    ['bmm/f32'] = function() return b3:bmm(w3) end,
    ['addmm/f32'] = function() return r(3):addmm(x, w) end,
    ['baddbmm/f32'] = function() return r(3):baddbmm(b3, w3) end,
    ['linear/f32'] = function() return linear(x) end,
    ['linear3d/f32'] = function() return linear(b3) end,
    ['conv2d/f32'] = function() return F.conv2d(img, cw, r(4)) end,
    ['conv1d/f32'] = function() return F.conv1d(sig, cw1, r(4)) end,
    ['conv_transpose2d/f32'] = function() return F.conv_transpose2d(img, ctw, r(4)) end,
    ['conv_transpose1d/f32'] = function() return F.conv_transpose1d(sig, ctw1, r(4)) end,
    ['dot/f32'] = function() return v:dot(v) end,
    ['dot/bf16'] = function() return vb:dot(vb) end,
    ['outer/f32'] = function() return v:outer(v) end,
    ['exp/bf16'] = function() return xb:exp() end,
    ['log/bf16'] = function() return pb:log() end,
    ['log1p/bf16'] = function() return pb:log1p() end,
    ['expm1/bf16'] = function() return xb:expm1() end,
    ['rsqrt/bf16'] = function() return pb:rsqrt() end,
    ['reciprocal/bf16'] = function() return xb:reciprocal() end,
    ['tan/bf16'] = function() return xb:tan() end,
    ['softplus/bf16'] = function() return xb:softplus() end,
    ['pow/bf16,scalar'] = function() return xb ^ 2 end,
    ['pow/bf16,bf16'] = function() return pb:pow(xb) end,
    ['softmax/bf16'] = function() return xb:softmax(2) end,
    ['softmax/f32'] = function() return x:softmax(2) end,
    ['log_softmax/bf16'] = function() return xb:log_softmax(2) end,
    ['sum/bf16'] = function() return xb:sum() end,
    ['sum/i64'] = function() return x:long():sum() end,
    ['prod/bf16'] = function() return xb:prod() end,
    ['cumsum/bf16'] = function() return xb:cumsum(2) end,
    ['cumprod/bf16'] = function() return xb:cumprod(2) end,
    ['logsumexp/bf16'] = function() return xb:logsumexp(2) end,
    ['norm/bf16'] = function() return xb:norm() end,
    ['layer_norm/bf16'] = function() return F.layer_norm(xb, { 6 }) end,
    ['layer_norm/bf16,w32'] = function()
      return F.layer_norm(xb, { 6 }, on(ember.ones(6)), on(ember.zeros(6)))
    end,
    ['group_norm/bf16'] = function() return F.group_norm(imgb, 3) end,
    ['cross_entropy/bf16'] = function() return F.cross_entropy(xb, cls) end,
    ['nll_loss/bf16'] = function() return F.nll_loss(xb:log_softmax(2), cls) end,
    ['mse_loss/bf16,bf16'] = function() return F.mse_loss(xb, xb * 2) end,
    ['mse_loss/bf16,f32'] = function() return F.mse_loss(xb, x) end,
    ['l1_loss/bf16,bf16'] = function() return F.l1_loss(xb, xb * 2) end,
    ['smooth_l1_loss/bf16,bf16'] = function() return F.smooth_l1_loss(xb, xb * 2) end,
    ['kl_div/bf16,bf16'] = function() return F.kl_div(xb:log_softmax(2), pb, 'sum') end,
    ['binary_cross_entropy_with_logits/bf16,bf16'] = function()
      return F.binary_cross_entropy_with_logits(xb, pb)
    end,
    ['binary_cross_entropy/bf16,bf16'] = function() return F.binary_cross_entropy(pb, pb) end,
    ['relu/bf16'] = function() return xb:relu() end,
    ['sigmoid/bf16'] = function() return xb:sigmoid() end,
    ['tanh/bf16'] = function() return xb:tanh() end,
    ['gelu/bf16'] = function() return xb:gelu() end,
    ['silu/bf16'] = function() return xb:silu() end,
    ['sqrt/bf16'] = function() return pb:sqrt() end,
    ['abs/bf16'] = function() return xb:abs() end,
    ['mean/bf16'] = function() return xb:mean() end,
    ['var/bf16'] = function() return xb:var() end,
    ['std/bf16'] = function() return xb:std() end,
    ['amax/bf16'] = function() return xb:amax() end,
    ['max_pool2d/bf16'] = function() return F.max_pool2d(imgb, 2) end,
    ['avg_pool2d/bf16'] = function() return F.avg_pool2d(imgb, 2) end,
    ['adaptive_avg_pool2d/bf16'] = function() return F.adaptive_avg_pool2d(imgb, 2) end,
    ['dropout/bf16'] = function() return F.dropout(xb, 0.5, true) end,
    ['embedding/w32'] = function() return F.embedding(cls, r(6, 4)) end,
    ['batch_norm/bf16,w32'] = function()
      return F.batch_norm(imgb, on(ember.zeros(3)), on(ember.ones(3)), on(ember.ones(3)),
        on(ember.zeros(3)), true)
    end,
    ['batch_norm/f32'] = function()
      return F.batch_norm(img, on(ember.zeros(3)), on(ember.ones(3)), on(ember.ones(3)),
        on(ember.zeros(3)), true)
    end,
    ['add/bf16,f32'] = function() return xb + x end,
    ['add/bf16,scalar'] = function() return xb + 1.5 end,
    ['mul/bf16,bf16'] = function() return xb * xb end,
    ['maximum/bf16,f32'] = function() return xb:max(x) end,
    ['atan2/bf16,f32'] = function() return xb:atan2(x) end,
    ['where/bf16,f32'] = function() return ember.where(x:gt(0), xb, x) end,
    ['clamp/bf16'] = function() return xb:clamp(-1, 1) end,
    ['lerp/bf16,bf16'] = function() return xb:lerp(xb * 2, 0.5) end,
    ['addcmul/f32,bf16,bf16'] = function() return x:addcmul(xb, xb) end,
    ['addcdiv/f32,bf16,bf16'] = function() return x:addcdiv(xb, xb + 3) end,
    ['cat/bf16,f32'] = function() return ember.cat({ xb, x }) end,
    ['cat/bf16,bf16'] = function() return ember.cat({ xb, xb }) end,
    ['stack/bf16,f32'] = function() return ember.stack({ xb, x }) end,
    ['index_copy/f32,bf16'] = function() return x:index_copy(1, idx, xb:narrow(1, 1, 2)) end,
    ['scatter_add/f32,bf16'] = function()
      return x:scatter_add(1, idx:view(2, 1):expand(2, 6), xb:narrow(1, 1, 2))
    end,
  }
end

-- The result's dtype under autocast, or 'error'.
local function dtype_under(opts, f)
  local ok, y = pcall(ember.autocast, opts, f)
  if not ok then return 'error', y end
  return y:dtype()
end

local function cpu(t) return t end

describe('autocast result dtypes', function()
  it('covers every case of the golden table, and nothing else', function()
    local mine = cases(cpu)
    for name in pairs(golden) do assert.is_truthy(mine[name], name .. ' has no Ember case') end
    for name in pairs(mine) do
      assert.is_truthy(golden[name], name .. ' is not in the golden table')
    end
    for name in pairs(differs) do assert.is_truthy(golden[name], name) end
  end)

  local mine = cases(cpu)
  local names = {}
  for name in pairs(golden) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(name .. ' on the CPU in bfloat16', function()
      local d = differs[name]
      local expected = d and d[1] or golden[name]
      local got, err = dtype_under({ device = 'cpu', dtype = 'bfloat16' }, mine[name])
      assert.are.equal(expected, got, name .. (err and ': ' .. tostring(err) or '')
        .. (d and ' (Ember differs from PyTorch 1.13 CPU on purpose: ' .. d[2] .. ')' or ''))
    end)
  end

  it('runs in float16 on the CPU too (PyTorch allows only bfloat16 there)', function()
    local x, w = ember.randn(3, 4), ember.randn(4, 2)
    ember.autocast({ device = 'cpu', dtype = 'float16' }, function()
      assert.are.equal('float16', x:matmul(w):dtype())
      assert.are.equal('float32', x:half():softmax(1):dtype())
      assert.are.equal('float32', (x:half() + x:bfloat16()):dtype()) -- two 16-bit kinds
      assert.are.equal('float32', x:half():addcmul(x:bfloat16(), x:bfloat16()):dtype())
    end)
  end)

  it('computes the same values as the explicit casts', function()
    local x, w = ember.randn(5, 7), ember.randn(7, 3)
    local y = ember.autocast({ device = 'cpu' }, function() return x:matmul(w) end)
    H.assert_close(y:float(), x:bfloat16():matmul(w:bfloat16()):float():totable(), 0, 0)
    local s = ember.autocast({ device = 'cpu' }, function() return y:softmax(2) end)
    H.assert_close(s, y:float():softmax(2):totable(), 0, 0)
  end)
end)

describe('autocast regions', function()
  local x, w = ember.randn(3, 4), ember.randn(4, 2)
  local function mm_dtype() return x:matmul(w):dtype() end

  it('returns the results of the function and closes the region', function()
    local a, b, c = ember.autocast({ device = 'cpu' }, function(u, v) return u, v, nil end, 1, 2)
    assert.are.same({ 1, 2 }, { a, b })
    assert.is_nil(c)
    assert.are.equal(0, C.em_autocast_depth())
    assert.is_false(ember.is_autocast_enabled('cpu'))
    assert.are.equal('float32', mm_dtype())
  end)

  it('nests: the innermost region of a kind decides, disabled regions turn it off', function()
    ember.autocast({ device = 'cpu', dtype = 'bfloat16' }, function()
      assert.are.equal('bfloat16', mm_dtype())
      ember.autocast({ device = 'cpu', dtype = 'float16' }, function()
        assert.are.equal('float16', mm_dtype())
        assert.are.same({ true, 'float16' }, { ember.is_autocast_enabled('cpu') })
        ember.autocast({ device = 'cpu', enabled = false }, function()
          assert.are.equal('float32', mm_dtype())
          assert.is_false(ember.is_autocast_enabled('cpu'))
          assert.are.equal(3, C.em_autocast_depth())
        end)
        assert.are.equal('float16', mm_dtype())
      end)
      assert.are.equal('bfloat16', mm_dtype())
    end)
    assert.are.equal('float32', mm_dtype())
  end)

  it('is per kind of device: a vulkan region leaves CPU ops alone', function()
    ember.autocast({ device = 'vulkan' }, function()
      assert.are.equal('float32', mm_dtype())
      assert.is_false(ember.is_autocast_enabled('cpu'))
      assert.are.same({ true, 'float16' }, { ember.is_autocast_enabled('vulkan') })
      ember.autocast({ device = 'cpu' }, function()
        assert.are.equal('bfloat16', mm_dtype())
        assert.are.same({ true, 'float16' }, { ember.is_autocast_enabled('vulkan:0') })
      end)
    end)
  end)

  it('defaults to the default device, bfloat16 on the CPU, float16 on Vulkan', function()
    ember.autocast(nil, function()
      assert.are.same({ true, 'bfloat16' }, { ember.is_autocast_enabled('cpu') })
    end)
    ember.autocast({ device = 'vulkan' }, function()
      assert.are.same({ true, 'float16' }, { ember.is_autocast_enabled('vulkan') })
    end)
  end)

  it('closes the region when the function raises, and raises the error again', function()
    H.assert_error(function()
      ember.autocast({ device = 'cpu' }, function()
        ember.autocast_enter({ device = 'cpu', enabled = false }) -- left open by the error
        error('boom', 0)
      end)
    end, 'boom')
    assert.are.equal(0, C.em_autocast_depth())
    assert.are.equal('float32', mm_dtype())
  end)

  it('has an enter/exit pair for loops', function()
    ember.autocast_enter({ device = 'cpu' })
    local d = mm_dtype()
    ember.autocast_exit()
    assert.are.equal('bfloat16', d)
    assert.are.equal('float32', mm_dtype())
    H.assert_error(ember.autocast_exit, 'autocast_exit: no autocast region is open')
  end)

  it('raises on misspelt options, devices and unsupported dtypes', function()
    local f = function() end
    H.assert_error(function() ember.autocast({ devcie = 'cpu' }, f) end,
      "autocast: unknown option devcie (did you mean device? expected one of device, dtype, enabled)")
    H.assert_error(function() ember.autocast({ device = 'vulkn' }, f) end,
      "autocast: expected device 'cpu' or 'vulkan'")
    H.assert_error(function() ember.autocast({ device = 'cuda' }, f) end,
      "got 'cuda'")
    H.assert_error(function() ember.autocast({ device = 'cpu', dtype = 'float32' }, f) end,
      "autocast: expected dtype float16 or bfloat16 for device 'cpu', got float32")
    H.assert_error(function() ember.autocast({ device = 'vulkan', dtype = 'float64' }, f) end,
      "autocast: expected dtype float16 or bfloat16 for device 'vulkan', got float64")
    H.assert_error(function() ember.autocast({ device = 'cpu', dtype = 'int8' }, f) end,
      'got int8')
    H.assert_error(function() ember.autocast({ device = 'cpu', dtype = 'bfloat61' }, f) end,
      'autocast')
    H.assert_error(function() ember.autocast({ enabled = 1 }, f) end,
      'autocast: expected enabled to be a boolean, got number')
    H.assert_error(function() ember.autocast({ device = 'cpu' }) end,
      'autocast: expected a function to run, got nil')
    H.assert_error(function() ember.autocast_enter({ device = 'cpu', dtype = 'float32' }) end,
      "autocast: expected dtype float16 or bfloat16 for device 'cpu', got float32")
    assert.are.equal(0, C.em_autocast_depth())
  end)

  it('refuses binary_cross_entropy inside a region, with the safe alternative', function()
    local p = ember.rand(4)
    H.assert_error(function()
      ember.autocast({ device = 'cpu' }, function() return F.binary_cross_entropy(p, p) end)
    end, 'binary_cross_entropy: unsafe to autocast; a sigmoid')
    assert.are.equal('float32', F.binary_cross_entropy(p, p):dtype()) -- fine outside
    local y = ember.autocast({ device = 'cpu', enabled = false }, function()
      return F.binary_cross_entropy(p, p)
    end)
    assert.are.equal('float32', y:dtype())
  end)

  it('lets batch_norm take float32 parameters with a 16-bit input (PyTorch\'s mixed form)',
    function()
      local x = ember.randn(4, 3, 2, 2):bfloat16()
      local w, b = ember.rand(3) + 0.5, ember.randn(3)
      local rm, rv = ember.zeros(3), ember.ones(3)
      local rm32, rv32 = ember.zeros(3), ember.ones(3)
      local y = F.batch_norm(x, rm, rv, w, b, true)
      local y32 = F.batch_norm(x:float(), rm32, rv32, w, b, true)
      assert.are.equal('bfloat16', y:dtype())
      H.assert_close(y:float(), y32:bfloat16():float():totable(), 0, 0)
      H.assert_close(rm, rm32:totable(), 1e-6, 1e-7)
      H.assert_close(rv, rv32:totable(), 1e-6, 1e-7)
      H.assert_error(function() F.batch_norm(x:float(), rm, rv, w:bfloat16(), b, true) end,
        'batch_norm: expected a weight of the input\'s dtype float32, got bfloat16')
    end)

  it('leaves in-place ops in their dtype', function()
    local a = ember.randn(3, 3):bfloat16():requires_grad_()
    local y = ember.autocast({ device = 'cpu' }, function()
      local t = a * 1
      t:exp_()
      return t
    end)
    assert.are.equal('bfloat16', y:dtype())
    y:sum():backward()
    assert.are.equal('bfloat16', a.grad:dtype())
  end)

  it('knows its table through em_autocast_inputs, and refuses unknown names', function()
    local ins = ffi.new('em_tensor*[1]')
    local outs = ffi.new('em_tensor*[1]')
    ins[0] = ember.randn(2).ptr
    assert.are.equal(-1, C.em_autocast_inputs('mse_los', 1, ins, outs))
    assert.are.equal("autocast_inputs: 'mse_los' is not in autocast's op table",
      ffi.string(C.em_last_error()))
    local a = ember.randn(2):bfloat16()
    local b = ember.autocast({ device = 'cpu' }, function()
      return ember.autocast_inputs('mse_loss', a)
    end)
    assert.are.equal('float32', b:dtype())
    assert.are.equal(a, ember.autocast_inputs('mse_loss', a)) -- outside a region: as is
  end)
end)

-- ---- gradients --------------------------------------------------------------------------------

-- Runs step(model) (a loss) in float32 and under autocast, backward outside the region; returns
-- the parameters' gradients of both runs, in order.
local function grads_both(model, step, opts)
  local function grads()
    local out = {}
    for _, p in ipairs(model:parameters()) do
      out[#out + 1] = p.grad
      p.grad = nil
    end
    return out
  end
  step(model):backward()
  local g32 = grads()
  local loss = ember.autocast(opts, function() return step(model) end)
  assert.are.equal('float32', loss:dtype())
  loss:backward()
  return g32, grads()
end

-- 16-bit tolerance, as a relative error in norm: a pre-activation near 0 that rounds to the
-- other side of a ReLU moves a few elements by one sample's share, as in PyTorch.
local function assert_grads_close(g32, g16, rtol)
  assert.are.equal(#g32, #g16)
  for i = 1, #g32 do
    assert.are.equal('float32', g16[i]:dtype(), 'gradient ' .. i .. ' dtype')
    local scale = g32[i]:norm():item()
    local err = (g16[i] - g32[i]):norm():item()
    assert.is_true(err <= rtol * scale + 1e-6,
      ('gradient %d: difference %g in norm for a gradient of norm %g'):format(i, err, scale))
  end
end

describe('autocast gradients', function()
  before_each(function() ember.manual_seed(7) end)

  -- Smooth activations: with ReLU, a pre-activation near 0 that rounds to the other side
  -- moves one sample's share of a gradient (PyTorch's autocast does the same), which makes
  -- the comparison depend on the data rather than on autocast.
  local function mlp()
    return nn.Sequential():add(nn.Linear(8, 16)):add(nn.Tanh()):add(nn.Linear(16, 5))
  end

  it('of an MLP match float32 within 16-bit tolerance, in float32', function()
    local model = mlp()
    local x, t = ember.randn(32, 8), ember.randint(1, 6, { 32 })
    local g32, g16 = grads_both(model, function(m) return F.cross_entropy(m:forward(x), t) end,
      { device = 'cpu', dtype = 'bfloat16' })
    assert_grads_close(g32, g16, 0.03)
    local _, g16h = grads_both(model, function(m) return F.cross_entropy(m:forward(x), t) end,
      { device = 'cpu', dtype = 'float16' })
    assert_grads_close(g32, g16h, 0.01)
    for _, p in ipairs(model:parameters()) do assert.are.equal('float32', p:dtype()) end
  end)

  it('of a small conv net (conv, batch norm, pool, linear) match float32', function()
    -- (no conv bias: batch norm cancels it, its gradient is 0 up to rounding)
    local model = nn.Sequential()
      :add(nn.Conv2d(3, 6, 3, { padding = 1, bias = false })):add(nn.BatchNorm2d(6))
      :add(nn.Tanh()):add(nn.AvgPool2d(2)):add(nn.Flatten()):add(nn.Linear(6 * 4 * 4, 4))
    local x, t = ember.randn(8, 3, 8, 8), ember.randint(1, 5, { 8 })
    local g32, g16 = grads_both(model, function(m) return F.cross_entropy(m:forward(x), t) end,
      { device = 'cpu', dtype = 'bfloat16' })
    assert_grads_close(g32, g16, 0.03)
  end)

  it('of an MSE regression (a Lua-composed loss) match float32', function()
    local model = mlp()
    local x, y = ember.randn(16, 8), ember.randn(16, 5)
    local g32, g16 = grads_both(model, function(m) return F.mse_loss(m:forward(x), y) end,
      { device = 'cpu', dtype = 'float16' })
    assert_grads_close(g32, g16, 0.01)
  end)

  it('are the same with backward inside the region (autocast is off in backward)', function()
    local model = mlp()
    local x, t = ember.randn(4, 8), ember.randint(1, 6, { 4 })
    local function run(inside)
      local loss = ember.autocast({ device = 'cpu' }, function()
        local l = F.cross_entropy(model:forward(x), t)
        if inside then l:backward() end
        return l
      end)
      if not inside then loss:backward() end
      local g = {}
      for _, p in ipairs(model:parameters()) do
        g[#g + 1] = p.grad:totable()
        p.grad = nil
      end
      return g
    end
    assert.are.same(run(false), run(true))
  end)

  it('reach a weight used twice in one region (its cast is cached once)', function()
    local w = ember.randn(4, 4):requires_grad_()
    local x = ember.randn(2, 4)
    local loss = ember.autocast({ device = 'cpu' }, function()
      return x:matmul(w):matmul(w):float():sum()
    end)
    loss:backward()
    local wb = w:detach():bfloat16():float()
    local ref_w = wb:clone():requires_grad_()
    x:bfloat16():float():matmul(ref_w):bfloat16():float():matmul(ref_w):sum():backward()
    H.assert_close(w.grad, ref_w.grad:totable(), 0.03, 0.03)
  end)

  it('cast a parameter once per region however many ops use it', function()
    local w = ember.randn(256, 256):requires_grad_()
    local x = ember.randn(1, 256)
    local function allocated() return ember.memory.stats('cpu').allocated end
    ember.autocast({ device = 'cpu' }, function()
      local keep = { x:matmul(w) } -- the first use makes the cast
      local before = allocated()
      for i = 2, 4 do keep[i] = x:matmul(w) end
      -- three more products: their [1, 256] bfloat16 results, no new 128 KiB cast
      assert.is_true(allocated() - before < 256 * 256 * 2, 'a new cast per use')
      ember.autocast({ device = 'cpu', dtype = 'float16' }, function()
        keep[5] = x:matmul(w) -- another dtype: another cast
        assert.is_true(allocated() - before >= 256 * 256 * 2)
      end)
    end)
  end)

  it('see a parameter changed inside the region (a stale cast is not reused)', function()
    local w = ember.ones(2, 2):requires_grad_()
    local x = ember.ones(1, 2)
    ember.autocast({ device = 'cpu' }, function()
      H.assert_close(x:matmul(w):float(), { { 2, 2 } }, 0, 0)
      ember.no_grad(function() w:mul_(3) end)
      H.assert_close(x:matmul(w):float(), { { 6, 6 } }, 0, 0)
    end)
  end)
end)

-- ---- Vulkan -------------------------------------------------------------------------------------

local VK = require('vk_helpers').open('autocast on vulkan')
if not VK then return end

describe('autocast on vulkan', function()
  local V = VK.V
  local function on(t) return t:to(V) end
  it('gives the table\'s dtypes with device = vulkan, in bfloat16 and float16', function()
    local mine = cases(on)
    local names = {}
    for name in pairs(golden) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local d = differs[name]
      local expected = d and d[1] or golden[name]
      local got, err = dtype_under({ device = 'vulkan', dtype = 'bfloat16' }, mine[name])
      assert.are.equal(expected, got, name .. (err and ': ' .. tostring(err) or ''))
      local half = expected == 'bfloat16' and 'float16' or expected
      if name:find('bf16', 1, true) then half = nil end -- bfloat16 operands stay bfloat16
      if half then
        got, err = dtype_under({ device = V, dtype = 'float16' }, mine[name])
        assert.are.equal(half, got, name .. ' in float16' .. (err and ': ' .. tostring(err) or ''))
      end
    end
  end)

  it('leaves Vulkan ops alone in a CPU region, and CPU ops in a Vulkan one', function()
    local a, b = on(ember.randn(3, 4)), on(ember.randn(4, 2))
    ember.autocast({ device = 'cpu' }, function()
      assert.are.equal('float32', a:matmul(b):dtype())
    end)
    ember.autocast({ device = 'vulkan' }, function()
      assert.are.equal('float16', a:matmul(b):dtype())
      assert.are.equal('float32', a:cpu():matmul(b:cpu()):dtype())
    end)
  end)

  it('trains an MLP with gradients matching the CPU float32 ones', function()
    ember.manual_seed(3)
    local model = nn.Sequential():add(nn.Linear(8, 16)):add(nn.Tanh()):add(nn.Linear(16, 5))
    local x, t = ember.randn(32, 8), ember.randint(1, 6, { 32 })
    local g32 = {}
    F.cross_entropy(model:forward(x), t):backward()
    for _, p in ipairs(model:parameters()) do
      g32[#g32 + 1] = p.grad
      p.grad = nil
    end
    model:to(V)
    for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
      local loss = ember.autocast({ device = 'vulkan', dtype = dtype }, function()
        return F.cross_entropy(model:forward(on(x)), on(t))
      end)
      loss:backward()
      local g = {}
      for _, p in ipairs(model:parameters()) do
        assert.are.equal(V, p.grad:device())
        g[#g + 1] = p.grad:cpu()
        p.grad = nil
      end
      assert_grads_close(g32, g, dtype == 'float16' and 0.01 or 0.03)
    end
  end)
end)
