-- ember.nn convolution and pooling layers, over ember.nn.functional.
local Module = require 'ember.nn.module'
local init = require 'ember.nn.init_fns'
local check_options = require('ember.util.names').check_options

local M = {}
local function ember() return require 'ember' end
local function F() return require('ember.nn').functional end

-- A size given as a number or a table becomes a table of n numbers.
local function tuple(v, n, fn, what)
  if type(v) == 'number' then
    local t = {}
    for i = 1, n do t[i] = v end
    return t
  end
  if type(v) == 'table' and #v == n then return v end
  error(('%s: expected %s as a number or %d numbers, got %s'):format(fn, what, n, tostring(v)), 4)
end
M.tuple = tuple

local function conv_class(name, n, transposed)
  local cls = Module:extend(name)
  function cls:__init(in_channels, out_channels, kernel_size, opts)
    opts = check_options(name, opts, transposed
      and { 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation', 'dtype', 'device' }
      or { 'stride', 'padding', 'dilation', 'groups', 'bias', 'dtype', 'device' }, 3)
    local groups = opts.groups or 1
    for _, v in ipairs({ in_channels, out_channels, groups }) do
      if type(v) ~= 'number' or v < 1 or v ~= math.floor(v) then
        error(name .. ': expected positive integer channels and groups', 2)
      end
    end
    if in_channels % groups ~= 0 or out_channels % groups ~= 0 then
      error(('%s: in_channels (%d) and out_channels (%d) must be divisible by groups (%d)')
        :format(name, in_channels, out_channels, groups), 2)
    end
    self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
    self.kernel_size = tuple(kernel_size, n, name, 'kernel_size')
    self.stride = tuple(opts.stride or 1, n, name, 'stride')
    self.padding = tuple(opts.padding or 0, n, name, 'padding')
    self.dilation = tuple(opts.dilation or 1, n, name, 'dilation')
    if transposed then self.output_padding = tuple(opts.output_padding or 0, n, name, 'output_padding') end
    local shape = transposed and { in_channels, out_channels / groups } or { out_channels, in_channels / groups }
    for _, k in ipairs(self.kernel_size) do shape[#shape + 1] = k end
    local E = ember()
    local o = { dtype = opts.dtype, device = opts.device }
    local w = init.kaiming_uniform_(E.empty(shape, o), math.sqrt(5))
    self:register_parameter('weight', w)
    if opts.bias ~= false then
      local fan_in = init.calculate_fans(w)
      local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
      self:register_parameter('bias', init.uniform_(E.empty(out_channels, o), -bound, bound))
    end
  end
  function cls:extra_repr()
    local s = ('%d, %d, kernel_size=[%s], stride=[%s]'):format(self.in_channels, self.out_channels,
      table.concat(self.kernel_size, ','), table.concat(self.stride, ','))
    if self.padding[1] ~= 0 or self.padding[n] ~= 0 then s = s .. ', padding=[' .. table.concat(self.padding, ',') .. ']' end
    if self.dilation[1] ~= 1 or self.dilation[n] ~= 1 then s = s .. ', dilation=[' .. table.concat(self.dilation, ',') .. ']' end
    if self.groups ~= 1 then s = s .. ', groups=' .. self.groups end
    if not self.bias then s = s .. ', bias=false' end
    return s
  end
  M[name] = cls
  return cls
end

local Conv1d = conv_class('Conv1d', 1)
function Conv1d:forward(x)
  return F().conv1d(x, self.weight, self.bias, { stride = self.stride[1], padding = self.padding[1],
    dilation = self.dilation[1], groups = self.groups })
end

local Conv2d = conv_class('Conv2d', 2)
function Conv2d:forward(x)
  return F().conv2d(x, self.weight, self.bias, { stride = self.stride, padding = self.padding,
    dilation = self.dilation, groups = self.groups })
end

local ConvTranspose2d = conv_class('ConvTranspose2d', 2, true)
function ConvTranspose2d:forward(x)
  return F().conv_transpose2d(x, self.weight, self.bias, { stride = self.stride,
    padding = self.padding, output_padding = self.output_padding, groups = self.groups,
    dilation = self.dilation })
end

-- MaxPool2d(kernel_size [, {stride=kernel_size, padding=0, dilation=1, ceil_mode=false,
-- return_indices=false}])
local MaxPool2d = Module:extend('MaxPool2d')
function MaxPool2d:__init(kernel_size, opts)
  opts = check_options('MaxPool2d', opts, { 'stride', 'padding', 'dilation', 'ceil_mode',
    'return_indices' }, 3)
  self.kernel_size = tuple(kernel_size, 2, 'MaxPool2d', 'kernel_size')
  self.stride = tuple(opts.stride or kernel_size, 2, 'MaxPool2d', 'stride')
  self.padding = tuple(opts.padding or 0, 2, 'MaxPool2d', 'padding')
  self.dilation = tuple(opts.dilation or 1, 2, 'MaxPool2d', 'dilation')
  self.ceil_mode, self.return_indices = opts.ceil_mode or false, opts.return_indices or false
end
function MaxPool2d:forward(x)
  return F().max_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    dilation = self.dilation, ceil_mode = self.ceil_mode, return_indices = self.return_indices })
end
function MaxPool2d:extra_repr()
  return ('kernel_size=[%s], stride=[%s]'):format(table.concat(self.kernel_size, ','), table.concat(self.stride, ','))
end
M.MaxPool2d = MaxPool2d

local AvgPool2d = Module:extend('AvgPool2d')
function AvgPool2d:__init(kernel_size, opts)
  opts = check_options('AvgPool2d', opts, { 'stride', 'padding', 'ceil_mode',
    'count_include_pad' }, 3)
  self.kernel_size = tuple(kernel_size, 2, 'AvgPool2d', 'kernel_size')
  self.stride = tuple(opts.stride or kernel_size, 2, 'AvgPool2d', 'stride')
  self.padding = tuple(opts.padding or 0, 2, 'AvgPool2d', 'padding')
  self.ceil_mode = opts.ceil_mode or false
  self.count_include_pad = opts.count_include_pad ~= false
end
function AvgPool2d:forward(x)
  return F().avg_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding,
    ceil_mode = self.ceil_mode, count_include_pad = self.count_include_pad })
end
function AvgPool2d:extra_repr()
  return ('kernel_size=[%s], stride=[%s]'):format(table.concat(self.kernel_size, ','), table.concat(self.stride, ','))
end
M.AvgPool2d = AvgPool2d

local AdaptiveAvgPool2d = Module:extend('AdaptiveAvgPool2d')
function AdaptiveAvgPool2d:__init(output_size)
  self.output_size = tuple(output_size, 2, 'AdaptiveAvgPool2d', 'output_size')
end
function AdaptiveAvgPool2d:forward(x) return F().adaptive_avg_pool2d(x, self.output_size) end
function AdaptiveAvgPool2d:extra_repr() return 'output_size=[' .. table.concat(self.output_size, ',') .. ']' end
M.AdaptiveAvgPool2d = AdaptiveAvgPool2d

return M
