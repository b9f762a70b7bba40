-- ember.generation: what autoregressive generation needs beyond a model's forward:
--   sample(logits, opts)  the next token from [B, V] (or [V]) logits: temperature, top-k,
--                         top-p (nucleus) filtering, then ember.multinomial; temperature 0 is
--                         greedy (argmax). Composed from ops, so it stays on the logits' device
--                         and never reads back to the host.
--   KVCache{...}          preallocated key/value buffers per layer for incremental decoding:
--                         each step writes its new positions in place and attends over views
--                         of the filled part, so no step copies the cache.
-- docs/api/generation.md has the reference, docs/guide.md a worked loop.
local tensor = require 'ember.tensor'
local is_tensor = tensor.is_tensor

local M = {}

local function ember() return require 'ember' end

-- Raises on keys of opts not in `known` (misspelt options are errors).
local function check_keys(fn, opts, known)
  return require('ember.util.names').check_options(fn, opts, known, 3)
end

local function number_in(fn, what, v, lo, hi, lo_open)
  if type(v) ~= 'number' or v ~= v or v > hi or v < lo or (lo_open and v == lo) then
    error(('%s: expected %s in %s%g, %g], got %s'):format(fn, what, lo_open and '(' or '[', lo,
      hi, tostring(v)), 3)
  end
  return v
end

-- ---- filtering ------------------------------------------------------------------------------

-- Keeps the k largest logits of each row (ties with the k-th are kept too), -inf elsewhere.
function M.top_k_filter(logits, k)
  local V = logits:size(-1)
  if k >= V then return logits end
  local values = logits:topk(k, -1)
  local kth = values:narrow(-1, k, 1)
  return logits:masked_fill(logits:lt(kth), -math.huge)
end

-- Keeps, per row, the smallest set of the most probable tokens whose probability reaches p
-- (at least the most probable one), -inf elsewhere. A token is kept when the probability of
-- the tokens ranked before it is below p.
function M.top_p_filter(logits, p)
  if p >= 1 then return logits end
  local sorted, order = logits:sort(-1, true)
  local probs = sorted:softmax(-1)
  local before = probs:cumsum(-1) - probs
  local drop_sorted = before:ge(p)
  local drop = drop_sorted:scatter(-1, order, drop_sorted)
  return logits:masked_fill(drop, -math.huge)
end

-- ---- sampling -------------------------------------------------------------------------------

local sample_keys = { temperature = true, top_k = true, top_p = true }

-- sample(logits [, {temperature = 1, top_k = nil, top_p = nil}]) -> the next token of each
-- row: [B, 1] 1-based int64 for [B, V] logits, [1] for [V]. temperature 0 is greedy (argmax,
-- the first maximum). top_k keeps the k largest logits, top_p the nucleus of mass p, applied
-- in that order after the temperature, as Hugging Face's generate does. 16-bit logits (and
-- float64 ones off the CPU) are filtered and sampled in float32.
function M.sample(logits, opts)
  local fn = 'sample'
  if not is_tensor(logits) then error(fn .. ': expected a tensor of logits, got ' .. type(logits), 2) end
  if logits:dim() ~= 1 and logits:dim() ~= 2 then
    error(('%s: expected logits [B, V] or [V], got %d dims'):format(fn, logits:dim()), 2)
  end
  if not logits:is_floating_point() then
    error(fn .. ': expected floating point logits, got ' .. logits:dtype(), 2)
  end
  opts = check_keys(fn, opts, sample_keys)
  local temperature = opts.temperature == nil and 1 or opts.temperature
  number_in(fn, 'temperature', temperature, 0, math.huge)
  local V = logits:size(-1)
  local top_k = opts.top_k
  if top_k ~= nil and (type(top_k) ~= 'number' or top_k ~= math.floor(top_k) or top_k < 1) then
    error(fn .. ': expected top_k to be a positive integer, got ' .. tostring(top_k), 2)
  end
  local top_p = opts.top_p
  if top_p ~= nil then number_in(fn, 'top_p', top_p, 0, 1, true) end
  if V == 0 then error(fn .. ': expected at least one token, got an empty vocabulary', 2) end
  if temperature == 0 then return logits:argmax(-1, true) end
  -- float64 stays float64 on the CPU; elsewhere the draw is float32 (multinomial's kernel)
  local x = (logits:dtype() == 'float64' and logits:device() == 'cpu') and logits or logits:float()
  if temperature ~= 1 then x = x / temperature end
  if top_k then x = M.top_k_filter(x, top_k) end
  if top_p then x = M.top_p_filter(x, top_p) end
  return ember().multinomial(x:softmax(-1), 1, true)
end

-- ---- the key/value cache --------------------------------------------------------------------

local KVCache = {}
KVCache.__index = KVCache
M.KVCache = KVCache

local cache_keys = { layers = true, batch = true, heads = true, head_dim = true, max_len = true,
  dtype = true, device = true }

local function positive(fn, what, v)
  if type(v) ~= 'number' or v ~= math.floor(v) or v < 1 then
    error(('%s: expected %s to be a positive integer, got %s'):format(fn, what, tostring(v)), 4)
  end
  return v
end

-- KVCache{layers=, batch=, heads=, head_dim=, max_len= [, dtype=, device=]}: for each layer a
-- key and a value buffer [batch, heads, max_len, head_dim], allocated once (zeros).
local function new_cache(opts)
  local fn = 'KVCache'
  if type(opts) ~= 'table' then error(fn .. ': expected an options table, got ' .. type(opts), 3) end
  check_keys(fn, opts, cache_keys)
  local self = setmetatable({}, KVCache)
  self.layers = positive(fn, 'layers', opts.layers)
  self.batch = positive(fn, 'batch', opts.batch)
  self.heads = positive(fn, 'heads', opts.heads)
  self.head_dim = positive(fn, 'head_dim', opts.head_dim)
  self.max_len = positive(fn, 'max_len', opts.max_len)
  local E = ember()
  local shape = { self.batch, self.heads, self.max_len, self.head_dim }
  local o = { dtype = opts.dtype or E.get_default_dtype(), device = opts.device }
  self.k, self.v, self.lens = {}, {}, {}
  for l = 1, self.layers do
    self.k[l] = E.zeros(shape, o)
    self.v[l] = E.zeros(shape, o)
    self.lens[l] = 0
  end
  self.len = 0
  return self
end
setmetatable(KVCache, { __call = function(_, opts) return new_cache(opts) end })

-- The positions every layer holds (cache.len is kept equal to it).
function KVCache:length(layer)
  if layer == nil then return self.len end
  return self.lens[layer]
end

-- append(layer, k, v): k and v [batch, heads, T, head_dim] are written at the layer's next T
-- positions, in place; returns views k_all, v_all [batch, heads, len, head_dim] of everything
-- the layer holds. No autograd: the cache holds values (k and v are detached).
function KVCache:append(layer, k, v)
  local fn = 'KVCache:append'
  if type(layer) ~= 'number' or layer ~= math.floor(layer) or layer < 1 or layer > self.layers then
    error(('%s: expected a layer in 1..%d, got %s'):format(fn, self.layers, tostring(layer)), 2)
  end
  if not is_tensor(k) or not is_tensor(v) then
    error(fn .. ': expected key and value tensors', 2)
  end
  local buf_k, buf_v = self.k[layer], self.v[layer]
  for _, t in ipairs({ k, v }) do
    if t:dim() ~= 4 or t:size(1) ~= self.batch or t:size(2) ~= self.heads
        or t:size(4) ~= self.head_dim or t:size(3) ~= k:size(3) then
      error(('%s: expected keys and values [%d, %d, T, %d], got %s and %s'):format(fn, self.batch,
        self.heads, self.head_dim, tostring(k:size()), tostring(v:size())), 2)
    end
  end
  local T, pos = k:size(3), self.lens[layer]
  if pos + T > self.max_len then
    error(('%s: %d more positions do not fit layer %d, which holds %d of max_len %d'):format(fn,
      T, layer, pos, self.max_len), 2)
  end
  if T > 0 then
    buf_k:narrow(3, pos + 1, T):copy_(k:detach())
    buf_v:narrow(3, pos + 1, T):copy_(v:detach())
  end
  pos = pos + T
  self.lens[layer] = pos
  local len = pos
  for l = 1, self.layers do len = math.min(len, self.lens[l]) end
  self.len = len
  if pos == 0 then return buf_k:narrow(3, 1, 0), buf_v:narrow(3, 1, 0) end
  return buf_k:narrow(3, 1, pos), buf_v:narrow(3, 1, pos)
end

-- Empties the cache (the buffers stay allocated; their contents are overwritten as it refills).
function KVCache:reset()
  for l = 1, self.layers do self.lens[l] = 0 end
  self.len = 0
  return self
end

return M
