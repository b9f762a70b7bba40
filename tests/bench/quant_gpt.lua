-- Benchmark: quantized inference of the GPT example (examples/gpt.lua's checkpoint), per format
-- and device, against the same checkpoint in fp32 in the same run:
--   val loss   the mean cross entropy over evenly spaced windows of the validation text (the
--              last 10% of the corpus, as examples/gpt.lua splits it), and its change against
--              fp32 (goals: q8_0 within 0.5%, q4_k within 3%);
--   weights    bytes of the model's parameters and buffers (the quantized blocks included);
--   tokens/s   greedy generation at batch 1 with the key/value cache (ember.models.gpt's
--              generate), after a warm-up;
--   layers     how many Linear layers and embeddings hold each dtype, and those left dense
--              with the reason (no kernel for the format on the device: reported, not faked).
-- Quantization: ember.models.gpt's quantize; rows that are not whole blocks of a k-quant take
-- its fallback (q4_k: q4_0, q6_k: q8_0), as llama.cpp's k-quants do.
-- Without --checkpoint, a model is first trained by examples/gpt.lua (--train-steps steps)
-- into build/quant_gpt.ckpt, unless that file exists.
-- usage: ember tests/bench/quant_gpt.lua [--checkpoint PATH] [--formats q8_0,q4_0,q4_k]
--        [--devices cpu,vulkan] [--tokens N] [--eval-batches N] [--batch-size N]
--        [--train-steps N] [--data DIR] [--threads N]
local B = dofile('tests/bench/bench.lua')
local G = require 'ember.models.gpt'
local ffi = require 'ffi'

local o = { formats = 'q8_0,q4_0,q4_k', tokens = 64, eval_batches = 8, batch_size = 8,
  train_steps = 600, data = '/usr/share/games/fortunes' }
local KNOWN = { checkpoint = true, formats = true, devices = true, tokens = true,
  eval_batches = true, batch_size = true, train_steps = true, data = true, threads = true }
local args, i = arg or {}, 1
while i <= #args do
  local key = (args[i]:match('^%-%-([%w-]+)$') or ''):gsub('-', '_')
  if not KNOWN[key] or args[i + 1] == nil then
    error(("quant_gpt.lua: unknown or incomplete option '%s'"):format(args[i]), 0)
  end
  o[key] = tonumber(args[i + 1]) or args[i + 1]
  i = i + 2
end
if o.threads then ember.set_num_threads(o.threads) end

local function split(s)
  local t = {}
  for w in tostring(s):gmatch('[^,]+') do t[#t + 1] = w end
  return t
end

-- ---- the checkpoint ---------------------------------------------------------------------------
local path = o.checkpoint
if not path then
  path = 'build/quant_gpt.ckpt'
  local f = io.open(path, 'rb')
  if f then f:close()
  else
    local cmd = ('./build/ember examples/gpt.lua --n-layer 2 --n-head 4 --n-embd 256 ' ..
      '--block-size 64 --batch-size 16 --steps %d --eval-interval %d --lr 2e-3 --warmup 50 ' ..
      '--sample-tokens 0 --final-tokens 0 --device cpu --checkpoint %s'):format(o.train_steps,
      o.train_steps, path)
    print('training the checkpoint: ' .. cmd)
    assert(os.execute(cmd) == 0, 'quant_gpt.lua: training failed')
  end
end
local ckpt = ember.load(path)
local cfg = ckpt.config
local chars = ckpt.vocab:totable()

-- ---- validation windows, as examples/gpt.lua makes them ---------------------------------------
local function corpus(dir)
  local names = {}
  local p = io.popen("find '" .. dir .. "' -maxdepth 1 -type f -printf '%f\\n'")
  for name in p:lines() do if not name:find('.', 1, true) then names[#names + 1] = name end end
  p:close()
  table.sort(names)
  local parts = {}
  for k, name in ipairs(names) do
    local f = assert(io.open(dir .. '/' .. name, 'rb'))
    parts[k] = f:read('*a')
    f:close()
  end
  return table.concat(parts)
end
local text = corpus(o.data)
local vocab_of = {}
for k, b in ipairs(chars) do vocab_of[b] = k end
local n_train = math.floor(0.9 * #text)
local val = ember.empty(#text - n_train, { dtype = 'int64' })
do
  local dst = ffi.cast('int64_t *', val:data_ptr())
  for k = n_train + 1, #text do dst[k - n_train - 1] = vocab_of[text:byte(k)] or 1 end
end
local T, Bsz = cfg.block_size, o.batch_size
local windows = {}
do
  local count, span = o.eval_batches * Bsz, val:size(1) - T - 1
  local offs = ember.arange(1, T + 1, { dtype = 'int64' }):view(1, T)
  for b = 0, o.eval_batches - 1 do
    local starts = {}
    for j = b * Bsz, b * Bsz + Bsz - 1 do starts[#starts + 1] = math.floor(j * span / (count - 1)) end
    local pos = (ember.tensor(starts, { dtype = 'int64' }):view(Bsz, 1) + offs):view(-1)
    windows[#windows + 1] = { val:index_select(1, pos):view(Bsz, T), val:index_select(1, pos + 1):view(Bsz, T) }
  end
end

-- ---- one configuration ---------------------------------------------------------------------------
local function weight_bytes(model)
  local n = 0
  for _, p in ipairs(model:named_parameters()) do n = n + p[2]:nbytes() end
  for _, b in ipairs(model:named_buffers()) do n = n + b[2]:nbytes() end
  return n
end

local function measure(format, device)
  local model = G.GPT(cfg)
  model:load_state_dict(ckpt.model)
  model:to(device)
  model:evaluate()
  local layers = 'all dense'
  if format ~= 'fp32' then
    local fallback = ({ q4_k = 'q4_0', q6_k = 'q8_0' })[format]
    local _, report = G.quantize(model, { format = format, fallback = fallback, verbose = false })
    local count = {}
    for _, m in ipairs(model:modules()) do
      if m.weight and m.weight:is_quantized() then
        count[m.weight:dtype()] = (count[m.weight:dtype()] or 0) + 1
      end
    end
    local parts = {}
    for dt, c in pairs(count) do parts[#parts + 1] = c .. ' ' .. dt end
    table.sort(parts)
    local why, order = {}, {}
    for _, s in ipairs(report.skipped) do
      if not why[s[2]] then order[#order + 1] = s[2] end
      why[s[2]] = (why[s[2]] or 0) + 1
    end
    for _, w in ipairs(order) do parts[#parts + 1] = ('%d dense: %s'):format(why[w], w) end
    layers = table.concat(parts, ', ')
  end
  local total = 0
  local ok, err = pcall(function()
    ember.no_grad(function()
      for _, xy in ipairs(windows) do
        total = total + model:loss(xy[1]:to(device), xy[2]:to(device)):item()
      end
    end)
  end)
  if not ok then return { error = tostring(err), layers = layers } end
  local prompt = { 1, 2, 3 }
  G.generate(model, prompt, o.tokens, { temperature = 0 }) -- warm-up: pipelines, caches
  local t0 = B.now()
  G.generate(model, prompt, o.tokens, { temperature = 0 })
  local tps = o.tokens / (B.now() - t0)
  return { loss = total / #windows, bytes = weight_bytes(model), tps = tps, layers = layers }
end

-- ---- the table -----------------------------------------------------------------------------------
local devices = o.devices and split(o.devices) or { 'cpu' }
if not o.devices and pcall(ember.device, 'vulkan') then devices[#devices + 1] = ember.device('vulkan').name end
local goals = { q8_0 = 0.5, q4_k = 3 }
print(('GPT checkpoint %s: %d layers, width %d, block %d, vocabulary %d; %d validation windows ' ..
  'of %d; %d tokens generated at batch 1 with the KV cache'):format(path, cfg.n_layer, cfg.n_embd,
  T, cfg.vocab_size, #windows * Bsz, T, o.tokens))
for _, dev in ipairs(devices) do
  local name = ember.device(dev).name
  print(('\n%s'):format(name))
  print(('%-6s %9s %8s %7s %10s %9s  %s'):format('format', 'val loss', 'vs fp32', 'goal',
    'weights', 'tokens/s', 'layers'))
  local base
  for _, f in ipairs({ 'fp32', unpack(split(o.formats)) }) do
    local r = measure(f, name)
    if r.error then
      print(('%-6s %s  [%s]'):format(f, r.error:gsub('\n.*', ''), r.layers))
    else
      base = base or r.loss
      local d = (r.loss - base) / base * 100
      print(('%-6s %9.4f %7.2f%% %7s %8.2f MiB %9.1f  %s'):format(f, r.loss, d,
        goals[f] and ('<' .. goals[f] .. '%') or '', r.bytes / 2 ^ 20, r.tps, r.layers))
    end
  end
end
