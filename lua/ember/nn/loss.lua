-- ember.nn losses: modules and functional forms (merged into ember.nn.functional). Class
-- targets are 1-based in Lua, as in Torch7. reduction is 'mean' (default), 'sum' or 'none'.
local Module = require 'ember.nn.module'
local where = require('ember.ops.pointwise').where
local tensor = require 'ember.tensor'
-- Losses composed here apply autocast's table at their entry, as the C ops do (float32).
local autocast_inputs = require('ember.autocast').autocast_inputs

local M, F = {}, {}
M.functional = F

local function reduce(fn, loss, reduction)
  reduction = reduction or 'mean'
  if reduction == 'mean' then return loss:mean() end
  if reduction == 'sum' then return loss:sum() end
  if reduction == 'none' then return loss end
  error(fn .. ": reduction must be 'mean', 'sum' or 'none', got " .. tostring(reduction), 3)
end

local function same_shape(fn, input, target)
  if not tensor.is_tensor(input) or not tensor.is_tensor(target) then
    error(fn .. ': expected input and target tensors', 3)
  end
  if tostring(input:size()) ~= tostring(target:size()) then
    error(('%s: input %s and target %s must have the same shape'):format(fn,
      tostring(input:size()), tostring(target:size())), 3)
  end
end

function F.mse_loss(input, target, reduction)
  same_shape('mse_loss', input, target)
  input, target = autocast_inputs('mse_loss', input, target)
  return reduce('mse_loss', (input - target):square(), reduction)
end

function F.l1_loss(input, target, reduction)
  same_shape('l1_loss', input, target)
  input, target = autocast_inputs('l1_loss', input, target)
  return reduce('l1_loss', (input - target):abs(), reduction)
end

-- smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere
function F.smooth_l1_loss(input, target, reduction, beta)
  same_shape('smooth_l1_loss', input, target)
  input, target = autocast_inputs('smooth_l1_loss', input, target)
  beta = beta or 1
  local d = (input - target):abs()
  local loss
  if beta == 0 then loss = d
  else loss = where(d:lt(beta), d:square() * (0.5 / beta), d - 0.5 * beta) end
  return reduce('smooth_l1_loss', loss, reduction)
end

-- Moves the class dim (2) last and flattens: [N, C, d1, ...] -> [N * d1 * ..., C].
local function classes_last(input, target)
  if input:dim() <= 2 then return input, target end
  local C = input:size(2)
  local perm = { 1 }
  for d = 3, input:dim() do perm[#perm + 1] = d end
  perm[#perm + 1] = 2
  return input:permute(perm):reshape(-1, C), target:reshape(-1)
end

-- nll_loss(log_probs [N, C], target [N] (1-based classes) [, opts])
-- opts: weight (per class), ignore_index, reduction
function F.nll_loss(input, target, opts)
  opts = require('ember.util.names').check_options('nll_loss', opts,
    { 'weight', 'ignore_index', 'reduction' })
  if not tensor.is_tensor(input) or not tensor.is_tensor(target) then
    error('nll_loss: expected input and target tensors', 2)
  end
  if input:dim() < 1 or input:dim() > 8 then error('nll_loss: expected input [N, C]', 2) end
  local shaped_input, shaped_target = classes_last(input, target)
  if shaped_input:dim() == 1 then
    shaped_input, shaped_target = shaped_input:unsqueeze(1), shaped_target:reshape(1)
  end
  if shaped_target:dim() ~= 1 or shaped_target:size(1) ~= shaped_input:size(1) then
    error(('nll_loss: expected a target of %d class indices, got shape %s'):format(
      shaped_input:size(1), tostring(target:size())), 2)
  end
  if shaped_target:is_floating_point() then
    error('nll_loss: expected integer class indices (1-based), got ' .. target:dtype(), 2)
  end
  local C = shaped_input:size(2)
  local t = shaped_target:long()
  local ignore = opts.ignore_index
  local keep
  if ignore ~= nil then
    keep = t:ne(ignore)
    t = where(keep, t, 1) -- any valid class; the mask zeroes it
  end
  if t:numel() > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 or hi > C then
      error(('nll_loss: class index %d is out of range for %d classes (classes are 1-based)'):format(
        lo < 1 and lo or hi, C), 2)
    end
  end
  local picked = -shaped_input:gather(2, t:unsqueeze(2)):squeeze(2)
  local w
  if opts.weight then w = opts.weight:index_select(1, t) end
  if keep then
    local k = keep:to(picked:dtype())
    w = w and w * k or k
  end
  local loss = w and picked * w or picked
  local reduction = opts.reduction or 'mean'
  if reduction == 'mean' and w then return loss:sum() / w:sum() end
  if reduction == 'none' and input:dim() > 2 then
    local shape = target:size()
    return loss:view(shape)
  end
  return reduce('nll_loss', loss, reduction)
end

-- cross_entropy(logits [N, C], target [, opts]): target holds 1-based class indices, or class
-- probabilities of the input's shape. opts: weight, ignore_index, reduction, label_smoothing.
function F.cross_entropy(input, target, opts)
  opts = require('ember.util.names').check_options('cross_entropy', opts,
    { 'weight', 'ignore_index', 'reduction', 'label_smoothing' })
  if not tensor.is_tensor(input) or not tensor.is_tensor(target) then
    error('cross_entropy: expected input and target tensors', 2)
  end
  local eps = opts.label_smoothing or 0
  if eps < 0 or eps > 1 then
    error('cross_entropy: label_smoothing must be in [0, 1], got ' .. eps, 2)
  end
  local class_dim = input:dim() == 1 and 1 or 2
  local logp = input:log_softmax(class_dim)
  if target:is_floating_point() then -- probabilities
    same_shape('cross_entropy', input, target)
    local C = input:size(class_dim)
    local p = eps > 0 and target * (1 - eps) + eps / C or target
    if opts.weight then
      local shape = {}
      for d = 1, input:dim() do shape[d] = d == class_dim and C or 1 end
      logp = logp * opts.weight:view(shape)
    end
    local loss = -(logp * p):sum(class_dim)
    return reduce('cross_entropy', loss, opts.reduction)
  end
  local nll = F.nll_loss(logp, target, { weight = opts.weight, ignore_index = opts.ignore_index,
    reduction = eps > 0 and 'none' or opts.reduction })
  if eps == 0 then return nll end
  -- label smoothing: (1 - eps) * nll + eps * mean over classes of -log p (weighted like PyTorch)
  local lp, t = classes_last(logp, target)
  local C = lp:size(2)
  local smooth = opts.weight and -(lp * opts.weight:view(1, C)):sum(2) or -lp:sum(2)
  smooth = smooth / C
  local tl = t:long()
  local keep
  if opts.ignore_index ~= nil then
    keep = tl:ne(opts.ignore_index):to(smooth:dtype())
    smooth = smooth * keep
  end
  local loss = nll:reshape(-1) * (1 - eps) + smooth * eps
  local reduction = opts.reduction or 'mean'
  if reduction == 'mean' then
    local denom
    if opts.weight then
      local safe = keep and where(keep:gt(0), tl, 1) or tl
      local w = opts.weight:index_select(1, safe)
      if keep then w = w * keep end
      denom = w:sum()
    elseif keep then
      denom = keep:sum()
    end
    return denom and loss:sum() / denom or loss:mean()
  end
  if reduction == 'none' and input:dim() > 2 then return loss:view(target:size()) end
  return reduce('cross_entropy', loss, reduction)
end

-- binary_cross_entropy(probabilities, target [, weight [, reduction]]): log clamped at -100
function F.binary_cross_entropy(input, target, weight, reduction)
  same_shape('binary_cross_entropy', input, target)
  input, target, weight = autocast_inputs('binary_cross_entropy', input, target, weight)
  local lo, hi = 0, 1 -- (an empty input has no min or max: nothing to check)
  if input:numel() > 0 then lo, hi = input:min():item(), input:max():item() end
  if lo < 0 or hi > 1 then
    error(('binary_cross_entropy: input must hold probabilities in [0, 1], got values in [%g, %g]')
      :format(lo, hi), 2)
  end
  local logp = input:log():clamp(-100, nil)
  local log1mp = (1 - input):log():clamp(-100, nil)
  local loss = -(target * logp + (1 - target) * log1mp)
  if weight then loss = loss * weight end
  return reduce('binary_cross_entropy', loss, reduction)
end

-- binary_cross_entropy_with_logits(logits, target [, opts]): stable form
-- max(x, 0) - x t + log(1 + exp(-|x|)); opts: weight, pos_weight, reduction
function F.binary_cross_entropy_with_logits(input, target, opts)
  opts = require('ember.util.names').check_options('binary_cross_entropy_with_logits', opts,
    { 'weight', 'pos_weight', 'reduction' })
  same_shape('binary_cross_entropy_with_logits', input, target)
  local weight, pos_weight
  input, target, weight, pos_weight = autocast_inputs('binary_cross_entropy_with_logits', input,
    target, opts.weight, opts.pos_weight)
  local x = input
  local log_sig_neg = -x:clamp(0, nil) - (-x:abs()):exp():log1p() -- log(1 - sigmoid(x))
  local log_sig = log_sig_neg + x                                  -- log(sigmoid(x))
  local loss
  if pos_weight then
    loss = -(log_sig * target * pos_weight + log_sig_neg * (1 - target))
  else
    loss = -(log_sig * target + log_sig_neg * (1 - target))
  end
  if weight then loss = loss * weight end
  return reduce('binary_cross_entropy_with_logits', loss, opts.reduction)
end

-- kl_div(input (log-probabilities), target [, reduction [, log_target]]):
-- target * (log target - input); 'batchmean' divides the sum by the batch size.
function F.kl_div(input, target, reduction, log_target)
  same_shape('kl_div', input, target)
  input, target = autocast_inputs('kl_div', input, target)
  local loss
  if log_target then
    loss = target:exp() * (target - input)
  else
    local t_log_t = where(target:gt(0), target * target:clamp(1e-300, nil):log(), 0)
    loss = t_log_t - target * input
  end
  if reduction == 'batchmean' then return loss:sum() / input:size(1) end
  return reduce('kl_div', loss, reduction)
end

-- ---- modules -----------------------------------------------------------------------------------
-- The options each loss module takes (besides reduction).
local LOSS_OPTIONS = {
  SmoothL1Loss = { 'beta' }, NLLLoss = { 'weight', 'ignore_index' },
  CrossEntropyLoss = { 'weight', 'ignore_index', 'label_smoothing' }, BCELoss = { 'weight' },
  BCEWithLogitsLoss = { 'weight', 'pos_weight' }, KLDivLoss = { 'log_target' },
}

local function loss_module(name, call, repr)
  local cls = Module:extend(name)
  local allowed = { 'reduction' }
  for _, k in ipairs(LOSS_OPTIONS[name] or {}) do allowed[#allowed + 1] = k end
  cls.__init = function(self, opts)
    opts = require('ember.util.names').check_options(name, opts, allowed, 3)
    self.opts = opts
    self.reduction = opts.reduction or 'mean'
  end
  cls.forward = function(self, input, target) return call(self, input, target) end
  cls.backward = require('ember.nn.criterion').backward(name, call) -- Torch7's idiom
  cls.extra_repr = repr or function(self) return "reduction='" .. self.reduction .. "'" end
  M[name] = cls
end

loss_module('MSELoss', function(self, x, t) return F.mse_loss(x, t, self.reduction) end)
loss_module('L1Loss', function(self, x, t) return F.l1_loss(x, t, self.reduction) end)
loss_module('SmoothL1Loss', function(self, x, t)
  return F.smooth_l1_loss(x, t, self.reduction, self.opts.beta)
end)
-- The class-loss modules call nn.functional's forms: the fused kernels when the runtime has
-- them (one pass, no host round trip: the composites above read min/max back to check the
-- targets), else the composites.
local function nnF() return require('ember.nn').functional end
loss_module('NLLLoss', function(self, x, t)
  return nnF().nll_loss(x, t, { weight = self.opts.weight, ignore_index = self.opts.ignore_index,
    reduction = self.reduction })
end)
loss_module('CrossEntropyLoss', function(self, x, t)
  return nnF().cross_entropy(x, t, { weight = self.opts.weight,
    ignore_index = self.opts.ignore_index, reduction = self.reduction,
    label_smoothing = self.opts.label_smoothing })
end)
loss_module('BCELoss', function(self, x, t)
  return F.binary_cross_entropy(x, t, self.opts.weight, self.reduction)
end)
loss_module('BCEWithLogitsLoss', function(self, x, t)
  return F.binary_cross_entropy_with_logits(x, t, { weight = self.opts.weight,
    pos_weight = self.opts.pos_weight, reduction = self.reduction })
end)
loss_module('KLDivLoss', function(self, x, t)
  return F.kl_div(x, t, self.reduction, self.opts.log_target)
end)

return M
