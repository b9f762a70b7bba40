-- ember.optim.optimizer: what every optimizer shares, following torch.optim.Optimizer:
-- parameter groups (a list of tensors, or a list of {params = {...}, lr = ...} tables whose
-- missing options come from the defaults), zero_grad, step (grad mode off, parameters without a
-- gradient skipped), per-parameter state, and state_dict / load_state_dict.
--
-- A concrete optimizer is a class made by optimizer.class(name, spec), where spec has
--   defaults  = { option = default value, ... } (the options the constructor accepts)
--   order     = { option names in PyTorch's positional order } (for error messages and docs)
--   validate  = function(fn, group): raises on bad hyperparameters
--   init_state = function(group, p, state) (optional): fills a fresh state table
--   update    = function(group, p, grad, state): one parameter's update, grad mode off
--
-- 16-bit parameters (float16, bfloat16) are optimized through a float32 master copy kept in
-- their state (master_param): the spec's functions see the master and a float32 gradient, so
-- every state tensor they make is float32 too, and after the update the master is rounded
-- into the parameter. In 16 bits Adam's eps (1e-8) and squared gradients flush to zero and
-- small updates round away; docs/design.md ("16-bit parameters") says why this form.
--
-- GradScaler records steps conditional on a device flag (_step_unless, below): the fused
-- kernels skip the update on the device, and the host's bookkeeping is undone once the flag
-- is known to be set (docs/design.md, "Loss scaling without host waits").
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local C = core.C
local is_tensor = tensor.is_tensor

local M = {}

local Optimizer = {}
Optimizer.__index = Optimizer
M.Optimizer = Optimizer

-- ---- argument checks -----------------------------------------------------------------------------
-- Shared by the optimizers' validate functions; messages name the optimizer and the value.

function M.check_number(fn, name, v)
  if type(v) ~= 'number' or v ~= v then
    error(('%s: expected a number for %s, got %s'):format(fn, name, tostring(v)), 0)
  end
end

function M.check_nonneg(fn, name, v, what)
  M.check_number(fn, name, v)
  if v < 0 then
    error(('%s: invalid %s %s (expected %s >= 0)'):format(fn, what or name, tostring(v), name), 0)
  end
end

function M.check_boolean(fn, name, v)
  if type(v) ~= 'boolean' then
    error(('%s: expected true or false for %s, got %s'):format(fn, name, tostring(v)), 0)
  end
end

-- ---- fused steps ---------------------------------------------------------------------------------
-- SGD and Adam run as one C call per parameter (em_sgd_step_, em_adam_step_) where the device
-- has the kernel, and as a sequence of elementwise ops otherwise. use_fused = false forces the
-- composed form everywhere (the specs check both against the reference).
M.use_fused = true
local no_fused = {} -- device ids whose backend lacks the kernels

-- rc is the fused call's status: true when it ran; false when the device lacks the kernel
-- (remembered, so the composed form is used from then on); raises on any other error.
function M.fused_call(p, rc)
  if rc == 0 then return true end
  if C.em_last_error_kind() == C.EM_ERR_NOT_IMPLEMENTED then
    no_fused[p.ptr.device_id] = true
    C.em_clear_error()
    return false
  end
  core.raise(1)
end

function M.has_fused(p) return M.use_fused and not no_fused[p.ptr.device_id] end

-- ---- conditional steps (GradScaler without host waits) -----------------------------------------
-- Optimizer:_step_unless(found_inf, resolve) records a step that changes nothing when the
-- device flag found_inf (float32 [1], em_amp_unscale_'s) is set: the fused kernels read it on
-- the device (options.found_inf). What the host changes during a step (Adam's step count, new
-- state, SGD's first-step mark) is logged, and undone once the flag is known to be set;
-- resolve, the scaler's, learns it, and runs before anything else reads or changes the state
-- (step, state_dict, load_state_dict: Optimizer:_settle). docs/design.md, "Loss scaling
-- without host waits".

-- The flag of the conditional step being recorded, else nil (the fused calls pass it on).
M.found_inf = nil

function M.found_inf_ptr() return M.found_inf and M.found_inf.ptr or nil end

-- For a composed update inside a conditional step (a device without the fused kernel for this
-- parameter): reads the flag, a host wait, and answers whether to skip the update.
function M.skip_composed()
  return M.found_inf ~= nil and M.found_inf:item() ~= 0
end

-- ---- parameter lists -----------------------------------------------------------------------------

local function tensor_key(t) return tonumber(ffi.cast('intptr_t', t.ptr)) end
M.tensor_key = tensor_key

-- A parameter list: one tensor, a list of tensors, or anything with :parameters() (a module).
local function param_list(fn, params, where)
  if is_tensor(params) then return { params } end
  if type(params) == 'table' and type(params.parameters) == 'function' and params[1] == nil then
    params = params:parameters()
  end
  if type(params) ~= 'table' then
    error(('%s: expected %s to be a tensor or a list of tensors, got %s'):format(fn, where,
      type(params)), 0)
  end
  local list = {}
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      error(('%s: %s[%d] is a %s, not a tensor'):format(fn, where, i, type(p)), 0)
    end
    if C.em_dtype_is_floating(p.ptr.dtype_id) == 0 then
      error(('%s: %s[%d] is a %s tensor; only floating-point tensors can be optimized')
        :format(fn, where, i, core.dtype_names[p.ptr.dtype_id]), 0)
    end
    if C.em_is_leaf(p.ptr) == 0 then
      error(('%s: %s[%d] is not a leaf tensor (it was computed by %s); optimize the leaves it ' ..
        'came from, or detach it'):format(fn, where, i, tostring(p.grad_fn)), 0)
    end
    list[i] = p
  end
  return list
end

local function is_group_list(params)
  return type(params) == 'table' and not is_tensor(params) and type(params[1]) == 'table'
    and not is_tensor(params[1]) and params[1].params ~= nil
end

-- ---- 16-bit parameters: float32 master copies -------------------------------------------------

local sixteen = { [tonumber(C.EM_FLOAT16)] = true, [tonumber(C.EM_BFLOAT16)] = true }
local function is16(p) return sixteen[tonumber(p.ptr.dtype_id)] == true end
M.is16 = is16

-- The dtype of p's state tensors: float32 for a 16-bit parameter, else p's own.
function M.state_dtype(p) return is16(p) and 'float32' or core.dtype_names[p.ptr.dtype_id] end

local function version(p) return tonumber(C.em_storage_version(p.ptr)) end
M.version = version

-- The tensor the spec's functions update: p itself, or for a 16-bit p its float32 master copy,
-- made on first need. A parameter written outside the optimizer since its last step (its
-- version counter moved: a loaded checkpoint, a manual edit) re-seeds the master from it.
local function master_of(p, st)
  if not is16(p) then return p end
  local m = st.master_param
  if m == nil then
    m = p:detach():to('float32'):contiguous()
    if C.em_same_storage(m.ptr, p.ptr) ~= 0 then m = m:clone() end
    st.master_param = m
  elseif st._version ~= nil and version(p) ~= st._version then
    m:copy_(p:detach())
  end
  return m
end
M.master_of = master_of

-- Float32 gradients for 16-bit parameters are copied into one scratch buffer per device, as
-- large as the largest such parameter, made before any parameter changes: the step then
-- allocates nothing per parameter, and one that runs out of memory still changes nothing.
local function scratch_sizes(self)
  local sizes
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if is16(p) then
        local g = C.em_grad(p.ptr)
        if g ~= nil then
          C.em_release(g)
          sizes = sizes or {}
          local d = tonumber(p.ptr.device_id)
          sizes[d] = math.max(sizes[d] or 0, p:numel())
        end
      end
    end
  end
  return sizes
end

local function make_scratch(sizes)
  if sizes == nil then return nil end
  local scratch = {}
  for d, n in pairs(sizes) do
    scratch[d] = creation.empty({ n }, { dtype = 'float32', device = core.device_name(d) })
  end
  return scratch
end

-- g (16-bit) as a float32 tensor of p's shape, in the scratch buffer.
local function grad32(scratch, p, g)
  local n = p:numel()
  if n == 0 then return g:to('float32') end
  local buf = scratch[tonumber(p.ptr.device_id)]:narrow(1, 1, n):view(p:size())
  buf:copy_(g)
  return buf
end

-- ---- construction --------------------------------------------------------------------------------

-- Builds an optimizer class. Calling it, Class(params, opts), makes an instance.
function M.class(name, spec)
  local cls = setmetatable({}, { __index = Optimizer })
  cls.__index = cls
  cls.__name = name
  spec.optional = spec.optional or {}
  cls.spec = spec
  cls.__tostring = Optimizer.__tostring
  setmetatable(cls, {
    __index = Optimizer,
    __call = function(_, params, opts) return M.new(cls, params, opts) end,
  })
  return cls
end

function M.new(cls, params, opts)
  local name, spec = cls.__name, cls.spec
  if type(opts) == 'number' then opts = { lr = opts } end
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(('%s: expected an options table, got %s'):format(name, type(opts)), 3)
  end
  local defaults = {}
  for k, v in pairs(spec.defaults) do defaults[k] = v end
  local allowed = {}
  for _, k in ipairs(spec.order) do allowed[k] = true end
  for k in pairs(spec.optional) do allowed[k] = true end
  for k in pairs(spec.defaults) do allowed[k] = true end
  require('ember.util.names').check_options(name, opts, allowed, 3)
  for k, v in pairs(opts) do defaults[k] = v end
  local ok, err = pcall(spec.validate, name, defaults)
  if not ok then error(err, 3) end
  local self = setmetatable({ defaults = defaults, param_groups = {}, state = {},
    _keys = {} }, cls)
  if params == nil then error(name .. ': expected parameters, got nil', 3) end
  local groups = is_group_list(params) and params or { { params = params } }
  for _, g in ipairs(groups) do
    ok, err = pcall(self.add_param_group, self, g)
    if not ok then error(err, 3) end
  end
  if #self.param_groups == 0 or (#self.param_groups == 1 and #self.param_groups[1].params == 0) then
    error(name .. ': got an empty parameter list', 3)
  end
  return self
end

-- add_param_group{params = ..., option = value}: options missing from the group come from
-- the optimizer's defaults. A parameter may belong to one group only.
function Optimizer:add_param_group(g)
  local name = self.__name
  if type(g) ~= 'table' or is_tensor(g) then
    error(('%s: add_param_group expects a table {params = ..., ...}, got %s'):format(name,
      is_tensor(g) and 'a tensor' or type(g)), 2)
  end
  if g.params == nil then error(name .. ': a parameter group needs a params field', 2) end
  local group = {}
  for k, v in pairs(g) do group[k] = v end
  local gi = #self.param_groups + 1
  group.params = param_list(name, g.params, ('param_groups[%d].params'):format(gi))
  for k, v in pairs(self.defaults) do
    if group[k] == nil then
      group[k] = type(v) == 'table' and { unpack(v) } or v
    end
  end
  self.spec.validate(name, group)
  local seen = {}
  for i, p in ipairs(group.params) do
    local key = tensor_key(p)
    if self._keys[key] or seen[key] then
      error(('%s: param_groups[%d].params[%d] appears more than once (a parameter may be ' ..
        'optimized by one group only)'):format(name, gi, i), 2)
    end
    seen[key] = true
  end
  for k in pairs(seen) do self._keys[k] = true end
  self.param_groups[gi] = group
  if self.spec.init_state then
    for _, p in ipairs(group.params) do
      local st = {}
      self.spec.init_state(group, master_of(p, st), st)
      self.state[p] = st
    end
  end
  return self
end

-- ---- zero_grad and step --------------------------------------------------------------------------

-- zero_grad([set_to_none = true]): drops the gradients (PyTorch's default) or, with false,
-- zeroes them in place.
function Optimizer:zero_grad(set_to_none)
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if set_to_none == false then
        local g = C.em_grad(p.ptr)
        if g ~= nil then
          local rc = C.em_zero_(g)
          C.em_release(g)
          core.check(rc)
        end
      else
        core.check(C.em_set_grad(p.ptr, nil))
      end
    end
  end
end

-- A shallow copy of a parameter's state (nil for none), for a conditional step's undo log.
local function shallow(st)
  if st == nil then return nil end
  local c = {}
  for k, v in pairs(st) do c[k] = v end
  return c
end

-- log (conditional steps only) receives { p, state before } per parameter stepped.
local function run_updates(self, log)
  local update, prepare, state = self.spec.update, self.spec.prepare, self.state
  -- First every parameter's state (prepare allocates what the first update needs; 16-bit
  -- parameters get their master copies and the gradient scratch), then the updates: a step
  -- that runs out of memory then fails before it changes any parameter, rather than with some
  -- parameters updated and the rest not (a retried step would update those twice).
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = C.em_grad(p.ptr)
      if g ~= nil then
        C.em_release(g)
        local st = state[p]
        if log then log[#log + 1] = { p, shallow(st) } end
        if st == nil then st = {}; state[p] = st end
        local m = master_of(p, st)
        if prepare then prepare(group, m, st) end
      end
    end
  end
  local scratch = make_scratch(scratch_sizes(self))
  local touched
  for _, group in ipairs(self.param_groups) do
    local params = group.params
    for i = 1, #params do
      local p = params[i]
      local g = C.em_grad(p.ptr)
      if g ~= nil then
        local st = state[p]
        if st == nil then st = {}; state[p] = st end
        g = core.own(g)
        if is16(p) then
          -- made or re-seeded above: asking again would see the writes of parameters that
          -- share p's storage and were updated earlier in this step
          local m = st.master_param
          update(group, m, grad32(scratch, p, g), st)
          p:copy_(m) -- rounded to the nearest 16-bit value
          touched = touched or {}
          touched[#touched + 1] = p
        else
          update(group, p, g, st)
        end
      end
    end
  end
  -- The versions the parameters have after this step (after every write: parameters may
  -- share a storage), against which the next step sees writes from outside.
  if touched then
    for _, p in ipairs(touched) do state[p]._version = version(p) end
  end
end

-- step([closure]): one update of every parameter that has a gradient. closure, when given,
-- recomputes the loss (with grad mode on) and its value is returned.
function Optimizer:step(closure)
  self:_settle()
  local loss
  if closure ~= nil then
    if type(closure) ~= 'function' then
      error(self.__name .. ':step: expected a closure function or nothing, got ' .. type(closure), 2)
    end
    local prev = C.em_set_grad_enabled(1)
    local ok, r = pcall(closure)
    C.em_set_grad_enabled(prev)
    if not ok then error(r, 0) end
    loss = r
  end
  local prev = C.em_set_grad_enabled(0)
  local ok, err = pcall(run_updates, self)
  C.em_set_grad_enabled(prev)
  if not ok then error(err, 0) end
  return loss
end

-- ---- conditional steps ---------------------------------------------------------------------------

-- Whether every update of a step can be made conditional on a flag on `device` (a device id):
-- the class has fused kernels (spec.conditional), they are in use there, and every parameter
-- with a gradient lives there.
function Optimizer:_can_step_unless(device)
  if not self.spec.conditional or not M.use_fused or no_fused[device] then return false end
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      local g = C.em_grad(p.ptr)
      if g ~= nil then
        C.em_release(g)
        if tonumber(p.ptr.device_id) ~= device then return false end
      end
    end
  end
  return true
end

-- Puts the host's state back as it was before a step that the flag skipped. Tensors were not
-- changed by the kernels; _version keeps its new value (a 16-bit parameter was rewritten with
-- the same value, and its master stays valid).
local function undo(self, log)
  for i = #log, 1, -1 do
    local p, before = log[i][1], log[i][2]
    local st = self.state[p]
    if before == nil then
      self.state[p] = nil
    elseif st ~= nil then
      local version_now = st._version
      for k in pairs(st) do st[k] = nil end
      for k, v in pairs(before) do st[k] = v end
      if version_now ~= nil and st.master_param ~= nil then st._version = version_now end
    end
  end
end

-- Records a step conditional on found_inf (see _can_step_unless; the caller checked). resolve()
-- is called before the optimizer next reads or changes its state; it must learn the flag and
-- call the returned undo function when the flag was set.
function Optimizer:_step_unless(found_inf, resolve)
  self:_settle()
  local log = {}
  M.found_inf = found_inf
  local prev = C.em_set_grad_enabled(0)
  local ok, err = pcall(run_updates, self, log)
  C.em_set_grad_enabled(prev)
  M.found_inf = nil
  if not ok then error(err, 0) end
  self._unresolved = resolve
  return function() undo(self, log) end
end

-- Learns the verdict of a pending conditional step (and undoes its bookkeeping if skipped).
function Optimizer:_settle()
  local resolve = self._unresolved
  if resolve ~= nil then
    self._unresolved = nil
    resolve()
  end
end

-- ---- state_dict ----------------------------------------------------------------------------------
-- { state = { [i] = { step = n, <buffer name> = tensor, ... } },
--   param_groups = { { lr = ..., <options>, params = { i, ... } }, ... } }
-- where i numbers the parameters across groups from 1, in order. Tensors are the live state
-- (as in PyTorch); ember.save writes them, and load_state_dict copies them.

local function copy_value(v)
  if type(v) == 'table' and not is_tensor(v) then
    local t = {}
    for k, x in pairs(v) do t[k] = copy_value(x) end
    return t
  end
  return v
end

function Optimizer:state_dict()
  self:_settle()
  local state, groups, index = {}, {}, 0
  for gi, group in ipairs(self.param_groups) do
    local g = {}
    for k, v in pairs(group) do
      if k ~= 'params' then g[k] = copy_value(v) end
    end
    g.params = {}
    for _, p in ipairs(group.params) do
      index = index + 1
      g.params[#g.params + 1] = index
      local st = self.state[p]
      if st ~= nil and next(st) ~= nil then
        local s = {}
        -- keys starting with '_' are the step's bookkeeping, not state to save; a momentum
        -- buffer made for a first step that never ran (_fresh, sgd.lua) holds nothing yet
        for k, v in pairs(st) do
          local private = type(k) == 'string' and k:sub(1, 1) == '_'
          if not private and not (st._fresh and k == 'momentum_buffer') then s[k] = v end
        end
        state[index] = s
      end
    end
    groups[gi] = g
  end
  return { state = state, param_groups = groups }
end

-- Checkpoint formats may hand back numbers as strings, booleans as strings or 0/1, and integer
-- table keys as strings ("1"): values are read back in the type the optimizer uses.
local function as_list(t)
  if type(t) ~= 'table' then return t end
  local r, n = {}, 0
  for k, v in pairs(t) do
    local i = tonumber(k)
    if i == nil then return t end
    r[i] = v
    n = math.max(n, i)
  end
  for i = 1, n do if r[i] == nil then return t end end
  return r
end

local function coerce(like, v)
  if is_tensor(v) and v.ptr.ndim == 0 and type(like) ~= 'nil' and not is_tensor(like) then
    v = v:item()
  end
  if type(like) == 'number' then
    if type(v) == 'string' then return tonumber(v) or v end
    if type(v) == 'boolean' then return v and 1 or 0 end
    return v
  elseif type(like) == 'boolean' then
    if v == 'true' or v == 1 or v == '1' then return true end
    if v == 'false' or v == 0 or v == '0' then return false end
    return v
  elseif type(like) == 'table' then
    local list = as_list(v)
    if type(list) ~= 'table' then return list end
    local r = {}
    for k, x in pairs(list) do r[k] = coerce(like[k] ~= nil and like[k] or like[1], x) end
    return r
  elseif type(v) == 'string' and tonumber(v) then
    return tonumber(v) -- keys the defaults do not know (initial_lr, ...) are numbers if they read so
  end
  return v
end

local function fail(name, msg) error(name .. ':load_state_dict: ' .. msg, 3) end

-- load_state_dict(sd): restores hyperparameters and state. The optimizer must have been built
-- over the same parameter shapes, in the same groups and order. State tensors are copied, cast
-- to their parameter's device and state dtype (float32 for a 16-bit parameter, else its own);
-- a 16-bit parameter whose saved state has no master_param gets one from its value.
function Optimizer:load_state_dict(sd)
  self:_settle()
  local name = self.__name
  if type(sd) ~= 'table' or type(sd.param_groups) ~= 'table' then
    fail(name, 'expected a table with param_groups (and state), as state_dict() returns')
  end
  local groups = as_list(sd.param_groups)
  if #groups ~= #self.param_groups then
    fail(name, ('the state dict has %d parameter groups, the optimizer %d'):format(#groups,
      #self.param_groups))
  end
  -- Map the saved indices to parameters; check sizes before changing anything.
  local by_index, new_groups = {}, {}
  for gi, g in ipairs(groups) do
    local own_group = self.param_groups[gi]
    local ids = as_list(g.params)
    if type(ids) ~= 'table' or #ids ~= #own_group.params then
      fail(name, ('parameter group %d has %s parameters in the state dict and %d in the optimizer')
        :format(gi, type(ids) == 'table' and tostring(#ids) or '?', #own_group.params))
    end
    for i, id in ipairs(ids) do by_index[tonumber(id)] = own_group.params[i] end
    local ng = {}
    for k, v in pairs(g) do
      if k ~= 'params' then ng[k] = coerce(own_group[k], v) end
    end
    new_groups[gi] = ng
  end
  local saved = sd.state or {}
  local new_state = {}
  for k, s in pairs(saved) do
    local p = by_index[tonumber(k)]
    if p == nil then fail(name, ('state for parameter %s, which no group lists'):format(tostring(k))) end
    if type(s) ~= 'table' then fail(name, ('state %s is a %s, not a table'):format(tostring(k), type(s))) end
    local st = {}
    for sk, v in pairs(s) do
      if sk == 'master_param' and not is16(p) then
        -- saved for a 16-bit parameter: this one is its own master
      elseif is_tensor(v) then
        if v:numel() ~= p:numel() and v.ptr.ndim ~= 0 then
          fail(name, ('state %s.%s has %d elements, its parameter %d'):format(tostring(k), sk,
            v:numel(), p:numel()))
        end
        local c = v:detach():to{ dtype = M.state_dtype(p), device = p:device() }
        if C.em_same_storage(c.ptr, v.ptr) ~= 0 then c = c:clone() end
        if v.ptr.ndim ~= 0 then c = c:reshape(p:size()):contiguous() end
        if sk == 'step' then st[sk] = c:item() else st[sk] = c end
      else
        st[sk] = type(v) == 'string' and tonumber(v) or v
      end
    end
    new_state[p] = st
  end
  for gi, ng in ipairs(new_groups) do
    local group = self.param_groups[gi]
    local trial = {}
    for k, v in pairs(group) do trial[k] = v end
    for k, v in pairs(ng) do trial[k] = v end
    local ok, err = pcall(self.spec.validate, name, trial)
    if not ok then fail(name, ('parameter group %d: %s'):format(gi, err)) end
  end
  for gi, ng in ipairs(new_groups) do
    for k, v in pairs(ng) do self.param_groups[gi][k] = v end
  end
  local state = {}
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do state[p] = new_state[p] or {} end
  end
  self.state = state
end

function Optimizer:__tostring()
  local lines = { self.__name .. ' (' }
  for gi, group in ipairs(self.param_groups) do
    lines[#lines + 1] = ('  parameter group %d: %d tensors'):format(gi, #group.params)
    local keys = {}
    for k in pairs(group) do if k ~= 'params' then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = group[k]
      if type(v) == 'table' then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = tostring(x) end
        v = '{' .. table.concat(parts, ', ') .. '}'
      end
      lines[#lines + 1] = ('    %s: %s'):format(k, tostring(v))
    end
  end
  lines[#lines + 1] = ')'
  return table.concat(lines, '\n')
end

return M
