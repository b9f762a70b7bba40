-- ember.nn rotary position embeddings (RoPE), LLaMA / GPT-NeoX style, in the half-rotation
-- layout of Hugging Face's rotate_half: the first and the second half of a head's dims are the
-- two coordinates of each rotated pair.
--
--   local rope = nn.RotaryEmbedding(64, {base = 10000, max_len = 2048})
--   q, k = rope(q), rope(k)                          -- q, k: [B, H, T, 64], positions 1..T
--   q = rope(q, {offset = past_len})                 -- decoding with a KV cache
--   q = F.apply_rotary(q, rope.cos, rope.sin, {offset = past_len})   -- the same, functional
--
-- The tables are computed in float64 (position times frequency, then cos and sin) and rounded
-- once to the dtype asked for, so late positions do not lose the float32 rounding of the
-- product. They are not buffers (not in state_dict, as PyTorch ports keep them non-persistent):
-- the module keeps one copy per device and dtype, made the first time an input needs it.
local Module = require 'ember.nn.module'

local M = {}
local function ember() return require 'ember' end

local check_options = require('ember.util.names').check_options

-- rotate_half(x) = cat(-x2, x1) over the last dim, x1 and x2 its halves.
local function rotate_half(x)
  local d = x:size(-1) / 2
  return ember().cat({ -x:narrow(-1, d + 1, d), x:narrow(-1, 1, d) }, -1)
end

-- F.apply_rotary(x, cos, sin [, {offset=0}]): x * cos + rotate_half(x) * sin for x [..., T, D]
-- (usually [B, H, T, D]), with rows offset+1 .. offset+T of the tables cos, sin [N, R]. When
-- R < D only the first R dims of each head are rotated (GPT-NeoX's rotary_pct), the rest pass.
local function apply_rotary(x, cos, sin, opts)
  local E = ember()
  local fn = 'apply_rotary'
  opts = check_options(fn, opts, { offset = true }, 2)
  if not E.is_tensor(x) then error(fn .. ': expected x to be a tensor, got ' .. type(x), 2) end
  if not E.is_tensor(cos) or not E.is_tensor(sin) then
    error(fn .. ': expected cos and sin to be tensors', 2)
  end
  if x:dim() < 2 then error(fn .. ': expected x with at least 2 dims [..., T, D], got ' .. x:dim() .. '-D', 2) end
  if cos:dim() ~= 2 or sin:dim() ~= 2 or cos:size(1) ~= sin:size(1) or cos:size(2) ~= sin:size(2) then
    error(fn .. ': expected cos and sin tables of the same shape [N, R]', 2)
  end
  local offset = opts.offset or 0
  if type(offset) ~= 'number' or offset < 0 or offset ~= math.floor(offset) then
    error(fn .. ': expected offset to be an integer >= 0, got ' .. tostring(offset), 2)
  end
  local T, D, N, R = x:size(-2), x:size(-1), cos:size(1), cos:size(2)
  if R > D or R % 2 ~= 0 then
    error(('%s: expected tables of an even width at most the head dim %d, got %d'):format(fn, D, R), 2)
  end
  if offset + T > N then
    error(('%s: positions %d..%d exceed the table of %d positions'):format(fn, offset + 1, offset + T, N), 2)
  end
  if T == 0 then return x:clone() end
  local c, s = cos:narrow(1, offset + 1, T), sin:narrow(1, offset + 1, T)
  if R == D then return x * c + rotate_half(x) * s end
  local xr, rest = x:narrow(-1, 1, R), x:narrow(-1, R + 1, D - R)
  return E.cat({ xr * c + rotate_half(xr) * s, rest }, -1)
end

M.functional = { apply_rotary = apply_rotary, rotate_half = rotate_half }

-- RotaryEmbedding(dim [, {base=10000, max_len=2048, dtype=, device=}]): cos and sin tables
-- [max_len, dim] (rope.cos, rope.sin), with inv_freq_i = base^(-2(i-1)/dim) and each frequency
-- repeated over the two halves, as Hugging Face's LLaMA and GPT-NeoX.
local RotaryEmbedding = Module:extend('RotaryEmbedding')
function RotaryEmbedding:__init(dim, opts)
  local fn = 'RotaryEmbedding'
  opts = check_options(fn, opts, { base = true, max_len = true, dtype = true, device = true }, 3)
  if type(dim) ~= 'number' or dim < 2 or dim % 2 ~= 0 then
    error(fn .. ': expected an even dim >= 2, got ' .. tostring(dim), 3)
  end
  local base, max_len = opts.base or 10000, opts.max_len or 2048
  if type(base) ~= 'number' or base <= 0 then error(fn .. ': expected base > 0, got ' .. tostring(base), 3) end
  if type(max_len) ~= 'number' or max_len < 1 or max_len ~= math.floor(max_len) then
    error(fn .. ': expected max_len to be a positive integer, got ' .. tostring(max_len), 3)
  end
  self.dim, self.base, self.max_len = dim, base, max_len
  local E = ember()
  local inv_freq = E.arange(0, dim, 2, { dtype = 'float64' }):div(dim)
  inv_freq = E.full({ dim / 2 }, base, { dtype = 'float64' }):pow(inv_freq):reciprocal()
  local t = E.arange(0, max_len, { dtype = 'float64' })
  local freqs = t:unsqueeze(2) * inv_freq:unsqueeze(1)      -- [max_len, dim / 2]
  local emb = E.cat({ freqs, freqs }, 2)                       -- [max_len, dim]
  local o = { dtype = opts.dtype or E.get_default_dtype(), device = opts.device }
  rawset(self, '_tables', {})
  self.cos, self.sin = emb:cos():to(o.dtype), emb:sin():to(o.dtype)
  if o.device then self.cos, self.sin = self.cos:to(o.device), self.sin:to(o.device) end
end

-- The tables on x's device, in x's dtype (made once, then kept).
function RotaryEmbedding:tables_like(x)
  local key = tostring(x:device()) .. '/' .. x:dtype()
  local hit = self._tables[key]
  if hit then return hit[1], hit[2] end
  local cos, sin = self.cos, self.sin
  if tostring(cos:device()) ~= tostring(x:device()) then cos, sin = cos:to(x:device()), sin:to(x:device()) end
  if cos:dtype() ~= x:dtype() then cos, sin = cos:to(x:dtype()), sin:to(x:dtype()) end
  self._tables[key] = { cos, sin }
  return cos, sin
end

-- rope(x [, {offset=0}]): x [..., T, dim] rotated for positions offset+1 .. offset+T.
function RotaryEmbedding:forward(x, opts)
  if not ember().is_tensor(x) then error('RotaryEmbedding: expected a tensor, got ' .. type(x), 3) end
  local cos, sin = self:tables_like(x)
  return apply_rotary(x, cos, sin, opts)
end

function RotaryEmbedding:extra_repr()
  return ('%d, base=%g, max_len=%d'):format(self.dim, self.base, self.max_len)
end
M.RotaryEmbedding = RotaryEmbedding

return M
