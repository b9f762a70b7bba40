-- ember.utils.checkpoint(fn, ...): activation checkpointing. The forward runs fn without
-- recording its graph, so none of the activations inside fn are kept: only fn's arguments are.
-- The backward runs fn again, with grad mode on, on detached copies of the arguments and with
-- the random generator put back where it stood at the forward (so dropout draws the same
-- masks), then backpropagates through that graph: the parameters fn uses get their gradients in
-- .grad on the way, and the arguments' gradients flow on to the outer graph.
--
-- It is an autograd.Function whose arguments are fn, an anchor tensor that requires grad (so
-- that the node records even when no argument requires grad, as when fn's only trainable
-- tensors are a module's parameters) and fn's arguments.
local ffi = require 'ffi'
local core = require 'ember.core'
local C = core.C
local creation = require 'ember.creation'
local random = require 'ember.random'
local autograd = require 'ember.autograd'
local tensor = require 'ember.tensor'
local is_tensor = tensor.is_tensor

local anchor -- a 0-d leaf that requires grad; it never gets a gradient
local KINDS = { 'cpu', 'vulkan' } -- the kinds of device autocast knows
local dtype_out = ffi.new('em_dtype[1]')

-- Runs fn(...) under the autocast regions noted at the forward, with backward's suspension of
-- autocast lifted; puts both back afterwards, also when fn raises.
local function with_autocast(regions, fn, ...)
  local depth = C.em_autocast_depth()
  local suspended = C.em_autocast_set_suspended(0)
  for _, r in ipairs(regions) do core.check(C.em_autocast_push(r[1], r[2], r[3] and 1 or 0)) end
  local res = { pcall(fn, ...) }
  while C.em_autocast_depth() > depth do C.em_autocast_pop() end
  C.em_autocast_set_suspended(suspended)
  if not res[1] then error(res[2], 0) end
  return unpack(res, 2, table.maxn(res))
end

-- A module keeps its last output (Torch7's module.output), which would keep the activations
-- that checkpointing is there not to keep: a module given as fn lets go of them after each run.
local function release_outputs(fn, ...)
  if type(fn) == 'table' and type(fn.clear_state) == 'function' then fn:clear_state() end
  return ...
end

local function forward(ctx, fn, _, ...)
  ctx.fn = fn
  ctx.n = select('#', ...)
  ctx.args = { ... }
  -- The generator is one stream for every device (docs/design.md), so its (seed, offset) is
  -- the whole random state the devices involved use.
  ctx.rng = random.get_rng_state()
  -- Autocast: the recomputation runs in backward, where autocast is off; it gets the
  -- forward's regions back, so that it computes in the same dtypes.
  ctx.autocast = {}
  for _, kind in ipairs(KINDS) do
    local on = C.em_autocast_enabled(kind, dtype_out) == 1
    ctx.autocast[#ctx.autocast + 1] = { kind, on and dtype_out[0] or C.EM_FLOAT16, on }
  end
  local tensors = {}
  for i = 1, ctx.n do
    if is_tensor(ctx.args[i]) then tensors[#tensors + 1] = ctx.args[i] end
  end
  ctx:save_for_backward(unpack(tensors)) -- refuses a backward after they are modified in place
  return release_outputs(fn, fn(...))
end

local function backward(ctx, ...)
  local n, args = ctx.n, ctx.args
  local detached = {}
  for i = 1, n do
    local a = args[i]
    if is_tensor(a) then
      detached[i] = a:detach()
      if a.requires_grad then detached[i]:requires_grad_(true) end
    else
      detached[i] = a
    end
  end
  local now = random.get_rng_state()
  random.set_rng_state(ctx.rng)
  local res = { pcall(autograd.enable_grad, with_autocast, ctx.autocast, ctx.fn,
    unpack(detached, 1, n)) }
  random.set_rng_state(now)
  if not res[1] then error(res[2], 0) end
  local outs, grads = {}, {}
  for i = 1, select('#', ...) do
    local o, g = res[i + 1], select(i, ...)
    if g ~= nil and is_tensor(o) and o.requires_grad then
      outs[#outs + 1] = o
      grads[#grads + 1] = g
    end
  end
  release_outputs(ctx.fn)
  if #outs > 0 then autograd.backward(outs, grads) end
  local r = { nil, nil }
  for i = 1, n do
    local d = detached[i]
    r[i + 2] = is_tensor(d) and d.requires_grad and d.grad or nil
  end
  return unpack(r, 1, n + 2)
end

local Checkpoint = autograd.Function{ name = 'Checkpoint', forward = forward, backward = backward }

local M = {}

function M.checkpoint(fn, ...)
  if type(fn) ~= 'function' and not (type(fn) == 'table' and getmetatable(fn)
      and getmetatable(fn).__call) then
    error('checkpoint: expected a function (or a module) as argument 1, got ' .. type(fn), 2)
  end
  if not autograd.is_grad_enabled() then return fn(...) end
  if anchor == nil then anchor = creation.zeros({}):requires_grad_(true) end
  return Checkpoint(fn, anchor, ...)
end

return M
