-- ember.precision: the `precision` option of the main job and of `ember bench`, one training
-- recipe per name, as PyTorch users write them by hand:
--   fp32  float32 throughout
--   bf16  the forward and the loss under ember.autocast with bfloat16, float32 parameters
--   fp16  the same with float16, plus an ember.amp.GradScaler (float16's range needs it)
--
--   local p = require('ember.precision').new('bf16', device)
--   local loss = p:forward(function() return criterion(model(x), y) end)
--   p:step(loss, optimizer)       -- backward (scaled for fp16), step, scale update
--   p:step(loss, optimizer, { clip = 1.0, params = model:parameters() })  -- clipped gradients
local M = {}

M.dtypes = { fp32 = false, bf16 = 'bfloat16', fp16 = 'float16' }
M.names = { 'fp32', 'bf16', 'fp16' }

-- The name checked: 'fp32', 'bf16' or 'fp16' (the dtype names are accepted too). The error
-- names `who` and points at the caller's caller, or nowhere with level 0 (command lines).
function M.check(name, who, level)
  local alias = { float32 = 'fp32', bfloat16 = 'bf16', float16 = 'fp16' }
  local n = alias[name] or name
  if M.dtypes[n] == nil then
    error(("%s: expected precision fp32, bf16 or fp16, got '%s'"):format(who or 'precision',
      tostring(name)), level or 3)
  end
  return n
end

local Recipe = {}
Recipe.__index = Recipe

function M.new(name, device)
  local ember = require 'ember'
  name = M.check(name, 'precision.new')
  local self = setmetatable({ name = name, dtype = M.dtypes[name] }, Recipe)
  if self.dtype then
    self.autocast = { device = ember.device(device or 'cpu').name, dtype = self.dtype }
    if name == 'fp16' then self.scaler = ember.amp.GradScaler() end
  end
  return self
end

-- Runs fn(...) under this recipe's autocast and returns its results; fn may be any callable
-- (a module too).
function Recipe:forward(fn, ...)
  if not self.autocast then return fn(...) end
  return require('ember').autocast(self.autocast, function(...) return fn(...) end, ...)
end

-- backward and the optimizer step (loss scaling for fp16). Returns nothing: a scaled step with
-- inf/NaN gradients is skipped, as PyTorch's GradScaler does, but the host learns so only
-- later (GradScaler:step records the step without waiting for the verdict; docs/amp.md).
-- opts.clip (optional): clip the gradients of opts.params to that total 2-norm before the
-- step (clip_grad_norm_), unscaled first for fp16 as PyTorch's recipe does.
function Recipe:step(loss, optimizer, opts)
  local clip = opts and opts.clip
  if clip and type(opts.params) ~= 'table' then
    error('precision:step: expected opts.params (the parameters to clip) with opts.clip', 2)
  end
  local clip_grad_norm_ = clip and require('ember.optim.clip').clip_grad_norm_
  if not self.scaler then
    loss:backward()
    if clip then clip_grad_norm_(opts.params, clip) end
    optimizer:step()
    return
  end
  self.scaler:scale(loss):backward()
  if clip then
    self.scaler:unscale_(optimizer)
    clip_grad_norm_(opts.params, clip)
  end
  self.scaler:step(optimizer)
  self.scaler:update()
end

function Recipe:state_dict() return self.scaler and self.scaler:state_dict() or nil end
function Recipe:load_state_dict(s) if self.scaler and s then self.scaler:load_state_dict(s) end end

return M
