-- ember.nn's volumetric layers: conv3d, max_pool3d, avg_pool3d (functions merged into
-- ember.nn.functional, and the modules Conv3d, MaxPool3d, AvgPool3d), plus the 1-D adaptive
-- max pooling and the adaptive pooling modules the 2-D layers lacked.
--
-- They are composed from the 2-D kernels, which every device has:
--  * conv3d is a sum over the kernel's depth taps of conv2d calls, each over the input slices
--    that tap reads (depth folded into the batch): the same multiply-adds as a direct 3-D
--    convolution, one input copy per tap.
--  * 3-D pooling pools each depth slice in 2-D first (depth folded into the channels), then
--    pools across depth over a strided window view (tensor unfold). Max pooling is separable,
--    and so is average pooling: the window is a box, so its divisor (clipped by the padding or
--    not) is a product of one count per dim.
-- Gradients come from the 2-D ops and the views. Dims are 1-based; indices are 1-based
-- positions in each D x H x W volume, as the 2-D ones are in each plane.
local unpack = table.unpack or unpack -- LuaJIT: the global
local Module = require 'ember.nn.module'
local init = require 'ember.nn.init_fns'
local tensor = require 'ember.tensor'
local args = require 'ember.nn.args'
local named = require 'ember.nn.named_args'
local field_module = require 'ember.nn.field_module'

local M, F = {}, {}
M.functional = F
local function E() return require 'ember' end
local function F2() return require('ember.nn').functional end

local function need(fn, what, x)
  if not tensor.is_tensor(x) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(x)), 3)
  end
end

local function triple(fn, what, v)
  local t = type(v) == 'number' and { v, v, v } or v
  if type(t) ~= 'table' or #t ~= 3 then
    error(('%s: expected %s as a number or a table of 3 numbers, got %s'):format(fn, what,
      tostring(v)), 3)
  end
  for i = 1, 3 do
    if type(t[i]) ~= 'number' or t[i] ~= math.floor(t[i]) then
      error(('%s: expected %s to hold integers, got %s'):format(fn, what, tostring(t[i])), 3)
    end
  end
  return t
end

-- A 5-D view of a batched or unbatched (4-D) volume input, and whether to squeeze back.
local function volume(fn, input)
  need(fn, 'input', input)
  if input:dim() == 5 then return input, false end
  if input:dim() == 4 then return input:unsqueeze(1), true end
  error(('%s: expected a 4-D (unbatched) or 5-D input [N, C, D, H, W], got %d-D'):format(fn,
    input:dim()), 3)
end

-- PyTorch's pooling_output_shape.
local function pooled(n, k, s, p, d, ceil)
  local out = math.floor((n + 2 * p - d * (k - 1) - 1 + (ceil and s - 1 or 0)) / s) + 1
  if ceil and (out - 1) * s >= n + p then out = out - 1 end
  return out
end

-- ---- conv3d --------------------------------------------------------------------------------

-- conv3d(input [N, C, D, H, W], weight [O, C / groups, kd, kh, kw], bias, stride = 1,
-- padding = 0 (or 'same' / 'valid'), dilation = 1, groups = 1).
function F.conv3d(input, weight, bias, ...)
  local fn = 'conv3d'
  local x, squeeze = volume(fn, input)
  need(fn, 'weight', weight)
  if bias ~= nil then need(fn, 'bias', bias) end
  local o = named(fn, { 'stride', 'padding', 'dilation', 'groups' }, ...)
  if weight:dim() ~= 5 then
    error(('%s: expected a 5-D weight [O, C / groups, kd, kh, kw], got %d-D'):format(fn, weight:dim()), 2)
  end
  local s, d = triple(fn, 'stride', o.stride or 1), triple(fn, 'dilation', o.dilation or 1)
  local groups = o.groups or 1
  local k = { weight:size(3), weight:size(4), weight:size(5) }
  local pad = o.padding or 0
  local hw_pad
  if pad == 'same' then
    for i = 1, 3 do
      if s[i] ~= 1 then error(fn .. ": padding='same' needs stride 1", 2) end
    end
    local t = {}
    for i = 3, 1, -1 do -- F.pad's order: last dim first
      local total = d[i] * (k[i] - 1)
      t[#t + 1] = math.floor(total / 2)
      t[#t + 1] = total - math.floor(total / 2)
    end
    x = F2().pad(x, t)
    hw_pad = { 0, 0 }
  else
    if pad == 'valid' then pad = 0 end
    if type(pad) == 'string' then
      error(("%s: padding must be a number, a table, 'same' or 'valid', got '%s'"):format(fn, pad), 2)
    end
    local p = triple(fn, 'padding', pad)
    if p[1] > 0 then x = F2().pad(x, { 0, 0, 0, 0, p[1], p[1] }) end
    hw_pad = { p[2], p[3] }
  end
  if x:size(2) ~= weight:size(2) * groups then
    error(('%s: expected an input of %d channels (weight %s, groups %d), got %d'):format(fn,
      weight:size(2) * groups, tostring(weight:size()), groups, x:size(2)), 2)
  end
  local N, Cc, Dp, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
  local Do = math.floor((Dp - d[1] * (k[1] - 1) - 1) / s[1]) + 1
  if Do < 1 then
    error(('%s: the kernel depth %d (dilation %d) exceeds the padded input depth %d'):format(fn,
      k[1], d[1], Dp), 2)
  end
  local xd = x:permute({ 1, 3, 2, 4, 5 }) -- [N, Dp, C, H, W]
  local y
  for a = 0, k[1] - 1 do
    local first = a * d[1] + 1
    local taps = xd:slice(2, first, first + (Do - 1) * s[1], s[1]):reshape({ N * Do, Cc, H, W })
    local part = F2().conv2d(taps, weight:select(3, a + 1), nil, { stride = { s[2], s[3] },
      padding = hw_pad, dilation = { d[2], d[3] }, groups = groups })
    y = y and y + part or part
  end
  local O, Ho, Wo = y:size(2), y:size(3), y:size(4)
  y = y:view({ N, Do, O, Ho, Wo }):permute({ 1, 3, 2, 4, 5 })
  if bias ~= nil then y = y + bias:view({ 1, O, 1, 1, 1 }) end
  return squeeze and y:squeeze(1) or y:contiguous()
end

-- ---- 3-D pooling ---------------------------------------------------------------------------

local function pool_geometry(fn, o, kernel_size)
  local k = triple(fn, 'kernel_size', kernel_size)
  local s = triple(fn, 'stride', o.stride or kernel_size)
  local p = triple(fn, 'padding', o.padding or 0)
  for i = 1, 3 do
    if k[i] < 1 or s[i] < 1 or p[i] < 0 then
      error(fn .. ': expected positive kernel_size and stride and a non-negative padding', 3)
    end
    if p[i] > k[i] / 2 then
      error(('%s: padding %d must be at most half the kernel size %d'):format(fn, p[i], k[i]), 3)
    end
  end
  return k, s, p
end

-- Windows across depth: x [N, C, D, ...] padded with `fill` so that Do windows of extent
-- d (k - 1) + 1 at stride s fit, as [N, C, Do, ..., k] (every d-th tap).
local function depth_windows(x, k, s, p, d, Do, fill)
  local D = x:size(3)
  local ext = d * (k - 1) + 1
  local right = math.max((Do - 1) * s + ext - D - p, 0)
  if p > 0 or right > 0 then
    x = F2().pad(x, { 0, 0, 0, 0, p, right }, 'constant', fill)
  end
  local w = x:unfold(3, ext, s):narrow(3, 1, Do)
  if d > 1 then w = w:slice(6, 1, ext, d) end
  return w
end

-- max_pool3d(input, kernel_size, stride = kernel_size, padding = 0, dilation = 1,
-- ceil_mode = false, return_indices = false)
function F.max_pool3d(input, kernel_size, ...)
  local fn = 'max_pool3d'
  local x, squeeze = volume(fn, input)
  local o = named(fn, { 'stride', 'padding', 'dilation', 'ceil_mode', 'return_indices' }, ...)
  local k, s, p = pool_geometry(fn, o, kernel_size)
  local d = triple(fn, 'dilation', o.dilation or 1)
  local ceil = args.boolean(fn, 'ceil_mode', o.ceil_mode, false, 2)
  local want = args.boolean(fn, 'return_indices', o.return_indices, false, 2)
  local N, Cc, D, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
  local Do = pooled(D, k[1], s[1], p[1], d[1], ceil)
  if Do < 1 then error(('%s: the output depth %d is too small'):format(fn, Do), 2) end
  local y2, i2 = F2().max_pool2d(x:reshape({ N, Cc * D, H, W }), { k[2], k[3] }, {
    stride = { s[2], s[3] }, padding = { p[2], p[3] }, dilation = { d[2], d[3] },
    ceil_mode = ceil, return_indices = want })
  local Ho, Wo = y2:size(3), y2:size(4)
  local win = depth_windows(y2:view({ N, Cc, D, Ho, Wo }), k[1], s[1], p[1], d[1], Do, -math.huge)
  local y, arg = win:max(6)
  local ind
  if want then
    local iw = depth_windows(i2:view({ N, Cc, D, Ho, Wo }), k[1], s[1], p[1], d[1], Do, 1)
    local hw = iw:gather(6, arg:unsqueeze(6)):squeeze(6)
    local base = {}
    for i = 1, Do do base[i] = (i - 1) * s[1] - p[1] end
    local b = E().tensor(base, { dtype = 'int64', device = x:device() }):view({ 1, 1, Do, 1, 1 })
    ind = (b + (arg - 1) * d[1]) * (H * W) + hw
  end
  if squeeze then
    y = y:squeeze(1)
    if ind then ind = ind:squeeze(1) end
  end
  if want then return y, ind end
  return y
end

-- Each output's window count along one dim (PyTorch's avg_pool divisor terms).
local function counts(n, out, k, s, p, include_pad)
  local c = {}
  for o = 0, out - 1 do
    local start = o * s - p
    local stop = math.min(start + k, n + p)
    local pool = stop - start
    start, stop = math.max(start, 0), math.min(stop, n)
    c[o + 1] = include_pad and pool or stop - start
  end
  return c
end

-- avg_pool3d(input, kernel_size, stride = kernel_size, padding = 0, ceil_mode = false,
-- count_include_pad = true, divisor_override = nil)
function F.avg_pool3d(input, kernel_size, ...)
  local fn = 'avg_pool3d'
  local x, squeeze = volume(fn, input)
  local o = named(fn, { 'stride', 'padding', 'ceil_mode', 'count_include_pad', 'divisor_override' }, ...)
  local k, s, p = pool_geometry(fn, o, kernel_size)
  local ceil = args.boolean(fn, 'ceil_mode', o.ceil_mode, false, 2)
  local incl = args.boolean(fn, 'count_include_pad', o.count_include_pad, true, 2)
  local div = o.divisor_override
  if div ~= nil and (type(div) ~= 'number' or div < 1 or div ~= math.floor(div)) then
    error(fn .. ': expected divisor_override to be a positive integer, got ' .. tostring(div), 2)
  end
  local N, Cc, D, H, W = x:size(1), x:size(2), x:size(3), x:size(4), x:size(5)
  local Do = pooled(D, k[1], s[1], p[1], 1, ceil)
  if Do < 1 then error(('%s: the output depth %d is too small'):format(fn, Do), 2) end
  local sums = F2().avg_pool2d(x:reshape({ N, Cc * D, H, W }), { k[2], k[3] }, {
    stride = { s[2], s[3] }, padding = { p[2], p[3] }, ceil_mode = ceil, divisor_override = 1 })
  local Ho, Wo = sums:size(3), sums:size(4)
  local y = depth_windows(sums:view({ N, Cc, D, Ho, Wo }), k[1], s[1], p[1], 1, Do, 0):sum(6)
  if div ~= nil then
    y = y / div
  else
    local opts = { dtype = y:dtype(), device = y:device() }
    local cd = E().tensor(counts(D, Do, k[1], s[1], p[1], incl), opts):view({ Do, 1, 1 })
    local ch = E().tensor(counts(H, Ho, k[2], s[2], p[2], incl), opts):view({ 1, Ho, 1 })
    local cw = E().tensor(counts(W, Wo, k[3], s[3], p[3], incl), opts):view({ 1, 1, Wo })
    y = y / (cd * ch * cw)
  end
  return squeeze and y:squeeze(1) or y
end

-- adaptive_max_pool1d(input [N, C, L] or [C, L], output_size, return_indices = false): the
-- 2-D kernel over a [.., 1, L] view; indices are positions in L (1-based).
function F.adaptive_max_pool1d(input, output_size, return_indices)
  local fn = 'adaptive_max_pool1d'
  need(fn, 'input', input)
  if input:dim() ~= 2 and input:dim() ~= 3 then
    error(('%s: expected a 2-D (unbatched) or 3-D input, got %d-D'):format(fn, input:dim()), 2)
  end
  local size = type(output_size) == 'table' and output_size[1] or output_size
  local y, ind = F2().adaptive_max_pool2d(input:unsqueeze(-2), { 1, size }, return_indices)
  if ind then return y:squeeze(-2), ind:squeeze(-2) end
  return y:squeeze(-2)
end

-- ---- modules -------------------------------------------------------------------------------

-- Conv3d(in_channels, out_channels, kernel_size [, opts]): opts stride, padding, dilation,
-- groups, bias (true), dtype, device; PyTorch's initialization.
local Conv3d = Module:extend('Conv3d')
function Conv3d:__init(in_channels, out_channels, kernel_size, opts)
  local fn = 'Conv3d'
  opts = args.options(fn, opts, args.set({ 'stride', 'padding', 'dilation', 'groups', 'bias',
    'padding_mode', 'dtype', 'device' }), 2)
  if opts.padding_mode ~= nil and opts.padding_mode ~= 'zeros' then
    error(fn .. ": padding_mode other than 'zeros' is not implemented", 2)
  end
  local groups = opts.groups or 1
  args.positive_int(fn, 'in_channels', in_channels, 2)
  args.positive_int(fn, 'out_channels', out_channels, 2)
  args.positive_int(fn, 'groups', groups, 2)
  if in_channels % groups ~= 0 or out_channels % groups ~= 0 then
    error(('%s: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)')
      :format(fn, in_channels, out_channels, groups), 2)
  end
  self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
  self.kernel_size = triple(fn, 'kernel_size', kernel_size)
  self.stride = triple(fn, 'stride', opts.stride or 1)
  self.padding = type(opts.padding) == 'string' and opts.padding or triple(fn, 'padding', opts.padding or 0)
  self.dilation = triple(fn, 'dilation', opts.dilation or 1)
  local o = { dtype = opts.dtype, device = opts.device }
  local shape = { out_channels, in_channels / groups, unpack(self.kernel_size) }
  local w = init.kaiming_uniform_(E().empty(shape, o), math.sqrt(5))
  self:register_parameter('weight', w)
  if opts.bias ~= false then
    local fan_in = init.calculate_fans(w)
    local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
    self:register_parameter('bias', init.uniform_(E().empty(out_channels, o), -bound, bound))
  end
end
function Conv3d:forward(x)
  return F.conv3d(x, self.weight, self.bias, { stride = self.stride, padding = self.padding,
    dilation = self.dilation, groups = self.groups })
end
function Conv3d:extra_repr()
  return ('%d, %d, kernel_size=[%s], stride=[%s]'):format(self.in_channels, self.out_channels,
    table.concat(self.kernel_size, ','), table.concat(self.stride, ','))
end
M.Conv3d = Conv3d

local function pool_module(name, fields, defaults, call)
  M[name] = field_module(name, fields, defaults, call)
end

pool_module('MaxPool3d', { 'kernel_size', 'stride', 'padding', 'dilation', 'return_indices', 'ceil_mode' },
  { nil, nil, 0, 1, false, false }, function(s, x)
    return F.max_pool3d(x, s.kernel_size, { stride = s.stride, padding = s.padding,
      dilation = s.dilation, ceil_mode = s.ceil_mode, return_indices = s.return_indices })
  end)
pool_module('AvgPool3d', { 'kernel_size', 'stride', 'padding', 'ceil_mode', 'count_include_pad',
  'divisor_override' }, { nil, nil, 0, false, true }, function(s, x)
    return F.avg_pool3d(x, s.kernel_size, { stride = s.stride, padding = s.padding,
      ceil_mode = s.ceil_mode, count_include_pad = s.count_include_pad,
      divisor_override = s.divisor_override })
  end)
pool_module('AdaptiveMaxPool1d', { 'output_size', 'return_indices' }, { nil, false },
  function(s, x) return F.adaptive_max_pool1d(x, s.output_size, s.return_indices) end)
pool_module('AdaptiveMaxPool2d', { 'output_size', 'return_indices' }, { nil, false },
  function(s, x) return F2().adaptive_max_pool2d(x, s.output_size, s.return_indices) end)
pool_module('AdaptiveAvgPool1d', { 'output_size' }, {},
  function(s, x) return F2().adaptive_avg_pool1d(x, s.output_size) end)

return M
