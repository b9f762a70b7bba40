-- ember.nn normalization layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm, RMSNorm
-- (with its functional form F.rms_norm).
local Module = require 'ember.nn.module'
local check_options = require('ember.util.names').check_options

local M = {}
local function ember() return require 'ember' end
local function F() return require('ember.nn').functional end

local function batch_norm_class(name, ranks)
  local cls = Module:extend(name)
  function cls:__init(num_features, opts)
    opts = check_options(name, opts, { 'eps', 'momentum', 'affine', 'track_running_stats' }, 3)
    self.num_features = num_features
    self.eps, self.momentum = opts.eps or 1e-5, opts.momentum == nil and 0.1 or opts.momentum
    self.affine = opts.affine ~= false
    self.track_running_stats = opts.track_running_stats ~= false
    local E = ember()
    if self.affine then
      self:register_parameter('weight', E.ones(num_features))
      self:register_parameter('bias', E.zeros(num_features))
    end
    if self.track_running_stats then
      self:register_buffer('running_mean', E.zeros(num_features))
      self:register_buffer('running_var', E.ones(num_features))
      self:register_buffer('num_batches_tracked', E.zeros({}, { dtype = 'int64' }))
    end
  end
  function cls:forward(x)
    if not ranks[x:dim()] then
      local allowed = {}
      for r in pairs(ranks) do allowed[#allowed + 1] = r end
      table.sort(allowed)
      error(('%s: expected a %s-D input, got %d-D'):format(name, table.concat(allowed, ' or '), x:dim()), 2)
    end
    if x:size(2) ~= self.num_features then
      error(('%s: expected %d channels, got %d'):format(name, self.num_features, x:size(2)), 2)
    end
    local use_batch = self.training or not self.track_running_stats
    if self.training and self.track_running_stats then
      ember().no_grad(function() self.num_batches_tracked:add_(1) end)
    end
    return F().batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
      use_batch, self.momentum, self.eps)
  end
  function cls:extra_repr()
    return ('%d, eps=%g, momentum=%g, affine=%s'):format(self.num_features, self.eps, self.momentum,
      tostring(self.affine))
  end
  M[name] = cls
end

batch_norm_class('BatchNorm1d', { [2] = true, [3] = true })
batch_norm_class('BatchNorm2d', { [4] = true })

-- LayerNorm(normalized_shape [, {eps=1e-5, elementwise_affine=true}])
local LayerNorm = Module:extend('LayerNorm')
function LayerNorm:__init(shape, opts)
  opts = check_options('LayerNorm', opts, { 'eps', 'elementwise_affine' }, 3)
  if type(shape) == 'number' then shape = { shape } end
  self.normalized_shape, self.eps = shape, opts.eps or 1e-5
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    self:register_parameter('weight', ember().ones(shape))
    self:register_parameter('bias', ember().zeros(shape))
  end
end
function LayerNorm:forward(x)
  return F().layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
end
function LayerNorm:extra_repr()
  return ('[%s], eps=%g'):format(table.concat(self.normalized_shape, ', '), self.eps)
end
M.LayerNorm = LayerNorm

-- GroupNorm(num_groups, num_channels [, {eps=1e-5, affine=true}])
local GroupNorm = Module:extend('GroupNorm')
function GroupNorm:__init(num_groups, num_channels, opts)
  opts = check_options('GroupNorm', opts, { 'eps', 'affine' }, 3)
  if num_channels % num_groups ~= 0 then
    error(('GroupNorm: num_channels (%d) must be divisible by num_groups (%d)'):format(num_channels,
      num_groups), 2)
  end
  self.num_groups, self.num_channels, self.eps = num_groups, num_channels, opts.eps or 1e-5
  self.affine = opts.affine ~= false
  if self.affine then
    self:register_parameter('weight', ember().ones(num_channels))
    self:register_parameter('bias', ember().zeros(num_channels))
  end
end
function GroupNorm:forward(x)
  return F().group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end
function GroupNorm:extra_repr() return ('%d, %d, eps=%g'):format(self.num_groups, self.num_channels, self.eps) end
M.GroupNorm = GroupNorm

-- ---- RMSNorm ---------------------------------------------------------------------------------
-- The machine epsilon of a floating dtype (torch.finfo(dtype).eps): RMSNorm's default eps.
local EPSILON = { float64 = 2.220446049250313e-16, float32 = 1.1920928955078125e-07,
  float16 = 0.0009765625, bfloat16 = 0.0078125 }

-- F.rms_norm(input, normalized_shape [, weight [, eps]]): input / sqrt(mean(input^2) + eps) *
-- weight, the mean over the last #normalized_shape dims, as PyTorch 2.4's. eps nil means the
-- input dtype's machine epsilon. Composed from ops (square, mean, rsqrt), in the input's dtype.
local function rms_norm(input, shape, weight, eps)
  local E = ember()
  if not E.is_tensor(input) then error('rms_norm: expected input to be a tensor, got ' .. type(input), 2) end
  if type(shape) == 'number' then shape = { shape } end
  if type(shape) ~= 'table' or #shape == 0 then
    error('rms_norm: expected normalized_shape as a number or a non-empty table of numbers', 2)
  end
  local nd, k = input:dim(), #shape
  local ok = nd >= k
  for i = 1, k do ok = ok and input:size(nd - k + i) == shape[i] end
  if not ok then
    error(('rms_norm: expected input with trailing dimensions [%s], got [%s]'):format(
      table.concat(shape, ', '), table.concat(input:size(), ', ')), 2)
  end
  if weight ~= nil and not E.is_tensor(weight) then
    error('rms_norm: expected weight to be a tensor or nil, got ' .. type(weight), 2)
  end
  if eps == nil then
    eps = EPSILON[input:dtype()]
    if not eps then error('rms_norm: expected a floating input, got ' .. input:dtype(), 2) end
  elseif type(eps) ~= 'number' or eps < 0 then
    error('rms_norm: expected eps to be a number >= 0, got ' .. tostring(eps), 2)
  end
  local dims = {}
  for i = 1, k do dims[i] = nd - k + i end
  local y = input * (input:square():mean(dims, true) + eps):rsqrt()
  if weight then y = y * weight end
  return y
end
M.functional = { rms_norm = rms_norm }

-- RMSNorm(normalized_shape [, {eps=nil, elementwise_affine=true, dtype=, device=}]): weight
-- ones(normalized_shape), no bias, as PyTorch 2.4's.
local RMSNorm = Module:extend('RMSNorm')
local RMS_OPTIONS = { eps = true, elementwise_affine = true, dtype = true, device = true }
function RMSNorm:__init(shape, opts)
  opts = check_options('RMSNorm', opts, { 'eps', 'elementwise_affine', 'dtype', 'device' }, 3)
  if type(shape) == 'number' then shape = { shape } end
  if type(shape) ~= 'table' or #shape == 0 then
    error('RMSNorm: expected normalized_shape as a number or a non-empty table of numbers', 3)
  end
  for _, n in ipairs(shape) do
    if type(n) ~= 'number' or n < 1 or n ~= math.floor(n) then
      error('RMSNorm: expected normalized_shape of positive integers, got ' .. tostring(n), 3)
    end
  end
  if opts.eps ~= nil and (type(opts.eps) ~= 'number' or opts.eps < 0) then
    error('RMSNorm: expected eps to be a number >= 0, got ' .. tostring(opts.eps), 3)
  end
  self.normalized_shape, self.eps = shape, opts.eps
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    self:register_parameter('weight', ember().ones(shape, { dtype = opts.dtype, device = opts.device }))
  end
end
function RMSNorm:forward(x)
  return rms_norm(x, self.normalized_shape, self.weight, self.eps)
end
function RMSNorm:extra_repr()
  return ('[%s], eps=%s, elementwise_affine=%s'):format(table.concat(self.normalized_shape, ', '),
    self.eps == nil and 'nil' or ('%g'):format(self.eps), tostring(self.elementwise_affine))
end
M.RMSNorm = RMSNorm

return M
