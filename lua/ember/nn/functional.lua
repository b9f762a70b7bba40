-- ember.nn.functional: the neural-network kernels (convolution, pooling, normalization,
-- dropout, embedding, fused class losses) as functions, with PyTorch's signatures and
-- Torch7's 1-based convention for dims, indices and classes.
--
-- Options come as PyTorch's positional arguments or as one table of named ones:
--   F.conv2d(x, w, b, 2, 1)  ==  F.conv2d(x, w, b, {stride = 2, padding = 1})
-- Pair options (stride, padding, ...) take a number or a table of two.
--
-- Every function calls one C op (ember.h, "neural-network ops"), which records autograd.
-- ember.nn merges the activations and the other losses into this table.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own = core.C, core.own
local is_tensor = tensor.is_tensor

local F = {}

-- ---- argument helpers -------------------------------------------------------------------------

local function need_tensor(fn, what, v)
  if not is_tensor(v) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(v)), 4)
  end
end

local function opt_tensor(fn, what, v)
  if v ~= nil and not is_tensor(v) then
    error(('%s: expected %s to be a tensor or nil, got %s'):format(fn, what, type(v)), 4)
  end
  return v and v.ptr or nil
end

local function integer(fn, what, v)
  if type(v) ~= 'number' or v ~= math.floor(v) then
    error(('%s: expected %s to be an integer, got %s'):format(fn, what, tostring(v)), 4)
  end
  return v
end

-- A number or a table of n numbers, written into an int64_t[n] buffer.
local function fill(buf, n, fn, what, v)
  if type(v) == 'number' then
    integer(fn, what, v)
    for i = 0, n - 1 do buf[i] = v end
    return buf
  end
  if type(v) == 'table' and #v == n then
    for i = 1, n do buf[i - 1] = integer(fn, what, v[i]) end
    return buf
  end
  error(('%s: expected %s as a number or a table of %d numbers, got %s'):format(fn, what, n,
    type(v) == 'table' and ('a table of ' .. #v) or tostring(v)), 4)
end

-- Buffers reused by every call (Lua runs one call at a time).
local b_stride, b_pad, b_dil, b_opad, b_kernel, b_size =
  ffi.new('int64_t[2]'), ffi.new('int64_t[2]'), ffi.new('int64_t[2]'), ffi.new('int64_t[2]'),
  ffi.new('int64_t[2]'), ffi.new('int64_t[2]')
local b_shape = ffi.new('int64_t[8]')
local out_ptr = ffi.new('em_tensor*[1]')

-- Named options, or PyTorch's positional ones listed in `names`: opts(names, a, b, ...).
-- Named options are checked against `names` (the function's name, for the message, is the one
-- it was called by, which is its own: conv2d, max_pool2d ...).
local function options(names, first, ...)
  if type(first) == 'table' and first[1] == nil and not is_tensor(first) then
    for k in pairs(first) do
      local known = false
      for _, n in ipairs(names) do known = known or n == k end
      if not known then
        local fn = (debug.getinfo(2, 'n') or {}).name or 'options'
        require('ember.util.names').check_options(fn, first, names, 3)
      end
    end
    return first
  end
  local o, args = {}, { first, ... }
  for i, name in ipairs(names) do o[name] = args[i] end
  return o
end

local function boolean(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'boolean' then
    error(('%s: expected %s to be a boolean, got %s'):format(fn, what, tostring(v)), 4)
  end
  return v
end

local reductions = { none = C.EM_REDUCTION_NONE, mean = C.EM_REDUCTION_MEAN, sum = C.EM_REDUCTION_SUM }
local function reduction(fn, r)
  local v = reductions[r or 'mean']
  if v == nil then
    error(("%s: reduction must be 'mean', 'sum' or 'none', got %s"):format(fn, tostring(r)), 4)
  end
  return v
end

-- Takes a new tensor from C, raising its error at the caller of the F.* function that called
-- this (errors then point at user code). Callers must not tail-call it: `local y = take(...)`.
local function take(p, retry, ...)
  if p == nil and (retry == nil or C.em_last_error_kind() ~= C.EM_ERR_OOM) then
    error(ffi.string(C.em_last_error()), 3)
  end
  return own(p, retry, ...)
end

-- C reports indices and classes 0-based; Lua callers wrote them 1-based. Rewrites the number
-- in the messages that quote one, then raises.
local function raise_1based(pattern)
  local msg = ffi.string(C.em_last_error())
  msg = msg:gsub(pattern, function(prefix, n) return prefix .. tostring(tonumber(n) + 1) end)
  error(msg, 3)
end

-- ---- convolution --------------------------------------------------------------------------------

local conv_names = { 'stride', 'padding', 'dilation', 'groups' }

-- padding='same' (stride 1): PyTorch pads d*(k-1)/2 each side and puts an odd remainder on the
-- right. An odd total is run with one more row on the left too, and that first output dropped.
local function same_padding(fn, weight, o, nsp)
  local stride = o.stride or 1
  for i = 1, nsp do
    local s = type(stride) == 'table' and stride[i] or stride
    if s ~= 1 then error(fn .. ": padding='same' needs stride 1", 4) end
  end
  local pads, trim = {}, {}
  local dil = o.dilation or 1
  for i = 1, nsp do
    local d = type(dil) == 'table' and dil[i] or dil
    local total = d * (weight:size(2 + i) - 1)
    pads[i] = math.ceil(total / 2)
    trim[i] = total % 2 == 1
  end
  return pads, trim
end

local function padding_of(fn, weight, o, nsp)
  local p = o.padding or 0
  if p == 'valid' then return 0, nil end
  if p == 'same' then return same_padding(fn, weight, o, nsp) end
  if type(p) == 'string' then
    error(("%s: padding must be a number, a table, 'same' or 'valid', got '%s'"):format(fn, p), 3)
  end
  return p, nil
end

local function trimmed(y, trim, nsp)
  if not trim then return y end
  local batch_dims = y:dim() - nsp
  for i = 1, nsp do
    if trim[i] then
      local d = batch_dims + i
      y = y:narrow(d, 2, y:size(d) - 1)
    end
  end
  return y
end

-- conv2d(input [N, C, H, W], weight [out, C/groups, kh, kw] [, bias [, opts]])
-- opts: stride (1), padding (0, or 'same' / 'valid'), dilation (1), groups (1).
function F.conv2d(input, weight, bias, ...)
  local fn = 'conv2d'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'weight', weight)
  local b = opt_tensor(fn, 'bias', bias)
  local o = options(conv_names, ...)
  local pad, trim = padding_of(fn, weight, o, 2)
  local s, p = fill(b_stride, 2, fn, 'stride', o.stride or 1), fill(b_pad, 2, fn, 'padding', pad)
  local d = fill(b_dil, 2, fn, 'dilation', o.dilation or 1)
  local g = integer(fn, 'groups', o.groups or 1)
  local y = take(C.em_conv2d(input.ptr, weight.ptr, b, s, p, d, g), C.em_conv2d, input.ptr,
    weight.ptr, b, s, p, d, g)
  return trimmed(y, trim, 2)
end

-- conv1d(input [N, C, L], weight [out, C/groups, k] [, bias [, opts]])
function F.conv1d(input, weight, bias, ...)
  local fn = 'conv1d'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'weight', weight)
  local b = opt_tensor(fn, 'bias', bias)
  local o = options(conv_names, ...)
  local pad, trim = padding_of(fn, weight, o, 1)
  local s = integer(fn, 'stride', type(o.stride) == 'table' and o.stride[1] or o.stride or 1)
  local p = integer(fn, 'padding', type(pad) == 'table' and pad[1] or pad)
  local d = integer(fn, 'dilation', type(o.dilation) == 'table' and o.dilation[1] or o.dilation or 1)
  local g = integer(fn, 'groups', o.groups or 1)
  local y = take(C.em_conv1d(input.ptr, weight.ptr, b, s, p, d, g), C.em_conv1d, input.ptr,
    weight.ptr, b, s, p, d, g)
  return trimmed(y, trim, 1)
end

local transpose_names = { 'stride', 'padding', 'output_padding', 'groups', 'dilation' }

-- conv_transpose2d(input [N, C, H, W], weight [C, out/groups, kh, kw] [, bias [, opts]])
-- opts: stride, padding, output_padding, groups, dilation (PyTorch's positional order).
function F.conv_transpose2d(input, weight, bias, ...)
  local fn = 'conv_transpose2d'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'weight', weight)
  local b = opt_tensor(fn, 'bias', bias)
  local o = options(transpose_names, ...)
  local s, p = fill(b_stride, 2, fn, 'stride', o.stride or 1), fill(b_pad, 2, fn, 'padding', o.padding or 0)
  local op = fill(b_opad, 2, fn, 'output_padding', o.output_padding or 0)
  local d = fill(b_dil, 2, fn, 'dilation', o.dilation or 1)
  local g = integer(fn, 'groups', o.groups or 1)
  local r = take(C.em_conv_transpose2d(input.ptr, weight.ptr, b, s, p, op, d, g),
    C.em_conv_transpose2d, input.ptr, weight.ptr, b, s, p, op, d, g)
  return r
end

function F.conv_transpose1d(input, weight, bias, ...)
  local fn = 'conv_transpose1d'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'weight', weight)
  local b = opt_tensor(fn, 'bias', bias)
  local o = options(transpose_names, ...)
  local function one(v, default, what)
    return integer(fn, what, type(v) == 'table' and v[1] or v or default)
  end
  local s, p = one(o.stride, 1, 'stride'), one(o.padding, 0, 'padding')
  local op, d = one(o.output_padding, 0, 'output_padding'), one(o.dilation, 1, 'dilation')
  local g = integer(fn, 'groups', o.groups or 1)
  local r = take(C.em_conv_transpose1d(input.ptr, weight.ptr, b, s, p, op, d, g),
    C.em_conv_transpose1d, input.ptr, weight.ptr, b, s, p, op, d, g)
  return r
end

-- conv2d_weight(input, weight_size, grad_output [, opts]): the gradient of conv2d with respect
-- to its weight (torch.nn.grad.conv2d_weight).
function F.conv2d_weight(input, weight_size, grad_output, ...)
  local fn = 'conv2d_weight'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'grad_output', grad_output)
  if type(weight_size) ~= 'table' or #weight_size ~= 4 then
    error(fn .. ': expected weight_size as a table of 4 numbers', 2)
  end
  local ws = ffi.new('int64_t[4]', weight_size)
  local o = options(conv_names, ...)
  local s, p = fill(b_stride, 2, fn, 'stride', o.stride or 1), fill(b_pad, 2, fn, 'padding', o.padding or 0)
  local d = fill(b_dil, 2, fn, 'dilation', o.dilation or 1)
  local g = integer(fn, 'groups', o.groups or 1)
  local r = take(C.em_conv2d_weight(input.ptr, ws, grad_output.ptr, s, p, d, g))
  return r
end

-- ---- pooling ------------------------------------------------------------------------------------

local max_names = { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }

-- Indices come back 1-based (positions within each input plane, row-major), as Torch7's.
local function with_indices(y, want)
  if not want then return y end
  local ind = core.take_out(0)
  return y, ind + 1
end

-- max_pool2d(input, kernel_size [, opts]): opts stride (= kernel_size), padding (0),
-- dilation (1), ceil_mode (false), return_indices (false).
function F.max_pool2d(input, kernel_size, ...)
  local fn = 'max_pool2d'
  need_tensor(fn, 'input', input)
  local o = options(max_names, ...)
  local k = fill(b_kernel, 2, fn, 'kernel_size', kernel_size)
  local s = fill(b_stride, 2, fn, 'stride', o.stride or kernel_size)
  local p, d = fill(b_pad, 2, fn, 'padding', o.padding or 0), fill(b_dil, 2, fn, 'dilation', o.dilation or 1)
  local ceil = boolean(fn, 'ceil_mode', o.ceil_mode, false) and 1 or 0
  local want = boolean(fn, 'return_indices', o.return_indices, false)
  local slot = want and core.out_slots or nil
  local y = take(C.em_max_pool2d(input.ptr, k, s, p, d, ceil, slot), C.em_max_pool2d, input.ptr, k,
    s, p, d, ceil, slot)
  return with_indices(y, want)
end

-- The 1-D forms run the 2-D kernels over [N, C, 1, L] views.
local function one_d(fn, input)
  need_tensor(fn, 'input', input)
  if input:dim() ~= 2 and input:dim() ~= 3 then
    error(('%s: expected a 2-D (unbatched) or 3-D input, got %d-D'):format(fn, input:dim()), 3)
  end
  return input:unsqueeze(-2)
end
local function first(v) return type(v) == 'table' and v[1] or v end

function F.max_pool1d(input, kernel_size, ...)
  local x = one_d('max_pool1d', input)
  local o = options(max_names, ...)
  local k = first(kernel_size)
  local y, ind = F.max_pool2d(x, { 1, k }, { stride = { 1, first(o.stride or k) },
    padding = { 0, first(o.padding or 0) }, dilation = { 1, first(o.dilation or 1) },
    ceil_mode = o.ceil_mode, return_indices = o.return_indices })
  if ind then return y:squeeze(-2), ind:squeeze(-2) end
  return y:squeeze(-2)
end

local avg_names = { 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' }

-- avg_pool2d(input, kernel_size [, opts]): opts stride (= kernel_size), padding (0),
-- ceil_mode (false), count_include_pad (true), divisor_override (nil).
function F.avg_pool2d(input, kernel_size, ...)
  local fn = 'avg_pool2d'
  need_tensor(fn, 'input', input)
  local o = options(avg_names, ...)
  local k = fill(b_kernel, 2, fn, 'kernel_size', kernel_size)
  local s = fill(b_stride, 2, fn, 'stride', o.stride or kernel_size)
  local p = fill(b_pad, 2, fn, 'padding', o.padding or 0)
  local ceil = boolean(fn, 'ceil_mode', o.ceil_mode, false) and 1 or 0
  local cip = boolean(fn, 'count_include_pad', o.count_include_pad, true) and 1 or 0
  local div = 0
  if o.divisor_override ~= nil then
    div = integer(fn, 'divisor_override', o.divisor_override)
    if div < 1 then error(fn .. ': expected divisor_override >= 1, got ' .. div, 2) end
  end
  local r = take(C.em_avg_pool2d(input.ptr, k, s, p, ceil, cip, div), C.em_avg_pool2d, input.ptr, k,
    s, p, ceil, cip, div)
  return r
end

function F.avg_pool1d(input, kernel_size, ...)
  local x = one_d('avg_pool1d', input)
  local o = options(avg_names, ...)
  local k = first(kernel_size)
  return F.avg_pool2d(x, { 1, k }, { stride = { 1, first(o.stride or k) },
    padding = { 0, first(o.padding or 0) }, ceil_mode = o.ceil_mode,
    count_include_pad = o.count_include_pad, divisor_override = o.divisor_override }):squeeze(-2)
end

-- output_size: a number, or a pair whose entries may be false (keep the input's size).
local function adaptive_size(fn, input, size)
  if type(size) == 'table' and #size ~= 2 then
    error(fn .. ': expected output_size as a number or a table of 2', 3)
  end
  local t = type(size) == 'table' and { size[1], size[2] } or { size, size }
  for i = 1, 2 do
    if t[i] == false and input:dim() >= 2 then t[i] = input:size(input:dim() - 2 + i) end
  end
  return fill(b_size, 2, fn, 'output_size', t)
end

function F.adaptive_avg_pool2d(input, output_size)
  local fn = 'adaptive_avg_pool2d'
  need_tensor(fn, 'input', input)
  local s = adaptive_size(fn, input, output_size)
  local r = take(C.em_adaptive_avg_pool2d(input.ptr, s), C.em_adaptive_avg_pool2d, input.ptr, s)
  return r
end

function F.adaptive_max_pool2d(input, output_size, return_indices)
  local fn = 'adaptive_max_pool2d'
  need_tensor(fn, 'input', input)
  local s = adaptive_size(fn, input, output_size)
  local want = boolean(fn, 'return_indices', return_indices, false)
  local slot = want and core.out_slots or nil
  local y = take(C.em_adaptive_max_pool2d(input.ptr, s, slot), C.em_adaptive_max_pool2d,
    input.ptr, s, slot)
  return with_indices(y, want)
end

function F.adaptive_avg_pool1d(input, output_size)
  local x = one_d('adaptive_avg_pool1d', input)
  return F.adaptive_avg_pool2d(x, { 1, first(output_size) }):squeeze(-2)
end

-- max_unpool2d(input, indices (1-based, from max_pool2d), kernel_size [, opts]): opts stride
-- (= kernel_size), padding (0), output_size (default (in - 1) * stride - 2 * padding + kernel).
function F.max_unpool2d(input, indices, kernel_size, ...)
  local fn = 'max_unpool2d'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'indices', indices)
  local o = options({ 'stride', 'padding', 'output_size' }, ...)
  local k = { fill(b_kernel, 2, fn, 'kernel_size', kernel_size)[0], b_kernel[1] }
  local s = fill(b_stride, 2, fn, 'stride', o.stride or kernel_size)
  local p = fill(b_pad, 2, fn, 'padding', o.padding or 0)
  local size = o.output_size
  if size == nil then
    local n = input:dim()
    size = {}
    for i = 1, 2 do
      size[i] = tonumber((input:size(n - 2 + i) - 1) * s[i - 1] - 2 * p[i - 1] + k[i])
    end
  elseif type(size) == 'table' and #size > 2 then
    size = { size[#size - 1], size[#size] } -- a full shape: its spatial dims
  end
  local os = fill(b_size, 2, fn, 'output_size', size)
  local i0 = indices - 1
  local r = take(C.em_max_unpool2d(input.ptr, i0.ptr, os), C.em_max_unpool2d, input.ptr, i0.ptr, os)
  return r
end

-- ---- normalization ------------------------------------------------------------------------------

-- batch_norm(input, running_mean, running_var [, weight, bias, training (false),
-- momentum (0.1), eps (1e-5)]): running statistics are updated in place when training.
function F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
  local fn = 'batch_norm'
  need_tensor(fn, 'input', input)
  local rm, rv = opt_tensor(fn, 'running_mean', running_mean), opt_tensor(fn, 'running_var', running_var)
  local w, b = opt_tensor(fn, 'weight', weight), opt_tensor(fn, 'bias', bias)
  local t = boolean(fn, 'training', training, false) and 1 or 0
  momentum, eps = momentum or 0.1, eps or 1e-5
  if type(momentum) ~= 'number' or type(eps) ~= 'number' then
    error(fn .. ': expected momentum and eps to be numbers', 2)
  end
  local r = take(C.em_batch_norm(input.ptr, rm, rv, w, b, t, momentum, eps), C.em_batch_norm,
    input.ptr, rm, rv, w, b, t, momentum, eps)
  return r
end

-- layer_norm(input, normalized_shape (a number or a table) [, weight, bias, eps (1e-5)])
function F.layer_norm(input, normalized_shape, weight, bias, eps)
  local fn = 'layer_norm'
  need_tensor(fn, 'input', input)
  local shape = type(normalized_shape) == 'number' and { normalized_shape } or normalized_shape
  if type(shape) ~= 'table' or #shape < 1 or #shape > 8 then
    error(fn .. ': expected normalized_shape as a number or a table of 1 to 8 numbers', 2)
  end
  for i = 1, #shape do b_shape[i - 1] = integer(fn, 'normalized_shape', shape[i]) end
  local w, b = opt_tensor(fn, 'weight', weight), opt_tensor(fn, 'bias', bias)
  eps = eps or 1e-5
  local r = take(C.em_layer_norm(input.ptr, #shape, b_shape, w, b, eps), C.em_layer_norm, input.ptr,
    #shape, b_shape, w, b, eps)
  return r
end

-- group_norm(input [N, C, ...], num_groups [, weight, bias, eps (1e-5)])
function F.group_norm(input, num_groups, weight, bias, eps)
  local fn = 'group_norm'
  need_tensor(fn, 'input', input)
  integer(fn, 'num_groups', num_groups)
  local w, b = opt_tensor(fn, 'weight', weight), opt_tensor(fn, 'bias', bias)
  eps = eps or 1e-5
  local r = take(C.em_group_norm(input.ptr, num_groups, w, b, eps), C.em_group_norm, input.ptr,
    num_groups, w, b, eps)
  return r
end

-- instance_norm(input [N, C, ...] [, running_mean, running_var, weight, bias,
-- use_input_stats (true), momentum, eps]): group_norm with one group per channel. Running
-- statistics are not supported.
function F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
  local fn = 'instance_norm'
  need_tensor(fn, 'input', input)
  if running_mean ~= nil or running_var ~= nil or use_input_stats == false then
    error(fn .. ': running statistics are not supported (use batch_norm or group_norm)', 2)
  end
  local _ = momentum
  if input:dim() < 2 then error(fn .. ': expected an input with at least 2 dims', 2) end
  return F.group_norm(input, input:size(2), weight, bias, eps)
end

-- ---- dropout, embedding ---------------------------------------------------------------------------

local function probability(fn, p)
  p = p == nil and 0.5 or p
  if type(p) ~= 'number' or not (p >= 0 and p <= 1) then
    error(('%s: expected p between 0 and 1, got %s'):format(fn, tostring(p)), 3)
  end
  return p
end

-- dropout(input [, p (0.5), training (true)]): zeroes elements with probability p (Ember's
-- seeded generator) and scales the rest by 1 / (1 - p). Not training: returns input.
function F.dropout(input, p, training)
  local fn = 'dropout'
  need_tensor(fn, 'input', input)
  p = probability(fn, p)
  local t = boolean(fn, 'training', training, true) and 1 or 0
  if t == 0 then return input end
  local r = take(C.em_dropout(input.ptr, p, t), C.em_dropout, input.ptr, p, t)
  return r
end

-- dropout2d / dropout1d: whole channels of [N, C, ...] zeroed together.
local function channel_dropout(fn, min_dim)
  return function(input, p, training)
    need_tensor(fn, 'input', input)
    p = probability(fn, p)
    if not boolean(fn, 'training', training, true) or p == 0 then return input end
    if input:dim() < min_dim then
      error(('%s: expected an input with at least %d dims, got %d-D'):format(fn, min_dim, input:dim()), 2)
    end
    local shape = { input:size(1), input:size(2) }
    for i = 3, input:dim() do shape[i] = 1 end
    local ember = require 'ember'
    if p == 1 then return input * 0 end
    local mask = ember.empty(shape, { dtype = input:dtype(), device = input:device() })
    mask:bernoulli_(1 - p)
    return input * (mask * (1 / (1 - p)))
  end
end
F.dropout2d = channel_dropout('dropout2d', 3)
F.dropout1d = channel_dropout('dropout1d', 2)

-- embedding(input (1-based indices), weight [V, D] [, opts]): opts padding_idx (1-based;
-- negative counts from the end), whose row gets no gradient.
function F.embedding(input, weight, opts)
  local fn = 'embedding'
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'weight', weight)
  opts = type(opts) == 'table' and opts or { padding_idx = opts }
  require('ember.util.names').check_options(fn, opts, { 'padding_idx', 'max_norm' })
  if opts.max_norm ~= nil then error(fn .. ': max_norm is not supported', 2) end
  local pad = -1
  if opts.padding_idx ~= nil then
    local v = integer(fn, 'padding_idx', opts.padding_idx)
    local rows = weight:dim() == 2 and weight:size(1) or 0
    if v == 0 or v > rows or v < -rows then
      error(('%s: padding_idx %d is out of range for %d rows'):format(fn, v, rows), 2)
    end
    pad = v > 0 and v - 1 or rows + v
  end
  if input:is_floating_point() or input:dtype() == 'bool' then
    error(fn .. ': expected integer indices, got ' .. input:dtype(), 2)
  end
  local i0 = input - 1
  local p = C.em_embedding(weight.ptr, i0.ptr, pad)
  if p == nil and C.em_last_error_kind() ~= C.EM_ERR_OOM then raise_1based('(index )(%-?%d+)') end
  local r = own(p, C.em_embedding, weight.ptr, i0.ptr, pad)
  return r
end

-- ---- class losses ---------------------------------------------------------------------------------

local function class_targets(fn, input, target, opts)
  need_tensor(fn, 'input', input)
  need_tensor(fn, 'target', target)
  local w = opt_tensor(fn, 'weight', opts.weight)
  local ignore = integer(fn, 'ignore_index', opts.ignore_index or -100)
  return w, ignore - 1, reduction(fn, opts.reduction)
end

-- nll_loss(input (log-probabilities [N, C, ...]), target (1-based classes [N, ...]) [, opts]):
-- opts weight (per class), ignore_index (-100), reduction ('mean').
function F.nll_loss(input, target, opts)
  local fn = 'nll_loss'
  opts = require('ember.util.names').check_options(fn, opts, { 'weight', 'ignore_index', 'reduction' })
  local w, ignore, red = class_targets(fn, input, target, opts)
  if target:is_floating_point() then
    error(('%s: expected integer class targets, got %s (use target:long())'):format(fn, target:dtype()), 2)
  end
  local t0 = target - 1
  local p = C.em_nll_loss(input.ptr, t0.ptr, w, ignore, red)
  if p == nil and C.em_last_error_kind() ~= C.EM_ERR_OOM then raise_1based('(class index )(%-?%d+)') end
  local r = own(p, C.em_nll_loss, input.ptr, t0.ptr, w, ignore, red)
  return r
end

-- Probability targets (the input's shape): -sum_c w[c] * p[c] * log_softmax(input)[c].
local function soft_cross_entropy(fn, input, target, opts, eps)
  if tostring(input:size()) ~= tostring(target:size()) then
    error(('%s: expected probability targets of the input\'s shape %s, got %s'):format(fn,
      tostring(input:size()), tostring(target:size())), 3)
  end
  local class_dim = input:dim() == 1 and 1 or 2
  local n = input:size(class_dim)
  local logp = input:log_softmax(class_dim)
  local p = eps > 0 and target * (1 - eps) + eps / n or target
  if opts.weight then
    local shape = {}
    for d = 1, input:dim() do shape[d] = d == class_dim and n or 1 end
    logp = logp * opts.weight:view(shape)
  end
  local loss = -(logp * p):sum(class_dim)
  local r = opts.reduction or 'mean'
  if r == 'mean' then return loss:mean() elseif r == 'sum' then return loss:sum() end
  return loss
end

-- cross_entropy(input (scores [N, C, ...]), target [, opts]): target holds 1-based classes
-- ([N, ...]) or class probabilities (the input's shape). opts weight, ignore_index (-100),
-- reduction ('mean'), label_smoothing (0). Log-softmax and NLL run fused in one kernel.
function F.cross_entropy(input, target, opts)
  local fn = 'cross_entropy'
  opts = require('ember.util.names').check_options(fn, opts,
    { 'weight', 'ignore_index', 'reduction', 'label_smoothing' })
  local w, ignore, red = class_targets(fn, input, target, opts)
  local eps = opts.label_smoothing or 0
  if type(eps) ~= 'number' or not (eps >= 0 and eps <= 1) then
    error(fn .. ': expected label_smoothing between 0 and 1, got ' .. tostring(eps), 2)
  end
  if target:is_floating_point() then
    if target:dim() ~= input:dim() then
      error(('%s: expected integer class targets, got %s (use target:long()), or probabilities '
        .. 'of the input\'s shape'):format(fn, target:dtype()), 2)
    end
    local r = soft_cross_entropy(fn, input, target, opts, eps)
    return r
  end
  local t0 = target - 1
  local p = C.em_cross_entropy(input.ptr, t0.ptr, w, ignore, red, eps)
  if p == nil and C.em_last_error_kind() ~= C.EM_ERR_OOM then raise_1based('(class index )(%-?%d+)') end
  local r = own(p, C.em_cross_entropy, input.ptr, t0.ptr, w, ignore, red, eps)
  return r
end

-- Attention lives in its own file (ember.nn.attention).
for k, v in pairs(require('ember.nn.attention').functional) do F[k] = v end

return F
