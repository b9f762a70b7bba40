-- Samples text from a checkpoint of the GPT main job (examples/gpt.lua), as nanoGPT's
-- sample.py: the checkpoint holds the model's config and vocabulary, so any checkpoint loads
-- on any device (auto: the best GPU, else the CPU; --device overrides).
--
--   ember examples/generate.lua --checkpoint gpt.ckpt --prompt 'The ' --max-new-tokens 300
--
-- Decoding is incremental: a key/value cache keeps every layer's keys and values, so each new
-- character costs one position's forward pass (ember.models.gpt's generate).
--
-- --quantize q8_0|q4_0|q4_k (or any ember.quant format) quantizes the trained weights after
-- loading (weight-only, post-training: ember.models.gpt's quantize): Linear layers and
-- embeddings become block-dtype tensors, run by the device's quantized kernels. A layer whose
-- rows are not whole blocks of the format takes --quantize-fallback (q4_k: q4_0, q6_k: q8_0,
-- as llama.cpp's k-quants fall back); a layer without a kernel on the device stays dense, and
-- the report on stderr says which and why.
local cli = require 'ember.util.cli'
local G = require 'ember.models.gpt'

local options = {
  { 'checkpoint', 'gpt.ckpt', 'a checkpoint written by examples/gpt.lua' },
  { 'prompt', '\n', 'the text to continue (its characters must be in the vocabulary)' },
  { 'max_new_tokens', 500, 'characters to generate' },
  { 'temperature', 0.8, 'softmax temperature (0: always the most likely character)' },
  { 'top_k', 40, 'sample among the k most likely characters (0: all)' },
  { 'num_samples', 1, 'samples to draw' },
  { 'device', os.getenv('EMBER_DEVICE') or 'auto', 'auto, cpu or vulkan[:N]' },
  { 'precision', 'fp32', 'fp32, bf16 or fp16 (autocast)' },
  { 'threads', 0, 'CPU threads (0: all cores)' },
  { 'seed', 1337, 'random seed' },
  { 'quantize', '', 'quantize the weights: q8_0, q4_0, q4_k ... ("" for none)' },
  { 'quantize_fallback', '', 'format for rows that are not whole blocks ("": by --quantize)' },
}

local opts, help = cli.parse(arg, options,
  'usage: ember examples/generate.lua [options] [key=value ...]')
if not opts then print(help) return end
opts.precision = require('ember.precision').check(opts.precision, '--precision', 0)
if opts.max_new_tokens < 0 or opts.max_new_tokens % 1 ~= 0 then
  error('--max-new-tokens: expected a non-negative integer, got ' .. opts.max_new_tokens, 0)
end
if opts.temperature < 0 then error('--temperature: expected a number >= 0, got ' .. opts.temperature, 0) end
if opts.threads > 0 then ember.set_num_threads(opts.threads) end
local device = ember.device(opts.device).name

local ok, ckpt = pcall(ember.load, opts.checkpoint)
if not ok then error('generate: cannot load the checkpoint: ' .. tostring(ckpt), 0) end
if type(ckpt.config) ~= 'table' or ckpt.vocab == nil then
  error(('generate: %s is not a checkpoint of examples/gpt.lua (no config and vocabulary)'):format(
    opts.checkpoint), 0)
end
local chars = ckpt.vocab:totable()
local id_of = {}
for i, b in ipairs(chars) do id_of[b] = i end
local prompt = {}
for i = 1, #opts.prompt do
  local id = id_of[opts.prompt:byte(i)]
  if not id then
    local ch = opts.prompt:sub(i, i)
    error(("--prompt: the character '%s' (byte %d) is not in the vocabulary"):format(
      ch:match('^[%g ]$') and ch or '\\' .. ch:byte(), ch:byte()), 0)
  end
  prompt[#prompt + 1] = id
end
if #prompt == 0 then error('--prompt: expected at least one character', 0) end

local model = G.GPT(ckpt.config)
model:load_state_dict(ckpt.model)
model:to(device)
local nparams = model:num_params()
if opts.quantize ~= '' then
  local fallback = opts.quantize_fallback ~= '' and opts.quantize_fallback or
    ({ q4_k = 'q4_0', q6_k = 'q8_0' })[opts.quantize]
  local ok, err, report = pcall(G.quantize, model, { format = opts.quantize, fallback = fallback,
    verbose = false })
  if not ok then error('--quantize: ' .. tostring(err):gsub('^.-quantize_model: ', ''), 0) end
  io.stderr:write(('generate: quantized %d layers to %s%s, %d left dense\n'):format(
    #report.quantized, opts.quantize, #report.fallback > 0 and
    (' (' .. #report.fallback .. ' as ' .. fallback .. ')') or '', #report.skipped))
  for _, s in ipairs(report.skipped) do
    io.stderr:write(('generate:   %s left dense: %s\n'):format(s[1], s[2]))
  end
end
local precision = require('ember.precision').new(opts.precision, device)
ember.manual_seed(opts.seed)
io.stderr:write(('generate: %s (step %s), %.2fM parameters, on %s, %s\n'):format(opts.checkpoint,
  tostring(ckpt.step), nparams / 1e6, device, precision.name))

for n = 1, opts.num_samples do
  local t0 = ember.clock()
  local ids = precision:forward(function()
    return G.generate(model, prompt, opts.max_new_tokens,
      { temperature = opts.temperature, top_k = opts.top_k > 0 and opts.top_k or nil })
  end)
  local bytes = {}
  for i, id in ipairs(ids) do bytes[i] = string.char(chars[id]) end
  io.write(opts.prompt, table.concat(bytes), '\n')
  if opts.num_samples > 1 and n < opts.num_samples then io.write('---------------\n') end
  io.stderr:write(('generate: %d characters in %.2f s\n'):format(#ids, ember.clock() - t0))
end
