-- ember.models.gpt: a GPT language model in the form of nanoGPT (Karpathy's model.py), shared by
-- the second main job (examples/gpt.lua), examples/generate.lua, the benchmarks
-- (tests/bench/gpt_step.lua, tests/gpu/gpt.lua) and the tests. PyTorch's version of the same
-- model is examples/gpt_torch.py; the parameter names are nanoGPT's (transformer.h.0.attn...),
-- so weights convert by name.
--
--   local G = require 'ember.models.gpt'
--   local model = G.GPT{ vocab_size = 65, block_size = 256, n_layer = 6, n_head = 6,
--                        n_embd = 384, dropout = 0.2 }
--   local logits = model(idx)                 -- idx int64 [B, T] of ids 1..V -> [B, T, V]
--   local loss = model:loss(idx, targets)     -- mean cross entropy over B*T
--   local opt = G.optimizer(model, { lr = 1e-3, weight_decay = 0.1, betas = {0.9, 0.99} })
--   group.lr = G.lr_at(step, { lr =, min_lr =, warmup =, steps = })
--
-- The model: token and position embeddings, dropout, n_layer pre-norm blocks
--   x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
-- (causal self-attention through F.scaled_dot_product_attention, an MLP C -> 4C -> C with
-- exact GELU), a final LayerNorm and an LM head whose weight is the token embedding's (weight
-- tying). Activations stay [B*T, C] between the blocks, so every Linear is one matrix product.
-- Initialization as nanoGPT: weights normal(0, 0.02), biases 0, the residual projections
-- (c_proj) normal(0, 0.02 / sqrt(2 n_layer)).
local M = {}

local function ember() return require 'ember' end
local function nn() return require('ember').nn end
local function F() return require('ember').nn.functional end

local defaults = { vocab_size = 65, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384,
  dropout = 0, bias = true, tie_weights = true }
M.defaults = defaults

-- A checked copy of cfg with the defaults filled in; misspelt keys are errors.
function M.config(cfg, who)
  who = who or 'GPT'
  cfg = cfg or {}
  local c = {}
  for k, v in pairs(cfg) do
    if defaults[k] == nil then error(("%s: unknown config key '%s'"):format(who, tostring(k)), 3) end
    c[k] = v
  end
  for k, v in pairs(defaults) do if c[k] == nil then c[k] = v end end
  for _, k in ipairs({ 'vocab_size', 'block_size', 'n_layer', 'n_head', 'n_embd' }) do
    local v = c[k]
    if type(v) ~= 'number' or v < 1 or v % 1 ~= 0 then
      error(('%s: expected %s to be a positive integer, got %s'):format(who, k, tostring(v)), 3)
    end
  end
  if c.n_embd % c.n_head ~= 0 then
    error(('%s: n_embd (%d) must be divisible by n_head (%d)'):format(who, c.n_embd, c.n_head), 3)
  end
  if type(c.dropout) ~= 'number' or c.dropout < 0 or c.dropout >= 1 then
    error(('%s: expected dropout in [0, 1), got %s'):format(who, tostring(c.dropout)), 3)
  end
  return c
end

local function normal_(t, std) return nn().init.normal_(t, 0, std) end

local function linear(cin, cout, bias, std)
  local l = nn().Linear(cin, cout, { bias = bias })
  normal_(l.weight, std)
  if l.bias then nn().init.zeros_(l.bias) end
  return l
end

-- ---- attention ------------------------------------------------------------------------------
-- q, k, v: [B, H, T, D] (last dim contiguous). Causal attention with dropout on the weights.
-- A key/value cache (generation) passes Tq < Tk: the new queries come after every cached key,
-- so they see all of them, and the causal mask applies among the new ones only.
local function attend(q, k, v, dropout_p)
  local sdpa = F().scaled_dot_product_attention
  local Tq, Tk = q:size(3), k:size(3)
  if Tq == Tk then return sdpa(q, k, v, { is_causal = true, dropout_p = dropout_p }) end
  if Tq == 1 then return sdpa(q, k, v, { dropout_p = dropout_p }) end
  -- Tq new queries at positions Tk-Tq+1..Tk: key j is visible to query i when j <= Tk - Tq + i
  local mask = ember().ones(Tq, Tk, { dtype = 'bool' }):tril(Tk - Tq):to(q:device())
  return sdpa(q, k, v, { attn_mask = mask, dropout_p = dropout_p })
end
M.attend = attend

local CausalSelfAttention = nn().Module:extend('CausalSelfAttention')
function CausalSelfAttention:__init(c)
  self.n_head, self.n_embd, self.dropout = c.n_head, c.n_embd, c.dropout
  self:add_module('c_attn', linear(c.n_embd, 3 * c.n_embd, c.bias, 0.02))
  self:add_module('c_proj', linear(c.n_embd, c.n_embd, c.bias, 0.02 / math.sqrt(2 * c.n_layer)))
  self:add_module('resid_dropout', nn().Dropout(c.dropout))
end

-- x: [B*T, C]. cache (optional, generation): an ember.generation.KVCache holding the keys and
-- values of the earlier positions; the new ones are appended to layer `layer` of it.
function CausalSelfAttention:forward(x, B, T, cache, layer)
  local C, H = self.n_embd, self.n_head
  local D = C / H
  local qkv = self.c_attn(x)                       -- [B*T, 3C]
  local function heads(i)                          -- [B, H, T, D], a view
    return qkv:narrow(2, i * C + 1, C):view(B, T, H, D):transpose(2, 3)
  end
  local q, k, v = heads(0), heads(1), heads(2)
  if cache then k, v = cache:append(layer, k, v) end
  local p = self.training and self.dropout or 0
  local y = attend(q, k, v, p)                     -- [B, H, T, D]
  y = y:transpose(2, 3):contiguous():view(B * T, C)
  return self.resid_dropout(self.c_proj(y))
end

local MLP = nn().Module:extend('MLP')
function MLP:__init(c)
  self:add_module('c_fc', linear(c.n_embd, 4 * c.n_embd, c.bias, 0.02))
  self:add_module('gelu', nn().GELU())
  self:add_module('c_proj', linear(4 * c.n_embd, c.n_embd, c.bias, 0.02 / math.sqrt(2 * c.n_layer)))
  self:add_module('dropout', nn().Dropout(c.dropout))
end
function MLP:forward(x)
  return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))
end

local Block = nn().Module:extend('Block')
function Block:__init(c)
  self:add_module('ln_1', nn().LayerNorm(c.n_embd))
  self:add_module('attn', CausalSelfAttention(c))
  self:add_module('ln_2', nn().LayerNorm(c.n_embd))
  self:add_module('mlp', MLP(c))
end
function Block:forward(x, B, T, cache, layer)
  x = x + self.attn(self.ln_1(x), B, T, cache, layer)
  return x + self.mlp(self.ln_2(x))
end

-- ---- the model ------------------------------------------------------------------------------
local GPT = nn().Module:extend('GPT')
M.GPT = GPT

function GPT:__init(cfg)
  local c = M.config(cfg, 'GPT')
  rawset(self, 'config', c)
  local E = nn()
  local t = E.ModuleDict()
  self:add_module('transformer', t)
  t:add_module('wte', E.Embedding(c.vocab_size, c.n_embd))
  t:add_module('wpe', E.Embedding(c.block_size, c.n_embd))
  normal_(t.wte.weight, 0.02)
  normal_(t.wpe.weight, 0.02)
  t:add_module('drop', E.Dropout(c.dropout))
  local h = E.ModuleList()
  for _ = 1, c.n_layer do h:append(Block(c)) end
  t:add_module('h', h)
  t:add_module('ln_f', E.LayerNorm(c.n_embd))
  if not c.tie_weights then self:add_module('lm_head', linear(c.n_embd, c.vocab_size, false, 0.02)) end
end

-- The parameter count, without the position embeddings (as nanoGPT reports it).
function GPT:num_params()
  local n = 0
  for _, p in ipairs(self:named_parameters()) do
    if p[1] ~= 'transformer.wpe.weight' then n = n + p[2]:numel() end
  end
  return n
end

-- idx: int64 [B, T] of token ids 1..vocab_size, T <= block_size. Returns the logits
-- [B, T, vocab_size]. cache (an ember.generation.KVCache, generation: M.cache makes one): the
-- keys and values of the positions before idx, which idx continues; its length is where idx's
-- positions start.
function GPT:forward(idx, cache)
  local c = self.config
  local B, T = idx:size(1), idx:size(2)
  local past = cache and cache.len or 0
  if past + T > c.block_size then
    error(('GPT: cannot forward a sequence of length %d, the block size is %d'):format(past + T,
      c.block_size), 2)
  end
  local t = self.transformer
  local pos = ember().arange(past + 1, past + T + 1, { dtype = 'int64', device = idx:device() })
  local x = t.wte(idx:reshape(B * T)):view(B, T, c.n_embd) + t.wpe(pos)
  x = t.drop(x:view(B * T, c.n_embd))
  for i, block in t.h:ipairs() do
    x = block(x, B, T, cache, i)
  end
  x = t.ln_f(x)
  local logits
  local wte = t.wte.weight
  if self.lm_head then logits = self.lm_head(x)
  elseif wte:is_quantized() then logits = ember().quant.linear(x, wte) -- tied, quantized
  else logits = x:mm(wte:t()) end
  return logits:view(B, T, c.vocab_size)
end

-- The mean cross entropy of predicting targets (int64 [B, T]) from idx.
function GPT:loss(idx, targets)
  local logits = self:forward(idx)
  return F().cross_entropy(logits:view(-1, self.config.vocab_size), targets:reshape(-1))
end

-- ---- training -------------------------------------------------------------------------------
-- AdamW with weight decay on the 2-D weights (matrices and embeddings) only, as nanoGPT's
-- configure_optimizers: biases and LayerNorm parameters are not decayed.
function M.optimizer(model, opts)
  local decay, no_decay = {}, {}
  for _, p in ipairs(model:named_parameters()) do
    if p[2]:dim() >= 2 then decay[#decay + 1] = p[2] else no_decay[#no_decay + 1] = p[2] end
  end
  return ember().optim.AdamW({
    { params = decay, weight_decay = opts.weight_decay or 0.1 },
    { params = no_decay, weight_decay = 0 },
  }, { lr = opts.lr or 1e-3, betas = opts.betas or { 0.9, 0.99 }, eps = opts.eps or 1e-8 })
end

-- The learning rate of step `step` (1-based): linear warm-up over `warmup` steps to `lr`, then
-- cosine decay to `min_lr` at step `steps` (nanoGPT's get_lr, counted from 1).
function M.lr_at(step, o)
  local it = step - 1
  if it < o.warmup then return o.lr * (it + 1) / (o.warmup + 1) end
  if it >= o.steps then return o.min_lr end
  local ratio = (it - o.warmup) / math.max(o.steps - o.warmup, 1)
  local coeff = 0.5 * (1 + math.cos(math.pi * ratio))
  return o.min_lr + coeff * (o.lr - o.min_lr)
end

-- ---- quantized inference --------------------------------------------------------------------
-- Quantizes the model's Linear layers and embeddings in place (ember.quant.quantize_model;
-- opts as there: format, group, symmetric, fallback, verbose). With tied weights the token
-- embedding is also the LM head, a quantized Linear: it stays dense where its dtype has no
-- Linear kernel on the model's device (reported as skipped). Returns the model and the report.
function M.quantize(model, opts)
  local Q = ember().quant
  local tied = model.lm_head == nil
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.skip = function(path, _, dtype)
    if tied and path == 'transformer.wte' then
      local ok, why = require('ember.quant.model').linear_kernel(dtype, model.transformer.wte.weight:device())
      if not ok then return 'tied to the LM head, and the quantized Linear is ' .. why end
    end
    return nil
  end
  return Q.quantize_model(model, o)
end

-- ---- generation -----------------------------------------------------------------------------
-- A key/value cache for incremental decoding of `batch` sequences (ember.generation.KVCache):
-- each layer's keys and values in buffers of block_size positions allocated once; each step
-- writes its new positions in place and attends over views of the filled part.
function M.cache(model, batch, dtype)
  local c = model.config
  return ember().generation.KVCache { layers = c.n_layer, batch = batch or 1, heads = c.n_head,
    head_dim = c.n_embd / c.n_head, max_len = c.block_size, dtype = dtype,
    device = model.transformer.wte.weight:device() }
end

-- Continues the ids in `prompt` (a Lua list of ids 1..V, at least one) by n tokens and returns
-- the new ids (a Lua list). opts: temperature (1; 0 is greedy), top_k, top_p (as
-- ember.generation.sample), cache (true: incremental decoding with a key/value cache; false:
-- every step recomputes the last block_size positions, as nanoGPT's generate). The model runs
-- in evaluation mode without gradients. With the cache, a context that reaches block_size is
-- cut to its last half and recomputed (the position embeddings end there), so later tokens see
-- at least half a block.
function M.generate(model, prompt, n, opts)
  local E = ember()
  opts = require('ember.util.names').check_options('generate', opts, { 'cache', 'temperature', 'top_k', 'top_p' })
  local c = model.config
  local device = model.transformer.wte.weight:device()
  local use_cache = opts.cache ~= false
  local cache = use_cache and M.cache(model, 1) or nil
  local ids, out = {}, {}
  for i, v in ipairs(prompt) do ids[i] = v end
  local sampling = { temperature = opts.temperature or 1, top_k = opts.top_k, top_p = opts.top_p }
  local function next_logits(from)
    local ctx = {}
    for i = from, #ids do ctx[#ctx + 1] = ids[i] end
    local idx = E.tensor({ ctx }, { dtype = 'int64' }):to(device)
    return model(idx, cache)[1][#ctx]
  end
  local was_training = model.training
  model:evaluate()
  E.no_grad(function()
    local pending = 1 -- the first id not yet in the cache
    for _ = 1, n do
      local logits
      if not use_cache then
        logits = next_logits(math.max(1, #ids - c.block_size + 1))
      else
        if cache.len + (#ids - pending + 1) > c.block_size then
          cache:reset()
          pending = math.max(1, #ids - math.floor(c.block_size / 2) + 1)
        end
        logits = next_logits(pending)
      end
      local id = E.generation.sample(logits, sampling):item() -- reads the token back
      pending = #ids + 1
      ids[#ids + 1] = id
      out[#out + 1] = id
    end
  end)
  model:train(was_training)
  return out
end

return M
