-- ember.print: tensors print like PyTorch's: summarized with edges and '...' above a
-- threshold, columns aligned, and the dtype and device shown when they are not the defaults.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C = core.C

local M = { threshold = 1000, edgeitems = 3, precision = 4, linewidth = 80 }

-- One format for the whole tensor, as PyTorch: integers print as "3.", a wide range of
-- magnitudes (or very large or small values) switches every element to scientific notation.
local function choose_format(values, is_float)
  if not is_float then return 'int' end
  local int_like, max_abs, min_abs = true, 0, math.huge
  for _, v in ipairs(values) do
    if v == v and v ~= math.huge and v ~= -math.huge then
      if v ~= math.floor(v) then int_like = false end
      local a = math.abs(v)
      if a > max_abs then max_abs = a end
      if a > 0 and a < min_abs then min_abs = a end
    end
  end
  if int_like then return max_abs >= 1e8 and 'sci' or 'intfloat' end
  if max_abs >= 1e8 or min_abs < 1e-4 or (min_abs < math.huge and max_abs / min_abs > 1000) then
    return 'sci'
  end
  return 'fixed'
end

local function fmt_number(v, format, is_bool)
  if is_bool then return v ~= 0 and 'true' or 'false' end
  if v ~= v then return 'nan' end
  if v == math.huge then return 'inf' end
  if v == -math.huge then return '-inf' end
  if format == 'int' then return string.format('%d', v) end
  if format == 'intfloat' then return string.format('%.0f.', v) end
  if format == 'sci' then return string.format('%.' .. M.precision .. 'e', v) end
  return string.format('%.' .. M.precision .. 'f', v)
end

-- The elements a summary shows: along every dim longer than 2 * edgeitems, its first and last
-- edgeitems, gathered by narrowing to each corner block before any copy, so that a huge view
-- (an expanded 2^62 x 4 tensor) is never materialized. The result holds the shown elements only.
local function gather_shown(x, edge)
  local function corners(t, d)
    if d >= t.ptr.ndim then return t end
    local n = t.ptr.sizes[d]
    if n <= 2 * edge then return corners(t, d + 1) end
    local lo = corners(core.own(C.em_narrow(t.ptr, d, 0, edge)), d + 1)
    local hi = corners(core.own(C.em_narrow(t.ptr, d, n - edge, edge)), d + 1)
    return core.own(C.em_cat(2, ffi.new('em_tensor *[2]', lo.ptr, hi.ptr), d))
  end
  local was = C.em_grad_enabled()
  C.em_set_grad_enabled(0)
  local ok, r = pcall(corners, x, 0)
  C.em_set_grad_enabled(was)
  if not ok then error(r, 0) end
  return r
end

-- A quantized tensor (a block dtype): its dtype, both shapes (in weights and in blocks), its
-- bytes and device, then the dequantized weights where there are few enough to print and the
-- device can dequantize them.
local function format_blocks(x)
  local s = ('tensor(%s, weights [%s], blocks [%s], %d bytes'):format(
    core.dtype_names[x.ptr.dtype_id], table.concat(x:weight_size(), ', '),
    table.concat(x:size(), ', '), x:nbytes())
  if x.ptr.device_id ~= 0 then s = s .. ", device='" .. core.device_name(x.ptr.device_id) .. "'" end
  s = s .. ')'
  local weights = x:numel() * tonumber(C.em_dtype_block_elems(x.ptr.dtype_id))
  if x.ptr.ndim > 0 and weights <= M.threshold then
    local ok, d = pcall(x.dequantize, x)
    if ok then s = s .. '\n' .. M.format(d) end
  end
  return s
end

function M.format(x)
  if C.em_dtype_is_block(x.ptr.dtype_id) ~= 0 then return format_blocks(x) end
  local ndim = x.ptr.ndim
  local numel = tonumber(C.em_numel(x.ptr))
  local is_float = C.em_dtype_is_floating(x.ptr.dtype_id) ~= 0
  local is_bool = x.ptr.dtype_id == C.EM_BOOL
  local summarize = numel > M.threshold
  local shown_x = summarize and gather_shown(x, M.edgeitems) or x
  local data, keep = tensor.host_doubles(shown_x)
  -- sizes are x's; strides step through shown_x, where a summarized dim holds its first and
  -- last edgeitems only
  local sizes, strides = {}, {}
  local s = 1
  for d = ndim, 1, -1 do
    sizes[d] = tonumber(x.ptr.sizes[d - 1]); strides[d] = s
    s = s * tonumber(shown_x.ptr.sizes[d - 1])
  end
  -- indices shown along a dim (false marks the '...'), as positions in shown_x
  local function shown(d)
    local n = sizes[d]
    local list = {}
    if summarize and n > 2 * M.edgeitems then
      for i = 0, M.edgeitems - 1 do list[#list + 1] = i end
      list[#list + 1] = false
      for i = M.edgeitems, 2 * M.edgeitems - 1 do list[#list + 1] = i end
    else
      for i = 0, n - 1 do list[#list + 1] = i end
    end
    return list
  end
  -- Every printed value is seen first: the format and the column width are shared.
  local values = {}
  local function scan(d, base)
    if d > ndim then values[#values + 1] = data[base]; return end
    for _, i in ipairs(shown(d)) do if i then scan(d + 1, base + i * strides[d]) end end
  end
  scan(1, 0)
  local format = choose_format(values, is_float)
  local width = 0
  for _, v in ipairs(values) do width = math.max(width, #fmt_number(v, format, is_bool)) end
  local function render(d, base, indent)
    if d > ndim then
      local s = fmt_number(data[base], format, is_bool)
      return string.rep(' ', width - #s) .. s
    end
    local parts = {}
    for _, i in ipairs(shown(d)) do
      if i then parts[#parts + 1] = render(d + 1, base + i * strides[d], indent .. ' ')
      else parts[#parts + 1] = '...' end
    end
    if d == ndim then
      -- rows longer than the line width wrap, continuing under the first element
      local per_line = math.max(1, math.floor((M.linewidth - #indent - 2) / (width + 2)))
      if #parts <= per_line then return '[' .. table.concat(parts, ', ') .. ']' end
      local lines = {}
      for k = 1, #parts, per_line do
        lines[#lines + 1] = table.concat(parts, ', ', k, math.min(k + per_line - 1, #parts))
      end
      return '[' .. table.concat(lines, ',\n' .. indent .. ' ') .. ']'
    end
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
  -- autograd, as PyTorch shows it: the op that made x, else whether x is a leaf that
  -- requires grad
  local grad_fn = C.em_grad_fn_name(x.ptr)
  if grad_fn ~= nil then extras[#extras + 1] = 'grad_fn=<' .. core.ffi.string(grad_fn) .. '>'
  elseif C.em_requires_grad(x.ptr) ~= 0 then extras[#extras + 1] = 'requires_grad=true' end
  local _ = keep
  if #extras > 0 then return 'tensor(' .. body .. ', ' .. table.concat(extras, ', ') .. ')' end
  return 'tensor(' .. body .. ')'
end

tensor.mt.__tostring = M.format

return M
