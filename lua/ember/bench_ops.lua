-- ember.bench_ops: `ember bench --ops`, what each device does at its limits: the bandwidth of a
-- large copy (GB/s, bytes read plus bytes written) and the throughput of square matrix products
-- per dtype (TFLOP/s, 2 n^3 per product), each the median of --repeats synchronized runs and
-- printed beside the device's published peak where Ember knows it (M.peaks).
--
--   ember bench --ops [--devices cpu,vulkan:0] [--size N] [--copy-mb M] [--repeats R]
--
-- --size 0 and --copy-mb 0 (the defaults) pick by device: n = 2048 and 256 MiB on GPUs,
-- n = 512 and 64 MiB on the CPU and CPU-type drivers (lavapipe), so every device finishes in
-- seconds. A dtype whose product fails on a device (a kernel missing) prints why instead.
local M = {}

-- Published peaks, by a substring of the device's description (the first match wins, so the
-- more specific names come first). bandwidth: GB/s of device memory; float32: TFLOP/s of the
-- plain FP32 units (what Ember's tiled kernel uses; not TF32); float16 and bfloat16: dense
-- tensor-core TFLOP/s (without the 2:4 sparsity that doubles the datasheets' headline).
-- Sources: NVIDIA H100 Tensor Core GPU datasheet (H100 SXM5 80GB: 3.35 TB/s, FP32 67, FP16/BF16
-- 989.5 dense; H100 PCIe 80GB: 2.0 TB/s, 51, 756; H100 NVL: 3.9 TB/s, 60, 835), NVIDIA H200
-- Tensor Core GPU datasheet (H200 SXM 141GB: 4.8 TB/s, 67, 989.5; H200 NVL: 4.8 TB/s, 60, 835),
-- NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM: 2.039 TB/s, 19.5, 312; A100 80GB PCIe:
-- 1.935 TB/s, 19.5, 312). Vulkan names an H100 SXM5 "NVIDIA H100 80GB HBM3".
M.peaks = {
  { match = 'H100 PCIe', bandwidth = 2000, float32 = 51.2, float16 = 756, bfloat16 = 756 },
  { match = 'H100 NVL', bandwidth = 3900, float32 = 60, float16 = 835, bfloat16 = 835 },
  { match = 'H100', bandwidth = 3350, float32 = 67, float16 = 989.5, bfloat16 = 989.5 },
  { match = 'H200 NVL', bandwidth = 4800, float32 = 60, float16 = 835, bfloat16 = 835 },
  { match = 'H200', bandwidth = 4800, float32 = 67, float16 = 989.5, bfloat16 = 989.5 },
  { match = 'A100 80GB PCIe', bandwidth = 1935, float32 = 19.5, float16 = 312, bfloat16 = 312 },
  { match = 'A100-SXM4-80GB', bandwidth = 2039, float32 = 19.5, float16 = 312, bfloat16 = 312 },
}

M.dtypes = { 'float32', 'float16', 'bfloat16' }

-- The peak entry for a device description, or nil.
function M.peak_for(description)
  for _, p in ipairs(M.peaks) do
    if description and description:find(p.match, 1, true) then return p end
  end
  return nil
end

local function median(xs)
  table.sort(xs)
  local n = #xs
  return n % 2 == 1 and xs[(n + 1) / 2] or (xs[n / 2] + xs[n / 2 + 1]) / 2
end

-- Times fn (work queued on device) over `repeats` runs, each of enough calls to last about
-- 20 ms (after one untimed call, which also compiles pipelines); returns seconds per call, the
-- median of the runs. Every run is synchronized at both ends.
local function time_op(ember, device, repeats, fn)
  fn()
  ember.synchronize(device)
  local t0 = ember.clock()
  fn()
  ember.synchronize(device)
  local once = math.max(ember.clock() - t0, 1e-7)
  local calls = math.max(1, math.min(200, math.floor(0.02 / once)))
  local runs = {}
  for r = 1, repeats do
    ember.synchronize(device)
    local t = ember.clock()
    for _ = 1, calls do fn() end
    ember.synchronize(device)
    runs[r] = (ember.clock() - t) / calls
  end
  return median(runs)
end

local function is_small(info) return info.type == 'cpu' or info.type == 'software' end

-- One device: {kind = 'copy' | 'matmul', dtype, value, unit, peak, error} rows.
function M.measure(ember, device, opts)
  local info = ember.device(device):info()
  local peak = M.peak_for(info.description)
  local n = opts.size > 0 and opts.size or (is_small(info) and 512 or 2048)
  local mb = opts.copy_mb > 0 and opts.copy_mb or (is_small(info) and 64 or 256)
  local repeats = math.max(1, opts.repeats)
  local rows = {}
  local elems = math.max(1, math.floor(mb * 1024 * 1024 / 4))
  local ok, err = pcall(function()
    local src = ember.ones({ elems }, { device = device })
    local dst = ember.zeros({ elems }, { device = device })
    local s = time_op(ember, device, repeats, function() dst:copy_(src) end)
    rows[#rows + 1] = { kind = 'copy', dtype = 'float32', size = elems * 4,
                        value = 2 * elems * 4 / s / 1e9, unit = 'GB/s', peak = peak and peak.bandwidth }
  end)
  if not ok then rows[#rows + 1] = { kind = 'copy', dtype = 'float32', unit = 'GB/s', error = tostring(err) } end
  for _, dt in ipairs(M.dtypes) do
    local row = { kind = 'matmul', dtype = dt, size = n, unit = 'TFLOP/s', peak = peak and peak[dt] }
    ok, err = pcall(function()
      local a = ember.randn({ n, n }, { device = device }):to(dt)
      local b = ember.randn({ n, n }, { device = device }):to(dt)
      local s = time_op(ember, device, repeats, function() return a:matmul(b) end)
      row.value = 2 * n ^ 3 / s / 1e12
    end)
    if not ok then row.error = tostring(err):gsub('^[^:]*:%d+: ', '') end
    rows[#rows + 1] = row
  end
  ember.memory.empty_cache(device)
  return rows, info, n, mb
end

local function value_text(v)
  if v >= 100 then return ('%.0f'):format(v) end
  if v >= 1 then return ('%.2f'):format(v) end
  return ('%.3g'):format(v) -- tiny products on a CPU driver: keep 3 digits, never "0.0000"
end

-- Prints the table; returns the rows of every device ({device =, description =, ...}).
function M.run(ember, opts, devices)
  print(('ember bench --ops: copy (GB/s, read + write) and n x n matmul (TFLOP/s, 2n^3), ' ..
    'median of %d synchronized runs'):format(math.max(1, opts.repeats)))
  print(('%-10s %-32s %-22s %13s %8s %7s'):format('device', 'description', 'measure', 'value',
    'peak', 'of peak'))
  local all = {}
  for _, device in ipairs(devices) do
    local rows, info, n, mb = M.measure(ember, device, opts)
    local desc = (info.type == 'cpu' and ('%d threads, %s'):format(ember.get_num_threads(),
      info.description) or info.description):sub(1, 32)
    for i, row in ipairs(rows) do
      row.device, row.description = device, info.description
      local what = row.kind == 'copy' and ('copy %d MiB'):format(mb) or
          ('matmul %s n=%d'):format(row.dtype, n)
      local unit = row.unit
      local first = i == 1 and device or ''
      local d = i == 1 and desc or ''
      if row.error then
        print(('%-10s %-32s %-22s failed: %s'):format(first, d, what, row.error))
      else
        local peak = row.peak and value_text(row.peak) or 'unknown'
        local frac = row.peak and ('%.2f'):format(row.value / row.peak) or ''
        print(('%-10s %-32s %-22s %13s %8s %7s'):format(first, d, what,
          value_text(row.value) .. ' ' .. (unit == 'GB/s' and 'GB/s' or 'TF/s'), peak, frac))
      end
      all[#all + 1] = row
    end
  end
  return all
end

return M
