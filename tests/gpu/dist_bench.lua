-- all_reduce bandwidth across ranks (run under mpirun; tests/gpu/dist_bench.sh starts it):
--   mpirun -np N ember tests/gpu/dist_bench.lua [--device auto|vulkan] [--min-mb 1] [--max-mb 1024]
-- For float32 tensors of 1 MiB .. 1 GiB (x4 steps), on the CPU (host memory: what MPI's transport
-- alone gives) and on each rank's GPU (staged through pinned host memory in chunks), it reports
-- the time of one all_reduce (sum; the slowest rank's, median of the repeats) and the bus
-- bandwidth as nccl-tests define it: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n, the
-- figure comparable across rank counts and against a link's speed. In the same run each rank
-- measures its device's host-staging limits: device -> pinned host and pinned host -> device
-- copy bandwidth of 256 MiB (all ranks at once, as during an all_reduce). A staged all_reduce
-- cannot beat about 1 / (1/d2h + 1/mpi + 1/h2d) of those without overlap, or their minimum with
-- full overlap; the gap to a device-to-device path (NCCL) is what docs/performance.md records.
-- Rank 0 prints the table; with --json FILE it also writes the figures there.
local dist = ember.distributed

local opts = { device = 'auto', min_mb = 1, max_mb = 1024, json = nil, staging_mb = 256 }
do
  local args, i = { ... }, 1
  while i <= #args do
    local k = args[i]:match('^%-%-([%w-]+)$')
    if not k or args[i + 1] == nil then error('dist_bench: bad argument ' .. tostring(args[i])) end
    k = k:gsub('-', '_')
    if opts[k] == nil and k ~= 'json' then error('dist_bench: unknown option --' .. k) end
    opts[k] = tonumber(args[i + 1]) or args[i + 1]
    i = i + 2
  end
end

dist.init({ device = opts.device, timeout = 600 })
local rank, n = dist.rank(), dist.world_size()
local dev = dist.device()

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s[math.floor((#s + 1) / 2)]
end

-- The slowest rank's value of each entry (a collective timing is as slow as its slowest rank).
local function slowest(list)
  local t = ember.tensor(list, { dtype = 'float64', device = 'cpu' })
  dist.all_reduce(t, { op = 'max' })
  local out = {}
  for i = 1, #list do out[i] = t[i] end
  return out
end

-- Times f (repeats chosen from the size), synchronizing the device after each call.
local function time_op(f, bytes, device)
  local reps = math.max(3, math.min(30, math.floor(4e9 / bytes)))
  f(); f() -- warm-up: pipelines, pinned buffers, MPI's connections
  if device ~= 'cpu' then ember.synchronize(device) end
  local times = {}
  for i = 1, reps do
    dist.barrier()
    local t0 = ember.clock()
    f()
    if device ~= 'cpu' then ember.synchronize(device) end
    times[i] = ember.clock() - t0
  end
  return median(slowest(times))
end

local results = { world_size = n, device = dev, rows = {}, staging = {} }

-- host-staging limits of the device (each rank its own device, all at once)
if dev ~= 'cpu' then
  local numel = opts.staging_mb * 1024 * 1024 / 4
  local x = ember.rand(numel, { device = dev })
  local pinned = ember.empty(numel, { device = 'cpu' }):pin_memory(dev)
  local d2h = time_op(function() pinned:copy_(x) end, numel * 4, dev)
  local h2d = time_op(function() x:copy_(pinned) end, numel * 4, dev)
  results.staging = { d2h_GBs = numel * 4 / d2h / 1e9, h2d_GBs = numel * 4 / h2d / 1e9,
                      mb = opts.staging_mb }
end

local devices = { 'cpu' }
if dev ~= 'cpu' then devices[2] = dev end
local mb = opts.min_mb
while mb <= opts.max_mb do
  local numel = math.floor(mb * 1024 * 1024 / 4)
  for _, d in ipairs(devices) do
    local t = ember.rand(numel, { device = d })
    local s = time_op(function() dist.all_reduce(t) end, numel * 4, d)
    local algbw = numel * 4 / s / 1e9
    results.rows[#results.rows + 1] = { mb = mb, device = d, ms = s * 1e3, algbw_GBs = algbw,
                                        busbw_GBs = algbw * 2 * (n - 1) / n }
    t = nil
    collectgarbage()
  end
  mb = mb * 4
end

if rank == 0 then
  print(('all_reduce float32 sum over %d ranks; each rank on %s'):format(n, dev))
  if results.staging.d2h_GBs then
    print(('host staging (%d MiB, every rank at once): device->pinned %.1f GB/s, ' ..
      'pinned->device %.1f GB/s'):format(results.staging.mb, results.staging.d2h_GBs,
      results.staging.h2d_GBs))
  end
  print(('%10s %-10s %10s %12s %12s'):format('size', 'tensors', 'time (ms)', 'algbw GB/s', 'busbw GB/s'))
  for _, r in ipairs(results.rows) do
    print(('%7d MiB %-10s %10.3f %12.2f %12.2f'):format(r.mb, r.device, r.ms, r.algbw_GBs, r.busbw_GBs))
  end
  if opts.json then
    local parts = {}
    for _, r in ipairs(results.rows) do
      parts[#parts + 1] = ('{"mb":%d,"device":"%s","ms":%.4f,"algbw_GBs":%.3f,"busbw_GBs":%.3f}')
        :format(r.mb, r.device, r.ms, r.algbw_GBs, r.busbw_GBs)
    end
    local f = assert(io.open(opts.json, 'w'))
    f:write(('{"world_size":%d,"device":"%s","staging":{"d2h_GBs":%s,"h2d_GBs":%s},"rows":[%s]}\n')
      :format(n, dev, tostring(results.staging.d2h_GBs or 'null'),
        tostring(results.staging.h2d_GBs or 'null'), table.concat(parts, ',')))
    f:close()
  end
end
dist.finalize()
