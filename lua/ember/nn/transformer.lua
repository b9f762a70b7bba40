-- ember.nn attention and Transformer layers: MultiheadAttention, TransformerEncoderLayer,
-- TransformerDecoderLayer, TransformerEncoder, TransformerDecoder and Transformer.
--
-- They follow PyTorch's modules: the same constructor arguments, the same parameter names and
-- shapes (so a PyTorch state_dict loads by name), the same mask conventions, and the same
-- arithmetic (pre- or post-norm, dropout places). Keyword arguments become an options table:
-- PyTorch's `mha(q, k, v, key_padding_mask=m, need_weights=False)` is
-- `mha(q, k, v, {key_padding_mask = m, need_weights = false})`.
--
-- Attention runs through F.scaled_dot_product_attention (fused, no [L, S] score matrix) unless
-- the caller asks for the attention weights (need_weights, PyTorch's default), which need the
-- score matrix: that path computes softmax(q k^T / sqrt(d) + mask) explicitly, as PyTorch does.
local Module = require 'ember.nn.module'
local init = require 'ember.nn.init_fns'
local tensor = require 'ember.tensor'

local M = {}
local is_tensor = tensor.is_tensor

local function ember() return require 'ember' end
local function nn() return require 'ember.nn' end
local function F() return require('ember.nn').functional end

-- ---- argument checks -------------------------------------------------------------------------
local args = require 'ember.nn.args'
local check_options, set, opt_bool = args.options, args.set, args.boolean
local function positive_int(fn, what, v, level) return args.positive_int(fn, what, v, level + 1) end

local function probability(fn, what, v, level)
  if type(v) ~= 'number' or v < 0 or v > 1 then
    error(('%s: expected %s to be a probability in [0, 1], got %s'):format(fn, what,
      tostring(v)), level + 1)
  end
  return v
end

local function opt_tensor(fn, what, v, level)
  if v ~= nil and not is_tensor(v) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(v)), level + 1)
  end
  return v
end

local function shape_str(t)
  local s = {}
  for i = 1, t:dim() do s[i] = tostring(t:size(i)) end
  return '[' .. table.concat(s, ', ') .. ']'
end

-- One more position at the end of a mask's last dim, open to attention (0 added).
local function pad_last(mask)
  local size = mask:size()
  size[#size] = 1
  return ember().cat({ mask, ember().zeros(size, { dtype = mask:dtype(), device = mask:device() }) },
    mask:dim())
end

-- A mask in MultiheadAttention's convention (boolean: true = NOT allowed to attend; float:
-- added to the scores) as an additive mask of dtype.
local function additive(mask, dtype)
  if mask:dtype() == 'bool' then
    return ember().zeros(mask:size(), { dtype = dtype, device = mask:device() })
      :masked_fill(mask, -math.huge)
  end
  if not mask:is_floating_point() then
    error('MultiheadAttention: expected a boolean or floating mask, got ' .. mask:dtype(), 4)
  end
  return mask:to(dtype)
end

-- ---- MultiheadAttention ----------------------------------------------------------------------
local MHA_OPTIONS = set({ 'dropout', 'bias', 'add_bias_kv', 'add_zero_attn', 'kdim', 'vdim',
  'batch_first', 'dtype', 'device' })

-- MultiheadAttention(embed_dim, num_heads [, {dropout=0, bias=true, add_bias_kv=false,
-- add_zero_attn=false, kdim=, vdim=, batch_first=false, dtype=, device=}])
local MultiheadAttention = Module:extend('MultiheadAttention')
function MultiheadAttention:__init(embed_dim, num_heads, opts)
  local fn = 'MultiheadAttention'
  positive_int(fn, 'embed_dim', embed_dim, 3)
  positive_int(fn, 'num_heads', num_heads, 3)
  opts = check_options(fn, opts, MHA_OPTIONS, 3)
  if embed_dim % num_heads ~= 0 then
    error(('%s: embed_dim (%d) must be divisible by num_heads (%d)'):format(fn, embed_dim,
      num_heads), 3)
  end
  rawset(self, '_ctor', { embed_dim, num_heads, opts })
  self.embed_dim, self.num_heads = embed_dim, num_heads
  self.head_dim = math.floor(embed_dim / num_heads)
  self.kdim = opts.kdim and positive_int(fn, 'kdim', opts.kdim, 3) or embed_dim
  self.vdim = opts.vdim and positive_int(fn, 'vdim', opts.vdim, 3) or embed_dim
  self.dropout = probability(fn, 'dropout', opts.dropout or 0, 3)
  self.batch_first = opt_bool(fn, 'batch_first', opts.batch_first, false, 3)
  self.add_zero_attn = opt_bool(fn, 'add_zero_attn', opts.add_zero_attn, false, 3)
  local bias = opt_bool(fn, 'bias', opts.bias, true, 3)
  local add_bias_kv = opt_bool(fn, 'add_bias_kv', opts.add_bias_kv, false, 3)
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  local E = ember()
  local o = { dtype = opts.dtype, device = opts.device }
  -- PyTorch's _reset_parameters: xavier_uniform_ on the projections, zero biases.
  if self._qkv_same_embed_dim then
    self:register_parameter('in_proj_weight', init.xavier_uniform_(E.empty(3 * embed_dim, embed_dim, o)))
  else
    self:register_parameter('q_proj_weight', init.xavier_uniform_(E.empty(embed_dim, embed_dim, o)))
    self:register_parameter('k_proj_weight', init.xavier_uniform_(E.empty(embed_dim, self.kdim, o)))
    self:register_parameter('v_proj_weight', init.xavier_uniform_(E.empty(embed_dim, self.vdim, o)))
  end
  if bias then self:register_parameter('in_proj_bias', E.zeros(3 * embed_dim, o)) end
  self:add_module('out_proj', nn().Linear(embed_dim, embed_dim, { bias = bias, dtype = opts.dtype,
    device = opts.device }))
  if bias then init.zeros_(self.out_proj.bias) end
  if add_bias_kv then
    self:register_parameter('bias_k', init.xavier_normal_(E.empty(1, 1, embed_dim, o)))
    self:register_parameter('bias_v', init.xavier_normal_(E.empty(1, 1, embed_dim, o)))
  end
end

-- The three input projections: (x W^T + b) with W, b the slices of the packed weight.
function MultiheadAttention:_project(query, key, value)
  local E, e = self.embed_dim, self.embed_dim
  local b = self.in_proj_bias
  local function bias(i) return b and b:narrow(1, i * e + 1, e) or nil end
  local lin = F().linear
  if self._qkv_same_embed_dim then
    local w = self.in_proj_weight
    if rawequal(query, key) and rawequal(key, value) then
      local qkv = lin(query, w, b):chunk(3, -1) -- self-attention: one matmul for q, k and v
      return qkv[1], qkv[2], qkv[3]
    end
    return lin(query, w:narrow(1, 1, E), bias(0)), lin(key, w:narrow(1, E + 1, E), bias(1)),
      lin(value, w:narrow(1, 2 * E + 1, E), bias(2))
  end
  return lin(query, self.q_proj_weight, bias(0)), lin(key, self.k_proj_weight, bias(1)),
    lin(value, self.v_proj_weight, bias(2))
end

local MHA_FORWARD = set({ 'key_padding_mask', 'need_weights', 'attn_mask',
  'average_attn_weights', 'is_causal' })

-- forward(query, key, value [, {key_padding_mask=, need_weights=true, attn_mask=,
-- average_attn_weights=true, is_causal=false}]) -> output, weights (nil unless need_weights)
-- Shapes as PyTorch: query [L, N, E] ([N, L, E] with batch_first, [L, E] unbatched), key
-- [S, N, kdim], value [S, N, vdim]; key_padding_mask [N, S] ([S] unbatched); attn_mask [L, S]
-- or [N * num_heads, L, S]. Boolean masks: true = not allowed to attend.
function MultiheadAttention:forward(query, key, value, opts)
  local fn = 'MultiheadAttention'
  opt_tensor(fn, 'query', query, 2)
  opt_tensor(fn, 'key', key, 2)
  opt_tensor(fn, 'value', value, 2)
  if query == nil or key == nil or value == nil then
    error(fn .. ': expected query, key and value tensors', 2)
  end
  opts = check_options(fn, opts, MHA_FORWARD, 2)
  local need_weights = opt_bool(fn, 'need_weights', opts.need_weights, true, 2)
  local average = opt_bool(fn, 'average_attn_weights', opts.average_attn_weights, true, 2)
  local is_causal = opt_bool(fn, 'is_causal', opts.is_causal, false, 2)
  local kpm = opt_tensor(fn, 'key_padding_mask', opts.key_padding_mask, 2)
  local attn_mask = opt_tensor(fn, 'attn_mask', opts.attn_mask, 2)
  if is_causal and attn_mask == nil then
    error(fn .. ': is_causal is a hint that attn_mask is the causal mask; pass attn_mask too', 2)
  end

  local batched = query:dim() == 3
  if not batched and query:dim() ~= 2 then
    error(('%s: expected query of 2 (unbatched) or 3 dimensions, got %s'):format(fn,
      shape_str(query)), 2)
  end
  if key:dim() ~= query:dim() or value:dim() ~= query:dim() then
    error(('%s: expected key and value with query\'s rank, got query %s, key %s, value %s')
      :format(fn, shape_str(query), shape_str(key), shape_str(value)), 2)
  end
  local self_attention = rawequal(query, key) and rawequal(key, value)
  if not batched then -- one batch element: [L, E] -> [L, 1, E]
    query, key, value = query:unsqueeze(2), key:unsqueeze(2), value:unsqueeze(2)
    if kpm then kpm = kpm:unsqueeze(1) end
  elseif self.batch_first then -- [N, L, E] -> [L, N, E]
    query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
  end
  if self_attention then key, value = query, query end
  local L, N, Eq = query:size(1), query:size(2), query:size(3)
  local S = key:size(1)
  if Eq ~= self.embed_dim then
    error(('%s: expected query of embed_dim %d in its last dimension, got %s'):format(fn,
      self.embed_dim, shape_str(query)), 2)
  end
  if key:size(3) ~= self.kdim or value:size(3) ~= self.vdim or value:size(1) ~= S
    or key:size(2) ~= N or value:size(2) ~= N then
    error(('%s: expected key [S, N, %d] and value [S, N, %d] with query [L, N, E], got key %s, value %s')
      :format(fn, self.kdim, self.vdim, shape_str(key), shape_str(value)), 2)
  end
  local H, hd = self.num_heads, self.head_dim
  local dtype = query:dtype()

  local q, k, v = self:_project(query, key, value)
  local E = ember()

  -- The masks, as additive float masks: attn [L, S] or [N*H, L, S], padding [N, S].
  if attn_mask then
    attn_mask = additive(attn_mask, q:dtype())
    if attn_mask:dim() == 2 then
      if attn_mask:size(1) ~= L or attn_mask:size(2) ~= S then
        error(('%s: expected a 2-D attn_mask of [%d, %d], got %s'):format(fn, L, S,
          shape_str(attn_mask)), 2)
      end
    elseif attn_mask:dim() == 3 then
      if attn_mask:size(1) ~= N * H or attn_mask:size(2) ~= L or attn_mask:size(3) ~= S then
        error(('%s: expected a 3-D attn_mask of [%d, %d, %d], got %s'):format(fn, N * H, L, S,
          shape_str(attn_mask)), 2)
      end
    else
      error(('%s: expected attn_mask of 2 or 3 dimensions, got %s'):format(fn,
        shape_str(attn_mask)), 2)
    end
  end
  if kpm then
    if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S then
      error(('%s: expected key_padding_mask of [%d, %d], got %s'):format(fn, N, S,
        shape_str(kpm)), 2)
    end
    kpm = additive(kpm, q:dtype())
  end

  -- add_bias_kv: one more key/value position holding the learned biases, never masked.
  if self.bias_k then
    k = E.cat({ k, self.bias_k:expand(1, N, self.embed_dim) }, 1)
    v = E.cat({ v, self.bias_v:expand(1, N, self.embed_dim) }, 1)
    if attn_mask then attn_mask = pad_last(attn_mask) end
    if kpm then kpm = pad_last(kpm) end
    S = S + 1
  end
  -- [L, N, E] -> [N, H, L, hd]
  q = q:reshape(L, N, H, hd):permute(2, 3, 1, 4)
  k = k:reshape(S, N, H, hd):permute(2, 3, 1, 4)
  v = v:reshape(S, N, H, hd):permute(2, 3, 1, 4)
  if self.add_zero_attn then -- one more all-zero key/value position
    k = E.cat({ k, E.zeros(N, H, 1, hd, { dtype = k:dtype(), device = k:device() }) }, 3)
    v = E.cat({ v, E.zeros(N, H, 1, hd, { dtype = v:dtype(), device = v:device() }) }, 3)
    if attn_mask then attn_mask = pad_last(attn_mask) end
    if kpm then kpm = pad_last(kpm) end
    S = S + 1
  end

  -- One additive mask broadcastable to [N, H, L, S].
  local mask
  if attn_mask then
    mask = attn_mask:dim() == 2 and attn_mask or attn_mask:view(N, H, L, S)
  end
  if kpm then
    local p = kpm:view(N, 1, 1, S)
    mask = mask and mask + p or p
  end
  local dropout_p = self.training and self.dropout or 0

  local out, weights
  if need_weights then
    -- The explicit path: the weights are part of the result.
    local scores = q:matmul(k:transpose(3, 4)) * (1 / math.sqrt(hd))
    if mask then scores = scores + mask end
    weights = scores:softmax(4)
    local p = dropout_p > 0 and F().dropout(weights, dropout_p, true) or weights
    out = p:matmul(v)
  else
    local causal = is_causal and kpm == nil
    out = F().scaled_dot_product_attention(q, k, v, {
      attn_mask = (not causal) and mask or nil, dropout_p = dropout_p, is_causal = causal })
  end
  -- [N, H, L, hd] -> [L, N, E] -> out_proj
  out = out:permute(3, 1, 2, 4):reshape(L, N, self.embed_dim)
  out = self.out_proj(out)
  if self.batch_first and batched then out = out:transpose(1, 2) end
  if not batched then out = out:squeeze(2) end
  if weights then
    if average then weights = weights:mean(2) end -- [N, L, S]
    if not batched then weights = weights:squeeze(1) end
  end
  return out, weights
end
function MultiheadAttention:extra_repr()
  return ('embed_dim=%d, num_heads=%d, dropout=%g, batch_first=%s'):format(self.embed_dim,
    self.num_heads, self.dropout, tostring(self.batch_first))
end
M.MultiheadAttention = MultiheadAttention

-- ---- Transformer layers ----------------------------------------------------------------------
local function activation_of(fn, a)
  if a == nil or a == 'relu' then return function(x) return x:relu() end, 'relu' end
  if a == 'gelu' then return function(x) return x:gelu() end, 'gelu' end
  if type(a) == 'function' then return a, 'function' end
  if type(a) == 'table' and getmetatable(a) and a._modules then
    return function(x) return a(x) end, a.__name
  end
  error(('%s: expected activation "relu", "gelu" or a function, got %s'):format(fn,
    tostring(a)), 4)
end

local LAYER_OPTIONS = set({ 'dim_feedforward', 'dropout', 'activation', 'layer_norm_eps',
  'batch_first', 'norm_first', 'bias', 'dtype', 'device' })

-- The parts both layer kinds share: sizes, activation, the feed-forward block.
local function init_layer(self, fn, d_model, nhead, opts)
  positive_int(fn, 'd_model', d_model, 4)
  positive_int(fn, 'nhead', nhead, 4)
  opts = check_options(fn, opts, LAYER_OPTIONS, 4)
  rawset(self, '_ctor', { d_model, nhead, opts })
  local ff = opts.dim_feedforward or 2048
  positive_int(fn, 'dim_feedforward', ff, 4)
  local p = probability(fn, 'dropout', opts.dropout == nil and 0.1 or opts.dropout, 4)
  self.norm_first = opt_bool(fn, 'norm_first', opts.norm_first, false, 4)
  self.batch_first = opt_bool(fn, 'batch_first', opts.batch_first, false, 4)
  local bias = opt_bool(fn, 'bias', opts.bias, true, 4)
  local eps = opts.layer_norm_eps or 1e-5
  rawset(self, '_activation', (activation_of(fn, opts.activation)))
  local n, o = nn(), { dtype = opts.dtype, device = opts.device }
  local mha = { dropout = p, bias = bias, batch_first = self.batch_first, dtype = o.dtype,
    device = o.device }
  local lin = { bias = bias, dtype = o.dtype, device = o.device }
  return n, mha, lin, ff, p, eps
end

local function layer_norm(n, d_model, eps, bias, opts)
  local ln = n.LayerNorm(d_model, { eps = eps })
  if opts.dtype or opts.device then ln:to({ dtype = opts.dtype, device = opts.device }) end
  if not bias then ln.bias = nil end -- PyTorch's bias=False drops the LayerNorm biases too
  return ln
end

local function feed_forward(self, x)
  return self.dropout2(self.linear2(self.dropout(self._activation(self.linear1(x)))))
end

-- Keyword arguments given as a table or PyTorch's positional tensors: the first argument after
-- the inputs is either an options table or the first positional mask.
local function layer_args(fn, names, allowed, ...)
  local first = ...
  if type(first) == 'table' and not is_tensor(first) then
    return check_options(fn, first, allowed, 3)
  end
  local o, args = {}, { ... }
  for i, name in ipairs(names) do o[name] = args[i] end
  return o
end

-- TransformerEncoderLayer(d_model, nhead [, {dim_feedforward=2048, dropout=0.1,
-- activation='relu', layer_norm_eps=1e-5, batch_first=false, norm_first=false, bias=true}])
local TransformerEncoderLayer = Module:extend('TransformerEncoderLayer')
function TransformerEncoderLayer:__init(d_model, nhead, opts)
  local n, mha, lin, ff, p, eps = init_layer(self, 'TransformerEncoderLayer', d_model, nhead, opts)
  opts = opts or {}
  self:add_module('self_attn', n.MultiheadAttention(d_model, nhead, mha))
  self:add_module('linear1', n.Linear(d_model, ff, lin))
  self:add_module('dropout', n.Dropout(p))
  self:add_module('linear2', n.Linear(ff, d_model, lin))
  self:add_module('norm1', layer_norm(n, d_model, eps, lin.bias, opts))
  self:add_module('norm2', layer_norm(n, d_model, eps, lin.bias, opts))
  self:add_module('dropout1', n.Dropout(p))
  self:add_module('dropout2', n.Dropout(p))
end

local ENC_FORWARD = set({ 'src_mask', 'src_key_padding_mask', 'is_causal' })
-- forward(src [, {src_mask=, src_key_padding_mask=, is_causal=false}]) or
-- forward(src, src_mask, src_key_padding_mask, is_causal)
function TransformerEncoderLayer:forward(src, ...)
  local o = layer_args('TransformerEncoderLayer', { 'src_mask', 'src_key_padding_mask',
    'is_causal' }, ENC_FORWARD, ...)
  local function sa(x)
    local y = self.self_attn(x, x, x, { attn_mask = o.src_mask,
      key_padding_mask = o.src_key_padding_mask, need_weights = false,
      is_causal = o.is_causal and o.src_mask ~= nil or nil })
    return self.dropout1(y)
  end
  local x = src
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + feed_forward(self, self.norm2(x))
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + feed_forward(self, x))
  end
  return x
end
M.TransformerEncoderLayer = TransformerEncoderLayer

-- TransformerDecoderLayer(d_model, nhead [, options as TransformerEncoderLayer])
local TransformerDecoderLayer = Module:extend('TransformerDecoderLayer')
function TransformerDecoderLayer:__init(d_model, nhead, opts)
  local n, mha, lin, ff, p, eps = init_layer(self, 'TransformerDecoderLayer', d_model, nhead, opts)
  opts = opts or {}
  self:add_module('self_attn', n.MultiheadAttention(d_model, nhead, mha))
  self:add_module('multihead_attn', n.MultiheadAttention(d_model, nhead, mha))
  self:add_module('linear1', n.Linear(d_model, ff, lin))
  self:add_module('dropout', n.Dropout(p))
  self:add_module('linear2', n.Linear(ff, d_model, lin))
  self:add_module('norm1', layer_norm(n, d_model, eps, lin.bias, opts))
  self:add_module('norm2', layer_norm(n, d_model, eps, lin.bias, opts))
  self:add_module('norm3', layer_norm(n, d_model, eps, lin.bias, opts))
  self:add_module('dropout1', n.Dropout(p))
  self:add_module('dropout2', n.Dropout(p))
  self:add_module('dropout3', n.Dropout(p))
end

local DEC_NAMES = { 'tgt_mask', 'memory_mask', 'tgt_key_padding_mask',
  'memory_key_padding_mask', 'tgt_is_causal', 'memory_is_causal' }
local DEC_FORWARD = set(DEC_NAMES)
-- forward(tgt, memory [, {tgt_mask=, memory_mask=, tgt_key_padding_mask=,
-- memory_key_padding_mask=, tgt_is_causal=false, memory_is_causal=false}])
function TransformerDecoderLayer:forward(tgt, memory, ...)
  local o = layer_args('TransformerDecoderLayer', DEC_NAMES, DEC_FORWARD, ...)
  if not is_tensor(memory) then
    error('TransformerDecoderLayer: expected memory (argument 2) to be a tensor, got '
      .. type(memory), 2)
  end
  local function sa(x)
    return self.dropout1(self.self_attn(x, x, x, { attn_mask = o.tgt_mask,
      key_padding_mask = o.tgt_key_padding_mask, need_weights = false,
      is_causal = o.tgt_is_causal and o.tgt_mask ~= nil or nil }))
  end
  local function mha(x)
    return self.dropout2(self.multihead_attn(x, memory, memory, { attn_mask = o.memory_mask,
      key_padding_mask = o.memory_key_padding_mask, need_weights = false,
      is_causal = o.memory_is_causal and o.memory_mask ~= nil or nil }))
  end
  local function ff(x)
    return self.dropout3(self.linear2(self.dropout(self._activation(self.linear1(x)))))
  end
  local x = tgt
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + mha(self.norm2(x))
    x = x + ff(self.norm3(x))
  else
    x = self.norm1(x + sa(x))
    x = self.norm2(x + mha(x))
    x = self.norm3(x + ff(x))
  end
  return x
end
M.TransformerDecoderLayer = TransformerDecoderLayer

-- A fresh copy of a layer with the same weights (PyTorch deep-copies the layer it is given).
local function copy_layer(layer)
  local ctor = rawget(layer, '_ctor')
  if not ctor then error('Transformer: expected a Transformer layer to copy', 4) end
  local copy = getmetatable(layer)(ctor[1], ctor[2], ctor[3])
  copy:load_state_dict(layer:state_dict())
  copy:train(layer.training)
  return copy
end

local function layer_stack(self, fn, layer, num_layers, opts, allowed)
  if type(layer) ~= 'table' or not rawget(layer, '_ctor') then
    error(('%s: expected a Transformer layer as argument 1, got %s'):format(fn,
      tostring(layer)), 4)
  end
  positive_int(fn, 'num_layers', num_layers, 4)
  opts = check_options(fn, opts, allowed, 4)
  local list = {}
  for i = 1, num_layers do list[i] = copy_layer(layer) end
  self:add_module('layers', nn().ModuleList(list))
  self.num_layers = num_layers
  if opts.norm ~= nil then self:add_module('norm', opts.norm) end
  return opts
end

local function each_layer(self)
  local layers = {}
  for _, m in ipairs(self.layers:children()) do layers[#layers + 1] = m end
  return layers
end

-- TransformerEncoder(encoder_layer, num_layers [, {norm=}]): num_layers copies of the layer.
local TransformerEncoder = Module:extend('TransformerEncoder')
function TransformerEncoder:__init(layer, num_layers, opts)
  layer_stack(self, 'TransformerEncoder', layer, num_layers, opts,
    set({ 'norm', 'enable_nested_tensor' }))
end
local STACK_ENC = set({ 'mask', 'src_key_padding_mask', 'is_causal' })
-- forward(src [, {mask=, src_key_padding_mask=, is_causal=}]) or forward(src, mask, kpm, is_causal)
function TransformerEncoder:forward(src, ...)
  local o = layer_args('TransformerEncoder', { 'mask', 'src_key_padding_mask', 'is_causal' },
    STACK_ENC, ...)
  local x = src
  for _, l in ipairs(each_layer(self)) do
    x = l(x, { src_mask = o.mask, src_key_padding_mask = o.src_key_padding_mask,
      is_causal = o.is_causal })
  end
  if self.norm then x = self.norm(x) end
  return x
end
M.TransformerEncoder = TransformerEncoder

-- TransformerDecoder(decoder_layer, num_layers [, {norm=}])
local TransformerDecoder = Module:extend('TransformerDecoder')
function TransformerDecoder:__init(layer, num_layers, opts)
  layer_stack(self, 'TransformerDecoder', layer, num_layers, opts, set({ 'norm' }))
end
function TransformerDecoder:forward(tgt, memory, ...)
  local o = layer_args('TransformerDecoder', DEC_NAMES, DEC_FORWARD, ...)
  local x = tgt
  for _, l in ipairs(each_layer(self)) do x = l(x, memory, o) end
  if self.norm then x = self.norm(x) end
  return x
end
M.TransformerDecoder = TransformerDecoder

-- Transformer([{d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
-- dim_feedforward=2048, dropout=0.1, activation='relu', layer_norm_eps=1e-5, batch_first=false,
-- norm_first=false, bias=true}]): the encoder-decoder model of "Attention is all you need".
local TRANSFORMER_OPTIONS = set({ 'd_model', 'nhead', 'num_encoder_layers', 'num_decoder_layers',
  'dim_feedforward', 'dropout', 'activation', 'layer_norm_eps', 'batch_first', 'norm_first',
  'bias', 'dtype', 'device' })
local Transformer = Module:extend('Transformer')
function Transformer:__init(opts)
  opts = check_options('Transformer', opts, TRANSFORMER_OPTIONS, 3)
  local d, h = opts.d_model or 512, opts.nhead or 8
  local layer_opts = {}
  for k, v in pairs(opts) do
    if LAYER_OPTIONS[k] then layer_opts[k] = v end
  end
  local n = nn()
  local eps, bias = opts.layer_norm_eps or 1e-5, opts.bias ~= false
  self:add_module('encoder', M.TransformerEncoder(M.TransformerEncoderLayer(d, h, layer_opts),
    opts.num_encoder_layers or 6, { norm = layer_norm(n, d, eps, bias, opts) }))
  self:add_module('decoder', M.TransformerDecoder(M.TransformerDecoderLayer(d, h, layer_opts),
    opts.num_decoder_layers or 6, { norm = layer_norm(n, d, eps, bias, opts) }))
  self.d_model, self.nhead, self.batch_first = d, h, opts.batch_first == true
  -- PyTorch's _reset_parameters: xavier_uniform_ on every matrix.
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then init.xavier_uniform_(p) end
  end
end
local T_NAMES = { 'src_mask', 'tgt_mask', 'memory_mask', 'src_key_padding_mask',
  'tgt_key_padding_mask', 'memory_key_padding_mask' }
local T_FORWARD = set({ 'src_mask', 'tgt_mask', 'memory_mask', 'src_key_padding_mask',
  'tgt_key_padding_mask', 'memory_key_padding_mask', 'src_is_causal', 'tgt_is_causal',
  'memory_is_causal' })
function Transformer:forward(src, tgt, ...)
  local o = layer_args('Transformer', T_NAMES, T_FORWARD, ...)
  local memory = self.encoder(src, { mask = o.src_mask,
    src_key_padding_mask = o.src_key_padding_mask, is_causal = o.src_is_causal })
  return self.decoder(tgt, memory, { tgt_mask = o.tgt_mask, memory_mask = o.memory_mask,
    tgt_key_padding_mask = o.tgt_key_padding_mask,
    memory_key_padding_mask = o.memory_key_padding_mask, tgt_is_causal = o.tgt_is_causal,
    memory_is_causal = o.memory_is_causal })
end

-- Transformer.generate_square_subsequent_mask(sz [, {dtype=, device=}]): the float causal mask
-- (-inf above the diagonal, 0 elsewhere), as PyTorch's.
function Transformer.generate_square_subsequent_mask(sz, opts)
  positive_int('generate_square_subsequent_mask', 'sz', sz, 2)
  opts = opts or {}
  local E = ember()
  local ones = E.ones(sz, sz, { dtype = 'bool', device = opts.device })
  return E.zeros(sz, sz, { dtype = opts.dtype, device = opts.device })
    :masked_fill(ones:triu(1), -math.huge)
end
M.Transformer = Transformer

return M
