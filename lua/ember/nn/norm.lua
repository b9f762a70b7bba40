-- ember.nn normalization layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm.
local Module = require 'ember.nn.module'

local M = {}
local function ember() return require 'ember' end
local function F() return require('ember.nn').functional end

local function batch_norm_class(name, ranks)
  local cls = Module:extend(name)
  function cls:__init(num_features, opts)
    opts = opts or {}
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
  opts = opts or {}
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
  opts = opts or {}
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

return M
