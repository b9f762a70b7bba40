-- GPU benchmark: a large elementwise op on the Vulkan device, as bandwidth (bytes read plus
-- written per second), against PyTorch CUDA on the same GPU in the same run.
--   ember tests/gpu/bench.lua [device]
local dev = ember.device(arg[1] or 'vulkan').name
local n = 256 * 1024 * 1024 -- 1 GiB of float32
local function median(t) table.sort(t) return t[math.floor((#t + 1) / 2)] end
local function time(f, reps)
  local w0 = ember.clock() -- a quarter second of warm-up: an idle GPU raises its clocks slowly
  repeat f(); ember.synchronize(dev) until ember.clock() - w0 > 0.25
  local s = {}
  for i = 1, reps do
    local t0 = ember.clock()
    f()
    ember.synchronize(dev)
    s[i] = ember.clock() - t0
  end
  return median(s)
end
local x = (ember.rand(n / 16):to(dev)):repeat_tensor(16) -- random data, filled on the device
local y = ember.rand(n / 16):to(dev):repeat_tensor(16)
print(('== %s: elementwise ops on %d float32 elements (1 GiB per tensor)'):format(dev, n))
local results = {}
for _, op in ipairs({ 'mul2', 'add' }) do
  local f = op == 'mul2' and function() local z = x * 2 end or function() local z = x + y end
  local s = time(f, 9)
  local bytes = (op == 'mul2' and 2 or 3) * n * 4
  results[op] = bytes / s
  print(('ember %-5s %8.2f ms %8.1f GB/s'):format(op, s * 1e3, bytes / s / 1e9))
end
local p = io.popen('python3 tests/gpu/torch_bench.py 2>&1')
local out = p:read('*a')
p:close()
io.write(out)
for op, bw in pairs(results) do
  local ref = tonumber(out:match('torch ' .. op .. ' %S+ ms%s+(%S+) GB/s'))
  if ref then print(('ratio %-5s %.3f (goal >= 0.95)'):format(op, bw / 1e9 / ref)) end
end
