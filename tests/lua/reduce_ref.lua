-- Plain-Lua references for reduce_spec.lua and reduce_dim_spec.lua: every reduction, scan and
-- softmax computed with loops over flat row-major tables, in double. Nothing here calls Ember.
local H = require 'tests.lua.helpers'

local nan, inf = 0 / 0, math.huge

-- Row-major strides of a shape.
local function strides_of(shape)
  local st, s = {}, 1
  for d = #shape, 1, -1 do st[d] = s; s = s * shape[d] end
  return st
end

-- Calls f(idx) for every 0-based index tuple of `sizes` in row-major order.
local function each_index(sizes, f)
  local idx = {}
  for i = 1, #sizes do
    if sizes[i] == 0 then return end
    idx[i] = 0
  end
  while true do
    f(idx)
    local d = #sizes
    while d >= 1 do
      idx[d] = idx[d] + 1
      if idx[d] < sizes[d] then break end
      idx[d] = 0
      d = d - 1
    end
    if d < 1 then return end
  end
end

-- Reduces flat (row-major values of `shape`) over `dims` (1-based, negative allowed; nil = all)
-- with f(list of values) -> value. Returns a nested table (a number when 0-d).
local function ref_reduce(flat, shape, dims, keepdim, f)
  local nd, red = #shape, {}
  if dims == nil then
    for d = 1, nd do red[d] = true end
  else
    for _, d in ipairs(type(dims) == 'table' and dims or { dims }) do
      red[d < 0 and nd + d + 1 or d] = true
    end
  end
  local st = strides_of(shape)
  local kept_sizes, kept_dims, red_sizes, red_dims, out_shape = {}, {}, {}, {}, {}
  for d = 1, nd do
    if red[d] then
      red_sizes[#red_sizes + 1], red_dims[#red_dims + 1] = shape[d], d
      if keepdim then out_shape[#out_shape + 1] = 1 end
    else
      kept_sizes[#kept_sizes + 1], kept_dims[#kept_dims + 1] = shape[d], d
      out_shape[#out_shape + 1] = shape[d]
    end
  end
  local results = {}
  each_index(kept_sizes, function(k)
    local base = 0
    for i = 1, #k do base = base + k[i] * st[kept_dims[i]] end
    local vals = {}
    each_index(red_sizes, function(r)
      local off = base
      for i = 1, #r do off = off + r[i] * st[red_dims[i]] end
      vals[#vals + 1] = flat[off + 1]
    end)
    results[#results + 1] = f(vals)
  end)
  return H.nested(out_shape, function(i) return results[i] end)
end

-- Applies g(list) -> list to every line along dim; the result has the input's shape.
local function ref_along(flat, shape, dim, g)
  local nd = #shape
  if dim < 0 then dim = nd + dim + 1 end
  local st = strides_of(shape)
  local out = {}
  if nd == 0 then
    return g({ flat[1] })[1]
  end
  local others, other_dims = {}, {}
  for d = 1, nd do
    if d ~= dim then others[#others + 1], other_dims[#other_dims + 1] = shape[d], d end
  end
  each_index(others, function(k)
    local base = 0
    for i = 1, #k do base = base + k[i] * st[other_dims[i]] end
    local vals = {}
    for j = 0, shape[dim] - 1 do vals[#vals + 1] = flat[base + j * st[dim] + 1] end
    local res = g(vals)
    for j = 0, shape[dim] - 1 do out[base + j * st[dim] + 1] = res[j + 1] end
  end)
  return H.nested(shape, function(i) return out[i] end)
end

local function isnan(v) return v ~= v end

local R = {}
function R.sum(v) local s = 0; for _, x in ipairs(v) do s = s + x end; return s end
function R.mean(v) return R.sum(v) / #v end
function R.prod(v) local s = 1; for _, x in ipairs(v) do s = s * x end; return s end
function R.amax(v)
  local m = -inf
  for _, x in ipairs(v) do if isnan(x) then return nan end; if x > m then m = x end end
  return m
end
function R.amin(v)
  local m = inf
  for _, x in ipairs(v) do if isnan(x) then return nan end; if x < m then m = x end end
  return m
end
function R.all(v) for _, x in ipairs(v) do if x == 0 then return false end end; return true end
function R.any(v) for _, x in ipairs(v) do if x ~= 0 then return true end end; return false end
function R.logsumexp(v)
  local m = R.amax(v)
  if m ~= m or m == inf or m == -inf then return m end
  local s = 0
  for _, x in ipairs(v) do s = s + math.exp(x - m) end
  return m + math.log(s)
end
function R.var(correction)
  return function(v)
    local mu, s = R.mean(v), 0
    for _, x in ipairs(v) do s = s + (x - mu) ^ 2 end
    return s / math.max(0, #v - correction)
  end
end
function R.std(correction)
  local var = R.var(correction)
  return function(v) return math.sqrt(var(v)) end
end
function R.norm(p)
  return function(v)
    if p == inf then
      local m = 0
      for _, x in ipairs(v) do m = math.max(m, math.abs(x)) end
      return m
    elseif p == -inf then
      local m = inf
      for _, x in ipairs(v) do m = math.min(m, math.abs(x)) end
      return m
    elseif p == 0 then
      local c = 0
      for _, x in ipairs(v) do if x ~= 0 then c = c + 1 end end
      return c
    end
    local s = 0
    for _, x in ipairs(v) do s = s + math.abs(x) ^ p end
    return s ^ (1 / p)
  end
end
-- The first maximum; NaN beats everything (first NaN wins). 1-based.
function R.argmax(v)
  local best, bi = nil, nil
  for i, x in ipairs(v) do
    if bi == nil or (isnan(x) and not isnan(best)) or (not isnan(best) and x > best) then
      best, bi = x, i
    end
  end
  return bi
end
function R.argmin(v)
  local best, bi = nil, nil
  for i, x in ipairs(v) do
    if bi == nil or (isnan(x) and not isnan(best)) or (not isnan(best) and x < best) then
      best, bi = x, i
    end
  end
  return bi
end
function R.cumsum(v)
  local r, s = {}, 0
  for i, x in ipairs(v) do s = s + x; r[i] = s end
  return r
end
function R.cumprod(v)
  local r, s = {}, 1
  for i, x in ipairs(v) do s = s * x; r[i] = s end
  return r
end
function R.softmax(v)
  local m = R.amax(v)
  local s, r = 0, {}
  for _, x in ipairs(v) do s = s + math.exp(x - m) end
  for i, x in ipairs(v) do r[i] = math.exp(x - m) / s end
  return r
end
function R.log_softmax(v)
  local m = R.amax(v)
  local s, r = 0, {}
  for _, x in ipairs(v) do s = s + math.exp(x - m) end
  for i, x in ipairs(v) do r[i] = x - m - math.log(s) end
  return r
end

return { R = R, reduce = ref_reduce, along = ref_along, each_index = each_index, isnan = isnan }
