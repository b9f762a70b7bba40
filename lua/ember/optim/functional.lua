-- ember.optim.functional: Torch7's optim package form, optim.<method>(feval, x, config, state),
-- over one flat parameter tensor x, and flatten_parameters to build such an x from a list of
-- parameters.
--
-- feval(x) returns the loss (a number or a 0-d tensor) and dloss/dx (a tensor with x's
-- number of elements). Each call does one update of x in place and returns x, {loss}, where
-- loss is f(x) before the update. config holds the hyperparameters under Torch7's names
-- (learningRate, momentum, ...); state (config when omitted) keeps the buffers and counters
-- between calls. The update rules are Torch7's, which differ from torch.optim in places
-- (Torch7's sgd dampening defaults to the momentum; its adam adds epsilon before the bias
-- correction). Unlike Torch7, dfdx is not modified.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local O = require 'ember.optim.optimizer'
local C = core.C
local is_tensor = tensor.is_tensor

local M = {}

local function evaluate(fn, feval, x)
  if type(feval) ~= 'function' then
    error(('%s: expected feval to be a function, got %s'):format(fn, type(feval)), 3)
  end
  if not is_tensor(x) then error(('%s: expected x to be a tensor, got %s'):format(fn, type(x)), 3) end
  local fx, dfdx = feval(x)
  if is_tensor(fx) then fx = fx:item() end
  if type(fx) ~= 'number' then
    error(('%s: feval must return the loss as a number or a 0-d tensor, got %s'):format(fn,
      type(fx)), 3)
  end
  if not is_tensor(dfdx) then
    error(('%s: feval must return dloss/dx as its second result, got %s'):format(fn,
      type(dfdx)), 3)
  end
  if dfdx:numel() ~= x:numel() then
    error(('%s: dloss/dx has %d elements, x has %d'):format(fn, dfdx:numel(), x:numel()), 3)
  end
  if dfdx.ptr.ndim ~= x.ptr.ndim or dfdx:size() ~= x:size() then dfdx = dfdx:reshape(x:size()) end
  return fx, dfdx:detach()
end

local function config_number(fn, config, name, default)
  local v = config[name]
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= v then
    error(('%s: expected config.%s to be a number, got %s'):format(fn, name, tostring(v)), 3)
  end
  return v
end

-- Runs update(x, dfdx) with grad mode off (x may be a leaf that requires grad) and restores
-- it. A 16-bit x is updated through a float32 master copy in state (master_param, as the
-- optimizers keep it: optimizer.lua), so its state buffers are float32 too.
local function no_grad(update, x, dfdx, state)
  local prev = C.em_set_grad_enabled(0)
  local ok, err = pcall(function()
    if not O.is16(x) then return update(x, dfdx) end
    local m = O.master_of(x, state)
    update(m, dfdx:to('float32'))
    x:copy_(m)
    state._version = O.version(x)
  end)
  C.em_set_grad_enabled(prev)
  if not ok then error(err, 0) end
end

-- sgd: config.learningRate (1e-3), learningRateDecay (0), weightDecay (0), weightDecays (a
-- tensor of per-element decays), momentum (0), dampening (= momentum), nesterov (false),
-- learningRates (a tensor of per-element rates). state.evalCounter counts the calls.
function M.sgd(feval, x, config, state)
  local fn = 'optim.sgd'
  config = config or {}
  state = state or config
  local lr = config_number(fn, config, 'learningRate', 1e-3)
  local lrd = config_number(fn, config, 'learningRateDecay', 0)
  local wd = config_number(fn, config, 'weightDecay', 0)
  local mom = config_number(fn, config, 'momentum', 0)
  local damp = config_number(fn, config, 'dampening', mom)
  local nesterov = config.nesterov or false
  local lrs, wds = config.learningRates, config.weightDecays
  if nesterov and not (mom > 0 and damp == 0) then
    error(fn .. ': Nesterov momentum requires a momentum and zero dampening', 2)
  end
  state.evalCounter = state.evalCounter or 0
  local fx, dfdx = evaluate(fn, feval, x)
  no_grad(function(x, dfdx)
    if wd ~= 0 then
      dfdx = dfdx:add(x, wd)
    elseif wds then
      dfdx = dfdx + wds:view(x:size()) * x
    end
    if mom ~= 0 then
      if not state.dfdx then
        state.dfdx = dfdx:clone()
      else
        state.dfdx:mul_(mom):add_(dfdx, 1 - damp)
      end
      if nesterov then dfdx = dfdx:add(state.dfdx, mom) else dfdx = state.dfdx end
    end
    local clr = lr / (1 + state.evalCounter * lrd)
    if lrs then
      x:add_(lrs:view(x:size()) * dfdx, -clr)
    else
      x:add_(dfdx, -clr)
    end
  end, x, dfdx, state)
  state.evalCounter = state.evalCounter + 1
  return x, { fx }
end

-- adam: config.learningRate (1e-3), learningRateDecay (0), beta1 (0.9), beta2 (0.999),
-- epsilon (1e-8), weightDecay (0). state.t counts the steps; state.m, state.v the moments.
function M.adam(feval, x, config, state)
  local fn = 'optim.adam'
  config = config or {}
  state = state or config
  local lr = config_number(fn, config, 'learningRate', 1e-3)
  local lrd = config_number(fn, config, 'learningRateDecay', 0)
  local beta1 = config_number(fn, config, 'beta1', 0.9)
  local beta2 = config_number(fn, config, 'beta2', 0.999)
  local eps = config_number(fn, config, 'epsilon', 1e-8)
  local wd = config_number(fn, config, 'weightDecay', 0)
  local fx, dfdx = evaluate(fn, feval, x)
  no_grad(function(x, dfdx)
    if wd ~= 0 then dfdx = dfdx:add(x, wd) end
    state.t = state.t or 0
    state.m = state.m or creation.zeros_like(x)
    state.v = state.v or creation.zeros_like(x)
    local clr = lr / (1 + state.t * lrd)
    state.t = state.t + 1
    state.m:mul_(beta1):add_(dfdx, 1 - beta1)
    state.v:mul_(beta2):addcmul_(dfdx, dfdx, 1 - beta2)
    local denom = state.v:sqrt():add_(eps)
    local bias_correction1 = 1 - beta1 ^ state.t
    local bias_correction2 = 1 - beta2 ^ state.t
    local step_size = clr * math.sqrt(bias_correction2) / bias_correction1
    x:addcdiv_(state.m, denom, -step_size)
  end, x, dfdx, state)
  return x, { fx }
end

-- flatten_parameters(params) -> x, dx, views, grad_views
-- Copies the parameters (a list of tensors or a module) into one new flat tensor x, and makes
-- a flat gradient tensor dx of zeros. views[i] is a view of x shaped like params[i] and
-- grad_views[i] the matching view of dx. Ember tensors are fixed handles, so the original
-- tensors cannot be made to point into x: use views[i] in their place. Each view of a
-- parameter that required grad requires grad too, and its .grad is grad_views[i], so that
-- backward accumulates straight into dx. Clear dx with dx:zero_() (setting view.grad = nil
-- would detach it from dx).
function M.flatten_parameters(params)
  local fn = 'flatten_parameters'
  if is_tensor(params) then params = { params } end
  if type(params) == 'table' and type(params.parameters) == 'function' and params[1] == nil then
    params = params:parameters()
  end
  if type(params) ~= 'table' or #params == 0 then
    error(fn .. ': expected a non-empty list of tensors (or a module)', 2)
  end
  local total, first = 0, params[1]
  for i, p in ipairs(params) do
    if not is_tensor(p) then error(('%s: params[%d] is a %s, not a tensor'):format(fn, i, type(p)), 2) end
    if p.ptr.dtype_id ~= first.ptr.dtype_id or p.ptr.device_id ~= first.ptr.device_id then
      error(('%s: params[%d] is %s on %s, params[1] %s on %s; all must share dtype and device')
        :format(fn, i, p:dtype(), p:device(), first:dtype(), first:device()), 2)
    end
    total = total + p:numel()
  end
  local like = { dtype = first:dtype(), device = first:device() }
  local x, dx = creation.empty(total, like), creation.zeros(total, like)
  local views, grad_views = {}, {}
  local offset = 0
  for i, p in ipairs(params) do
    local n = p:numel()
    local v = x:narrow(1, offset + 1, n):view(p:size())
    local gv = dx:narrow(1, offset + 1, n):view(p:size())
    v:copy_(p:detach())
    if p.requires_grad then
      v.requires_grad = true
      v.grad = gv
    end
    views[i], grad_views[i] = v, gv
    offset = offset + n
  end
  return x, dx, views, grad_views
end

return M
