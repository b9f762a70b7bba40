-- ember.bench: `ember bench`, the device comparison. It trains one of the reference models
-- (ember.models) on random data for a number of steps on each device and prints, per device,
-- the average step time and the throughput, and the speed against the first device (the CPU):
--
--   ember bench --model cnn --batch-size 64 --steps 20
--   model cnn, batch 64, median of 5 runs of 20 steps after 3 warm-up (forward, cross entropy,
--   backward, Adam step)
--   device     description              step (ms)   samples/s   vs cpu
--   cpu        2 threads                    24.10        2656     1.00
--   vulkan:0   NVIDIA H100 80GB HBM3         1.90       33684    12.68
--
-- --precision fp32,bf16,fp16 adds a row per device and precision (ember.precision: autocast
-- with float32 parameters, plus loss scaling for fp16), e.g. `vulkan:0 bf16`; the ratio is
-- always against the first row.
--
-- --ops measures each device's copy bandwidth and matmul throughput per dtype instead, beside
-- its published peak (ember.bench_ops).
--
-- The timed loop synchronizes only at its end, as a training loop that reads its loss now
-- and then does. Devices are `cpu` and every Vulkan GPU unless --devices names them (a
-- CPU-type Vulkan driver such as lavapipe only when named).
local M = {}

local options = {
  { 'model', 'cnn', 'cnn or mlp (ember.models)' },
  { 'batch_size', 64, 'samples per step' },
  { 'steps', 20, 'timed steps per device' },
  { 'warmup', 3, 'untimed steps first (pipelines, caches)' },
  { 'repeats', 5, 'timed runs of --steps steps per device; the median is reported' },
  { 'devices', '', 'comma-separated devices (default: cpu and every Vulkan GPU)' },
  { 'dtype', 'float32', 'parameter and input dtype' },
  { 'precision', 'fp32', 'comma-separated: fp32, bf16 (autocast), fp16 (autocast + loss scaling)' },
  { 'seed', 1, 'random seed' },
  { 'ops', false, 'measure copy bandwidth and matmul TFLOP/s per dtype instead (ember.bench_ops)' },
  { 'size', 0, 'with --ops: the matmul size n (0: 2048 on GPUs, 512 on CPUs)' },
  { 'copy_mb', 0, 'with --ops: MiB copied (0: 256 on GPUs, 64 on CPUs)' },
}

local function default_devices(ember)
  local list = { 'cpu' }
  for _, d in ipairs(ember.devices()) do
    if d.name ~= 'cpu' and (d.type == 'discrete' or d.type == 'integrated') then
      list[#list + 1] = d.name
    end
  end
  return list
end

local function describe(ember, name)
  if name == 'cpu' then return ('%d threads'):format(ember.get_num_threads()) end
  for _, d in ipairs(ember.devices()) do
    if d.name == name then return d.description or '' end
  end
  return ''
end

-- Times `steps` training steps on one device; returns seconds per step.
local function time_device(ember, opts, device, precision)
  local models = require 'ember.models'
  ember.manual_seed(opts.seed)
  local model = models.build(opts.model):to(device)
  if opts.dtype ~= 'float32' then model = model:to(opts.dtype) end
  local recipe = require('ember.precision').new(precision, device)
  local shape = { opts.batch_size }
  for _, s in ipairs(models.input_shape[opts.model]) do shape[#shape + 1] = s end
  local x = ember.randn(shape, { dtype = opts.dtype }):to(device)
  local y = ember.randint(1, 11, { opts.batch_size }):to(device)
  local criterion = ember.nn.CrossEntropyLoss()
  local optimizer = ember.optim.Adam(model:parameters(), { lr = 1e-3 })
  model:train()
  local function step()
    optimizer:zero_grad()
    local loss = recipe:forward(function() return criterion(model(x), y) end)
    recipe:step(loss, optimizer)
    return loss
  end
  for _ = 1, opts.warmup do step() end
  local last = step()
  last:item()
  ember.synchronize()
  -- the median of several runs: one run can catch a collection or the OS
  local runs = {}
  for r = 1, math.max(1, opts.repeats) do
    local t0 = ember.clock()
    for _ = 1, opts.steps do last = step() end
    local value = last:item() -- waits for the device
    ember.synchronize()
    runs[r] = (ember.clock() - t0) / opts.steps
    if value ~= value then error('bench: the loss became NaN on ' .. device, 0) end
  end
  table.sort(runs)
  return runs[math.floor((#runs + 1) / 2)]
end

function M.main(args)
  local ember = require 'ember'
  local cli = require 'ember.util.cli'
  local opts, help = cli.parse(args or {}, options,
    'usage: ember bench [options] [key=value ...]\n' ..
    'Trains a reference model on random data on each device and compares step times.')
  if not opts then print(help) return end
  if not opts.ops and (opts.size ~= 0 or opts.copy_mb ~= 0) then
    error('bench: --size and --copy-mb go with --ops', 0)
  end
  if opts.ops then
    if opts.size < 0 or opts.size ~= math.floor(opts.size) or opts.copy_mb < 0 then
      error(('bench: --size and --copy-mb: expected integers >= 0, got %s and %s'):format(
        opts.size, opts.copy_mb), 0)
    end
    local devices = {}
    for d in opts.devices:gmatch('[^,%s]+') do devices[#devices + 1] = ember.device(d).name end
    return require('ember.bench_ops').run(ember, opts, #devices > 0 and devices or default_devices(ember))
  end
  if require('ember.models').input_shape[opts.model] == nil then
    error("bench: --model must be cnn or mlp, got '" .. tostring(opts.model) .. "'", 0)
  end
  local precisions = {}
  for p in tostring(opts.precision):gmatch('[^,%s]+') do
    precisions[#precisions + 1] = require('ember.precision').check(p, 'bench: --precision', 0)
  end
  if #precisions == 0 then error('bench: --precision: expected fp32, bf16 or fp16', 0) end
  local devices = {}
  if opts.devices ~= '' then
    for d in opts.devices:gmatch('[^,%s]+') do devices[#devices + 1] = ember.device(d).name end
  else
    devices = default_devices(ember)
  end
  print(('model %s, batch %d, median of %d runs of %d steps after %d warm-up (forward, cross entropy, backward, Adam step)')
    :format(opts.model, opts.batch_size, math.max(1, opts.repeats), opts.steps, opts.warmup))
  local function label(device, precision)
    return precision == 'fp32' and #precisions == 1 and device or device .. ' ' .. precision
  end
  print(('%-14s %-32s %10s %11s %8s'):format('device', 'description', 'step (ms)', 'samples/s',
    'vs ' .. label(devices[1], precisions[1])))
  local base
  local results = {}
  for _, device in ipairs(devices) do
    for _, precision in ipairs(precisions) do
      local ok, per_step = pcall(time_device, ember, opts, device, precision)
      local desc = describe(ember, device):sub(1, 32)
      if ok then
        base = base or per_step
        results[#results + 1] = { device = device, precision = precision, step = per_step }
        print(('%-14s %-32s %10.2f %11.0f %8.2f'):format(label(device, precision), desc,
          per_step * 1e3, opts.batch_size / per_step, base / per_step))
      else
        print(('%-14s %-32s failed: %s'):format(label(device, precision), desc, tostring(per_step)))
      end
    end
  end
  return results
end

return M
