-- Host-to-device copies on a Vulkan GPU: 256 MiB float32 from ordinary memory (staged) and
-- from pinned memory (x:pin_memory()), synchronized, median of 9, against PyTorch CUDA's
-- x.cuda() from pageable and pinned memory (tests/gpu/torch_transfer.py) in the same run.
--   ember tests/gpu/transfer.lua [device]
local dev = ember.device(arg[1] or 'vulkan').name
local n = 64 * 1024 * 1024
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f)
  local w0 = ember.clock()
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.25
  local s = {}
  for i = 1, 9 do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end
local x = ember.rand(n)
local p = x:pin_memory(dev)
local d = ember.empty(n, { device = dev })
for _, c in ipairs({ { 'pageable', x }, { 'pinned', p } }) do
  local s = time(function() d:copy_(c[2]) end)
  print(('ember h2d %-9s %8.2f ms %8.1f GB/s'):format(c[1], s * 1e3, n * 4 / s / 1e9))
end
assert((d:to('cpu') - x):abs():max():item() == 0, 'the copy differs')
local pipe = io.popen('python3 tests/gpu/torch_transfer.py 2>&1')
io.write(pipe:read('*a'))
pipe:close()
