-- 2-D convolutions on a Vulkan GPU in float16 / bfloat16 (the column method on tensor cores,
-- vulkan/vk_conv_cols.c) and float32 (the tiled implicit GEMM): correctness against the CPU,
-- then speed against PyTorch CUDA's cuDNN (tests/gpu/torch_conv.py, run from here when python3
-- can import torch).
--   ember tests/gpu/conv.lua [device] [check]
-- Shapes: ResNet-50's 3x3 layers at batch 32 (64 channels at 56x56, 128 at 28x28, 256 at
-- 14x14), its 7x7 stem, and the Fashion-MNIST CNN's second layer at batch 256. Forward, and
-- forward + backward (input and weight gradients), median of timed runs after a warm-up.
-- FLOPs: 2 N M C kh kw OH OW for the forward, three times that for forward + backward.
-- Lines, one fact each:
--   PASS|FAIL <what>: max error ...
--   ember conv <dtype> <shape> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s
--   torch conv <dtype> <shape> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s   (torch_conv.py)
--   ratio <dtype> <shape> fwd|fwdbwd <ember/torch speed>
local F = require('ember.nn').functional
local dev = ember.device(arg[1] or 'vulkan').name
local check_only = arg[2] == 'check'
ember.zeros(1):to(dev)
local info = ember.device(dev):info()
print(('device: %s (%s, %s)'):format(dev, info.description, info.driver))
print('tensor cores: ' .. tostring(info.tensor_cores))

-- ---- correctness: Vulkan (dtype) against the CPU's float32 over the same rounded values ----
local passed, failed = 0, 0
local tol = { float32 = 1e-5, float16 = 4e-3, bfloat16 = 2.5e-2 }
local function relerr(a, b)
  a, b = a:to('cpu'):float(), b:to('cpu'):float()
  return (a - b):abs():max():item() / math.max(b:abs():max():item(), 1e-30)
end
local function case(what, dt, N, C, Hh, W, M, k, o)
  local x = (ember.rand({ N, C, Hh, W }) * 2 - 1):to(dt)
  local w = (ember.rand({ M, C, k, k }) * 2 - 1):to(dt)
  local b = (ember.rand({ M }) * 2 - 1):to(dt)
  local cx, cw, cb = x:float():requires_grad_(), w:float():requires_grad_(), b:float():requires_grad_()
  local vx, vw, vb = x:to(dev):requires_grad_(), w:to(dev):requires_grad_(), b:to(dev):requires_grad_()
  local cy, vy = F.conv2d(cx, cw, cb, o), F.conv2d(vx, vw, vb, o)
  local g = (ember.rand(cy:size()) * 2 - 1):to(dt)
  cy:backward(g:float())
  vy:backward(g:to(dev))
  local errs = { relerr(vy, cy), relerr(vx.grad, cx.grad), relerr(vw.grad, cw.grad), relerr(vb.grad, cb.grad) }
  local ok = true
  for _, e in ipairs(errs) do ok = ok and e <= tol[dt] end
  if ok then passed = passed + 1 else failed = failed + 1 end
  print(('%s %s %s: max error relative to the largest value: y %.3g, gx %.3g, gw %.3g, gb %.3g')
    :format(ok and 'PASS' or 'FAIL', what, dt, errs[1], errs[2], errs[3], errs[4]))
end
for _, dt in ipairs({ 'float16', 'bfloat16', 'float32' }) do
  case('N4 C16 30x30 M40 k3 p1', dt, 4, 16, 30, 30, 40, 3, { padding = 1 })
  case('N2 C3 33x31 M65 k7 s2 p3', dt, 2, 3, 33, 31, 65, 7, { stride = 2, padding = 3 })
  case('N3 C70 9x9 M130 k3 s2 d2', dt, 3, 70, 9, 9, 130, 3, { stride = 2, dilation = 2 })
  case('N64 C32 14x14 M64 k5 p2', dt, 64, 32, 14, 14, 64, 5, { padding = 2 })
  case('N2 C64 12x12 M64 k1', dt, 2, 64, 12, 12, 64, 1, {})
end
print(('check: %d passed, %d failed'):format(passed, failed))
if check_only then return end

-- ---- speed --------------------------------------------------------------------------------
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  local w0 = ember.clock()
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.3
  local s = {}
  for i = 1, reps do
    collectgarbage()
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end

-- name, N, C, H, W, M, k, stride, padding
local shapes = {
  { 'r50-3x3-64', 32, 64, 56, 56, 64, 3, 1, 1 },
  { 'r50-3x3-128', 32, 128, 28, 28, 128, 3, 1, 1 },
  { 'r50-3x3-256', 32, 256, 14, 14, 256, 3, 1, 1 },
  { 'r50-stem', 32, 3, 224, 224, 64, 7, 2, 3 },
  { 'fmnist-conv2', 256, 32, 14, 14, 64, 5, 1, 2 },
}
local results = {}
for _, dt in ipairs({ 'float16', 'bfloat16', 'float32' }) do
  for _, s in ipairs(shapes) do
    local name, N, C, Hh, W, M, k, st, p = unpack(s)
    local o = { stride = st, padding = p }
    local x = ((ember.rand({ N, C, Hh, W }) * 2 - 1):to(dt)):to(dev)
    local w = ((ember.rand({ M, C, k, k }) * 0.2 - 0.1):to(dt)):to(dev)
    local y = F.conv2d(x, w, nil, o)
    local g = ((ember.rand(y:size()) * 2 - 1):to(dt)):to(dev)
    local OH, OW = y:size(3), y:size(4)
    local flops = 2 * N * M * C * k * k * OH * OW
    local tf = time(function() F.conv2d(x, w, nil, o) end, 10)
    local lx, lw = x:detach():requires_grad_(), w:detach():requires_grad_()
    local tb = time(function()
      lx.grad, lw.grad = nil, nil
      F.conv2d(lx, lw, nil, o):backward(g)
    end, 10)
    print(('ember conv %s %s fwd %.3f ms %.2f TFLOP/s'):format(dt, name, tf * 1e3, flops / tf / 1e12))
    print(('ember conv %s %s fwdbwd %.3f ms %.2f TFLOP/s'):format(dt, name, tb * 1e3, 3 * flops / tb / 1e12))
    results[dt .. ' ' .. name .. ' fwd'], results[dt .. ' ' .. name .. ' fwdbwd'] = tf, tb
  end
end

local ok_torch = os.execute('python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null')
if ok_torch == 0 or ok_torch == true then
  local pr = io.popen('python3 tests/gpu/torch_conv.py 2>&1')
  for line in pr:lines() do
    print(line)
    local dt, name, kind, ms = line:match('^torch conv (%S+) (%S+) (%S+) ([%d.]+) ms')
    local key = dt and (dt .. ' ' .. name .. ' ' .. kind)
    if key and results[key] then
      print(('ratio %s %s %s %.2f'):format(dt, name, kind, (tonumber(ms) / 1e3) / results[key]))
    end
  end
  pr:close()
else
  print('torch: not available (no ratios)')
end
