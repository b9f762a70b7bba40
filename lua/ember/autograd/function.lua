-- ember.autograd.Function: custom autograd functions written in Lua, in PyTorch's style.
--
--   local Exp = ember.autograd.Function{
--     name = 'Exp',
--     forward = function(ctx, x) local y = x:exp(); ctx:save_for_backward(y); return y end,
--     backward = function(ctx, gy) local y = ctx:saved(); return gy * y end,
--   }
--   local y = Exp(x)            -- or Exp.apply(x)
--
-- Built on em_function_apply (ember.h). Each application that records gets an entry in a Lua
-- registry, keyed by an integer id that the C node holds as its ctx. ONE long-lived FFI
-- callback serves every function (LuaJIT has few callback slots): it looks the entry up by id.
-- The C node releases its ctx through em_function_release_later, which only queues the id: a
-- graph may be freed by a tensor's finalizer, when LuaJIT cannot be called back; the queue is
-- drained (entries deleted) at the next apply and after each backward.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own = core.C, core.own
local is_tensor = tensor.is_tensor

local M = {}

-- The registry lives in Lua's registry table, not in this module: the release queue is one per
-- process, so a second copy of this module (a test runner that reloads modules per file) must
-- share the entries and the ids, or one copy would drain the other's releases.
local shared = debug.getregistry()
local state = shared.ember_autograd_functions
if state == nil then
  state = { entries = {}, live = 0, next_id = 0 }
  shared.ember_autograd_functions = state
end
local registry = state.entries
local drain_buf = ffi.new('void *[256]')

-- Deletes the entries of the nodes that went (or were done with after a backward).
local function drain()
  while true do
    local n = C.em_function_take_released(drain_buf, 256)
    for i = 0, n - 1 do
      local id = tonumber(ffi.cast('intptr_t', drain_buf[i]))
      if registry[id] then
        registry[id] = nil
        state.live = state.live - 1
      end
    end
    if n < 256 then return end
  end
end
M.drain = drain

-- How many applications are still held by a graph (after taking the released ones out).
function M.registry_size()
  drain()
  return state.live
end

-- ---- ctx -------------------------------------------------------------------------------------
local Ctx = {}
Ctx.__index = Ctx

-- save_for_backward(...): tensors (or nil) backward reads with ctx:saved() / ctx.saved_tensors.
function Ctx:save_for_backward(...)
  local n = select('#', ...)
  local saved, versions = {}, {}
  for i = 1, n do
    local t = select(i, ...)
    if t ~= nil and not is_tensor(t) then
      error(('save_for_backward: argument %d is a %s; only tensors (or nil) can be saved, keep '
        .. 'other values as fields of ctx'):format(i, type(t)), 2)
    end
    saved[i] = t
    if t ~= nil then versions[i] = C.em_storage_version(t.ptr) end
  end
  rawset(self, 'saved_tensors', saved)
  rawset(self, '_n_saved', n)
  rawset(self, '_versions', versions)
end

function Ctx:saved()
  local s = rawget(self, 'saved_tensors')
  if s == nil then return end
  return unpack(s, 1, self._n_saved)
end

-- mark_non_differentiable(...): outputs that get no grad_fn (their gradient is nil in backward).
function Ctx:mark_non_differentiable(...)
  local set = rawget(self, '_non_diff') or {}
  for i = 1, select('#', ...) do
    local t = select(i, ...)
    if not is_tensor(t) then
      error(('mark_non_differentiable: argument %d is not a tensor'):format(i), 2)
    end
    set[#set + 1] = t
  end
  rawset(self, '_non_diff', set)
end

-- ---- backward dispatch -----------------------------------------------------------------------
local function check_versions(entry)
  local ctx = entry.ctx
  local saved, versions = rawget(ctx, 'saved_tensors'), rawget(ctx, '_versions')
  if saved == nil then return end
  for i = 1, ctx._n_saved do
    local t = saved[i]
    if t ~= nil and C.em_storage_version(t.ptr) ~= versions[i] then
      error(('saved tensor %d was modified by an in-place operation after it was saved (its '
        .. 'version is %d, expected %d)'):format(i, tonumber(C.em_storage_version(t.ptr)),
        tonumber(versions[i])), 0)
    end
  end
end

local function run_backward(entry, n_out, grad_outputs, n_in, grad_inputs)
  check_versions(entry)
  local gs = {}
  for i = 1, n_out do
    local g = grad_outputs[i - 1]
    if g ~= nil then gs[i] = own(C.em_retain(g)) end
  end
  local r = { n = 0 }
  local function pack(...) r = { n = select('#', ...), ... } end
  pack(entry.def.backward(entry.ctx, unpack(gs, 1, n_out)))
  if r.n ~= n_in then
    error(('backward returned %d value%s, expected %d (one per argument of forward, nil for '
      .. 'those without a gradient)'):format(r.n, r.n == 1 and '' or 's', n_in), 0)
  end
  for i = 1, n_in do
    local g = r[i]
    if g ~= nil then
      if not is_tensor(g) then
        error(('backward returned a %s for input %d, expected a tensor or nil'):format(type(g), i), 0)
      end
      grad_inputs[i - 1] = C.em_retain(g.ptr)
    end
  end
end

local backward_cb = ffi.cast('em_function_backward', function(ctxp, n_out, grad_outputs, n_in, grad_inputs)
  local entry = registry[tonumber(ffi.cast('intptr_t', ctxp))]
  if entry == nil then
    C.em_set_error('the function was already released')
    return -1
  end
  local ok, err = pcall(run_backward, entry, n_out, grad_outputs, n_in, grad_inputs)
  if not ok then
    for i = 0, n_in - 1 do -- what was stored before the error
      if grad_inputs[i] ~= nil then C.em_release(grad_inputs[i]); grad_inputs[i] = nil end
    end
    C.em_set_error(tostring(err))
    return -1
  end
  return 0
end)
local release_later = ffi.cast('void (*)(void *)', C.em_function_release_later)

-- ---- apply -----------------------------------------------------------------------------------
local function same(a, b) return a.ptr == b.ptr end

local function apply(def, ...)
  drain()
  local n_in = select('#', ...)
  local args = { ... }
  local record = C.em_grad_enabled() ~= 0
  local needs, any = {}, false
  for i = 1, n_in do
    local a = args[i]
    needs[i] = record and is_tensor(a) and a.requires_grad or false
    any = any or needs[i]
  end
  local ctx = setmetatable({ needs_input_grad = needs }, Ctx)
  local previous = C.em_set_grad_enabled(0)
  local res = { pcall(def.forward, ctx, ...) }
  C.em_set_grad_enabled(previous)
  if not res[1] then error(res[2], 0) end
  local n_out = table.maxn(res) - 1
  local outs = {}
  for i = 1, n_out do outs[i] = res[i + 1] end
  if not any then return unpack(outs, 1, n_out) end

  -- An input (or another leaf that requires grad, such as a parameter) returned as it is
  -- becomes a view of it, so that it keeps its own place in the graph.
  for i = 1, n_out do
    local o = outs[i]
    if is_tensor(o) then
      local shared = o.requires_grad and o.is_leaf
      for j = 1, n_in do
        if shared or (is_tensor(args[j]) and same(o, args[j])) then shared = true; break end
      end
      for j = 1, i - 1 do -- the same tensor returned twice
        if is_tensor(outs[j]) and same(o, outs[j]) then shared = true; break end
      end
      if shared then outs[i] = o:detach() end
    end
  end
  -- A saved output is kept detached: the output holds the node, which would hold it back.
  local saved = rawget(ctx, 'saved_tensors')
  if saved then
    for k = 1, ctx._n_saved do
      local t = saved[k]
      for i = 1, n_out do
        if t ~= nil and is_tensor(outs[i]) and same(t, outs[i]) then saved[k] = t:detach() end
      end
    end
  end
  local non_diff = rawget(ctx, '_non_diff') or {}
  local in_ptrs = ffi.new('em_tensor *[?]', math.max(n_in, 1))
  for i = 1, n_in do
    if is_tensor(args[i]) then in_ptrs[i - 1] = args[i].ptr end
  end
  local out_ptrs = ffi.new('em_tensor *[?]', math.max(n_out, 1))
  local any_out = false
  for i = 1, n_out do
    local o = outs[i]
    if is_tensor(o) then
      local nd = false
      for _, t in ipairs(non_diff) do if same(t, o) then nd = true end end
      if not nd then out_ptrs[i - 1] = o.ptr; any_out = true end
    end
  end
  if not any_out then return unpack(outs, 1, n_out) end
  state.next_id = state.next_id + 1
  local id = state.next_id
  registry[id] = { def = def, ctx = ctx }
  state.live = state.live + 1
  -- On failure em_function_apply has queued the id already; drain() takes it out.
  local rc = C.em_function_apply(def.name, n_in, in_ptrs, n_out, out_ptrs, backward_cb,
    release_later, ffi.cast('void *', id))
  if rc ~= 0 then core.raise(2) end -- at the caller of F(...) (a tail call)
  return unpack(outs, 1, n_out)
end

local known = { name = true, forward = true, backward = true }

-- Function{forward = f, backward = g [, name = 'Exp']} -> a function object: F(...) and
-- F.apply(...) run forward under no_grad and record backward.
function M.Function(def)
  if type(def) ~= 'table' then
    error('Function: expected a table {forward=..., backward=...}, got ' .. type(def), 2)
  end
  for k in pairs(def) do
    if not known[k] then
      error(('Function: unknown key %s (expected forward, backward, name)'):format(tostring(k)), 2)
    end
  end
  if type(def.forward) ~= 'function' or type(def.backward) ~= 'function' then
    error('Function: forward and backward must be functions', 2)
  end
  if def.name ~= nil and type(def.name) ~= 'string' then
    error('Function: name must be a string, got ' .. type(def.name), 2)
  end
  local spec = { name = def.name or 'Function', forward = def.forward, backward = def.backward }
  local F = { name = spec.name, forward = def.forward, backward = def.backward }
  F.apply = function(...) return apply(spec, ...) end
  return setmetatable(F, {
    __call = function(_, ...) return apply(spec, ...) end,
    __tostring = function() return 'autograd.Function ' .. spec.name end,
  })
end

return M
