-- Module hooks, as PyTorch's: forward pre-hooks, forward hooks and full backward hooks. Each
-- register_* method returns a handle whose :remove() takes the hook off.
--
-- module.lua routes every call of a module through hooks.call: module(x) and module:forward(x)
-- alike (a class's forward is wrapped when it is defined; __call covers a forward set on an
-- instance). A module with no hooks costs one table lookup per call.
--
-- The full backward hook follows PyTorch's BackwardHook: the module's tensor arguments and its
-- outputs go through identity autograd.Functions. The outputs' identity sees the gradients of
-- the outputs (grad_output) first; the arguments' identity then sees the gradients of the
-- arguments (grad_input), calls the hooks, and passes on what they return.
local tensor = require 'ember.tensor'
local autograd = require 'ember.autograd'
local is_tensor = tensor.is_tensor

local M = {}

local next_id = 0

-- Adds fn to the list in field `field` of module; returns the handle.
local function add(module, field, fn, what)
  if type(fn) ~= 'function' then
    error(('%s: expected a function, got %s'):format(what, type(fn)), 3)
  end
  next_id = next_id + 1
  local id = next_id
  local list = rawget(module, field)
  if list == nil then
    list = {}
    rawset(module, field, list)
  end
  list[#list + 1] = { id = id, fn = fn }
  return {
    id = id,
    remove = function()
      local l = rawget(module, field)
      if l == nil then return end
      for i, h in ipairs(l) do
        if h.id == id then table.remove(l, i); break end
      end
      if #l == 0 then rawset(module, field, nil) end -- back to the fast path
    end,
  }
end

function M.install(Module)
  -- fn(module, args) -> nil, or new args (a table, or a single value)
  function Module:register_forward_pre_hook(fn)
    return add(self, '_forward_pre_hooks', fn, 'register_forward_pre_hook')
  end
  -- fn(module, args, output) -> nil, or a new output
  function Module:register_forward_hook(fn)
    return add(self, '_forward_hooks', fn, 'register_forward_hook')
  end
  -- fn(module, grad_input, grad_output) -> nil, or a new grad_input (a table by argument
  -- position; nil entries for arguments without a gradient)
  function Module:register_full_backward_hook(fn)
    return add(self, '_backward_hooks', fn, 'register_full_backward_hook')
  end
end

-- ---- backward hooks --------------------------------------------------------------------------
local function pack(...) return { n = select('#', ...), ... } end

local function run_backward_hooks(state, grad_input)
  for _, h in ipairs(rawget(state.module, '_backward_hooks') or state.hooks) do
    local r = h.fn(state.module, grad_input, state.grad_output or {})
    if r ~= nil then
      if is_tensor(r) then r = { r } end
      if type(r) ~= 'table' then
        error('full backward hook: expected nil or a table of gradients, got ' .. type(r), 0)
      end
      grad_input = r
    end
  end
  return grad_input
end

-- Identity on the module's outputs: notes grad_output. When no argument needs a gradient the
-- arguments' identity never runs backward, so the hooks run here, with an empty grad_input.
local HookOutputs = autograd.Function{
  name = 'BackwardHookOutputs',
  forward = function(ctx, state, ...)
    ctx.state = state
    return ...
  end,
  backward = function(ctx, ...)
    local state = ctx.state
    state.grad_output = pack(...)
    if not state.inputs_hooked then run_backward_hooks(state, {}) end
    return nil, ...
  end,
}

-- Identity on the module's arguments: gives the hooks grad_input and passes on their result.
local HookInputs = autograd.Function{
  name = 'BackwardHookInputs',
  forward = function(ctx, state, ...)
    ctx.state = state
    ctx.n = select('#', ...)
    return ...
  end,
  backward = function(ctx, ...)
    local grad_input = run_backward_hooks(ctx.state, pack(...))
    return nil, unpack(grad_input, 1, ctx.n)
  end,
}

local function any_requires_grad(t, n)
  for i = 1, n do
    if is_tensor(t[i]) and t[i].requires_grad then return true end
  end
  return false
end

-- ---- calling ---------------------------------------------------------------------------------
local function run(self, f, ...)
  local args = pack(...)
  local pre = rawget(self, '_forward_pre_hooks')
  if pre then
    for _, h in ipairs(pre) do
      local r = h.fn(self, args)
      if r ~= nil then
        if type(r) == 'table' and not is_tensor(r) then
          args = { n = r.n or table.maxn(r) }
          for i = 1, args.n do args[i] = r[i] end
        else
          args = { n = 1, r }
        end
      end
    end
  end
  local bwd = rawget(self, '_backward_hooks')
  local state
  if bwd and autograd.is_grad_enabled() then
    state = { module = self, hooks = bwd }
    if any_requires_grad(args, args.n) then
      state.inputs_hooked = true
      args = pack(HookInputs(state, unpack(args, 1, args.n)))
    end
  end
  local res = pack(f(self, unpack(args, 1, args.n)))
  local fwd = rawget(self, '_forward_hooks')
  if fwd then
    for _, h in ipairs(fwd) do
      local r = h.fn(self, args, res[1])
      if r ~= nil then res[1] = r end
    end
  end
  if state then
    local out = res[1]
    if is_tensor(out) and out.requires_grad then
      res[1] = HookOutputs(state, out)
    elseif type(out) == 'table' and not is_tensor(out) and any_requires_grad(out, #out) then
      local wrapped = pack(HookOutputs(state, unpack(out, 1, #out)))
      local copy = {}
      for k, v in pairs(out) do copy[k] = v end
      for i = 1, #out do copy[i] = wrapped[i] end
      res[1] = copy
    end
  end
  return res
end

-- Runs f(self, ...) with self's hooks around it (once: a forward that calls its class's parent
-- forward, or __call then forward, does not run them twice).
function M.call(self, f, ...)
  if rawget(self, '_in_hooks') or (rawget(self, '_forward_pre_hooks') == nil
      and rawget(self, '_forward_hooks') == nil and rawget(self, '_backward_hooks') == nil) then
    return f(self, ...)
  end
  rawset(self, '_in_hooks', true)
  local ok, res = pcall(run, self, f, ...)
  rawset(self, '_in_hooks', nil)
  if not ok then error(res, 0) end
  return unpack(res, 1, res.n)
end

return M
