-- Convolution microbenchmarks: the two convolution layers of the Fashion-MNIST CNN
-- (conv5x5-32 pad 2 on 1x28x28, conv5x5-64 pad 2 on 32x14x14) at batch 64, forward alone
-- and forward + backward, plus the pooling that follows each. Prints the best and median
-- of repeated runs in milliseconds.
--   ember tests/bench/bench_conv.lua [threads]
-- PyTorch's figures for the same layers: python3 tests/bench/torch_conv.py [threads]
package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
local ember = require 'ember'
local F = require 'ember.nn.functional'

local threads = tonumber(arg and arg[1]) or ember.get_num_threads()
ember.set_num_threads(threads)
ember.manual_seed(0)

-- A monotonic wall clock of our own (os.clock adds up the CPU time of every thread).
local ffi = require 'ffi'
ffi.cdef 'typedef struct { long sec, nsec; } em_bench_timespec;'
pcall(ffi.cdef, 'int clock_gettime(int, void *);')
local clock_gettime = ffi.cast('int (*)(int, em_bench_timespec *)', ffi.C.clock_gettime)
local ts = ffi.new('em_bench_timespec')
local function clock()
  clock_gettime(1, ts)
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end

local function bench(name, f, reps)
  reps = reps or 20
  for _ = 1, 3 do f() end
  local t = {}
  for i = 1, reps do
    -- collected outside the timed region: in a training loop freed activations come back
    -- from the allocator's cache, while a benchmark that never collects pays page faults
    collectgarbage()
    local t0 = clock()
    f()
    t[i] = (clock() - t0) * 1e3
  end
  table.sort(t)
  print(('%d  %-34s best %7.2f ms   median %7.2f ms'):format(threads, name, t[1], t[math.floor(#t / 2) + 1]))
end

local x = ember.randn(64, 1, 28, 28)
local w1 = ember.randn(32, 1, 5, 5):requires_grad_()
local b1 = ember.randn(32):requires_grad_()
local h = ember.randn(64, 32, 14, 14):requires_grad_()
local w2 = ember.randn(64, 32, 5, 5):requires_grad_()
local b2 = ember.randn(64):requires_grad_()
local g1 = ember.ones(64, 32, 28, 28)
local g2 = ember.ones(64, 64, 14, 14)

bench('conv1 fwd', function() ember.no_grad(function() F.conv2d(x, w1, b1, { padding = 2 }) end) end)
bench('conv1 fwd+bwd (w, b)', function()
  local y = F.conv2d(x, w1, b1, { padding = 2 })
  y:backward(g1)
end)
bench('conv2 fwd', function() ember.no_grad(function() F.conv2d(h, w2, b2, { padding = 2 }) end) end)
bench('conv2 fwd+bwd (x, w, b)', function()
  local y = F.conv2d(h, w2, b2, { padding = 2 })
  y:backward(g2)
end)
local p1 = ember.randn(64, 32, 28, 28):requires_grad_()
bench('maxpool2 [64,32,28,28] fwd+bwd', function()
  local y = F.max_pool2d(p1, 2)
  y:backward(ember.ones(64, 32, 14, 14))
end)
