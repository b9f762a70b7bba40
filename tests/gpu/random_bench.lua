-- GPU benchmark of the random and optimizer kernels (kernels/random.comp, kernels/optim.comp)
-- against PyTorch CUDA in the same run: rand / randn / bernoulli_ fills of 64M float32, and
-- fused SGD (momentum) / Adam steps over 16M float32 parameters.
--   ember tests/gpu/random_bench.lua [device]
local dev = ember.device(arg[1] or 'vulkan').name
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  f(); ember.synchronize(dev)
  local s = {}
  for i = 1, reps do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end
local n = (tonumber(arg[2]) or 64) * 1024 * 1024 -- arg 2: millions of values (default 64)
local x = ember.empty(n, { device = dev })
local function report(what, s, bytes)
  print(('ember %-10s %8.3f ms %8.1f GB/s'):format(what, s * 1e3, bytes / s / 1e9))
end
report('rand', time(function() x:uniform_() end, 9), 4 * n)
report('randn', time(function() x:normal_() end, 9), 4 * n)
report('bernoulli', time(function() x:bernoulli_(0.5) end, 9), 4 * n)
local m = math.floor(n / 4)
local p, g = ember.rand(m, { device = dev }):requires_grad_(), ember.rand(m, { device = dev })
local opt_sgd = ember.optim.SGD({ p }, { lr = 0.01, momentum = 0.9 })
local opt_adam = ember.optim.Adam({ p }, { lr = 0.001 })
p.grad = g
ember.no_grad(function()
  report('sgd_mom', time(function() opt_sgd:step() end, 9), 5 * 4 * m)
  report('adam', time(function() opt_adam:step() end, 9), 7 * 4 * m)
end)
local f = io.popen([[python3 - <<'PY'
import torch, time
d = 'cuda'
def t(f, reps=9):
    f(); torch.cuda.synchronize(); s = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); torch.cuda.synchronize(); s.append(time.perf_counter() - t0)
    s.sort(); return s[len(s) // 2]
n = 64 * 1024 * 1024
x = torch.empty(n, device=d)
for name, fn, b in [('rand', lambda: x.uniform_(), 4 * n), ('randn', lambda: x.normal_(), 4 * n),
                    ('bernoulli', lambda: x.bernoulli_(0.5), 4 * n)]:
    s = t(fn); print('torch %-10s %8.3f ms %8.1f GB/s' % (name, s * 1e3, b / s / 1e9))
m = 16 * 1024 * 1024
p = torch.rand(m, device=d, requires_grad=True); p.grad = torch.rand(m, device=d)
for name, o, b in [('sgd_mom', torch.optim.SGD([p], lr=0.01, momentum=0.9, foreach=False, fused=False), 5 * 4 * m),
                   ('adam', torch.optim.Adam([p], lr=0.001, fused=True), 7 * 4 * m)]:
    s = t(o.step); print('torch %-10s %8.3f ms %8.1f GB/s' % (name, s * 1e3, b / s / 1e9))
PY]])
io.write(f:read('*a'))
f:close()
