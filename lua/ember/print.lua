-- ember.print: tensors print like PyTorch's: summarized with edges and '...' above a
-- threshold, columns aligned, and the dtype and device shown when they are not the defaults.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C = core.C

local M = { threshold = 1000, edgeitems = 3, precision = 4 }

local function fmt_number(v, is_float, is_bool, int_like)
  if is_bool then return v ~= 0 and 'true' or 'false' end
  if v ~= v then return 'nan' end
  if v == math.huge then return 'inf' end
  if v == -math.huge then return '-inf' end
  if not is_float then return string.format('%d', v) end
  if int_like then return string.format('%.0f.', v) end
  local a = math.abs(v)
  if a ~= 0 and (a >= 1e8 or a < 1e-4) then return string.format('%.' .. M.precision .. 'e', v) end
  return string.format('%.' .. M.precision .. 'f', v)
end

function M.format(x)
  local data, keep = tensor.host_doubles(x)
  local ndim = x.ptr.ndim
  local numel = tonumber(C.em_numel(x.ptr))
  local is_float = C.em_dtype_is_floating(x.ptr.dtype_id) ~= 0
  local is_bool = x.ptr.dtype_id == C.EM_BOOL
  local summarize = numel > M.threshold
  local sizes, strides = {}, {}
  local s = 1
  for d = ndim, 1, -1 do
    sizes[d] = tonumber(x.ptr.sizes[d - 1]); strides[d] = s; s = s * sizes[d]
  end
  -- indices shown along a dim (nil marks the '...')
  local function shown(d)
    local n = sizes[d]
    local list = {}
    if summarize and n > 2 * M.edgeitems then
      for i = 0, M.edgeitems - 1 do list[#list + 1] = i end
      list[#list + 1] = false
      for i = n - M.edgeitems, n - 1 do list[#list + 1] = i end
    else
      for i = 0, n - 1 do list[#list + 1] = i end
    end
    return list
  end
  -- Every printed value is formatted first so that columns share one width.
  local int_like = true
  if is_float then
    local function scan(d, base)
      if d > ndim then
        local v = data[base]
        if v == v and v ~= math.huge and v ~= -math.huge and v ~= math.floor(v) then int_like = false end
        return
      end
      for _, i in ipairs(shown(d)) do if i then scan(d + 1, base + i * strides[d]) end end
    end
    scan(1, 0)
  end
  local width = 0
  local function measure(d, base)
    if d > ndim then
      width = math.max(width, #fmt_number(data[base], is_float, is_bool, int_like))
      return
    end
    for _, i in ipairs(shown(d)) do if i then measure(d + 1, base + i * strides[d]) end end
  end
  measure(1, 0)
  local function render(d, base, indent)
    if d > ndim then
      local s = fmt_number(data[base], is_float, is_bool, int_like)
      return string.rep(' ', width - #s) .. s
    end
    local parts = {}
    for _, i in ipairs(shown(d)) do
      if i then parts[#parts + 1] = render(d + 1, base + i * strides[d], indent .. ' ')
      else parts[#parts + 1] = '...' end
    end
    if d == ndim then return '[' .. table.concat(parts, ', ') .. ']' end
    local sep = ',' .. string.rep('\n', ndim - d) .. indent .. ' '
    return '[' .. table.concat(parts, sep) .. ']'
  end
  local body
  if numel == 0 then body = '[]'
  else body = render(1, 0, string.rep(' ', 7)) end
  local extras = {}
  if ndim > 0 and numel == 0 then extras[#extras + 1] = 'size=' .. tostring(x:size()) end
  if x.ptr.dtype_id ~= core.default_dtype and not is_bool and not (x.ptr.dtype_id == C.EM_INT64 and false) then
    extras[#extras + 1] = 'dtype=' .. core.dtype_names[x.ptr.dtype_id]
  elseif is_bool then
    extras[#extras + 1] = 'dtype=bool'
  end
  if x.ptr.device_id ~= 0 then extras[#extras + 1] = "device='" .. core.device_name(x.ptr.device_id) .. "'" end
  local _ = keep
  if #extras > 0 then return 'tensor(' .. body .. ', ' .. table.concat(extras, ', ') .. ')' end
  return 'tensor(' .. body .. ')'
end

tensor.mt.__tostring = M.format

return M
