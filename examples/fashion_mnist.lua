-- Trains a classifier on Fashion-MNIST (Debian's dataset-fashion-mnist package) and reports,
-- per epoch, the training loss, the test accuracy and the throughput. `make run` runs it with
-- the defaults: the "2 Conv+pooling" network of the dataset's benchmark (reference test
-- accuracy 0.916). `ember examples/fashion_mnist.lua --help` lists the options.
--
-- Under mpirun (`mpirun -np 2 ember examples/fashion_mnist.lua`, or `ember run --nproc 2 ...`)
-- every process trains a shard of each epoch (ember.data.DistributedSampler) on its own
-- device with nn.DistributedDataParallel; --batch-size is per process. Rank 0 evaluates,
-- prints and writes the checkpoint, which resumes at any number of processes (docs/ddp.md).
local cli = require 'ember.util.cli'
local nn, optim = ember.nn, ember.optim

local options = {
  { 'model', 'cnn', 'cnn (conv5x5-32, pool, conv5x5-64, pool, fc1024, dropout, fc10) or mlp (784-256-128-10)' },
  { 'epochs', 0, 'training epochs (0: 6 for the cnn, 20 for the mlp)' },
  { 'batch_size', 64, 'samples per training batch' },
  { 'lr', 1e-3, 'learning rate' },
  { 'optimizer', 'adam', 'sgd (momentum 0.9), adam or adamw' },
  { 'precision', 'fp32', 'fp32, bf16 (autocast) or fp16 (autocast and loss scaling)' },
  { 'device', os.getenv('EMBER_DEVICE') or 'auto', 'auto, cpu or vulkan[:N]' },
  { 'threads', 0, 'CPU threads (0: all cores)' },
  { 'seed', 1, 'random seed (weights, dropout, data order)' },
  { 'workers', 1, 'data-loader worker threads' },
  { 'data', '/usr/share/datasets/fashion-mnist', 'folder with the IDX files' },
  { 'checkpoint', 'fashion_mnist.ckpt', 'checkpoint written after every epoch ("" for none)' },
  { 'resume', nil, 'checkpoint to resume from', 'string' },
  { 'limit', 0, 'use only the first N training samples (0: all)' },
  { 'plot', nil, 'write the loss and accuracy curves to this PNG file at the end', 'string' },
}

local opts, help = cli.parse(arg, options, 'usage: ember examples/fashion_mnist.lua [options] [key=value ...]')
if not opts then print(help) return end

opts.precision = require('ember.precision').check(opts.precision, '--precision', 0)
if opts.epochs == 0 then opts.epochs = opts.model == 'mlp' and 20 or 6 end
if opts.threads > 0 then ember.set_num_threads(opts.threads) end
local device = opts.device
-- Under mpirun: one process per device, each taking its local rank's (ember.distributed).
local dist = os.getenv('OMPI_COMM_WORLD_SIZE') and ember.distributed
if dist then
  dist.init({ device = device })
  device = dist.device()
end
local world, rank = dist and dist.world_size() or 1, dist and dist.rank() or 0
local function print0(...) if rank == 0 then print(...) end end
local quiet = { write = function() end, flush = function() end } -- other ranks' progress bars
ember.manual_seed(opts.seed)

-- ---- data ---------------------------------------------------------------------------------
local MEAN, STD = 0.2860, 0.3530 -- Fashion-MNIST training-set pixel statistics

local function load_split(prefix)
  local images = ember.data.read_idx(opts.data .. '/' .. prefix .. '-images-idx3-ubyte.gz')
  local labels = ember.data.read_idx(opts.data .. '/' .. prefix .. '-labels-idx1-ubyte.gz')
  local x = ((images:float() / 255) - MEAN) / STD
  local y = labels:long() + 1 -- classes 1..10, as Torch7 counts
  if opts.model == 'cnn' then x = x:view(-1, 1, 28, 28) else x = x:view(-1, 784) end
  return x:contiguous(), y
end

local train_x, train_y = load_split('train')
local test_x, test_y = load_split('t10k')
if opts.limit > 0 then
  train_x, train_y = train_x:narrow(1, 1, opts.limit):contiguous(), train_y:narrow(1, 1, opts.limit):contiguous()
end

-- ---- model ----------------------------------------------------------------------------------
if opts.model ~= 'cnn' and opts.model ~= 'mlp' then
  error("--model must be cnn or mlp, got '" .. tostring(opts.model) .. "'", 0)
end
local model = require('ember.models').build(opts.model):to(device)
-- net trains (gradients averaged over the processes under mpirun); model evaluates and saves
local net = dist and ember.nn.DistributedDataParallel(model) or model
-- Mixed precision (ember.precision): parameters stay float32; the forward runs under autocast.
local precision = require('ember.precision').new(opts.precision, device)
local criterion = nn.CrossEntropyLoss()
local params = model:parameters()
local optimizer
if opts.optimizer == 'sgd' then optimizer = optim.SGD(params, { lr = opts.lr, momentum = 0.9 })
elseif opts.optimizer == 'adam' then optimizer = optim.Adam(params, { lr = opts.lr })
elseif opts.optimizer == 'adamw' then optimizer = optim.AdamW(params, { lr = opts.lr })
else error("--optimizer must be sgd, adam or adamw, got '" .. opts.optimizer .. "'", 0) end

local train_set = ember.data.TensorDataset(train_x, train_y)
local loader = ember.data.DataLoader(train_set, {
  batch_size = opts.batch_size, num_workers = opts.workers, shuffle = not dist or nil,
  seed = not dist and opts.seed or nil,
  sampler = dist and ember.data.DistributedSampler(train_set, { seed = opts.seed }) or nil })

local first_epoch = 1
if opts.resume then
  local ckpt = ember.load(opts.resume)
  model:load_state_dict(ckpt.model)
  optimizer:load_state_dict(ckpt.optimizer)
  ember.set_rng_state(ckpt.rng)
  precision:load_state_dict(ckpt.scaler)
  first_epoch = ckpt.epoch + 1
  print0(('resumed from %s after epoch %d'):format(opts.resume, ckpt.epoch))
end

print0(('Fashion-MNIST: %d training and %d test images; model %s on %s, %s, %d threads'):format(
  train_x:size(1), test_x:size(1), opts.model, ember.get_default_device and tostring(device) or device,
  precision.name, ember.get_num_threads()))
if dist then print0(('data parallel: %d processes, batch %d each'):format(world, opts.batch_size)) end
print0(model)

-- ---- training -------------------------------------------------------------------------------
local function evaluate()
  model:evaluate()
  local correct = 0
  ember.no_grad(function()
    local n, bs = test_x:size(1), 1000
    for start = 1, n, bs do
      local len = math.min(bs, n - start + 1)
      local x = test_x:narrow(1, start, len):to(device)
      local pred = precision:forward(model, x):argmax(2)
      correct = correct + pred:eq(test_y:narrow(1, start, len):to(device)):sum():item()
    end
  end)
  return correct / test_x:size(1)
end

-- The curves for --plot: the mean training loss of every `window` batches (50, fewer for a
-- small --limit; x in epochs) and the test accuracy after each epoch.
local curves = { loss_x = {}, loss = {}, epoch = {}, accuracy = {} }
local window_size = math.min(50, math.max(1, math.floor(#loader / 10)))

local accuracy
for epoch = first_epoch, opts.epochs do
  model:train()
  loader:set_epoch(epoch)
  local bar = ember.progress(#loader, { desc = ('epoch %d/%d'):format(epoch, opts.epochs),
    out = rank ~= 0 and quiet or nil })
  local t0, seen, loss_sum, batches = os.clock(), 0, 0, 0
  local loss_total, shown, window
  local wall0 = ember.clock and ember.clock() or os.time()
  for x, y in loader:iter() do
    x, y = x:to(device), y:to(device)
    optimizer:zero_grad()
    local loss = precision:forward(function() return criterion(net(x), y) end)
    precision:step(loss, optimizer)
    -- The losses add up on the device; reading one back waits for the device, so the bar
    -- shows it every 50 batches (a GPU runs ahead of the host meanwhile).
    loss_total = loss_total and loss_total + loss:detach() or loss:detach()
    window = window and window + loss:detach() or loss:detach()
    batches, seen = batches + 1, seen + x:size(1)
    if batches % 50 == 0 then shown = loss:item() end
    if batches % window_size == 0 then
      curves.loss_x[#curves.loss_x + 1] = epoch - 1 + batches / #loader
      curves.loss[#curves.loss + 1] = window:item() / window_size
      window = nil
    end
    bar:update(1, { loss = shown })
  end
  if loss_total and dist then dist.all_reduce(loss_total, { op = 'avg' }) end -- over processes
  if loss_total then loss_sum = loss_total:item() end
  bar:close()
  local elapsed = (ember.clock and ember.clock() or os.time()) - wall0
  if elapsed <= 0 then elapsed = os.clock() - t0 end
  if rank == 0 then -- the other processes go on to the next epoch's first all-reduce
    accuracy = evaluate()
    curves.epoch[#curves.epoch + 1], curves.accuracy[#curves.accuracy + 1] = epoch, accuracy
    print(('epoch %d: train loss %.4f, test accuracy %.4f, %.0f samples/s'):format(epoch,
      loss_sum / math.max(batches, 1), accuracy, world * seen / elapsed))
  end
  if opts.checkpoint ~= '' then
    local state = { model = model:state_dict(), optimizer = optimizer:state_dict(),
      epoch = epoch, rng = ember.get_rng_state(), model_kind = opts.model,
      scaler = precision:state_dict() }
    if dist then net:save_checkpoint(opts.checkpoint, state) else ember.save(opts.checkpoint, state) end
  end
end

if accuracy then print(('final test accuracy: %.4f'):format(accuracy)) end
if opts.plot and rank == 0 then
  ember.plot.figure(opts.plot, {
    { series = { { name = window_size == 1 and 'train loss (per batch)' or
      ('train loss (mean of %d batches)'):format(window_size), x = curves.loss_x,
      y = curves.loss } },
      title = 'Fashion-MNIST ' .. opts.model .. ': training loss', xlabel = 'epoch', ylabel = 'cross-entropy' },
    { series = { { name = 'test accuracy', x = curves.epoch, y = curves.accuracy } },
      title = 'test accuracy', xlabel = 'epoch', ylabel = 'accuracy' },
  })
  print('curves written to ' .. opts.plot)
end
if dist then dist.finalize() end
return accuracy
