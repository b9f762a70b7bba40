-- ember.nn layers without spatial structure: Linear, Bilinear, Identity, Flatten, Unflatten,
-- Dropout, Embedding. Initialization follows PyTorch's defaults.
local Module = require 'ember.nn.module'
local init = require 'ember.nn.init_fns'
local autocast_inputs = require('ember.autocast').autocast_inputs
local check_options = require('ember.util.names').check_options

local M = {}

local function ember() return require 'ember' end
local function F() return require('ember.nn').functional end

local function check_positive(fn, name, v)
  if type(v) ~= 'number' or v < 1 or v ~= math.floor(v) then
    error(('%s: expected %s to be a positive integer, got %s'):format(fn, name, tostring(v)), 3)
  end
end

-- Linear(in_features, out_features [, {bias=true, dtype=, device=}]): y = x W^T + b
local Linear = Module:extend('Linear')
function Linear:__init(in_features, out_features, opts)
  check_positive('Linear', 'in_features', in_features)
  check_positive('Linear', 'out_features', out_features)
  opts = type(opts) == 'table' and opts or { bias = opts }
  check_options('Linear', opts, { 'bias', 'dtype', 'device' }, 3)
  self.in_features, self.out_features = in_features, out_features
  local E = ember()
  local o = { dtype = opts.dtype, device = opts.device }
  self:register_parameter('weight', init.kaiming_uniform_(E.empty(out_features, in_features, o), math.sqrt(5)))
  if opts.bias ~= false then
    local bound = 1 / math.sqrt(in_features)
    self:register_parameter('bias', init.uniform_(E.empty(out_features, o), -bound, bound))
  end
end
-- F.linear(x, weight [, bias]): x W^T + b, as PyTorch's; Linear's forward.
local function linear(x, weight, bias)
  local w, b
  x, w, b = autocast_inputs('linear', x, weight, bias) -- one 16-bit op under autocast
  if x:dim() == 2 and b then return b:addmm(x, w:t()) end
  if b and x:dim() > 2 and x:is_contiguous() then
    -- [..., in] as one [rows, in] product with the bias added by the same call, as PyTorch's
    -- linear does: a separate broadcast add and its backward's reduction cost a pass each.
    local shape = x:size()
    local y = b:addmm(x:view(-1, shape[#shape]), w:t())
    shape[#shape] = y:size(2)
    return y:view(shape)
  end
  local y = x:matmul(w:t())
  if b then y = y + b end
  return y
end
M.functional = { linear = linear }

function Linear:forward(x) return linear(x, self.weight, self.bias) end
function Linear:extra_repr()
  return ('in_features=%d, out_features=%d, bias=%s'):format(self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end
M.Linear = Linear

-- Bilinear(in1, in2, out): y_k = x1^T A_k x2 + b_k
local Bilinear = Module:extend('Bilinear')
function Bilinear:__init(in1, in2, out, opts)
  check_positive('Bilinear', 'in1_features', in1)
  check_positive('Bilinear', 'in2_features', in2)
  check_positive('Bilinear', 'out_features', out)
  opts = check_options('Bilinear', opts, { 'bias' }, 3)
  self.in1_features, self.in2_features, self.out_features = in1, in2, out
  local bound = 1 / math.sqrt(in1)
  local E = ember()
  self:register_parameter('weight', init.uniform_(E.empty(out, in1, in2), -bound, bound))
  if opts.bias ~= false then self:register_parameter('bias', init.uniform_(E.empty(out), -bound, bound)) end
end
function Bilinear:forward(x1, x2)
  local out, in1, in2 = self.out_features, self.in1_features, self.in2_features
  -- [N, in1] @ [in1, out * in2] -> [N, out, in2], times x2, summed over in2
  local weight, bias
  x1, x2, weight, bias = autocast_inputs('bilinear', x1, x2, self.weight, self.bias)
  local w = weight:permute(2, 1, 3):reshape(in1, out * in2)
  local y = (x1:matmul(w):view(-1, out, in2) * x2:unsqueeze(2)):sum(3)
  if bias then y = y + bias end
  return y
end
function Bilinear:extra_repr()
  return ('in1_features=%d, in2_features=%d, out_features=%d'):format(self.in1_features,
    self.in2_features, self.out_features)
end
M.Bilinear = Bilinear

local Identity = Module:extend('Identity')
function Identity:forward(x) return x end
M.Identity = Identity

-- Flatten(start_dim=2, end_dim=-1): keeps the batch dim, as PyTorch's nn.Flatten
local Flatten = Module:extend('Flatten')
function Flatten:__init(start_dim, end_dim) self.start_dim, self.end_dim = start_dim or 2, end_dim or -1 end
function Flatten:forward(x) return x:flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr() return ('start_dim=%d, end_dim=%d'):format(self.start_dim, self.end_dim) end
M.Flatten = Flatten

-- Unflatten(dim, sizes): the inverse of Flatten for one dim
local Unflatten = Module:extend('Unflatten')
function Unflatten:__init(dim, sizes)
  if type(sizes) ~= 'table' then error('Unflatten: expected a table of sizes', 2) end
  self.dim, self.sizes = dim, sizes
end
function Unflatten:forward(x)
  local d = self.dim > 0 and self.dim or x:dim() + self.dim + 1
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x:size(i) end
  for _, s in ipairs(self.sizes) do shape[#shape + 1] = s end
  for i = d + 1, x:dim() do shape[#shape + 1] = x:size(i) end
  return x:reshape(shape)
end
function Unflatten:extra_repr() return ('dim=%d, sizes=[%s]'):format(self.dim, table.concat(self.sizes, ', ')) end
M.Unflatten = Unflatten

local Dropout = Module:extend('Dropout')
function Dropout:__init(p)
  p = p or 0.5
  if type(p) ~= 'number' or p < 0 or p > 1 then
    error('Dropout: expected a probability in [0, 1], got ' .. tostring(p), 2)
  end
  self.p = p
end
function Dropout:forward(x) return F().dropout(x, self.p, self.training) end
function Dropout:extra_repr() return 'p=' .. self.p end
M.Dropout = Dropout

-- Embedding(num_embeddings, embedding_dim [, {padding_idx=}]): indices are 1-based
local Embedding = Module:extend('Embedding')
function Embedding:__init(num, dim, opts)
  check_positive('Embedding', 'num_embeddings', num)
  check_positive('Embedding', 'embedding_dim', dim)
  opts = check_options('Embedding', opts, { 'padding_idx' }, 3)
  self.num_embeddings, self.embedding_dim, self.padding_idx = num, dim, opts.padding_idx
  local w = init.normal_(ember().empty(num, dim), 0, 1)
  if opts.padding_idx then ember().no_grad(function() w[opts.padding_idx]:zero_() end) end
  self:register_parameter('weight', w)
end
function Embedding:forward(idx)
  return F().embedding(idx, self.weight, { padding_idx = self.padding_idx })
end
function Embedding:extra_repr() return ('%d, %d'):format(self.num_embeddings, self.embedding_dim) end
M.Embedding = Embedding

return M
