-- ember.optim.clip: gradient clipping, as torch.nn.utils.clip_grad_norm_ / clip_grad_value_.
-- The total norm is the norm of the vector of per-gradient norms (PyTorch's definition, so
-- every order p, inf and 0 included, gives PyTorch's number); each norm is computed by the
-- device, and only the per-tensor results travel to the host.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C = core.C
local is_tensor = tensor.is_tensor

local M = {}

-- The gradients of params (a tensor, a list of tensors, or a module), skipping missing ones.
local function grads_of(fn, params)
  if is_tensor(params) then params = { params } end
  if type(params) == 'table' and type(params.parameters) == 'function' and params[1] == nil then
    params = params:parameters()
  end
  if type(params) ~= 'table' then
    error(('%s: expected a tensor or a list of tensors, got %s'):format(fn, type(params)), 3)
  end
  local gs = {}
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      error(('%s: parameters[%d] is a %s, not a tensor'):format(fn, i, type(p)), 3)
    end
    local g = C.em_grad(p.ptr)
    if g ~= nil then gs[#gs + 1] = core.own(g) end
  end
  return gs
end

local function norm_order(fn, p)
  if p == nil then return 2 end
  if p == 'inf' then return math.huge end
  if p == '-inf' then return -math.huge end
  if type(p) ~= 'number' or p ~= p then
    error(("%s: expected norm_type to be a number or 'inf', got %s"):format(fn, tostring(p)), 3)
  end
  return p
end

-- The p-norm of a list of numbers, as torch.norm of a 1-D tensor holding them.
local function vector_norm(xs, p)
  if p == math.huge or p == -math.huge then
    local r = math.abs(xs[1])
    for i = 2, #xs do
      local a = math.abs(xs[i])
      if a ~= a or r ~= r then r = 0 / 0 -- NaN propagates as in torch.max
      elseif (p > 0 and a > r) or (p < 0 and a < r) then r = a end
    end
    return r
  end
  local s = 0
  if p == 0 then
    for i = 1, #xs do if xs[i] ~= 0 then s = s + 1 end end
    return s
  end
  for i = 1, #xs do s = s + math.abs(xs[i]) ^ p end
  return s ^ (1 / p)
end
M.vector_norm = vector_norm


-- clip_grad_norm_(params, max_norm [, norm_type = 2] [, error_if_nonfinite = false]) -> total
-- norm of the gradients (as one vector) before clipping, a number. When it exceeds max_norm
-- the gradients are scaled in place by max_norm / (total + 1e-6). The fourth argument may
-- also be an options table { error_if_nonfinite = true }.
function M.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)
  local fn = 'clip_grad_norm_'
  if type(max_norm) ~= 'number' or max_norm ~= max_norm then
    error(('%s: expected max_norm to be a number, got %s'):format(fn, tostring(max_norm)), 2)
  end
  if type(norm_type) == 'table' and error_if_nonfinite == nil then
    norm_type, error_if_nonfinite = norm_type.norm_type, norm_type.error_if_nonfinite
  elseif type(error_if_nonfinite) == 'table' then
    error_if_nonfinite = error_if_nonfinite.error_if_nonfinite
  end
  local p = norm_order(fn, norm_type)
  local gs = grads_of(fn, params)
  -- Empty gradients have norm 0 and are left out (an inf norm of nothing is undefined).
  local norms = {}
  for _, g in ipairs(gs) do
    if g:numel() > 0 then norms[#norms + 1] = g:norm(p):item() end
  end
  if #norms == 0 then return 0 end
  local total = vector_norm(norms, p)
  if error_if_nonfinite and (total ~= total or total == math.huge or total == -math.huge) then
    error(('%s: the total norm of order %s of the gradients is %s, so they cannot be clipped; ' ..
      'pass error_if_nonfinite = false to scale them by it anyway'):format(fn, tostring(p),
      tostring(total)), 2)
  end
  local coef = max_norm / (total + 1e-6)
  if not (coef >= 1) then -- NaN coefficients scale too, as in PyTorch
    local prev = C.em_set_grad_enabled(0)
    for _, g in ipairs(gs) do
      local rc = C.em_binary_scalar_(C.EM_MUL, g.ptr, coef)
      if rc ~= 0 then C.em_set_grad_enabled(prev); core.raise(1) end
    end
    C.em_set_grad_enabled(prev)
  end
  return total
end

-- clip_grad_value_(params, clip_value): clamps every gradient to [-clip_value, clip_value].
function M.clip_grad_value_(params, clip_value)
  local fn = 'clip_grad_value_'
  if type(clip_value) ~= 'number' or clip_value ~= clip_value then
    error(('%s: expected clip_value to be a number, got %s'):format(fn, tostring(clip_value)), 2)
  end
  if clip_value < 0 then
    error(('%s: expected clip_value >= 0, got %s'):format(fn, tostring(clip_value)), 2)
  end
  local gs = grads_of(fn, params)
  local prev = C.em_set_grad_enabled(0)
  local ok, err = pcall(function()
    for _, g in ipairs(gs) do g:clamp_(-clip_value, clip_value) end
  end)
  C.em_set_grad_enabled(prev)
  if not ok then error(err, 2) end
end

return M
