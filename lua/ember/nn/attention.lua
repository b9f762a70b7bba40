-- ember.nn attention: F.scaled_dot_product_attention, PyTorch's function over the fused C op
-- (ember.h, em_scaled_dot_product_attention; docs/api/nn_functional.md). ember.nn.functional
-- takes the `functional` table below as its own.
--
--   F.scaled_dot_product_attention(q, k, v [, {attn_mask=, dropout_p=, is_causal=, scale=,
--                                              enable_gqa=}])
--   F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa)
--
-- q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev] -> [..., Hq, L, Ev].
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own = core.C, core.own
local is_tensor = tensor.is_tensor

local FN = 'scaled_dot_product_attention'
local names = { 'attn_mask', 'dropout_p', 'is_causal', 'scale', 'enable_gqa' }

-- Raises at the caller of F.scaled_dot_product_attention; depth: the helpers between (0 or 1).
local function fail(msg, depth) error(FN .. ': ' .. msg, 3 + (depth or 0)) end

-- The options: a table of named ones, or PyTorch's positional arguments 4 to 8.
local function options(...)
  local first = ...
  if type(first) == 'table' and not is_tensor(first) then
    if select('#', ...) > 1 then fail('expected the options table as the last argument', 1) end
    require('ember.util.names').check_options(FN, first,
      { 'attn_mask', 'dropout_p', 'is_causal', 'scale', 'enable_gqa' }, 4)
    return first
  end
  local o, args = {}, { ... }
  if select('#', ...) > #names then
    fail(('expected at most %d arguments, got %d'):format(#names + 3, select('#', ...) + 3), 1)
  end
  for i, n in ipairs(names) do o[n] = args[i] end
  return o
end

local function boolean(what, v)
  if v == nil then return false end
  if type(v) ~= 'boolean' then
    fail(('expected %s to be a boolean, got %s'):format(what, tostring(v)), 1)
  end
  return v
end

local M = { functional = {} }

-- scaled_dot_product_attention(query, key, value [, opts]): softmax(q k^T * scale + mask) v,
-- fused (no L x S matrix in memory). See the head of this file and docs/api.
function M.functional.scaled_dot_product_attention(query, key, value, ...)
  local args = { query, key, value }
  local what = { 'query', 'key', 'value' }
  for i = 1, 3 do
    if not is_tensor(args[i]) then
      fail(('expected argument %d (%s) to be a tensor, got %s'):format(i, what[i], type(args[i])))
    end
  end
  local o = options(...)
  local mask = o.attn_mask
  if mask ~= nil and not is_tensor(mask) then
    fail(('expected attn_mask to be a tensor or nil, got %s'):format(type(mask)))
  end
  local p = o.dropout_p or 0
  if type(p) ~= 'number' then
    fail(('expected dropout_p to be a number, got %s'):format(tostring(p)))
  end
  local scale = o.scale
  if scale == nil then
    scale = 0 / 0 -- NaN: 1 / sqrt(E)
  elseif type(scale) ~= 'number' then
    fail(('expected scale to be a number or nil, got %s'):format(tostring(scale)))
  end
  local causal = boolean('is_causal', o.is_causal) and 1 or 0
  local gqa = boolean('enable_gqa', o.enable_gqa) and 1 or 0
  local mp = mask and mask.ptr or nil
  local r = C.em_scaled_dot_product_attention(query.ptr, key.ptr, value.ptr, mp, p, causal, scale,
    gqa)
  if r == nil and C.em_last_error_kind() ~= C.EM_ERR_OOM then
    error(ffi.string(C.em_last_error()), 2)
  end
  local out = own(r, C.em_scaled_dot_product_attention, query.ptr, key.ptr, value.ptr, mp, p,
    causal, scale, gqa)
  return out
end

return M
