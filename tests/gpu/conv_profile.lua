-- One 16-bit convolution layer's forward and backward, repeated, for EMBER_VK_PROFILE=1 (the
-- per-kernel GPU times print at exit):
--   EMBER_VK_PROFILE=1 ember tests/gpu/conv_profile.lua [N C H W M k stride pad [dtype [reps]]]
-- Default: ResNet-50's first 3x3 layer (32 x 64 x 56 x 56, 64 filters), float16, 10 reps.
local F = require('ember.nn').functional
local a = arg
local N, C, Hh, W, M, k, st, p = tonumber(a[1] or 32), tonumber(a[2] or 64), tonumber(a[3] or 56),
  tonumber(a[4] or 56), tonumber(a[5] or 64), tonumber(a[6] or 3), tonumber(a[7] or 1), tonumber(a[8] or 1)
local dt, reps = a[9] or 'float16', tonumber(a[10] or 10)
local dev = ember.device('vulkan').name
local o = { stride = st, padding = p }
local x = (ember.rand({ N, C, Hh, W }) * 2 - 1):to(dt):to(dev):requires_grad_()
local w = (ember.rand({ M, C, k, k }) * 0.2 - 0.1):to(dt):to(dev):requires_grad_()
local y = F.conv2d(x, w, nil, o)
local g = (ember.rand(y:size()) * 2 - 1):to(dt):to(dev)
for _ = 1, reps do
  x.grad, w.grad = nil, nil
  F.conv2d(x, w, nil, o):backward(g)
end
ember.synchronize(dev)
local t0 = ember.clock()
for _ = 1, reps do
  x.grad, w.grad = nil, nil
  F.conv2d(x, w, nil, o):backward(g)
end
ember.synchronize(dev)
print(('%s conv N%d C%d %dx%d M%d k%d: forward+backward %.3f ms per step'):format(dt, N, C, Hh, W,
  M, k, (ember.clock() - t0) / reps * 1e3))
