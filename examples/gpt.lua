-- The second main job: trains a character-level GPT (nanoGPT's model, lua/ember/models/gpt.lua)
-- on the text of Debian's `fortunes` package and reports, every --eval-interval steps, the
-- training and validation loss, the learning rate and the throughput, with a generated sample;
-- it ends with a longer sample. `make gpt` runs it with the defaults, which finish on a 2-core
-- CPU in under 15 minutes. `ember examples/gpt.lua --help` lists the options.
--
-- The data: every plain-text fortune file of the folder (names without an extension; the
-- .dat indexes and .u8 links are left out), concatenated in sorted name order. Characters are
-- bytes: the vocabulary is the set of bytes that occur, in byte order. The first 90% of the text
-- trains, the last 10% validates. Training batches are windows at random offsets (ember.randint,
-- seeded); the validation loss is the mean over fixed, evenly spaced windows of the validation
-- text, the same at every evaluation. examples/gpt_torch.py trains the same model on the same
-- split with PyTorch.
--
-- A checkpoint (model, optimizer, random-number state, step, config, vocabulary) is written at
-- every evaluation; --resume continues from one exactly: the losses that follow are those of a
-- run that was never interrupted. examples/generate.lua samples from a checkpoint.
--
-- Under mpirun (`mpirun -np 4 ember examples/gpt.lua`, or `ember run --nproc 4 ...`) each
-- process trains on its own device through nn.DistributedDataParallel, --batch-size
-- sequences each: every step draws the windows of all processes from the shared, seeded
-- stream and each takes its share, so W processes of batch B train on what one process of
-- batch W*B would. Rank 0 evaluates, samples, prints and writes the checkpoints.
local cli = require 'ember.util.cli'
local G = require 'ember.models.gpt'
local ffi = require 'ffi'

local options = {
  { 'data', '/usr/share/games/fortunes', 'a folder of fortune files, or one text file' },
  { 'n_layer', 4, 'transformer blocks' },
  { 'n_head', 4, 'attention heads' },
  { 'n_embd', 128, 'embedding width' },
  { 'block_size', 128, 'context length (characters)' },
  { 'batch_size', 16, 'sequences per training batch' },
  { 'dropout', 0.0, 'dropout probability' },
  { 'steps', 2000, 'training steps' },
  { 'stop', 0, 'stop after this step (0: at --steps); --resume continues the same schedule' },
  { 'lr', 2e-3, 'peak learning rate (AdamW)' },
  { 'min_lr', 0, 'final learning rate of the cosine decay (0: lr / 10)' },
  { 'warmup', 100, 'linear warm-up steps' },
  { 'weight_decay', 0.1, 'AdamW weight decay of the 2-D weights' },
  { 'grad_clip', 1.0, 'clip the gradients to this total norm (0: no clipping)' },
  { 'eval_interval', 250, 'steps between evaluations, samples and checkpoints' },
  { 'eval_batches', 8, 'validation batches (of --batch-size windows) per evaluation' },
  { 'sample_tokens', 200, 'characters sampled at each evaluation (0: none)' },
  { 'final_tokens', 600, 'characters sampled at the end' },
  { 'precision', 'fp32', 'fp32, bf16 (autocast) or fp16 (autocast and loss scaling)' },
  { 'device', os.getenv('EMBER_DEVICE') or 'auto', 'auto, cpu or vulkan[:N]' },
  { 'threads', 0, 'CPU threads (0: all cores)' },
  { 'profile', '', 'profile steps 3-5: print the op table, write this Chrome trace ("" for none)' },
  { 'seed', 1337, 'random seed (weights, batches, dropout)' },
  { 'checkpoint', 'gpt.ckpt', 'checkpoint written at every evaluation ("" for none)' },
  { 'resume', nil, 'checkpoint to resume from (its model config is used)', 'string' },
  { 'plot', nil, 'write the training and validation loss curves to this PNG file at the end', 'string' },
}

local opts, help = cli.parse(arg, options, 'usage: ember examples/gpt.lua [options] [key=value ...]')
if not opts then print(help) return end
io.stdout:setvbuf('line') -- progress shows as it comes, also in a log file

opts.precision = require('ember.precision').check(opts.precision, '--precision', 0)
local function positive(name)
  local v = opts[name]
  if v < 1 or v % 1 ~= 0 then
    error(('--%s: expected a positive integer, got %s'):format(name:gsub('_', '-'), tostring(v)), 0)
  end
end
for _, k in ipairs({ 'n_layer', 'n_head', 'n_embd', 'block_size', 'batch_size', 'steps',
  'eval_interval', 'eval_batches' }) do positive(k) end
if opts.threads > 0 then ember.set_num_threads(opts.threads) end
if opts.min_lr == 0 then opts.min_lr = opts.lr / 10 end
local dist = os.getenv('OMPI_COMM_WORLD_SIZE') and ember.distributed
if dist then dist.init({ device = opts.device }) end
local device = dist and dist.device() or ember.device(opts.device).name
local world, rank = dist and dist.world_size() or 1, dist and dist.rank() or 0
local function print0(...) if rank == 0 then print(...) end end

-- ---- data -----------------------------------------------------------------------------------
local function read_file(path)
  local f, err = io.open(path, 'rb')
  if not f then error('gpt: cannot read ' .. tostring(err), 0) end
  local s = f:read('*a')
  f:close()
  return s
end

-- The text: one file, or the folder's fortune files (regular files whose names have no '.').
local function read_corpus(path)
  local f = io.open(path .. '/.', 'rb')
  if not f then return read_file(path), { path } end
  f:close()
  local names = {}
  local p = io.popen("find '" .. path:gsub("'", "'\\''") .. "' -maxdepth 1 -type f -printf '%f\\n'")
  for name in p:lines() do
    if not name:find('.', 1, true) then names[#names + 1] = name end
  end
  p:close()
  table.sort(names)
  if #names == 0 then
    error(('gpt: no fortune files in %s (install Debian\'s fortunes package)'):format(path), 0)
  end
  local parts = {}
  for i, name in ipairs(names) do parts[i] = read_file(path .. '/' .. name) end
  return table.concat(parts), names
end

-- ids: int64 tensor of the text's bytes as vocabulary ids 1..V (1-based, as Lua indexes).
local function encode(text, vocab_of)
  local n = #text
  local t = ember.empty(n, { dtype = 'int64' })
  local dst, src = ffi.cast('int64_t *', t:data_ptr()), ffi.cast('const uint8_t *', text)
  for i = 0, n - 1 do dst[i] = vocab_of[src[i]] end
  return t
end

-- ---- model, optimizer, checkpoint ------------------------------------------------------------
local ckpt = opts.resume and ember.load(opts.resume)
local text, files = read_corpus(opts.data)
local chars -- the vocabulary: byte values in order
if ckpt then
  chars = ckpt.vocab:totable()
else
  local seen = {}
  for i = 1, #text do seen[text:byte(i)] = true end
  chars = {}
  for b = 0, 255 do if seen[b] then chars[#chars + 1] = b end end
end
local vocab_of = ffi.new('int64_t[256]')
for i, b in ipairs(chars) do vocab_of[b] = i end
for i = 1, #text do
  if vocab_of[text:byte(i)] == 0 then
    error(('gpt: the text has byte %d, which the checkpoint\'s vocabulary lacks'):format(text:byte(i)), 0)
  end
end
local data = encode(text, vocab_of)
local n_train = math.floor(0.9 * data:size(1))
local train_data = data:narrow(1, 1, n_train)
local val_data = data:narrow(1, n_train + 1, data:size(1) - n_train)

local config = ckpt and ckpt.config or {
  vocab_size = #chars, block_size = opts.block_size, n_layer = opts.n_layer,
  n_head = opts.n_head, n_embd = opts.n_embd, dropout = opts.dropout,
}
local T, B = config.block_size, opts.batch_size
if val_data:size(1) < T + 2 then error('gpt: the text is too short for --block-size ' .. T, 0) end

ember.manual_seed(opts.seed)
local model = G.GPT(config):to(device)
local optimizer = G.optimizer(model, { lr = opts.lr, weight_decay = opts.weight_decay })
local precision = require('ember.precision').new(opts.precision, device)
local step = 0
if ckpt then
  model:load_state_dict(ckpt.model)
  optimizer:load_state_dict(ckpt.optimizer)
  precision:load_state_dict(ckpt.scaler)
  ember.set_rng_state(ckpt.rng)
  step = ckpt.step
end
-- under mpirun: the wrapper whose gradient hooks average over the processes (the training
-- below calls model:loss, which the hooks see the same)
local ddp = dist and ember.nn.DistributedDataParallel(model)

local function save(path)
  local write = ddp and function(p, t) ddp:save_checkpoint(p, t) end or ember.save
  write(path, { model = model:state_dict(), optimizer = optimizer:state_dict(),
    rng = ember.get_rng_state(), step = step, config = config,
    vocab = ember.tensor(chars, { dtype = 'uint8' }), scaler = precision:state_dict() })
end

-- ---- batches --------------------------------------------------------------------------------
local offsets_1T = ember.arange(1, T + 1, { dtype = 'int64' }):view(1, T)

-- The windows starting at 0-based offsets `starts` (int64 [n]) of `split`: inputs and targets
-- (the same shifted by one), int64 [n, T] on the device.
local function windows(split, starts)
  local n = starts:size(1)
  local pos = (starts:view(n, 1) + offsets_1T):view(-1)
  local x = split:index_select(1, pos):view(n, T)
  local y = split:index_select(1, pos + 1):view(n, T)
  return x:to(device), y:to(device)
end

local function train_batch()
  local starts = ember.randint(0, train_data:size(1) - T, { B * world })
  if world > 1 then starts = starts:narrow(1, rank * B + 1, B) end
  return windows(train_data, starts)
end

-- Evenly spaced windows of the validation text: eval_batches batches, the same every time.
-- (Batches of the whole step's windows, world * B, so that W processes of batch B validate on
-- what one process of batch W*B does.)
local val_batches = {}
do
  local VB = B * world
  local count, span = opts.eval_batches * VB, val_data:size(1) - T - 1
  for b = 0, opts.eval_batches - 1 do
    local starts = {}
    for j = b * VB, b * VB + VB - 1 do
      starts[#starts + 1] = count > 1 and math.floor(j * span / (count - 1)) or 0
    end
    val_batches[#val_batches + 1] = { windows(val_data, ember.tensor(starts, { dtype = 'int64' })) }
  end
end

local function evaluate()
  model:evaluate()
  local total
  ember.no_grad(function()
    for _, xy in ipairs(val_batches) do
      local loss = precision:forward(function() return model:loss(xy[1], xy[2]) end):float()
      total = total and total + loss or loss
    end
  end)
  model:train()
  return total:item() / #val_batches
end

local function decode(ids)
  local bytes = {}
  for i, id in ipairs(ids) do bytes[i] = string.char(chars[id]) end
  return table.concat(bytes)
end

-- A sample that leaves the training's random stream as it was (its own seed): a run that
-- samples and one that does not, or resumes, train on the same numbers.
local newline = vocab_of[10] > 0 and tonumber(vocab_of[10]) or 1
local function sample(n)
  local state = ember.get_rng_state()
  ember.manual_seed(opts.seed + step)
  local ids = precision:forward(function()
    return G.generate(model, { newline }, n, { temperature = 0.8, top_k = 40 })
  end)
  ember.set_rng_state(state)
  return decode(ids)
end

-- ---- training -------------------------------------------------------------------------------
print0(('fortunes: %d files, %d characters (%d train, %d validation), vocabulary %d'):format(#files,
  data:size(1), train_data:size(1), val_data:size(1), #chars))
print0(('GPT: %d layers, %d heads, width %d, context %d, %.2fM parameters; batch %d, %d steps, ' ..
  'on %s, %s, %d threads'):format(config.n_layer, config.n_head, config.n_embd, T,
  model:num_params() / 1e6, B, opts.steps, device, precision.name, ember.get_num_threads()))
if dist then print0(('data parallel: %d processes, batch %d each'):format(world, B)) end
if ckpt then print0(('resumed from %s at step %d'):format(opts.resume, step)) end

local schedule = { lr = opts.lr, min_lr = opts.min_lr, warmup = opts.warmup, steps = opts.steps }
local params = model:parameters()
local clip = opts.grad_clip > 0 and { clip = opts.grad_clip, params = params } or nil
local wall0 = ember.clock()
local interval_start, loss_total, interval_steps = wall0, nil, 0
local val_loss
local curves = { step = {}, train = {}, val = {} } -- for --plot: one point per evaluation
local last = opts.stop > 0 and math.min(opts.stop, opts.steps) or opts.steps
-- --profile: a step unrecorded, one of warm-up, three recorded (docs/profiling.md)
local prof = opts.profile ~= '' and ember.profiler.profile({ record_shapes = true,
  profile_memory = true, schedule = { wait = 1, warmup = 1, active = 3, ['repeat'] = 1 },
  on_trace_ready = function(p)
    print(p:key_averages():table({ sort_by = 'self_cpu_time_total', row_limit = 20 }))
    print('trace: ' .. p:export_chrome_trace(opts.profile))
  end }):start()
while step < last do
  step = step + 1
  local lr = G.lr_at(step, schedule)
  for _, group in ipairs(optimizer.param_groups) do group.lr = lr end
  local x, y = train_batch()
  optimizer:zero_grad()
  local loss = precision:forward(function() return model:loss(x, y) end)
  precision:step(loss, optimizer, clip)
  if prof then prof:step() end
  -- the losses add up on the device; reading one back would wait for it every step
  loss = loss:detach():float()
  loss_total = loss_total and loss_total + loss or loss
  interval_steps = interval_steps + 1
  if step % opts.eval_interval == 0 or step == last then
    if dist then dist.all_reduce(loss_total, { op = 'avg' }) end -- the mean over the processes
    local train_loss = loss_total:item() / interval_steps -- waits for the device
    local tokens_per_s = world * interval_steps * B * T / (ember.clock() - interval_start)
    if rank == 0 then -- the others go on to the next step's first all-reduce
      val_loss = evaluate()
      curves.step[#curves.step + 1] = step
      curves.train[#curves.train + 1], curves.val[#curves.val + 1] = train_loss, val_loss
      print(('step %d/%d: train loss %.4f, val loss %.4f, lr %.2e, %.0f tokens/s, %.0f s'):format(step,
        opts.steps, train_loss, val_loss, lr, tokens_per_s, ember.clock() - wall0))
      if opts.sample_tokens > 0 and step < opts.steps then
        print('  sample: ' .. sample(opts.sample_tokens):gsub('\n', '\n          '))
      end
    end
    if opts.checkpoint ~= '' then save(opts.checkpoint) end
    interval_start, loss_total, interval_steps = ember.clock(), nil, 0
  end
end

if prof then prof:stop() end
if val_loss and step == opts.steps then print(('final validation loss: %.4f'):format(val_loss)) end
if opts.final_tokens > 0 and step == opts.steps and rank == 0 then
  print('generated text:')
  print(sample(opts.final_tokens))
end
if opts.plot and rank == 0 then
  ember.plot.lines(opts.plot, {
    { name = ('train (mean of %d steps)'):format(opts.eval_interval), x = curves.step, y = curves.train },
    { name = 'validation', x = curves.step, y = curves.val },
  }, { title = ('GPT on fortunes: %d layers, width %d'):format(config.n_layer, config.n_embd),
       xlabel = 'step', ylabel = 'cross-entropy' })
  print('loss curves written to ' .. opts.plot)
end
if dist then dist.finalize() end
return val_loss
