-- ember.optim.lr_scheduler: learning-rate schedules, as torch.optim.lr_scheduler.
--
-- A scheduler wraps an optimizer and rewrites each group's lr when step() is called (once per
-- epoch, or per batch for OneCycleLR). Construction takes the first step (epoch 0), as in
-- PyTorch. The step rules are PyTorch's chainable forms: each one scales the group's current
-- lr, so schedulers compose (SequentialLR, or two schedulers stepped together) and a learning
-- rate changed by hand is carried along. Options come in a table, by name or in PyTorch's
-- positional order: StepLR(opt, {step_size = 30, gamma = 0.1}) or StepLR(opt, {30, 0.1}).
--
-- Every scheduler has step(), get_last_lr() (a list, one lr per group), last_epoch, and
-- state_dict() / load_state_dict() (numbers and lists only, so ember.save can write them).
local M = {}

local LRScheduler = {}
LRScheduler.__index = LRScheduler
M.LRScheduler = LRScheduler

local function fail(fn, msg) error(fn .. ': ' .. msg, 0) end

local function is_optimizer(o)
  return type(o) == 'table' and type(o.param_groups) == 'table' and type(o.step) == 'function'
end

-- Reads option `name` (or positional entry i) from opts, with a default; nil default = required.
local function option(fn, opts, i, name, default)
  local v = opts[name]
  if v == nil then v = opts[i] end
  if v == nil then v = default end
  if v == nil then fail(fn, 'missing required option ' .. name) end
  return v
end

local function check_number(fn, name, v)
  if type(v) ~= 'number' or v ~= v then
    fail(fn, ('expected a number for %s, got %s'):format(name, tostring(v)))
  end
  return v
end

local function check_int(fn, name, v, min)
  if type(v) ~= 'number' or v ~= math.floor(v) or v < min then
    fail(fn, ('expected an integer %s >= %d, got %s'):format(name, min, tostring(v)))
  end
  return v
end

-- One value per group: a number for all, or a list with one entry per group.
local function per_group(fn, name, opt, v)
  local n = #opt.param_groups
  if type(v) == 'table' then
    if #v ~= n then fail(fn, ('expected %d values for %s (one per group), got %d'):format(n, name, #v)) end
    for i = 1, n do check_number(fn, name, v[i]) end
    return v
  end
  check_number(fn, name, v)
  local r = {}
  for i = 1, n do r[i] = v end
  return r
end

-- Builds a scheduler class; spec.init(self, opts) reads the options, spec.get_lr(self) gives
-- the new lrs (one per group) for self.last_epoch.
local function class(name, spec)
  local cls = setmetatable({ __name = name, spec = spec }, { __index = LRScheduler })
  cls.__index = cls
  setmetatable(cls, {
    __index = LRScheduler,
    __call = function(_, opt, opts)
      local ok, r = pcall(M.new, cls, opt, opts)
      if not ok then error(r, 2) end
      return r
    end,
  })
  return cls
end

-- The named options of each scheduler made by class() (positional entries are not checked).
local OPTIONS = {
  StepLR = { 'step_size', 'gamma' }, MultiStepLR = { 'milestones', 'gamma' },
  ExponentialLR = { 'gamma' }, LinearLR = { 'start_factor', 'end_factor', 'total_iters' },
  CosineAnnealingLR = { 'T_max', 'eta_min' }, ConstantLR = { 'factor', 'total_iters' },
  PolynomialLR = { 'total_iters', 'power' },
  CosineAnnealingWarmRestarts = { 'T_0', 'T_mult', 'eta_min' }, LambdaLR = { 'lr_lambda' },
  OneCycleLR = { 'max_lr', 'total_steps', 'epochs', 'steps_per_epoch', 'pct_start',
    'anneal_strategy', 'cycle_momentum', 'base_momentum', 'max_momentum', 'div_factor',
    'final_div_factor', 'three_phase' },
}

function M.new(cls, opt, opts)
  local name = cls.__name
  if not is_optimizer(opt) then fail(name, 'expected an optimizer, got ' .. type(opt)) end
  opts = opts or {}
  if type(opts) ~= 'table' then fail(name, 'expected an options table, got ' .. type(opts)) end
  if OPTIONS[name] then
    local named, allowed = {}, { 'last_epoch' }
    for k, v in pairs(opts) do if type(k) == 'string' then named[k] = v end end
    for _, k in ipairs(OPTIONS[name]) do allowed[#allowed + 1] = k end
    require('ember.util.names').check_options(name, named, allowed, 0)
  end
  local self = setmetatable({ optimizer = opt, _step_count = 0 }, cls)
  local last_epoch = opts.last_epoch or -1
  check_int(name, 'last_epoch', last_epoch, -1)
  if cls.spec.prepare then cls.spec.prepare(self, opts, last_epoch) end
  if last_epoch == -1 then
    for _, g in ipairs(opt.param_groups) do
      if g.initial_lr == nil then g.initial_lr = g.lr end
    end
  else
    for i, g in ipairs(opt.param_groups) do
      if g.initial_lr == nil then
        fail(name, ("param_groups[%d] has no initial_lr; resuming from last_epoch %d needs the " ..
          'optimizer state of the run being resumed'):format(i, last_epoch))
      end
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(opt.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  if cls.spec.init then cls.spec.init(self, opts) end
  self:_initial_step()
  return self
end

function LRScheduler:_initial_step()
  self._step_count = 0
  self:step()
end

-- step(): advances one epoch (or batch) and writes the new lrs into the optimizer.
function LRScheduler:step(epoch)
  if epoch ~= nil then
    error(self.__name .. ':step: the epoch argument is deprecated in PyTorch and not ' ..
      'supported; call step() once per epoch', 2)
  end
  self._step_count = self._step_count + 1
  self.last_epoch = self.last_epoch + 1
  local ok, lrs = pcall(self.spec.get_lr, self)
  if not ok then error(lrs, 2) end
  self:_apply(lrs)
end

-- Jumps to `epoch` with the closed form where the schedule has one (SequentialLR restarts a
-- schedule this way, as PyTorch's scheduler.step(0) does).
function LRScheduler:_step_to(epoch)
  self._step_count = self._step_count + 1
  self.last_epoch = epoch
  local f = self.spec.closed_form or self.spec.get_lr
  local ok, lrs = pcall(f, self)
  if not ok then error(lrs, 2) end
  self:_apply(lrs)
end

function LRScheduler:_apply(lrs)
  local groups = self.optimizer.param_groups
  for i, g in ipairs(groups) do g.lr = lrs[i] end
  local last = {}
  for i, g in ipairs(groups) do last[i] = g.lr end
  self._last_lr = last
end

function LRScheduler:get_last_lr()
  local r = {}
  for i, v in ipairs(self._last_lr) do r[i] = v end
  return r
end

-- The scheduler's own fields: numbers, booleans, strings and lists of numbers.
local skip = { optimizer = true, _schedulers = true, _lambdas = true }
function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if not skip[k] and type(v) ~= 'function' then
      if type(v) == 'table' then
        local c = {}
        for i, x in pairs(v) do if type(x) ~= 'function' then c[i] = x end end
        v = c
      end
      sd[k] = v
    end
  end
  return sd
end

-- Values may come back from a checkpoint as strings and lists with string keys.
local function restore(v, like)
  if type(v) == 'string' then
    if v == 'inf' then return math.huge elseif v == '-inf' then return -math.huge end
    if v == 'true' then return true elseif v == 'false' then return false end
    if type(like) ~= 'string' and tonumber(v) then return tonumber(v) end
    return v
  end
  if type(v) == 'table' then
    local r = {}
    for k, x in pairs(v) do r[tonumber(k) or k] = restore(x, type(like) == 'table' and like[1] or nil) end
    return r
  end
  return v
end

function LRScheduler:load_state_dict(sd)
  if type(sd) ~= 'table' then
    error(self.__name .. ':load_state_dict: expected a table, got ' .. type(sd), 2)
  end
  for k, v in pairs(sd) do
    if not skip[k] then self[k] = restore(v, self[k]) end
  end
end

function LRScheduler:__tostring()
  local lrs = {}
  for i, v in ipairs(self._last_lr or {}) do lrs[i] = ('%.6g'):format(v) end
  return ('%s(last_epoch = %d, lr = {%s})'):format(self.__name, self.last_epoch,
    table.concat(lrs, ', '))
end

-- Group lrs as they are now, scaled by f (a number or nil for 1).
local function current(self, f)
  local r = {}
  for i, g in ipairs(self.optimizer.param_groups) do r[i] = f and g.lr * f or g.lr end
  return r
end

-- The base lrs scaled by f.
local function from_base(self, f)
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * f end
  return r
end

-- ---- StepLR: lr * gamma every step_size epochs ----------------------------------------------------
M.StepLR = class('StepLR', {
  init = function(self, o)
    self.step_size = check_int('StepLR', 'step_size', option('StepLR', o, 1, 'step_size'), 1)
    self.gamma = check_number('StepLR', 'gamma', option('StepLR', o, 2, 'gamma', 0.1))
  end,
  get_lr = function(self)
    if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return current(self) end
    return current(self, self.gamma)
  end,
  closed_form = function(self)
    return from_base(self, self.gamma ^ math.floor(self.last_epoch / self.step_size))
  end,
})

-- ---- MultiStepLR: lr * gamma at each milestone ------------------------------------------------------
M.MultiStepLR = class('MultiStepLR', {
  init = function(self, o)
    local ms = option('MultiStepLR', o, 1, 'milestones')
    if type(ms) ~= 'table' then fail('MultiStepLR', 'expected a list of milestones, got ' .. type(ms)) end
    self.milestones = {}
    for i, m in ipairs(ms) do
      check_int('MultiStepLR', 'milestone', m, 0)
      if i > 1 and m < ms[i - 1] then fail('MultiStepLR', 'milestones must be increasing') end
      self.milestones[i] = m
    end
    self.gamma = check_number('MultiStepLR', 'gamma', option('MultiStepLR', o, 2, 'gamma', 0.1))
  end,
  get_lr = function(self)
    local count = 0
    for _, m in ipairs(self.milestones) do if m == self.last_epoch then count = count + 1 end end
    if count == 0 then return current(self) end
    return current(self, self.gamma ^ count)
  end,
  closed_form = function(self)
    local passed = 0
    for _, m in ipairs(self.milestones) do if m <= self.last_epoch then passed = passed + 1 end end
    return from_base(self, self.gamma ^ passed)
  end,
})

-- ---- ExponentialLR: lr * gamma every epoch ------------------------------------------------------------
M.ExponentialLR = class('ExponentialLR', {
  init = function(self, o)
    self.gamma = check_number('ExponentialLR', 'gamma', option('ExponentialLR', o, 1, 'gamma'))
  end,
  get_lr = function(self)
    if self.last_epoch == 0 then return current(self) end
    return current(self, self.gamma)
  end,
  closed_form = function(self) return from_base(self, self.gamma ^ self.last_epoch) end,
})

-- ---- LinearLR: the factor goes linearly from start_factor to end_factor in total_iters epochs -------
M.LinearLR = class('LinearLR', {
  init = function(self, o)
    local fn = 'LinearLR'
    local s = check_number(fn, 'start_factor', option(fn, o, 1, 'start_factor', 1 / 3))
    local e = check_number(fn, 'end_factor', option(fn, o, 2, 'end_factor', 1))
    if s <= 0 or s > 1 then fail(fn, ('start_factor must be in (0, 1], got %s'):format(s)) end
    if e < 0 or e > 1 then fail(fn, ('end_factor must be in [0, 1], got %s'):format(e)) end
    self.start_factor, self.end_factor = s, e
    self.total_iters = check_int(fn, 'total_iters', option(fn, o, 3, 'total_iters', 5), 1)
  end,
  get_lr = function(self)
    local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    if e == 0 then return current(self, s) end
    if e > n then return current(self) end
    return current(self, 1 + (f - s) / (n * s + (e - 1) * (f - s)))
  end,
  closed_form = function(self)
    local s, f, n = self.start_factor, self.end_factor, self.total_iters
    return from_base(self, s + (f - s) * math.min(n, self.last_epoch) / n)
  end,
})

-- ---- CosineAnnealingLR: half a cosine from the base lr down to eta_min in T_max epochs -------------
M.CosineAnnealingLR = class('CosineAnnealingLR', {
  init = function(self, o)
    local fn = 'CosineAnnealingLR'
    self.T_max = check_int(fn, 'T_max', option(fn, o, 1, 'T_max'), 1)
    self.eta_min = check_number(fn, 'eta_min', option(fn, o, 2, 'eta_min', 0))
  end,
  get_lr = function(self)
    local e, T, eta = self.last_epoch, self.T_max, self.eta_min
    local r = {}
    for i, g in ipairs(self.optimizer.param_groups) do
      local base = self.base_lrs[i]
      if e == 0 then
        r[i] = g.lr
      elseif self._step_count == 1 and e > 0 then -- resumed with last_epoch: the closed form
        r[i] = eta + (base - eta) * (1 + math.cos(e * math.pi / T)) / 2
      elseif (e - 1 - T) % (2 * T) == 0 then
        r[i] = g.lr + (base - eta) * (1 - math.cos(math.pi / T)) / 2
      else
        r[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) *
          (g.lr - eta) + eta
      end
    end
    return r
  end,
  closed_form = function(self)
    local r, T, eta = {}, self.T_max, self.eta_min
    for i, base in ipairs(self.base_lrs) do
      r[i] = eta + (base - eta) * (1 + math.cos(math.pi * self.last_epoch / T)) / 2
    end
    return r
  end,
})

-- ---- ConstantLR: lr * factor until total_iters, then the base lr --------------------------------
M.ConstantLR = class('ConstantLR', {
  init = function(self, o)
    local fn = 'ConstantLR'
    local f = check_number(fn, 'factor', option(fn, o, 1, 'factor', 1 / 3))
    if f < 0 or f > 1 then fail(fn, ('factor must be in [0, 1], got %s'):format(f)) end
    self.factor = f
    self.total_iters = check_int(fn, 'total_iters', option(fn, o, 2, 'total_iters', 5), 0)
  end,
  get_lr = function(self)
    local e = self.last_epoch
    if e == 0 then return current(self, self.factor) end
    if e ~= self.total_iters then return current(self) end
    return current(self, 1 / self.factor)
  end,
  closed_form = function(self)
    local f = self.factor
    return from_base(self, self.last_epoch >= self.total_iters and 1 or f)
  end,
})

-- ---- PolynomialLR: (1 - epoch / total_iters)^power, then 0 -------------------------------------
M.PolynomialLR = class('PolynomialLR', {
  init = function(self, o)
    local fn = 'PolynomialLR'
    self.total_iters = check_int(fn, 'total_iters', option(fn, o, 1, 'total_iters', 5), 1)
    self.power = check_number(fn, 'power', option(fn, o, 2, 'power', 1))
  end,
  get_lr = function(self)
    local e, n = self.last_epoch, self.total_iters
    if e == 0 or e > n then return current(self) end
    return current(self, ((1 - e / n) / (1 - (e - 1) / n)) ^ self.power)
  end,
  closed_form = function(self)
    local n = self.total_iters
    return from_base(self, (1 - math.min(n, self.last_epoch) / n) ^ self.power)
  end,
})

-- ---- CosineAnnealingWarmRestarts: cosine cycles of T_0, T_0 * T_mult, ... epochs -----------------
-- step() counts whole epochs; step(epoch) may be fractional (per batch: epoch + i / batches).
M.CosineAnnealingWarmRestarts = class('CosineAnnealingWarmRestarts', {
  init = function(self, o)
    local fn = 'CosineAnnealingWarmRestarts'
    self.T_0 = check_int(fn, 'T_0', option(fn, o, 1, 'T_0'), 1)
    self.T_mult = check_int(fn, 'T_mult', option(fn, o, 2, 'T_mult', 1), 1)
    self.eta_min = check_number(fn, 'eta_min', option(fn, o, 3, 'eta_min', 0))
    self.T_i = self.T_0
    self.T_cur = self.last_epoch
  end,
  get_lr = function(self)
    local r = {}
    for i, base in ipairs(self.base_lrs) do
      r[i] = self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
    end
    return r
  end,
})
local WarmRestarts = M.CosineAnnealingWarmRestarts

function WarmRestarts:step(epoch)
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    if type(epoch) ~= 'number' or epoch < 0 then
      error('CosineAnnealingWarmRestarts:step: expected an epoch >= 0, got ' .. tostring(epoch), 2)
    end
    if epoch >= self.T_0 then
      if self.T_mult == 1 then
        self.T_cur = epoch % self.T_0
      else
        local n = math.floor(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1) / math.log(self.T_mult))
        self.T_cur = epoch - self.T_0 * (self.T_mult ^ n - 1) / (self.T_mult - 1)
        self.T_i = self.T_0 * self.T_mult ^ n
      end
    else
      self.T_i = self.T_0
      self.T_cur = epoch
    end
  end
  self._step_count = self._step_count + 1
  self.last_epoch = math.floor(epoch)
  self:_apply(self.spec.get_lr(self))
end

function WarmRestarts:_step_to(epoch) self:step(epoch) end

-- ---- LambdaLR: base lr times lr_lambda(epoch) ----------------------------------------------------
M.LambdaLR = class('LambdaLR', {
  init = function(self, o)
    local f = option('LambdaLR', o, 1, 'lr_lambda')
    local n = #self.optimizer.param_groups
    if type(f) == 'function' then
      local fs = {}
      for i = 1, n do fs[i] = f end
      f = fs
    elseif type(f) ~= 'table' or #f ~= n then
      fail('LambdaLR', ('expected lr_lambda to be a function or a list of %d functions'):format(n))
    end
    for i = 1, n do
      if type(f[i]) ~= 'function' then fail('LambdaLR', ('lr_lambda[%d] is not a function'):format(i)) end
    end
    -- Kept apart from the fields: functions do not go into state_dict.
    self._lambdas = setmetatable({}, { __index = f })
  end,
  get_lr = function(self)
    local r = {}
    for i, base in ipairs(self.base_lrs) do
      local factor = self._lambdas[i](self.last_epoch)
      if type(factor) ~= 'number' then
        fail('LambdaLR', ('lr_lambda[%d] returned a %s, expected a number'):format(i, type(factor)))
      end
      r[i] = base * factor
    end
    return r
  end,
})

-- ---- OneCycleLR: up from max_lr / div_factor to max_lr, then down to a tiny lr -----------------
local function anneal_cos(a, b, pct) return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) end
local function anneal_linear(a, b, pct) return (b - a) * pct + a end

M.OneCycleLR = class('OneCycleLR', {
  prepare = function(self, o, last_epoch)
    local fn = 'OneCycleLR'
    local opt = self.optimizer
    local max_lr = option(fn, o, 1, 'max_lr')
    local total = o.total_steps or o[2]
    if total == nil then
      local epochs, per = o.epochs or o[3], o.steps_per_epoch or o[4]
      if epochs == nil or per == nil then
        fail(fn, 'give either total_steps or both epochs and steps_per_epoch')
      end
      total = check_int(fn, 'epochs', epochs, 1) * check_int(fn, 'steps_per_epoch', per, 1)
    end
    self.total_steps = check_int(fn, 'total_steps', total, 1)
    local pct = check_number(fn, 'pct_start', option(fn, o, 5, 'pct_start', 0.3))
    if pct < 0 or pct > 1 then fail(fn, ('pct_start must be in [0, 1], got %s'):format(pct)) end
    self.pct_start = pct
    local strategy = option(fn, o, 6, 'anneal_strategy', 'cos')
    if strategy ~= 'cos' and strategy ~= 'linear' then
      fail(fn, ("anneal_strategy must be 'cos' or 'linear', got %s"):format(tostring(strategy)))
    end
    self.anneal_strategy = strategy
    local cycle = option(fn, o, 7, 'cycle_momentum', true)
    if type(cycle) ~= 'boolean' then fail(fn, 'expected true or false for cycle_momentum') end
    self.cycle_momentum = cycle
    local div = check_number(fn, 'div_factor', option(fn, o, 10, 'div_factor', 25))
    local final_div = check_number(fn, 'final_div_factor', option(fn, o, 11, 'final_div_factor', 1e4))
    local three = option(fn, o, 12, 'three_phase', false)
    if type(three) ~= 'boolean' then fail(fn, 'expected true or false for three_phase') end
    self.three_phase = three
    local max_lrs = per_group(fn, 'max_lr', opt, max_lr)
    if last_epoch == -1 then
      for i, g in ipairs(opt.param_groups) do
        g.initial_lr = max_lrs[i] / div
        g.max_lr = max_lrs[i]
        g.min_lr = g.initial_lr / final_div
      end
    end
    if cycle then
      local d = opt.defaults or {}
      if d.momentum == nil and d.betas == nil then
        fail(fn, 'the optimizer has neither momentum nor betas, needed by cycle_momentum = true ' ..
          '(pass cycle_momentum = false)')
      end
      self.use_beta1 = d.betas ~= nil
      local maxm = per_group(fn, 'max_momentum', opt, option(fn, o, 9, 'max_momentum', 0.95))
      local basem = per_group(fn, 'base_momentum', opt, option(fn, o, 8, 'base_momentum', 0.85))
      if last_epoch == -1 then
        for i, g in ipairs(opt.param_groups) do
          if self.use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
          g.max_momentum, g.base_momentum = maxm[i], basem[i]
        end
      end
    end
  end,
  get_lr = function(self)
    local n, step = self.total_steps, self.last_epoch
    if step > n then
      fail('OneCycleLR', ('tried to step %d times; total_steps is %d'):format(step + 1, n))
    end
    local p = self.pct_start
    local phases
    if self.three_phase then
      phases = {
        { p * n - 1, 'initial_lr', 'max_lr', 'max_momentum', 'base_momentum' },
        { 2 * p * n - 2, 'max_lr', 'initial_lr', 'base_momentum', 'max_momentum' },
        { n - 1, 'initial_lr', 'min_lr', 'max_momentum', 'max_momentum' },
      }
    else
      phases = {
        { p * n - 1, 'initial_lr', 'max_lr', 'max_momentum', 'base_momentum' },
        { n - 1, 'max_lr', 'min_lr', 'base_momentum', 'max_momentum' },
      }
    end
    local anneal = self.anneal_strategy == 'cos' and anneal_cos or anneal_linear
    local r = {}
    for i, g in ipairs(self.optimizer.param_groups) do
      local start = 0
      for k, ph in ipairs(phases) do
        local stop = ph[1]
        if step <= stop or k == #phases then
          local pct = (step - start) / (stop - start)
          r[i] = anneal(g[ph[2]], g[ph[3]], pct)
          if self.cycle_momentum then
            local m = anneal(g[ph[4]], g[ph[5]], pct)
            if self.use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
          end
          break
        end
        start = stop
      end
    end
    return r
  end,
})

-- ---- SequentialLR: one scheduler after another, switching at the milestones ----------------------
M.SequentialLR = setmetatable({ __name = 'SequentialLR' }, { __index = LRScheduler })
local SequentialLR = M.SequentialLR
SequentialLR.__index = SequentialLR
SequentialLR.__tostring = LRScheduler.__tostring
setmetatable(SequentialLR, {
  __index = LRScheduler,
  __call = function(_, opt, opts)
    local fn = 'SequentialLR'
    if not is_optimizer(opt) then error(fn .. ': expected an optimizer, got ' .. type(opt), 2) end
    opts = opts or {}
    local scheds, ms = opts.schedulers or opts[1], opts.milestones or opts[2]
    if type(scheds) ~= 'table' or #scheds == 0 then
      error(fn .. ': expected a list of schedulers', 2)
    end
    for i, s in ipairs(scheds) do
      if type(s) ~= 'table' or s.optimizer ~= opt then
        error(('%s: schedulers[%d] does not belong to this optimizer'):format(fn, i), 2)
      end
    end
    if type(ms) ~= 'table' or #ms ~= #scheds - 1 then
      error(('%s: expected %d milestones (one fewer than the schedulers), got %s'):format(fn,
        #scheds - 1, type(ms) == 'table' and tostring(#ms) or type(ms)), 2)
    end
    local self = setmetatable({ optimizer = opt, _schedulers = scheds, _milestones = {},
      last_epoch = (opts.last_epoch or -1) + 1 }, SequentialLR)
    for i, m in ipairs(ms) do self._milestones[i] = m end
    for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
    for _, s in ipairs(scheds) do s.last_epoch = s.last_epoch - 1 end
    scheds[1]:_initial_step()
    self._last_lr = scheds[1]:get_last_lr()
    return self
  end,
})

function SequentialLR:step()
  self.last_epoch = self.last_epoch + 1
  local idx = 1
  for _, m in ipairs(self._milestones) do
    if self.last_epoch >= m then idx = idx + 1 end
  end
  local s = self._schedulers[idx]
  if idx > 1 and self._milestones[idx - 1] == self.last_epoch then
    s:_step_to(0) -- PyTorch's scheduler.step(0): the next schedule restarts at its epoch 0
  else
    s:step()
  end
  self._last_lr = s:get_last_lr()
end

-- The wrapped schedulers' states go along (SequentialLR and ChainedScheduler).
local function composite_state_dict(self)
  local sd = LRScheduler.state_dict(self)
  sd._schedulers = {}
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end

local function composite_load_state_dict(self, sd)
  LRScheduler.load_state_dict(self, sd)
  local subs = sd._schedulers or {}
  for k, s in pairs(subs) do
    local i = tonumber(k)
    if self._schedulers[i] then self._schedulers[i]:load_state_dict(s) end
  end
end
SequentialLR.state_dict = composite_state_dict
SequentialLR.load_state_dict = composite_load_state_dict

-- ---- ChainedScheduler: several schedulers stepped together ----------------------------------------
M.ChainedScheduler = setmetatable({ __name = 'ChainedScheduler' }, { __index = LRScheduler })
local Chained = M.ChainedScheduler
Chained.__index = Chained
Chained.__tostring = LRScheduler.__tostring
setmetatable(Chained, {
  __index = LRScheduler,
  __call = function(_, scheds)
    if type(scheds) == 'table' and scheds.schedulers then scheds = scheds.schedulers end
    if type(scheds) ~= 'table' or #scheds == 0 then
      error('ChainedScheduler: expected a list of schedulers', 2)
    end
    local opt = scheds[1].optimizer
    for i, s in ipairs(scheds) do
      if type(s) ~= 'table' or s.optimizer ~= opt then
        error(('ChainedScheduler: schedulers[%d] does not belong to the optimizer of the ' ..
          'first'):format(i), 2)
      end
    end
    local self = setmetatable({ optimizer = opt, _schedulers = scheds, last_epoch = 0 }, Chained)
    self._last_lr = current(self)
    return self
  end,
})

Chained.state_dict = composite_state_dict
Chained.load_state_dict = composite_load_state_dict

function Chained:step()
  for _, s in ipairs(self._schedulers) do s:step() end
  self.last_epoch = self.last_epoch + 1
  self._last_lr = current(self)
end

-- ---- ReduceLROnPlateau: lr * factor when a metric stops improving --------------------------------
local Plateau = { __name = 'ReduceLROnPlateau' }
Plateau.__index = Plateau
M.ReduceLROnPlateau = Plateau
setmetatable(Plateau, {
  __call = function(_, opt, opts)
    local fn = 'ReduceLROnPlateau'
    local ok, r = pcall(function()
      if not is_optimizer(opt) then fail(fn, 'expected an optimizer, got ' .. type(opt)) end
      opts = opts or {}
      local self = setmetatable({ optimizer = opt, last_epoch = 0, cooldown_counter = 0,
        num_bad_epochs = 0 }, Plateau)
      self.mode = option(fn, opts, 1, 'mode', 'min')
      if self.mode ~= 'min' and self.mode ~= 'max' then
        fail(fn, ("mode must be 'min' or 'max', got %s"):format(tostring(self.mode)))
      end
      self.factor = check_number(fn, 'factor', option(fn, opts, 2, 'factor', 0.1))
      if self.factor >= 1 then fail(fn, ('factor must be < 1, got %s'):format(self.factor)) end
      self.patience = check_int(fn, 'patience', option(fn, opts, 3, 'patience', 10), 0)
      self.threshold = check_number(fn, 'threshold', option(fn, opts, 4, 'threshold', 1e-4))
      self.threshold_mode = option(fn, opts, 5, 'threshold_mode', 'rel')
      if self.threshold_mode ~= 'rel' and self.threshold_mode ~= 'abs' then
        fail(fn, ("threshold_mode must be 'rel' or 'abs', got %s"):format(tostring(self.threshold_mode)))
      end
      self.cooldown = check_int(fn, 'cooldown', option(fn, opts, 6, 'cooldown', 0), 0)
      self.min_lrs = per_group(fn, 'min_lr', opt, option(fn, opts, 7, 'min_lr', 0))
      self.eps = check_number(fn, 'eps', option(fn, opts, 8, 'eps', 1e-8))
      self.best = self.mode == 'min' and math.huge or -math.huge
      self._last_lr = current(self)
      return self
    end)
    if not ok then error(r, 2) end
    return r
  end,
})

function Plateau:is_better(a, best)
  local t = self.threshold
  if self.mode == 'min' then
    if self.threshold_mode == 'rel' then return a < best * (1 - t) end
    return a < best - t
  end
  if self.threshold_mode == 'rel' then return a > best * (t + 1) end
  return a > best + t
end

-- step(metric): metric is a number or a 0-d tensor (a validation loss, an accuracy...).
function Plateau:step(metric)
  if type(metric) ~= 'number' then
    local ok, v = pcall(function() return metric:item() end)
    if not ok or type(v) ~= 'number' then
      error('ReduceLROnPlateau:step: expected the metric as a number or a 0-d tensor, got ' ..
        type(metric), 2)
    end
    metric = v
  end
  self.last_epoch = self.last_epoch + 1
  if self:is_better(metric, self.best) then
    self.best = metric
    self.num_bad_epochs = 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local new = math.max(g.lr * self.factor, self.min_lrs[i])
      if g.lr - new > self.eps then g.lr = new end
    end
    self.cooldown_counter = self.cooldown
    self.num_bad_epochs = 0
  end
  self._last_lr = current(self)
end

Plateau.get_last_lr = LRScheduler.get_last_lr
Plateau.state_dict = LRScheduler.state_dict
Plateau.load_state_dict = LRScheduler.load_state_dict
Plateau.__tostring = LRScheduler.__tostring

return M
