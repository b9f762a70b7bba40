-- ember.nn.Module: the base of every layer. Torch7's Module API (forward/backward, :add,
-- training/evaluate) over PyTorch's model of parameters, buffers, children and state_dict.
--
-- A module is a Lua table. Parameters, buffers and children are ordinary fields (self.weight,
-- self.running_mean, self.conv1); the module also keeps their names in order, so that
-- parameters(), state_dict() and printing list them the way they were registered.
local ember_core = require 'ember.core'
local tensor = require 'ember.tensor'

local hooks = require 'ember.nn.hooks'

local Module = {}
Module.__index = Module
Module.__name = 'Module'
local profiling = require 'ember.profiler.state' -- the profiler's module ranges

local function is_tensor(x) return tensor.is_tensor(x) end

-- ---- classes ---------------------------------------------------------------------------------
-- local Linear = nn.Module:extend('Linear'); function Linear:__init(...) ... end
-- Linear(...) builds an instance: Module's fields first, then the class's __init.
local class_mt = {}
class_mt.__call = function(cls, ...)
  local self = setmetatable({}, cls)
  Module.__init(self)
  if cls.__init ~= Module.__init then cls.__init(self, ...) end
  return self
end
class_mt.__tostring = function(cls) return 'class ' .. cls.__name end

-- A class's forward is wrapped so that each call notes the random-number state (Torch7's
-- backward reruns forward and must see the same dropout masks) and runs the module's hooks
-- (nn/hooks.lua). Every result comes back (an RNN returns output, h_n); the first is kept as
-- self.output.
local function keep_output(self, out, ...)
  rawset(self, 'output', out)
  return out, ...
end
local function wrap_forward(f)
  return function(self, ...)
    local random = package.loaded['ember.random']
    if random and random.get_rng_state then rawset(self, '_rng_state', random.get_rng_state()) end
    return keep_output(self, hooks.call(self, f, ...))
  end
end

function Module:extend(name)
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == 'string' and k:sub(1, 2) == '__' and k ~= '__name' then cls[k] = v end
  end
  cls.__index = cls
  cls.__name = name or 'Module'
  cls.__super = self
  return setmetatable(cls, {
    __index = self,
    __call = class_mt.__call,
    __tostring = class_mt.__tostring,
    __newindex = function(t, k, v)
      if k == 'forward' and type(v) == 'function' then v = wrap_forward(v) end
      rawset(t, k, v)
    end,
  })
end

function Module:__init()
  rawset(self, '_parameters', {})
  rawset(self, '_buffers', {})
  rawset(self, '_modules', {})
  rawset(self, 'training', true)
end

-- ---- registration ----------------------------------------------------------------------------
local function add_name(list, name)
  for _, n in ipairs(list) do if n == name then return end end
  list[#list + 1] = name
end

function Module:register_parameter(name, t)
  if t ~= nil and not is_tensor(t) then
    error(('register_parameter: expected a tensor for %s, got %s'):format(name, type(t)), 2)
  end
  if t ~= nil and not t.requires_grad then t:requires_grad_(true) end
  add_name(self._parameters, name)
  rawset(self, name, t)
  return t
end

function Module:register_buffer(name, t)
  if t ~= nil and not is_tensor(t) then
    error(('register_buffer: expected a tensor for %s, got %s'):format(name, type(t)), 2)
  end
  add_name(self._buffers, name)
  rawset(self, name, t)
  return t
end

function Module:add_module(name, m)
  if type(m) ~= 'table' or getmetatable(m) == nil or not m._modules then
    error(('add_module: expected a module for %s, got %s'):format(tostring(name), type(m)), 2)
  end
  name = tostring(name)
  add_name(self._modules, name)
  rawset(self, name, m)
  profiling.parent_of[m], profiling.name_in_parent[m] = self, name -- ranges' names
  return m
end

-- ---- traversal -------------------------------------------------------------------------------
function Module:children()
  local r = {}
  for _, name in ipairs(self._modules) do r[#r + 1] = self[name] end
  return r
end

function Module:named_children()
  local r = {}
  for _, name in ipairs(self._modules) do r[#r + 1] = { name, self[name] } end
  return r
end

-- Every module in the tree, this one first, each once.
function Module:modules()
  local r, seen = {}, {}
  local function walk(m)
    if seen[m] then return end
    seen[m] = true
    r[#r + 1] = m
    for _, c in ipairs(m:children()) do walk(c) end
  end
  walk(self)
  return r
end

-- {name, tensor} pairs with dotted names ("features.1.weight"); shared tensors appear once.
local function named(self, field, prefix, out, seen)
  for _, name in ipairs(self[field]) do
    local t = self[name]
    if t ~= nil and not seen[t] then
      seen[t] = true
      out[#out + 1] = { prefix .. name, t }
    end
  end
  for _, cname in ipairs(self._modules) do
    named(self[cname], field, prefix .. cname .. '.', out, seen)
  end
  return out
end

function Module:named_parameters() return named(self, '_parameters', '', {}, {}) end
function Module:named_buffers() return named(self, '_buffers', '', {}, {}) end

function Module:parameters()
  local r = {}
  for _, p in ipairs(self:named_parameters()) do r[#r + 1] = p[2] end
  return r
end

function Module:buffers()
  local r = {}
  for _, b in ipairs(self:named_buffers()) do r[#r + 1] = b[2] end
  return r
end

-- ---- modes and gradients ---------------------------------------------------------------------
function Module:train(mode)
  if mode == nil then mode = true end
  for _, m in ipairs(self:modules()) do rawset(m, 'training', mode and true or false) end
  return self
end

function Module:evaluate() return self:train(false) end
Module.eval = Module.evaluate

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end
Module.zeroGradParameters = Module.zero_grad

-- Torch7's clearState: every module in the tree lets go of the output (and gradInput) it
-- keeps from the last forward. An output holds its autograd graph, the activations saved for
-- backward included, until the next forward through that module replaces it; after a step
-- that failed half-way (out of memory) that is a whole step's memory, so release it first.
function Module:clear_state()
  for _, m in ipairs(self:modules()) do
    rawset(m, 'output', nil)
    rawset(m, 'gradInput', nil)
  end
  return self
end
Module.clearState = Module.clear_state

function Module:requires_grad_(flag)
  if flag == nil then flag = true end
  for _, p in ipairs(self:parameters()) do p:requires_grad_(flag) end
  return self
end

-- ---- calling ---------------------------------------------------------------------------------
-- module(x) runs forward (PyTorch). module:forward(x) does too and keeps what Torch7's
-- module:backward(x, gradOutput) needs.
function Module:__call(...)
  if profiling.recording then return profiling.call(self, hooks.call, self, self.forward, ...) end
  return hooks.call(self, self.forward, ...)
end
hooks.install(Module) -- register_forward_pre_hook, register_forward_hook, ..._full_backward_hook

function Module:forward()
  error(self.__name .. ': forward is not implemented', 2)
end

-- Torch7: returns gradInput and accumulates parameter gradients. The forward is run again on a
-- copy of input that requires grad (with the random-number state of the last forward, so
-- dropout masks repeat), and autograd differentiates it.
function Module:backward(input, gradOutput)
  if profiling.recording and not rawget(self, '_profiled_backward') then -- a range "<path>.backward"
    return profiling.backward(self, input, gradOutput)
  end
  local ember = require 'ember'
  if not is_tensor(input) or not is_tensor(gradOutput) then
    error(self.__name .. ':backward: expected an input tensor and a gradOutput tensor', 2)
  end
  local x = input:detach():requires_grad_(input:is_floating_point())
  local state = rawget(self, '_rng_state')
  if state then ember.set_rng_state(state) end
  local after = state and ember.get_rng_state()
  local out = self:forward(x)
  local params = self:parameters()
  local inputs = { x.requires_grad and x or nil }
  local wanted = {}
  for _, p in ipairs(params) do
    if p.requires_grad then wanted[#wanted + 1] = p end
  end
  local all = {}
  if inputs[1] then all[1] = x end
  for _, p in ipairs(wanted) do all[#all + 1] = p end
  local grads = ember.autograd.grad({ out }, all, { grad_outputs = { gradOutput }, allow_unused = true })
  if after then ember.set_rng_state(after) end
  local off = inputs[1] and 1 or 0
  for i, p in ipairs(wanted) do
    local g = grads[i + off]
    if g then
      local current = p.grad
      if current then ember.no_grad(function() current:add_(g) end) else p.grad = g end
    end
  end
  rawset(self, 'gradInput', inputs[1] and grads[1] or nil)
  return self.gradInput
end

-- ---- state -----------------------------------------------------------------------------------
-- state_dict(): a flat table of dotted names to tensors (parameters and buffers), detached.
function Module:state_dict()
  local sd = {}
  for _, p in ipairs(self:named_parameters()) do sd[p[1]] = p[2]:detach() end
  for _, b in ipairs(self:named_buffers()) do sd[b[1]] = b[2]:detach() end
  return sd
end

local function flatten_into(prefix, t, out)
  for k, v in pairs(t) do
    local key = prefix == '' and tostring(k) or prefix .. '.' .. tostring(k)
    if is_tensor(v) then out[key] = v
    elseif type(v) == 'table' then flatten_into(key, v, out)
    end
  end
  return out
end

-- load_state_dict(sd [, strict=true]): sd may be flat (dotted names) or nested (as ember.load
-- returns it). Values are copied into the existing tensors, so optimizers keep working.
function Module:load_state_dict(sd, strict)
  if strict == nil then strict = true end
  if type(sd) ~= 'table' then error('load_state_dict: expected a table, got ' .. type(sd), 2) end
  local flat = flatten_into('', sd, {})
  local own = {}
  for _, p in ipairs(self:named_parameters()) do own[p[1]] = p[2] end
  for _, b in ipairs(self:named_buffers()) do own[b[1]] = b[2] end
  local missing, unexpected, mismatched = {}, {}, {}
  for name, t in pairs(own) do
    local v = flat[name]
    if v == nil then missing[#missing + 1] = name
    elseif tostring(v:size()) ~= tostring(t:size()) then
      mismatched[#mismatched + 1] = ('%s: checkpoint %s, model %s'):format(name, tostring(v:size()),
        tostring(t:size()))
    end
  end
  for name in pairs(flat) do
    if own[name] == nil then unexpected[#unexpected + 1] = name end
  end
  table.sort(missing); table.sort(unexpected); table.sort(mismatched)
  local problems = {}
  if #mismatched > 0 then problems[#problems + 1] = 'shape mismatch for ' .. table.concat(mismatched, '; ') end
  if strict and #missing > 0 then problems[#problems + 1] = 'missing keys: ' .. table.concat(missing, ', ') end
  if strict and #unexpected > 0 then problems[#problems + 1] = 'unexpected keys: ' .. table.concat(unexpected, ', ') end
  if #problems > 0 then error('load_state_dict: ' .. table.concat(problems, '; '), 2) end
  local ember = require 'ember'
  ember.no_grad(function()
    for name, t in pairs(own) do
      local v = flat[name]
      if v ~= nil then t:copy_(v) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- ---- devices and dtypes ----------------------------------------------------------------------
-- to(device), to(dtype), to{device=, dtype=}: moves parameters and buffers in place (the same
-- tensor objects now hold the moved data, so references held elsewhere stay valid). Only
-- floating tensors change dtype.
function Module:to(a, b)
  local moved = {}
  for _, m in ipairs(self:modules()) do
    for _, field in ipairs({ '_parameters', '_buffers' }) do
      for _, name in ipairs(m[field]) do
        local t = m[name]
        if t ~= nil and not moved[t] then
          moved[t] = true
          local target = t
          local dtype_arg, device_arg
          for _, v in ipairs({ a, b }) do
            if type(v) == 'table' then dtype_arg, device_arg = v.dtype, v.device
            elseif v ~= nil then
              if ember_core.C.em_dtype_from_name(tostring(v)) >= 0 then dtype_arg = v else device_arg = v end
            end
          end
          ember_core.C.em_clear_error()
          if device_arg then target = target:to(device_arg) end
          if dtype_arg and target:is_floating_point() then target = target:to(dtype_arg) end
          -- a moved parameter stays a leaf that requires grad, as before the move
          if target ~= t and field == '_parameters' then
            target = target:detach():requires_grad_(t.requires_grad)
          end
          if target ~= t then ember_core.replace(t, target) end
        end
      end
    end
  end
  return self
end

function Module:float() return self:to('float32') end
function Module:double() return self:to('float64') end
function Module:half() return self:to('float16') end

-- ---- printing --------------------------------------------------------------------------------
function Module:extra_repr() return '' end

function Module:__tostring()
  local head = self.__name .. '(' .. self:extra_repr()
  if #self._modules == 0 then return head .. ')' end
  local lines = { head }
  for _, name in ipairs(self._modules) do
    local child = tostring(self[name]):gsub('\n', '\n  ')
    lines[#lines + 1] = '  (' .. name .. '): ' .. child
  end
  return table.concat(lines, '\n') .. '\n)'
end

-- A short summary of every parameter: name, shape, count; and the total.
function Module:summary()
  local lines, total = {}, 0
  for _, p in ipairs(self:named_parameters()) do
    local n = p[2]:numel()
    total = total + n
    lines[#lines + 1] = ('%-40s %-20s %d'):format(p[1], tostring(p[2]:size()), n)
  end
  lines[#lines + 1] = ('total parameters: %d'):format(total)
  return table.concat(lines, '\n')
end

return Module
