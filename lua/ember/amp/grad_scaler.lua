-- ember.amp.grad_scaler: GradScaler, dynamic loss scaling as torch.cuda.amp.GradScaler
-- (docs/amp.md, "GradScaler").
--
-- 16-bit gradients flush to zero below 6e-8 (float16); multiplying the loss by a large scale S
-- before backward keeps them representable. Before the optimizer uses them the gradients are
-- multiplied by 1/S, and a step whose gradients hold an inf or NaN (S was too large) is
-- skipped and S halved; after growth_interval clean steps in a row S doubles.
--
--   local scaler = ember.amp.GradScaler()
--   for each batch:
--     opt:zero_grad()
--     local loss = loss_fn(model:forward(x), y)
--     scaler:scale(loss):backward()
--     scaler:unscale_(opt)                           -- optional: to clip the true gradients
--     ember.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
--     scaler:step(opt)                               -- skipped when a gradient is inf/NaN
--     scaler:update()
--
-- The check and the unscale are one fused pass per gradient on its device (em_amp_unscale_);
-- the verdict is a one-element flag tensor per device. The scale itself lives on the host:
-- update is scalar arithmetic on a number the host has.
--
-- Deferred verdicts (the default; docs/design.md, "Loss scaling without host waits"): for an
-- optimizer whose updates are all fused kernels on the flag's device (SGD, Adam, AdamW), step
-- records the update conditional on the flag (the kernels skip it on the device) and an
-- asynchronous read of the flag (em_read_start), and update only marks the scale's update as
-- pending. The verdict is collected where it is first needed: the next scale(loss) (by then
-- the device has usually finished the step, and collecting costs no wait), or anything else
-- that needs the scale or the optimizer's state (get_scale, state_dict, unscale_, the
-- optimizer's own step or state_dict). A set flag then undoes the optimizer's host-side
-- bookkeeping of the step (Adam's step count, state made for it) before anything reads it.
-- Other optimizers, parameters spread over several devices, deferred = false or
-- EMBER_AMP_SYNC=1 take the synchronous path: step reads the flag, then steps or not.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local ops = require 'ember.ops.pointwise' -- where

local C = core.C
local is_tensor = tensor.is_tensor

local GradScaler = {}
local settle -- applies a pending update() (defined with update below)
local pending_scale -- the next scale as a device tensor while the verdict is pending
local update_scale -- PyTorch's _amp_update_scale_ on the host
GradScaler.__index = GradScaler
GradScaler.__name = 'GradScaler'

-- An optimizer's progress through one iteration (PyTorch's OptState).
local READY, UNSCALED, STEPPED = 'ready', 'unscaled', 'stepped'

local defaults = { init_scale = 2.0 ^ 16, growth_factor = 2.0, backoff_factor = 0.5,
  growth_interval = 2000, enabled = true, deferred = true }
local order = { 'init_scale', 'growth_factor', 'backoff_factor', 'growth_interval', 'enabled',
  'deferred' }

-- Errors carry no position: the message names the method (Ember's errors are values).
local function fail(fn, msg) error(('GradScaler%s: %s'):format(fn, msg), 0) end

local function check_finite(fn, name, v)
  if type(v) ~= 'number' or v ~= v or v == math.huge or v == -math.huge then
    fail(fn, ('expected a finite number for %s, got %s'):format(name, tostring(v)))
  end
end

local function check_growth_factor(fn, v)
  check_finite(fn, 'growth_factor', v)
  if v <= 1 then fail(fn, ('growth_factor must be > 1, got %s'):format(tostring(v))) end
end

local function check_backoff_factor(fn, v)
  check_finite(fn, 'backoff_factor', v)
  if not (v > 0 and v < 1) then
    fail(fn, ('backoff_factor must be in (0, 1), got %s'):format(tostring(v)))
  end
end

local function check_growth_interval(fn, v)
  if type(v) ~= 'number' or v ~= math.floor(v) or v < 1 or v == math.huge then
    fail(fn, ('growth_interval must be a positive integer, got %s'):format(tostring(v)))
  end
end

local function check_scale(fn, name, v)
  check_finite(fn, name, v)
  if v <= 0 then fail(fn, ('%s must be > 0, got %s'):format(name, tostring(v))) end
end

-- GradScaler([opts]): opts may set init_scale, growth_factor, backoff_factor,
-- growth_interval and enabled (PyTorch's defaults: 2^16, 2, 0.5, 2000, true), and deferred
-- (Ember's: true, verdicts collected without host waits where the optimizer allows; false, or
-- the environment variable EMBER_AMP_SYNC=1, reads the flag in every step).
local function new(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= 'table' or is_tensor(opts) then
    fail('', ('expected an options table, got %s'):format(type(opts)))
  end
  local o = {}
  for k, v in pairs(defaults) do o[k] = v end
  for k, v in pairs(opts) do
    if defaults[k] == nil then
      local hint = require('ember.util.names').closest(tostring(k), order, 1)[1]
      fail('', ('unknown option %s (%sexpected one of %s)'):format(tostring(k),
        hint and ('did you mean ' .. hint .. '? ') or '', table.concat(order, ', ')))
    end
    o[k] = v
  end
  for _, k in ipairs({ 'enabled', 'deferred' }) do
    if type(o[k]) ~= 'boolean' then
      fail('', ('expected true or false for %s, got %s'):format(k, tostring(o[k])))
    end
  end
  local sync_env = os.getenv('EMBER_AMP_SYNC')
  check_scale('', 'init_scale', o.init_scale)
  check_growth_factor('', o.growth_factor)
  check_backoff_factor('', o.backoff_factor)
  check_growth_interval('', o.growth_interval)
  return setmetatable({
    _enabled = o.enabled,
    _scale = o.init_scale,
    _growth_factor = o.growth_factor,
    _backoff_factor = o.backoff_factor,
    _growth_interval = o.growth_interval,
    _growth_tracker = 0,
    _deferred = o.deferred and not (sync_env ~= nil and sync_env ~= '' and sync_env ~= '0'),
    -- per optimizer: { stage = READY | UNSCALED | STEPPED, found = { [device] = flag },
    -- found_inf = the flags' verdict once read (nil before), read = the asynchronous read of
    -- a deferred step's flag, undo = the optimizer's undo of a deferred step }
    _per_optimizer = setmetatable({}, { __mode = 'k' }),
    -- an update() whose verdicts are not collected yet: the records of its optimizers
    _pending = nil,
  }, GradScaler)
end

function GradScaler:is_enabled() return self._enabled end

-- ---- scale -----------------------------------------------------------------------------------

-- 16-bit outputs are scaled in float32, as PyTorch's float32 scale tensor promotes them: a
-- float16 loss of 2 times 2^16 would overflow float16 before backward began.
local sixteen = { [tonumber(C.EM_FLOAT16)] = true, [tonumber(C.EM_BFLOAT16)] = true }

local function scale_value(fn, v, s, path)
  if is_tensor(v) then
    if C.em_dtype_is_floating(v.ptr.dtype_id) == 0 then
      fail(fn, ('expected floating-point outputs, got a %s tensor%s')
        :format(core.dtype_names[v.ptr.dtype_id], path))
    end
    if sixteen[tonumber(v.ptr.dtype_id)] then v = v:float() end
    return v * s
  elseif type(v) == 'table' then
    local r = {}
    for k, x in pairs(v) do r[k] = scale_value(fn, x, s, ('%s[%s]'):format(path, tostring(k))) end
    return r
  end
  fail(fn, ('expected a tensor or a table of tensors, got a %s%s'):format(type(v), path))
end

-- The device of every tensor in outputs, or nil when they are spread over several (or none).
local function outputs_device(v, dev)
  if is_tensor(v) then
    local d = tonumber(v.ptr.device_id)
    if dev ~= nil and dev ~= d then return nil, true end
    return d
  elseif type(v) == 'table' then
    for _, x in pairs(v) do
      local d, mixed = outputs_device(x, dev)
      if mixed then return nil, true end
      dev = d or dev
    end
  end
  return dev
end

-- While a deferred update's verdict is still on the device, the next scale is one of two
-- numbers the host knows: backed off, or the clean one (grown or not). Chosen on the device
-- from the flags, as a float32 0-d tensor, so scale(loss) needs no wait: the verdict is
-- collected at the next unscale (step or unscale_), after the next forward and backward are
-- recorded. Multiplying by this tensor gives what multiplying by the number gives: a scale is
-- a float32 value (powers of the factors), and the product is rounded once either way. nil
-- when the flags are not all on the outputs' device (the caller then waits for them).
function pending_scale(self, outputs)
  local dev = outputs_device(outputs)
  if dev == nil then return nil end
  local any
  for _, st in ipairs(self._pending) do
    local d, flag = next(st.found)
    if st.read == nil or d ~= dev or next(st.found, d) ~= nil then return nil end
    any = any == nil and flag or any + flag
  end
  local scale, tracker = self._scale, self._growth_tracker
  update_scale(self, true)
  local backed = self._scale
  self._scale, self._growth_tracker = scale, tracker
  update_scale(self, false)
  local clean = self._scale
  self._scale, self._growth_tracker = scale, tracker
  local name = core.device_name(dev)
  local prev = C.em_set_grad_enabled(0)
  local ok, r = pcall(function()
    return ops.where(any:squeeze():ne(0), creation.tensor(backed, { device = name }),
      creation.tensor(clean, { device = name }))
  end)
  C.em_set_grad_enabled(prev)
  if not ok then error(r, 0) end
  return r
end

GradScaler._pending_scale = function(self, outputs) return pending_scale(self, outputs) end -- tests

-- scale(outputs): outputs (a tensor, or a table of them, nested as you like) times the scale.
-- With enabled = false, outputs unchanged.
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  -- the verdict if it has arrived (no wait), else the scale chosen on the device
  local s = self._pending ~= nil and not settle(self, false) and pending_scale(self, outputs)
  if not s then
    settle(self, true)
    s = self._scale
  end
  return scale_value(':scale', outputs, s, '')
end

-- ---- unscale_ and step ----------------------------------------------------------------------

local function opt_state(self, optimizer)
  local st = self._per_optimizer[optimizer]
  if st == nil then
    st = { stage = READY, found = {} }
    self._per_optimizer[optimizer] = st
  end
  return st
end

local function check_optimizer(fn, optimizer)
  if type(optimizer) ~= 'table' or type(optimizer.param_groups) ~= 'table' then
    fail(fn, ('expected an optimizer (a table with param_groups), got %s')
      :format(is_tensor(optimizer) and 'a tensor' or type(optimizer)))
  end
end

-- Every gradient of the optimizer's parameters, grouped by device.
local function grads_by_device(optimizer)
  local by_device, devices = {}, {}
  for _, group in ipairs(optimizer.param_groups) do
    for _, p in ipairs(group.params) do
      local g = C.em_grad(p.ptr)
      if g ~= nil then
        g = core.own(g)
        local d = tonumber(g.ptr.device_id)
        local list = by_device[d]
        if list == nil then
          list = {}
          by_device[d] = list
          devices[#devices + 1] = d
        end
        list[#list + 1] = g
      end
    end
  end
  return by_device, devices
end

-- The fused pass over one device's gradients; the flag comes back still on the device.
local function unscale_device(list, device, inv_scale)
  local found = creation.zeros({ 1 }, { dtype = 'float32', device = core.device_name(device) })
  local arr = ffi.new('em_tensor *[?]', #list)
  for i, g in ipairs(list) do arr[i - 1] = g.ptr end
  core.check(C.em_amp_unscale_(arr, #list, found.ptr, inv_scale))
  return found
end

local function do_unscale(self, optimizer, st)
  -- 1/S in double, then rounded to float32 by the op, as PyTorch's reciprocal of a float64
  -- scale stored in a float32 tensor
  local inv_scale = 1 / self._scale
  local by_device, devices = grads_by_device(optimizer)
  local prev = C.em_set_grad_enabled(0)
  local ok, err = pcall(function()
    for _, d in ipairs(devices) do
      st.found[d] = unscale_device(by_device[d], d, inv_scale)
    end
  end)
  C.em_set_grad_enabled(prev)
  if not ok then error(err, 0) end
  st.stage = UNSCALED
end

-- unscale_(optimizer): divides the optimizer's gradients by the scale in place, once per
-- step, so that clipping or inspection sees true gradients. No host wait.
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  check_optimizer(':unscale_', optimizer)
  local st = opt_state(self, optimizer)
  if st.stage == UNSCALED then
    fail(':unscale_', 'unscale_() has already been called on this optimizer since the last ' ..
      'update()')
  elseif st.stage == STEPPED then
    fail(':unscale_', 'unscale_() is being called after step()')
  end
  settle(self, true)
  do_unscale(self, optimizer, st)
end

-- The verdict of one optimizer's step: the sum of its flags (0: clean). A deferred step's comes
-- from its asynchronous read: with wait false, nil while the device is still on it. Learning
-- that a deferred step was skipped undoes the optimizer's bookkeeping of it.
local flag_buf = ffi.new('float[1]')
local function verdict(st, wait)
  if st.found_inf == nil then
    if st.read ~= nil then
      local rc = C.em_read_finish(st.read, flag_buf, wait and 1 or 0)
      if rc == 0 then return nil end
      ffi.gc(st.read, nil) -- em_read_finish freed it
      st.read = nil
      if rc < 0 then core.raise(0) end
      st.found_inf = flag_buf[0]
    else
      local any = 0
      for _, flag in pairs(st.found) do any = any + flag:item() end
      st.found_inf = any
    end
    local undo = st.undo
    st.undo = nil
    if undo ~= nil and st.found_inf ~= 0 then undo() end
  end
  return st.found_inf
end

-- PyTorch's _amp_update_scale_, on the host once the verdict is here.
function update_scale(self, found_inf) -- declared above
  if found_inf then
    self._scale = self._scale * self._backoff_factor
    self._growth_tracker = 0
  else
    local successful = self._growth_tracker + 1
    if successful == self._growth_interval then
      local grown = self._scale * self._growth_factor
      if grown < math.huge then self._scale = grown end -- a scale that would overflow stays
      self._growth_tracker = 0
    else
      self._growth_tracker = successful
    end
  end
end

-- Applies a pending update(): collects its verdicts (waiting if wait, else returning false
-- while any is still on the device) and updates the scale. True when nothing is pending.
function settle(self, wait) -- declared above (scale and unscale_ use it)
  local pending = self._pending
  if pending == nil then return true end
  local found = false
  for _, st in ipairs(pending) do
    local v = verdict(st, wait)
    if v == nil then return false end
    if v ~= 0 then found = true end
  end
  self._pending = nil
  update_scale(self, found)
  return true
end

-- _poll(): collects a pending update's verdicts if the device has finished with them, without
-- waiting; true when no update is pending any more. (For tests and tools that want to know
-- whether the next scale() will wait.)
function GradScaler:_poll() return settle(self, false) end

-- step(optimizer): unscales the gradients unless unscale_ did already, then runs
-- optimizer:step() unless a gradient held an inf or NaN. Returns nothing (as PyTorch's, which
-- returns optimizer.step()'s value, nothing without a closure): whether the step was skipped
-- is known later, when the verdict is collected (get_scale() shows the back-off). With
-- enabled = false, returns optimizer:step(closure).
function GradScaler:step(optimizer, closure)
  if not self._enabled then return optimizer:step(closure) end
  check_optimizer(':step', optimizer)
  if closure ~= nil then
    fail(':step', 'closures are not supported when the scaler is enabled (call backward on ' ..
      'scaler:scale(loss) yourself)')
  end
  local st = opt_state(self, optimizer)
  if st.stage == STEPPED then
    fail(':step', 'step() has already been called since the last update()')
  end
  if st.stage == READY then
    settle(self, true)
    do_unscale(self, optimizer, st)
  end
  local device = next(st.found)
  if device == nil then
    fail(':step', 'no inf checks were recorded for this optimizer (none of its parameters has ' ..
      'a gradient)')
  end
  if self._deferred and next(st.found, device) == nil and type(optimizer._can_step_unless) ==
      'function' and optimizer:_can_step_unless(device) then
    -- the update conditional on the flag, then the flag's read, both without a wait
    local flag = st.found[device]
    st.undo = optimizer:_step_unless(flag, function() verdict(st, true) end)
    local r = C.em_read_start(flag.ptr)
    if r == nil then core.raise(0) end
    st.read = ffi.gc(r, C.em_read_free)
  elseif verdict(st, true) == 0 then
    optimizer:step()
  end
  st.stage = STEPPED
end

-- ---- update ----------------------------------------------------------------------------------

-- update([new_scale]): at the end of an iteration. Without new_scale the scale backs off when
-- any optimizer's gradients held an inf or NaN this iteration, and grows after
-- growth_interval clean iterations in a row; new_scale (a number or a one-element tensor)
-- sets it instead. Every optimizer is then ready for the next iteration. A deferred step's
-- verdict is not waited for: the new scale is worked out when it is first needed.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  settle(self, true)
  if new_scale ~= nil then
    if is_tensor(new_scale) then
      if new_scale:numel() ~= 1 then
        fail(':update', ('expected new_scale to be a number or a tensor of one element, got ' ..
          'one of %d elements'):format(new_scale:numel()))
      end
      new_scale = new_scale:item()
    end
    check_scale(':update', 'new_scale', new_scale)
    self._scale = new_scale
  else
    local records = {}
    for _, st in pairs(self._per_optimizer) do
      if next(st.found) ~= nil then records[#records + 1] = st end
    end
    if #records == 0 then fail(':update', 'no inf checks were recorded prior to update() (call ' ..
      'scaler:step(optimizer) or scaler:unscale_(optimizer) first)') end
    self._pending = records
    -- verdicts already known (synchronous steps) apply now; deferred ones when needed
    local known = true
    for _, st in ipairs(records) do
      if st.found_inf == nil and st.read ~= nil then known = false end
    end
    if known then settle(self, true) end
  end
  self._per_optimizer = setmetatable({}, { __mode = 'k' })
end

-- ---- the scale and the factors -----------------------------------------------------------------

-- get_scale(): the current scale (1 when disabled).
function GradScaler:get_scale()
  if not self._enabled then return 1.0 end
  settle(self, true)
  return self._scale
end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:set_growth_factor(v)
  check_growth_factor(':set_growth_factor', v)
  settle(self, true) -- a pending update uses the value it was made with
  self._growth_factor = v
end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:set_backoff_factor(v)
  check_backoff_factor(':set_backoff_factor', v)
  settle(self, true) -- a pending update uses the value it was made with
  self._backoff_factor = v
end
function GradScaler:get_growth_interval() return self._growth_interval end
function GradScaler:set_growth_interval(v)
  check_growth_interval(':set_growth_interval', v)
  settle(self, true) -- a pending update uses the value it was made with
  self._growth_interval = v
end

-- ---- state_dict ------------------------------------------------------------------------------
-- PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker
-- (numbers only, so ember.save keeps them in the file's metadata). Empty when disabled.

function GradScaler:state_dict()
  if not self._enabled then return {} end
  settle(self, true)
  return { scale = self._scale, growth_factor = self._growth_factor,
    backoff_factor = self._backoff_factor, growth_interval = self._growth_interval,
    _growth_tracker = self._growth_tracker }
end

-- Numbers may come back from other tools' files as text, a scale as a one-element tensor.
local function number_of(v)
  if is_tensor(v) and v:numel() == 1 then return v:item() end
  if type(v) == 'string' then return tonumber(v) end
  return v
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= 'table' or is_tensor(sd) then
    fail(':load_state_dict', ('expected a table as state_dict() returns, got %s'):format(type(sd)))
  end
  if next(sd) == nil then
    fail(':load_state_dict', 'the state dict is empty, possibly because it was saved from a ' ..
      'disabled GradScaler')
  end
  local known = { scale = true, growth_factor = true, backoff_factor = true,
    growth_interval = true, _growth_tracker = true }
  local v = {}
  for k, x in pairs(sd) do
    if not known[k] then
      fail(':load_state_dict', ('unknown key %s (expected scale, growth_factor, ' ..
        'backoff_factor, growth_interval, _growth_tracker)'):format(tostring(k)))
    end
    v[k] = number_of(x)
  end
  for k in pairs(known) do
    if v[k] == nil then fail(':load_state_dict', ('missing key %s'):format(k)) end
  end
  check_scale(':load_state_dict', 'scale', v.scale)
  check_growth_factor(':load_state_dict', v.growth_factor)
  check_backoff_factor(':load_state_dict', v.backoff_factor)
  check_growth_interval(':load_state_dict', v.growth_interval)
  if type(v._growth_tracker) ~= 'number' or v._growth_tracker ~= math.floor(v._growth_tracker)
    or v._growth_tracker < 0 then
    fail(':load_state_dict', ('_growth_tracker must be an integer >= 0, got %s')
      :format(tostring(v._growth_tracker)))
  end
  settle(self, true) -- the pending update's optimizers learn their verdict
  self._scale, self._growth_factor = v.scale, v.growth_factor
  self._backoff_factor, self._growth_interval = v.backoff_factor, v.growth_interval
  self._growth_tracker = v._growth_tracker
end

function GradScaler:__tostring()
  if not self._enabled then return 'GradScaler(enabled=false)' end
  settle(self, true)
  return ('GradScaler(scale=%g, growth_factor=%g, backoff_factor=%g, growth_interval=%d)')
    :format(self._scale, self._growth_factor, self._backoff_factor, self._growth_interval)
end

-- ember.amp.GradScaler(opts) makes one; GradScaler is also the class (its methods).
setmetatable(GradScaler, { __call = function(_, opts) return new(opts) end })
return GradScaler
