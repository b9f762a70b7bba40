-- ember.nn.distributed: DistributedDataParallel, data-parallel training over ember.distributed
-- (PyTorch's torch.nn.parallel.DistributedDataParallel, in Lua). docs/ddp.md tells the story.
--
--   local ddp = nn.DistributedDataParallel(model, {bucket_mb = 25})
--   local loss = criterion(ddp(x), y)
--   loss:backward()            -- gradients come back averaged over the ranks
--   optimizer:step()
--
-- Wrapping broadcasts the model's parameters and buffers from rank 0, so every rank starts from
-- the same weights. Forward is the model's. Backward averages the gradients:
--
--  * Buckets. Parameters are grouped, in reverse order of registration (the order backward
--    usually produces their gradients), into buckets of about bucket_mb MB of one dtype and
--    device; each bucket is one flat buffer, so one all-reduce serves many small tensors.
--  * Overlap. A gradient hook on every parameter (autograd register_hook, which sees the
--    parameter's whole gradient of the pass, just before it is added into .grad) copies
--    .grad + gradient into the parameter's place in its bucket. When a bucket is full its
--    all-reduce (op 'avg') starts asynchronously, on ember.distributed's communication thread,
--    while backward goes on. Buckets start strictly in order, so every rank issues the same
--    collectives in the same order (MPI requires it) even where their backwards differ.
--  * Finish. A callback queued with autograd.queue_callback runs when backward has finished:
--    it fills the buckets of parameters whose hook did not fire (unused in this pass, on this
--    rank) with their .grad or zeros, starts what is left, waits for every all-reduce, and
--    writes the averages into .grad. So when backward returns, .grad holds the average over
--    ranks: clip_grad_norm_, GradScaler's unscale_ and the optimizer see reduced gradients.
--  * Unused parameters never hang a step: they take part with zeros (their .grad becomes the
--    average of the ranks that used them). One no rank used gets zeros, or, with
--    find_unused_parameters = true (one more small all-reduce per step), keeps a nil .grad as
--    in PyTorch.
--  * no_sync. ddp:no_sync(f) runs f (forwards and backwards) without communication: gradients
--    accumulate locally in .grad, and the next synchronized backward averages the sum. Wrap
--    both the forward and the backward in it: a backward is synchronized when its forward
--    through ddp(...) ran outside no_sync (as in PyTorch) and it runs outside no_sync itself
--    (which also covers a model called through another method, such as model:loss).
--
-- state_dict()/load_state_dict() are the wrapped model's (no "module." prefix), so a
-- checkpoint loads into the bare model at any number of processes.
local Module = require 'ember.nn.module'
local creation = require 'ember.creation'
local names = require 'ember.util.names'

local DDP = Module:extend('DistributedDataParallel')

local options = { bucket_mb = true, broadcast_parameters = true, broadcast_buffers = true,
  find_unused_parameters = true }

local function dist_module()
  local ok, dist = pcall(require, 'ember.distributed')
  if not ok or type(dist) ~= 'table' or not dist.is_initialized or not dist.is_initialized() then
    return nil
  end
  return dist
end

local function autograd() return require 'ember.autograd' end
local function no_grad(f) return require('ember.autograd').no_grad(f) end

-- Broadcasts tensor t (a parameter or buffer) from rank 0 in place.
local function broadcast_from_root(dist, t)
  local data = t:detach()
  if data:is_contiguous() then
    dist.broadcast(data, 0)
  else
    local c = data:contiguous()
    dist.broadcast(c, 0)
    no_grad(function() data:copy_(c) end)
  end
end

-- The parameters that need gradients, in reverse order of registration, grouped into buckets
-- of one dtype and device of about `cap` bytes each (a tensor larger than cap is a bucket of
-- its own).
local function make_buckets(params, cap)
  local buckets, open = {}, {}
  for i = #params, 1, -1 do
    local p = params[i]
    local key = p:dtype() .. '@' .. p:device()
    local bytes = p:numel() * p:element_size()
    local b = open[key]
    if b and b.bytes > 0 and b.bytes + bytes > cap then b = nil end
    if not b then
      b = { key = key, members = {}, numel = 0, bytes = 0, dtype = p:dtype(), device = p:device() }
      buckets[#buckets + 1] = b
      open[key] = b
    end
    b.members[#b.members + 1] = { param = p, index = i, offset = b.numel, numel = p:numel() }
    b.numel = b.numel + p:numel()
    b.bytes = b.bytes + bytes
  end
  for n, b in ipairs(buckets) do
    b.id = n
    b.flat = creation.zeros({ b.numel }, { dtype = b.dtype, device = b.device })
    for _, m in ipairs(b.members) do
      m.view = b.flat:narrow(1, m.offset + 1, math.max(m.numel, 0)):view(m.param:size())
    end
  end
  return buckets
end

function DDP:__init(model, opts)
  if type(model) ~= 'table' or type(model.parameters) ~= 'function' then
    error('DistributedDataParallel: expected a module, got ' .. type(model), 3)
  end
  opts = names.check_options('DistributedDataParallel', opts, options, 3)
  local dist = dist_module()
  if not dist then
    error('DistributedDataParallel: ember.distributed is not initialized; call ' ..
      "ember.distributed.init() first (and launch with mpirun -np N ember script.lua)", 3)
  end
  local mb = opts.bucket_mb or 25
  if type(mb) ~= 'number' or not (mb > 0) then
    error('DistributedDataParallel: expected bucket_mb to be a number > 0, got ' .. tostring(mb), 3)
  end
  for _, k in ipairs({ 'broadcast_parameters', 'broadcast_buffers', 'find_unused_parameters' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
      error(('DistributedDataParallel: expected %s to be a boolean, got %s'):format(k,
        type(opts[k])), 3)
    end
  end
  self:add_module('module', model)
  rawset(self, 'dist', dist)
  rawset(self, 'bucket_mb', mb)
  rawset(self, 'broadcast_buffers', opts.broadcast_buffers ~= false)
  rawset(self, 'find_unused_parameters', opts.find_unused_parameters or false)
  rawset(self, 'require_backward_grad_sync', true)
  rawset(self, '_sync_pass', true)
  if opts.broadcast_parameters ~= false then
    for _, p in ipairs(model:parameters()) do broadcast_from_root(dist, p) end
    for _, b in ipairs(model:buffers()) do broadcast_from_root(dist, b) end
  end
  local params = {}
  for _, p in ipairs(model:parameters()) do
    if p.requires_grad then params[#params + 1] = p end
  end
  rawset(self, '_params', params)
  rawset(self, '_buckets', make_buckets(params, mb * 2 ^ 20))
  local hooks = {}
  for _, b in ipairs(self._buckets) do
    for _, m in ipairs(b.members) do
      hooks[#hooks + 1] = m.param:register_hook(function(g) return self:_on_grad(b, m, g) end)
    end
  end
  rawset(self, '_hooks', hooks)
end

function DDP:extra_repr()
  return ('world_size=%d, %d buckets of <= %g MB'):format(self.dist.world_size(),
    #self._buckets, self.bucket_mb)
end

-- ---- forward -----------------------------------------------------------------------------
function DDP:forward(...)
  self:_drain() -- a backward that failed half-way leaves all-reduces in flight
  rawset(self, '_sync_pass', self.require_backward_grad_sync)
  if self.broadcast_buffers and self._sync_pass and self.dist.world_size() > 1 then
    for _, b in ipairs(self.module:buffers()) do broadcast_from_root(self.dist, b) end
  end
  return self.module(...)
end

-- Torch7's module:backward(input, gradOutput) differentiates with autograd.grad, which leaves
-- the parameters' hooks out: its gradients would not be averaged, so it is refused.
function DDP:backward()
  error('DistributedDataParallel:backward: not implemented (Torch7\'s module:backward bypasses ' ..
    'the gradient averaging); call backward on the loss: criterion(ddp(x), y):backward()', 2)
end

-- no_sync(f, ...): runs f with gradient synchronization off; gradients of backwards whose
-- forward ran inside accumulate locally. Returns f's results. (PyTorch's no_sync context.)
function DDP:no_sync(f, ...)
  if type(f) ~= 'function' then
    error('no_sync: expected a function to run without gradient synchronization, got ' ..
      type(f), 2)
  end
  local was = self.require_backward_grad_sync
  rawset(self, 'require_backward_grad_sync', false)
  local r = { pcall(f, ...) }
  rawset(self, 'require_backward_grad_sync', was)
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, table.maxn(r))
end

-- ---- backward ----------------------------------------------------------------------------
-- The step in flight: which members have their gradient, how full each bucket is, the next
-- bucket to start and the handles of those started.
local function new_step(self)
  local st = { done = {}, filled = {}, next = 1, handles = {} }
  for i = 1, #self._buckets do st.filled[i] = 0 end
  rawset(self, '_step', st)
  autograd().queue_callback(function() self:finish_gradients() end)
  return st
end

-- Starts the full buckets at the head of the queue (buckets start in order on every rank).
local function launch_ready(self, st)
  local buckets = self._buckets
  while st.next <= #buckets and st.filled[st.next] == #buckets[st.next].members do
    local b = buckets[st.next]
    st.handles[st.next] = self.dist.all_reduce(b.flat, { op = 'avg', async = true })
    st.next = st.next + 1
  end
end

-- Fills member m's slot in its bucket with .grad (accumulated so far) + g.
local function fill(m, g)
  local old = m.param.grad
  if g then m.view:copy_(g) else m.view:zero_() end
  if old then m.view:add_(old) end
end

function DDP:_on_grad(b, m, g)
  if not (self._sync_pass and self.require_backward_grad_sync) then return nil end
  local st = self._step or new_step(self)
  if st.done[m] then return nil end -- reached twice in one pass (cannot happen with one engine)
  st.done[m] = true
  fill(m, g)
  st.filled[b.id] = st.filled[b.id] + 1
  launch_ready(self, st)
  return nil
end

-- finish_gradients(): completes the step's synchronization: members not reached by this
-- backward join with their .grad (or zeros), every bucket's all-reduce is started and waited
-- for, and the averages are written into .grad. Runs by itself at the end of each backward;
-- calling it when nothing is pending does nothing.
function DDP:finish_gradients()
  local st = self._step
  if not st then return end
  rawset(self, '_step', nil)
  local reached, k = {}, 0
  no_grad(function()
    for _, b in ipairs(self._buckets) do
      for _, m in ipairs(b.members) do
        k = k + 1
        reached[k] = st.done[m] and 1 or 0
        if not st.done[m] then
          st.done[m] = true
          fill(m, nil)
          st.filled[b.id] = st.filled[b.id] + 1
        end
      end
    end
    launch_ready(self, st)
    -- find_unused_parameters: which members some rank reached (one more small all-reduce, after
    -- the buckets on every rank); the others keep a nil .grad, as in PyTorch
    local used = self.find_unused_parameters and
      self.dist.all_reduce(creation.tensor(reached, { dtype = 'float32' }), { op = 'max' }):totable()
    k = 0
    for i, b in ipairs(self._buckets) do
      st.handles[i]:wait()
      for _, m in ipairs(b.members) do
        k = k + 1
        local grad = m.param.grad
        if grad then grad:copy_(m.view)
        elseif not used or used[k] > 0 then m.param.grad = m.view:clone() end
      end
    end
  end)
end

-- Waits for (and discards) the all-reduces of a backward that failed before its end.
function DDP:_drain()
  local st = self._step
  if not st then return end
  rawset(self, '_step', nil)
  for i = 1, st.next - 1 do pcall(function() st.handles[i]:wait() end) end
end

-- ---- state -------------------------------------------------------------------------------
function DDP:state_dict() return self.module:state_dict() end
function DDP:load_state_dict(sd, strict) return self.module:load_state_dict(sd, strict) end

-- save_checkpoint(path, obj): rank 0 writes obj (ember.save) while the others wait for it;
-- every rank returns once the file is complete.
function DDP:save_checkpoint(path, obj)
  if self.dist.rank() == 0 then require('ember.serialize').save(path, obj) end
  self.dist.barrier()
end

-- Gradient hooks stay with the parameters; remove() takes them off (the model is then plain).
function DDP:remove()
  self:_drain()
  for _, h in ipairs(self._hooks) do h.remove() end
  rawset(self, '_hooks', {})
  rawset(self, '_buckets', {})
end

return { DistributedDataParallel = DDP }
