-- ember.autograd: the Lua face of the C tape: requires_grad, .grad, backward, detach, no_grad,
-- hooks, autograd.grad and gradcheck.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

-- ---- properties ------------------------------------------------------------------------------
tensor.getters.requires_grad = function(x) return C.em_requires_grad(x.ptr) ~= 0 end
tensor.setters.requires_grad = function(x, v) check(C.em_set_requires_grad(x.ptr, v and 1 or 0)) end
tensor.getters.is_leaf = function(x) return C.em_is_leaf(x.ptr) ~= 0 end
tensor.getters.grad = function(x)
  local g = C.em_grad(x.ptr)
  if g == nil then return nil end
  return own(g)
end
tensor.setters.grad = function(x, g)
  if g ~= nil and not is_tensor(g) then
    error('grad: expected a tensor or nil, got ' .. type(g), 3)
  end
  check(C.em_set_grad(x.ptr, g and g.ptr or nil))
end
tensor.getters.grad_fn = function(x)
  local name = C.em_grad_fn_name(x.ptr)
  if name == nil then return nil end
  return ffi.string(name)
end

function methods.requires_grad_(x, flag)
  if flag == nil then flag = true end
  check(C.em_set_requires_grad(x.ptr, flag and 1 or 0))
  return x
end

function methods.detach(x) return own(C.em_detach(x.ptr)) end
function methods.detach_(x) check(C.em_detach_(x.ptr)); return x end
function methods.retain_grad(x) check(C.em_retain_grad(x.ptr)); return x end

-- ---- hooks -----------------------------------------------------------------------------------
-- One C callback serves every hook: its userdata is a key into this table. (Each LuaJIT
-- callback is a scarce resource, so one per hook would not do.)
local hooks, next_key = {}, 0
local hook_cb = ffi.cast('em_grad_hook', function(grad, userdata)
  local f = hooks[tonumber(ffi.cast('intptr_t', userdata))]
  C.em_retain(grad)
  local ok, r = pcall(f, own(grad))
  if not ok then
    C.em_set_error(tostring(r))
    return nil
  end
  if is_tensor(r) then return C.em_retain(r.ptr) end
  return nil
end)

-- register_hook(fn): fn(grad) may return a tensor to use instead. Returns a handle with :remove().
function methods.register_hook(x, fn)
  if type(fn) ~= 'function' then error('register_hook: expected a function, got ' .. type(fn), 2) end
  next_key = next_key + 1
  local key = next_key
  hooks[key] = fn
  local id = C.em_register_hook(x.ptr, hook_cb, ffi.cast('void *', key))
  if id < 0 then hooks[key] = nil; core.raise(1) end
  return {
    remove = function()
      check(C.em_remove_hook(x.ptr, id))
      hooks[key] = nil
    end,
  }
end

local fn = require 'ember.autograd.function'
M.Function = fn.Function
M.function_registry_size = fn.registry_size

-- ---- end-of-backward callbacks -------------------------------------------------------------
-- queue_callback(f), called during a backward started from Lua (from a gradient hook), runs f
-- once after that backward has put every gradient into .grad, before backward returns (as
-- PyTorch's Variable._execution_engine.queue_callback). DistributedDataParallel finishes its
-- gradient all-reduces there. Callbacks queued in a nested backward wait for the outermost
-- one; a backward that fails drops its callbacks. An error in a callback is raised by backward.
-- The scope lives in Lua's registry, not in this module: a test runner that reloads modules per
-- file leaves tensors whose backward is an earlier copy's, and queue_callback must see the
-- backward that is running whichever copy started it.
local scope = debug.getregistry().ember_backward_callbacks
if scope == nil then
  scope = { queued = {}, depth = 0 }
  debug.getregistry().ember_backward_callbacks = scope
end

function M.queue_callback(f)
  if type(f) ~= 'function' then error('queue_callback: expected a function, got ' .. type(f), 2) end
  if scope.depth == 0 then
    error('queue_callback: expected to be called during backward (from a gradient hook)', 2)
  end
  scope.queued[#scope.queued + 1] = f
end

-- Runs C backward `run` (returning a status) inside the callback scope; returns its status.
local function with_callbacks(run, ...)
  scope.depth = scope.depth + 1
  local ok, rc = pcall(run, ...)
  scope.depth = scope.depth - 1
  if scope.depth > 0 then
    if not ok then error(rc, 0) end
    return rc
  end
  local list = scope.queued
  scope.queued = {}
  if not ok then error(rc, 0) end
  if rc == 0 then
    for _, f in ipairs(list) do f() end
  end
  return rc
end

-- ---- backward --------------------------------------------------------------------------------
-- These functions may call back into Lua (hooks), which LuaJIT allows only from interpreted
-- code: they are kept out of the JIT.
local function backward(x, grad, opts)
  if type(grad) == 'table' and not is_tensor(grad) then opts, grad = grad, nil end
  opts = require('ember.util.names').check_options('backward', opts, { 'retain_graph', 'create_graph' })
  local ok, rc = pcall(with_callbacks, function()
    local r = C.em_backward(x.ptr, grad and grad.ptr or nil, opts.retain_graph and 1 or 0,
      opts.create_graph and 1 or 0)
    fn.drain() -- custom functions done with (or failed) give their Lua state back now
    return r
  end)
  if not ok then error(rc, 0) end -- a callback's error, already placed
  if rc ~= 0 then core.raise(2) end -- at the caller's line
end
jit.off(backward, true)
methods.backward = backward

-- autograd.backward(tensors [, grads [, opts]]): one backward from several tensors (the
-- gradients meeting in the graph are summed first). grads: a tensor or a table (entries may be
-- nil for one-element tensors). opts: retain_graph, create_graph.
local function backward_many(tensors, grads, opts)
  if is_tensor(tensors) then tensors = { tensors } end
  if is_tensor(grads) then grads = { grads } end
  if type(tensors) ~= 'table' then
    error('autograd.backward: expected a tensor or a table of tensors, got ' .. type(tensors), 2)
  end
  opts = require('ember.util.names').check_options('autograd.backward', opts, { 'retain_graph', 'create_graph' })
  local n = #tensors
  local ts = ffi.new('em_tensor*[?]', math.max(n, 1))
  local gs = ffi.new('em_tensor*[?]', math.max(n, 1))
  for i = 1, n do
    ts[i - 1] = tensors[i].ptr
    if grads and grads[i] then gs[i - 1] = grads[i].ptr end
  end
  local ok, rc = pcall(with_callbacks, function()
    local r = C.em_backward_many(n, ts, gs, opts.retain_graph and 1 or 0,
      opts.create_graph and 1 or 0)
    fn.drain()
    return r
  end)
  if not ok then error(rc, 0) end -- a callback's error, already placed
  if rc ~= 0 then core.raise(2) end
end
jit.off(backward_many, true)
M.backward = backward_many

-- grad(outputs, inputs [, opts]) -> a table of gradients (or one, for a single input tensor).
-- opts: grad_outputs, retain_graph, create_graph, allow_unused.
local function grad(outputs, inputs, opts)
  opts = require('ember.util.names').check_options('grad', opts, { 'grad_outputs', 'retain_graph', 'create_graph', 'allow_unused' })
  local single = is_tensor(inputs)
  if is_tensor(outputs) then outputs = { outputs } end
  if single then inputs = { inputs } end
  local grad_outputs = opts.grad_outputs
  if is_tensor(grad_outputs) then grad_outputs = { grad_outputs } end
  local no, ni = #outputs, #inputs
  local out_ptrs = ffi.new('em_tensor*[?]', no)
  local in_ptrs = ffi.new('em_tensor*[?]', ni)
  local go_ptrs = grad_outputs and ffi.new('em_tensor*[?]', no) or nil
  for i = 1, no do
    out_ptrs[i - 1] = outputs[i].ptr
    if go_ptrs and grad_outputs[i] then go_ptrs[i - 1] = grad_outputs[i].ptr end
  end
  for i = 1, ni do in_ptrs[i - 1] = inputs[i].ptr end
  local results = ffi.new('em_tensor*[?]', ni)
  local rc = C.em_autograd_grad(no, out_ptrs, go_ptrs, ni, in_ptrs, results,
    opts.retain_graph and 1 or 0, opts.create_graph and 1 or 0, opts.allow_unused and 1 or 0)
  fn.drain()
  if rc ~= 0 then core.raise(2) end
  local r = {}
  for i = 1, ni do r[i] = results[i - 1] ~= nil and own(results[i - 1]) or false end
  if single then return r[1] or nil end
  return r
end
jit.off(grad)
M.grad = grad

-- ---- grad mode -------------------------------------------------------------------------------
-- no_grad(f, ...) runs f with recording off and returns its results; the mode is restored even
-- when f raises.
local function with_mode(enabled, f, ...)
  local previous = C.em_set_grad_enabled(enabled and 1 or 0)
  local results = { pcall(f, ...) }
  C.em_set_grad_enabled(previous)
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

function M.no_grad(f, ...) return with_mode(false, f, ...) end
function M.enable_grad(f, ...) return with_mode(true, f, ...) end
function M.set_grad_enabled(enabled) return C.em_set_grad_enabled(enabled and 1 or 0) ~= 0 end
function M.is_grad_enabled() return C.em_grad_enabled() ~= 0 end

-- ---- gradcheck -------------------------------------------------------------------------------
-- gradcheck(f, inputs [, opts]) compares the gradients autograd computes for f (a function of
-- the input tensors returning one tensor) with central finite differences in float64.
-- opts: eps (1e-6), atol (1e-5), rtol (1e-3). Inputs must be float64 tensors that require grad.
-- Returns true, or raises an error naming the input and element that disagree.
function M.gradcheck(f, inputs, opts)
  opts = require('ember.util.names').check_options('gradcheck', opts, { 'eps', 'atol', 'rtol' })
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  if is_tensor(inputs) then inputs = { inputs } end
  for i, x in ipairs(inputs) do
    if x.ptr.dtype_id ~= C.EM_FLOAT64 then
      error(('gradcheck: input %d must be float64, got %s'):format(i, x:dtype()), 2)
    end
  end
  local out = f(unpack(inputs))
  local n_out = out:numel()
  -- Analytic Jacobian, one row per output element: grad of out[j] with respect to the inputs.
  local flat_out = out:reshape(-1)
  local analytic = {}
  for j = 1, n_out do
    local go = tensor.methods.zero_(out:detach():clone()):reshape(-1)
    go[j] = 1
    local grads = grad({ out }, inputs, { grad_outputs = { go:view(out:size()) },
      retain_graph = true, allow_unused = true })
    analytic[j] = grads
  end
  local _ = flat_out
  -- Numerical Jacobian, perturbing each input element in place.
  for i, x in ipairs(inputs) do
    local data = x:detach()
    local n = x:numel()
    local flat = data:view(-1)
    if not data:is_contiguous() then error('gradcheck: inputs must be contiguous', 2) end
    for k = 1, n do
      local orig = flat[k]
      flat[k] = orig + eps
      local plus = M.no_grad(f, unpack(inputs)):reshape(-1):totable()
      flat[k] = orig - eps
      local minus = M.no_grad(f, unpack(inputs)):reshape(-1):totable()
      flat[k] = orig
      for j = 1, n_out do
        local numeric = (plus[j] - minus[j]) / (2 * eps)
        local g = analytic[j][i]
        local a = g and g:reshape(-1)[k] or 0
        if math.abs(a - numeric) > atol + rtol * math.abs(numeric) then
          error(('gradcheck: input %d, element %d, output %d: autograd %.8g, finite differences %.8g')
            :format(i, k, j, a, numeric), 2)
        end
      end
    end
  end
  return true
end

return M
