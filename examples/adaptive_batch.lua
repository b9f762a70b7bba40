-- The adaptive out-of-memory pattern: train with the largest batch size that fits.
--
-- Each training step runs inside pcall. When a step fails with "out of memory", the script
-- halves the batch size, lets the failed step's tensors go, and retries the same samples;
-- any other error stops the script. Ember's out-of-memory error is an ordinary Lua error
-- that leaves the process and every existing tensor intact (docs/devices.md, "Out of memory"),
-- which is what makes this pattern work.
--
-- The data is random and needs no files: Fashion-MNIST-shaped inputs whose labels a fixed
-- random linear "teacher" assigns, so the loss falls as the model learns. `--limit` caps the
-- device's memory (ember.memory.set_limit) to show the pattern on any machine, the CPU
-- included:
--
--   ember examples/adaptive_batch.lua --device cpu --limit 24M
--
-- `ember examples/adaptive_batch.lua --help` lists the options.
local cli = require 'ember.util.cli'
local models = require 'ember.models'

local options = {
  { 'model', 'mlp', 'mlp (784-256-128-10) or cnn (the Fashion-MNIST CNN), from ember.models' },
  { 'batch_size', 4096, 'the batch size to start from' },
  { 'samples', 16384, 'samples per epoch' },
  { 'epochs', 1, 'training epochs' },
  { 'lr', 1e-3, 'learning rate (Adam)' },
  { 'device', os.getenv('EMBER_DEVICE') or 'auto', 'auto, cpu or vulkan[:N]' },
  { 'limit', nil, 'memory limit for the device: bytes, or a size such as 512K, 64M, 1.5G', 'string' },
  { 'threads', 0, 'CPU threads (0: all cores)' },
  { 'seed', 1, 'random seed (weights, data)' },
}

local opts, help = cli.parse(arg, options, 'usage: ember examples/adaptive_batch.lua [options] [key=value ...]')
if not opts then print(help) return end

-- "64M" -> 67108864. Binary units (K = 1024), as Ember's memory figures are in KiB/MiB/GiB.
local function parse_size(text)
  local number, unit = tostring(text):upper():match('^%s*(%d+%.?%d*)%s*([KMGT]?)I?B?%s*$')
  local scale = { [''] = 1, K = 2 ^ 10, M = 2 ^ 20, G = 2 ^ 30, T = 2 ^ 40 }
  if not number then
    error(('option --limit: expected bytes or a size such as 64M, got %q'):format(tostring(text)), 0)
  end
  return math.floor(tonumber(number) * scale[unit])
end

local function format_bytes(n)
  if n == nil then return 'unknown' end
  local units = { 'B', 'KiB', 'MiB', 'GiB', 'TiB' }
  local i = 1
  while n >= 1024 and i < #units do n, i = n / 1024, i + 1 end
  return i == 1 and ('%d B'):format(n) or ('%.1f %s'):format(n, units[i])
end

if opts.model ~= 'cnn' and opts.model ~= 'mlp' then
  error("--model must be cnn or mlp, got '" .. tostring(opts.model) .. "'", 0)
end
for _, name in ipairs({ 'batch_size', 'samples', 'epochs' }) do
  local v = opts[name]
  if v < 1 or v ~= math.floor(v) then
    error(('--%s must be a positive integer, got %s'):format(name:gsub('_', '-'), tostring(v)), 0)
  end
end
if opts.threads > 0 then ember.set_num_threads(opts.threads) end
ember.manual_seed(opts.seed)
local device = ember.device(opts.device).name -- 'auto' resolved to a name such as 'vulkan:0'

-- The limit covers everything this process allocates on the device: the model, the
-- optimizer's state and each step's activations. Set it first so that all of them count.
if opts.limit then ember.memory.set_limit(device, parse_size(opts.limit)) end

-- ---- model, optimizer, data ----------------------------------------------------------------
local model = models.build(opts.model):to(device)
local criterion = ember.nn.CrossEntropyLoss()
local optimizer = ember.optim.Adam(model:parameters(), { lr = opts.lr })
local shape = models.input_shape[opts.model] -- one sample: {784} or {1, 28, 28}
local features = 1
for _, s in ipairs(shape) do features = features * s end
local teacher = ember.randn(features, 10, { device = device }) -- labels = argmax(x * teacher)

-- One training step on n fresh samples; returns the (detached) mean loss. What it allocates
-- (the batch, the activations, the autograd graph) is referenced from its locals, and from the
-- outputs that the model's modules keep from their last forward (see the recovery below).
local function train_step(n)
  -- Gradients start from zero every step, so a backward pass that an earlier step left half
  -- done adds nothing to this one.
  optimizer:zero_grad()
  local x = ember.randn(n, unpack(shape), { device = device })
  local y = x:view(n, features):mm(teacher):argmax(2) -- classes 1..10
  local loss = criterion(model(x), y)
  loss:backward()
  -- The step needs little memory of its own (Adam allocates its state in the first step,
  -- before the batch size matters), so in practice the failures come earlier, above.
  optimizer:step()
  return loss:detach()
end

local function is_out_of_memory(err)
  return tostring(err):find('out of memory', 1, true) ~= nil
end

-- The error without where it was raised: "out of memory on cpu: tried to allocate ...".
local function oom_message(err)
  return tostring(err):match('out of memory on .*') or tostring(err)
end

print(('model %s on %s; %d samples per epoch, batch size %d to start%s'):format(opts.model,
  device, opts.samples, opts.batch_size,
  opts.limit and ', memory limit ' .. format_bytes(ember.memory.stats(device).limit) or ''))

-- ---- training with an adaptive batch size ----------------------------------------------------
local batch = opts.batch_size
local loss -- the mean loss of the last epoch
local failures = 0
for epoch = 1, opts.epochs do
  model:train()
  local done, steps, loss_total = 0, 0, nil
  while done < opts.samples do
    local n = math.min(batch, opts.samples - done)
    local ok, result = pcall(train_step, n)
    if ok then
      -- The losses add up on the device (weighted by the batch size, since batches differ);
      -- reading one back every step would wait for the device each time.
      loss_total = loss_total and loss_total + result * n or result * n
      done, steps = done + n, steps + 1
    else
      -- Only out-of-memory is recoverable, and only while the batch can still shrink.
      if not is_out_of_memory(result) or n == 1 then error(result, 0) end
      batch = math.floor(n / 2)
      failures = failures + 1
      print(('out of memory at batch %d (%s); batch size now %d'):format(n, oom_message(result), batch))
      -- Drop the failed step's tensors. Its locals went with pcall, but each module still
      -- holds the output of its last forward, and an output holds its autograd graph with the
      -- activations saved for backward: the criterion's output (the loss) holds the whole
      -- failed step. clear_state() lets go of them; the collection then frees them at once,
      -- so the retry starts from what the model and the optimizer hold. The peak starts
      -- afresh, so that the figure printed at the end is that of the batch size that fits.
      model:clear_state()
      criterion:clear_state()
      ember.memory.collect()
      ember.memory.reset_peak(device)
    end
  end
  loss = loss_total:item() / done
  print(('epoch %d: %d steps, loss %.4f, batch size %d'):format(epoch, steps, loss, batch))
end

print(('final batch size %d, loss %.4f'):format(batch, loss))

-- What the model and the optimizer hold now (the collection frees the last step first), the
-- peak of the batch size that fitted, the limit, and the allocations made in all.
model:clear_state()
criterion:clear_state()
ember.memory.collect()
local s = ember.memory.stats(device)
print(('memory on %s: allocated %s, cached %s, peak %s%s, limit %s, %d allocations'):format(
  s.device, format_bytes(s.allocated), format_bytes(s.cached), format_bytes(s.peak),
  failures > 0 and ' (since the last out of memory)' or '',
  s.limit > 0 and format_bytes(s.limit) or 'none', s.num_allocs))
