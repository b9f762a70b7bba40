-- ember.nn losses beyond the basic ones (loss.lua): huber, margin ranking, triplet margin,
-- cosine embedding, Poisson NLL, Gaussian NLL and CTC, as functions (merged into
-- ember.nn.functional) and modules, with PyTorch's argument names, defaults and formulas.
--
-- All but CTC are composed from pointwise ops and reductions (their gradients come from those,
-- on every device). CTC calls em_ctc_loss (runtime/src/ops/nn_ctc.c): the alpha-beta recursion
-- in log space, a kernel on the CPU and on Vulkan. reduction is 'mean' (default), 'sum' or 'none'.
local ffi = require 'ffi'
local tensor = require 'ember.tensor'
local core = require 'ember.core'
local named = require 'ember.nn.named_args'
local field_module = require 'ember.nn.field_module'
local where = require('ember.ops.pointwise').where
local autocast_inputs = require('ember.autocast').autocast_inputs
local C = core.C

local M, F = {}, {}
M.functional = F

local function reduce(fn, loss, reduction)
  reduction = reduction or 'mean'
  if reduction == 'mean' then return loss:mean() end
  if reduction == 'sum' then return loss:sum() end
  if reduction == 'none' then return loss end
  error(fn .. ": reduction must be 'mean', 'sum' or 'none', got " .. tostring(reduction), 3)
end

local function tensors(fn, ...)
  local names = { ... }
  return function(...)
    local vals = { ... }
    for i, n in ipairs(names) do
      if not tensor.is_tensor(vals[i]) then
        error(('%s: expected %s to be a tensor, got %s'):format(fn, n, type(vals[i])), 4)
      end
    end
  end
end

local function number(fn, what, v, default)
  if v == nil then return default end
  if type(v) ~= 'number' then
    error(('%s: expected %s to be a number, got %s'):format(fn, what, tostring(v)), 3)
  end
  return v
end

local function same_shape(fn, a, b, an, bn)
  if tostring(a:size()) ~= tostring(b:size()) then
    error(('%s: %s %s and %s %s must have the same shape'):format(fn, an, tostring(a:size()), bn,
      tostring(b:size())), 3)
  end
end

-- huber_loss(input, target, reduction = 'mean', delta = 1):
-- 0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere.
function F.huber_loss(input, target, ...)
  local fn = 'huber_loss'
  tensors(fn, 'input', 'target')(input, target)
  local o = named(fn, { 'reduction', 'delta' }, ...)
  local delta = number(fn, 'delta', o.delta, 1)
  if delta <= 0 then error(fn .. ': expected delta > 0, got ' .. delta, 2) end
  same_shape(fn, input, target, 'input', 'target')
  input, target = autocast_inputs(fn, input, target)
  local d = (input - target):abs()
  local loss = where(d:lt(delta), d:square() * 0.5, (d - 0.5 * delta) * delta)
  return reduce(fn, loss, o.reduction)
end

-- margin_ranking_loss(input1, input2, target, margin = 0, reduction = 'mean'):
-- max(0, -target (input1 - input2) + margin), target +1 or -1.
function F.margin_ranking_loss(input1, input2, target, ...)
  local fn = 'margin_ranking_loss'
  tensors(fn, 'input1', 'input2', 'target')(input1, input2, target)
  local o = named(fn, { 'margin', 'reduction' }, ...)
  local margin = number(fn, 'margin', o.margin, 0)
  if input1:dim() ~= input2:dim() or input1:dim() ~= target:dim() then
    error(('%s: expected input1, input2 and target of the same number of dims, got %d, %d and %d')
      :format(fn, input1:dim(), input2:dim(), target:dim()), 2)
  end
  local loss = (-target * (input1 - input2) + margin):clamp_min(0)
  return reduce(fn, loss, o.reduction)
end

-- pairwise distance along the last dim (F.pairwise_distance's formula): ||x1 - x2 + eps||_p
local function pdist(x1, x2, p, eps, keepdim)
  return (x1 - x2 + eps):norm(p, -1, keepdim or false)
end

-- triplet_margin_loss(anchor, positive, negative, margin = 1, p = 2, eps = 1e-6, swap = false,
-- reduction = 'mean'): max(d(a, p) - d(a, n) + margin, 0) with d the pairwise distance.
function F.triplet_margin_loss(anchor, positive, negative, ...)
  local fn = 'triplet_margin_loss'
  tensors(fn, 'anchor', 'positive', 'negative')(anchor, positive, negative)
  local o = named(fn, { 'margin', 'p', 'eps', 'swap', 'reduction' }, ...)
  local margin, p = number(fn, 'margin', o.margin, 1), number(fn, 'p', o.p, 2)
  local eps = number(fn, 'eps', o.eps, 1e-6)
  local ad, pd, nd = anchor:dim(), positive:dim(), negative:dim()
  if ad ~= pd or ad ~= nd or ad < 1 or ad > 2 then
    error(('%s: expected anchor, positive and negative of 1 or 2 dims alike, got %d, %d and %d')
      :format(fn, ad, pd, nd), 2)
  end
  if margin <= 0 then error(fn .. ': expected margin > 0, got ' .. margin, 2) end
  local d_ap, d_an = pdist(anchor, positive, p, eps), pdist(anchor, negative, p, eps)
  if o.swap then d_an = d_an:minimum(pdist(positive, negative, p, eps)) end
  local loss = (d_ap - d_an + margin):clamp_min(0)
  return reduce(fn, loss, o.reduction)
end

-- cosine_embedding_loss(input1, input2, target, margin = 0, reduction = 'mean'):
-- 1 - cos(x1, x2) for target 1, max(0, cos(x1, x2) - margin) for target -1; cos over the last
-- dim with PyTorch's 1e-12 added to each squared norm.
function F.cosine_embedding_loss(input1, input2, target, ...)
  local fn = 'cosine_embedding_loss'
  tensors(fn, 'input1', 'input2', 'target')(input1, input2, target)
  local o = named(fn, { 'margin', 'reduction' }, ...)
  local margin = number(fn, 'margin', o.margin, 0)
  local d = input1:dim()
  if d < 1 or d > 2 or input2:dim() ~= d or target:dim() ~= d - 1 then
    error(('%s: expected 1-D or 2-D inputs and a target of one dim less, got %d-D, %d-D and %d-D')
      :format(fn, d, input2:dim(), target:dim()), 2)
  end
  local EPS = 1e-12
  local prod = (input1 * input2):sum(-1)
  local m1 = input1:square():sum(-1) + EPS
  local m2 = input2:square():sum(-1) + EPS
  local cos = prod / (m1 * m2):sqrt()
  local zero = cos * 0
  local pos = where(target:eq(1), 1 - cos, zero)
  local neg = where(target:eq(-1), (cos - margin):clamp_min(0), zero)
  return reduce(fn, pos + neg, o.reduction)
end

-- poisson_nll_loss(input, target, log_input = true, full = false, eps = 1e-8,
-- reduction = 'mean'): exp(input) - target input (log_input) or input - target log(input + eps);
-- full adds Stirling's term target log target - target + 0.5 log(2 pi target) where target > 1.
function F.poisson_nll_loss(input, target, ...)
  local fn = 'poisson_nll_loss'
  tensors(fn, 'input', 'target')(input, target)
  local o = named(fn, { 'log_input', 'full', 'eps', 'reduction' }, ...)
  local log_input = o.log_input ~= false
  local eps = number(fn, 'eps', o.eps, 1e-8)
  input, target = autocast_inputs(fn, input, target)
  local loss
  if log_input then loss = input:exp() - target * input
  else loss = input - target * (input + eps):log() end
  if o.full then
    local safe = target:clamp_min(1) -- the term is masked where target <= 1
    local st = safe * safe:log() - safe + (safe * (2 * math.pi)):log() * 0.5
    loss = loss + where(target:gt(1), st, st * 0)
  end
  return reduce(fn, loss, o.reduction)
end

-- gaussian_nll_loss(input, target, var, full = false, eps = 1e-6, reduction = 'mean'):
-- 0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) when full).
-- var has the input's shape, or that shape with its last dim 1 or dropped. As PyTorch, the
-- clamp to eps does not stop var's gradient.
function F.gaussian_nll_loss(input, target, var, ...)
  local fn = 'gaussian_nll_loss'
  tensors(fn, 'input', 'target', 'var')(input, target, var)
  local o = named(fn, { 'full', 'eps', 'reduction' }, ...)
  local eps = number(fn, 'eps', o.eps, 1e-6)
  local isz = tostring(input:size())
  if tostring(var:size()) ~= isz then
    local s = input:size()
    local n = input:dim()
    if n >= 1 and var:dim() == n - 1 and tostring(var:size()) == tostring(input:narrow(n, 1, 1):squeeze(n):size()) then
      var = var:unsqueeze(-1)
    elseif not (n >= 1 and var:dim() == n and var:size(n) == 1 and
        tostring(var:squeeze(n):size()) == tostring(input:narrow(n, 1, 1):squeeze(n):size())) then
      error(('%s: var %s does not match the input %s (same shape, or its last dim 1 or dropped)')
        :format(fn, tostring(var:size()), tostring(s)), 2)
    end
  end
  if var:numel() > 0 and var:min():item() < 0 then error(fn .. ': var has negative entries', 2) end
  input, target, var = autocast_inputs(fn, input, target, var)
  local v = var + (var:clamp_min(eps) - var):detach()
  local loss = ((input - target):square() / v + v:log()) * 0.5
  if o.full then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduce(fn, loss, o.reduction)
end

-- ---- CTC ---------------------------------------------------------------------------------------

-- Lengths as an int64 tensor on the CPU: a tensor or a table of numbers.
local function lengths(fn, what, v, n)
  local t
  if tensor.is_tensor(v) then
    if v:is_floating_point() or v:dtype() == 'bool' then
      error(('%s: expected integer %s, got %s'):format(fn, what, v:dtype()), 4)
    end
    t = v:to('cpu'):long():contiguous()
  elseif type(v) == 'table' then
    t = require('ember').tensor(v, { dtype = 'int64' })
  else
    error(('%s: expected %s as a tensor or a table of numbers, got %s'):format(fn, what, type(v)), 4)
  end
  if t:dim() ~= 1 or t:size(1) ~= n then
    error(('%s: expected %d %s, got shape %s'):format(fn, n, what, tostring(t:size())), 4)
  end
  return t
end

-- ctc_loss(log_probs [T, N, C] (or [T, C]), targets, input_lengths, target_lengths,
-- blank = 1, reduction = 'mean', zero_infinity = false). Classes and blank are 1-based (blank
-- 1 is PyTorch's blank 0); targets are [N, S] padded or all the targets concatenated (1-D).
-- 'mean' divides each loss by its target length, then averages over the batch, as PyTorch.
-- The gradient is the derivative with respect to log_probs (see docs/api/nn_functional.md).
function F.ctc_loss(log_probs, targets, input_lengths, target_lengths, ...)
  local fn = 'ctc_loss'
  tensors(fn, 'log_probs', 'targets')(log_probs, targets)
  local o = named(fn, { 'blank', 'reduction', 'zero_infinity' }, ...)
  local blank = number(fn, 'blank', o.blank, 1)
  local lp = log_probs
  local dt = lp:dtype()
  if dt == 'float16' or dt == 'bfloat16' then lp = lp:float() end -- computed in float32
  local unbatched = lp:dim() == 2
  if unbatched then
    lp = lp:unsqueeze(2)
    if targets:dim() == 1 then targets = targets:unsqueeze(1) end
  end
  if lp:dim() ~= 3 then
    error(('%s: expected log_probs [T, N, C] or [T, C], got shape %s'):format(fn,
      tostring(log_probs:size())), 2)
  end
  local n = lp:size(2)
  if tensor.is_tensor(input_lengths) and input_lengths:dim() == 0 then input_lengths = input_lengths:reshape(1) end
  if tensor.is_tensor(target_lengths) and target_lengths:dim() == 0 then target_lengths = target_lengths:reshape(1) end
  if type(input_lengths) == 'number' then input_lengths = { input_lengths } end
  if type(target_lengths) == 'number' then target_lengths = { target_lengths } end
  local il, tl = lengths(fn, 'input_lengths', input_lengths, n), lengths(fn, 'target_lengths', target_lengths, n)
  if targets:is_floating_point() or targets:dtype() == 'bool' then
    error(('%s: expected integer targets, got %s'):format(fn, targets:dtype()), 2)
  end
  local t0 = targets:to('cpu'):long() - 1
  local zi = o.zero_infinity and 1 or 0
  local p = C.em_ctc_loss(lp.ptr, t0.ptr, il.ptr, tl.ptr, blank - 1, zi)
  if p == nil then
    local msg = ffi.string(C.em_last_error())
    msg = msg:gsub('(class index )(%-?%d+)', function(a, k) return a .. tostring(tonumber(k) + 1) end)
    msg = msg:gsub('(blank )(%-?%d+)', function(a, k) return a .. tostring(tonumber(k) + 1) end)
    error(msg, 2)
  end
  local loss = core.own(p)
  local r = o.reduction or 'mean'
  if r == 'mean' then
    local div = tl:to(loss:device()):to(loss:dtype()):clamp_min(1)
    loss = (loss / div):mean()
  elseif r == 'sum' then
    loss = loss:sum()
  elseif r == 'none' then
    if unbatched then loss = loss:squeeze(1) end
  else
    error(fn .. ": reduction must be 'mean', 'sum' or 'none', got " .. tostring(r), 2)
  end
  return loss
end

-- ---- modules -----------------------------------------------------------------------------------

local function loss_module(name, fields, defaults, call)
  local cls = field_module(name, fields, defaults, call)
  cls.backward = require('ember.nn.criterion').backward(name, call) -- Torch7's idiom
  M[name] = cls
  return cls
end

loss_module('HuberLoss', { 'reduction', 'delta' }, { 'mean', 1 },
  function(s, x, t) return F.huber_loss(x, t, s.reduction, s.delta) end)
loss_module('MarginRankingLoss', { 'margin', 'reduction' }, { 0, 'mean' },
  function(s, x1, x2, t) return F.margin_ranking_loss(x1, x2, t, s.margin, s.reduction) end)
loss_module('TripletMarginLoss', { 'margin', 'p', 'eps', 'swap', 'reduction' },
  { 1, 2, 1e-6, false, 'mean' }, function(s, a, p, n)
    return F.triplet_margin_loss(a, p, n, s.margin, s.p, s.eps, s.swap, s.reduction)
  end)
loss_module('CosineEmbeddingLoss', { 'margin', 'reduction' }, { 0, 'mean' },
  function(s, x1, x2, t) return F.cosine_embedding_loss(x1, x2, t, s.margin, s.reduction) end)
loss_module('PoissonNLLLoss', { 'log_input', 'full', 'eps', 'reduction' },
  { true, false, 1e-8, 'mean' }, function(s, x, t)
    return F.poisson_nll_loss(x, t, s.log_input, s.full, s.eps, s.reduction)
  end)
loss_module('GaussianNLLLoss', { 'full', 'eps', 'reduction' }, { false, 1e-6, 'mean' },
  function(s, x, t, v) return F.gaussian_nll_loss(x, t, v, s.full, s.eps, s.reduction) end)
loss_module('CTCLoss', { 'blank', 'reduction', 'zero_infinity' }, { 1, 'mean', false },
  function(s, lp, t, il, tl)
    return F.ctc_loss(lp, t, il, tl, s.blank, s.reduction, s.zero_infinity)
  end)

return M
