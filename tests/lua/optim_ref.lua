-- Plain-Lua references for tests/lua/optim_spec.lua and lr_scheduler_spec.lua: each
-- optimizer's update written out elementwise over arrays of doubles, from the formulas in
-- PyTorch's torch.optim documentation (and Torch7's optim package for the functional forms),
-- and learning rates in closed form. No Ember op is used in them. At the end, what both specs
-- share for running torch itself (when /usr/bin/python3 has it) and for checkpoint round trips.
--
-- A reference step is step(o, p, g, st): o the hyperparameters, p the parameter (an array,
-- changed in place), g its gradient, st the parameter's state table (starts empty).
local R = {}

local function zeros(n)
  local t = {}
  for i = 1, n do t[i] = 0 end
  return t
end

-- The gradient after maximize and (coupled) weight decay.
local function effective_grad(o, p, g)
  local d = {}
  for i = 1, #p do
    local gi = o.maximize and -g[i] or g[i]
    d[i] = gi + (o.weight_decay or 0) * p[i]
  end
  return d
end

function R.SGD(o, p, g, st)
  local lr, mom, damp = o.lr or 1e-3, o.momentum or 0, o.dampening or 0
  local d = effective_grad(o, p, g)
  if mom ~= 0 then
    if st.buf == nil then
      st.buf = {}
      for i = 1, #p do st.buf[i] = d[i] end
    else
      for i = 1, #p do st.buf[i] = mom * st.buf[i] + (1 - damp) * d[i] end
    end
    for i = 1, #p do
      if o.nesterov then d[i] = d[i] + mom * st.buf[i] else d[i] = st.buf[i] end
    end
  end
  for i = 1, #p do p[i] = p[i] - lr * d[i] end
end

local function adam(o, p, g, st, decoupled)
  local lr, eps = o.lr or 1e-3, o.eps or 1e-8
  local b1, b2 = (o.betas or {})[1] or 0.9, (o.betas or {})[2] or 0.999
  local wd = o.weight_decay or (decoupled and 1e-2 or 0)
  if st.m == nil then st.t, st.m, st.v, st.vmax = 0, zeros(#p), zeros(#p), zeros(#p) end
  st.t = st.t + 1
  local bc1, bc2 = 1 - b1 ^ st.t, 1 - b2 ^ st.t
  for i = 1, #p do
    local gi = o.maximize and -g[i] or g[i]
    if decoupled then p[i] = p[i] * (1 - lr * wd) else gi = gi + wd * p[i] end
    st.m[i] = b1 * st.m[i] + (1 - b1) * gi
    st.v[i] = b2 * st.v[i] + (1 - b2) * gi * gi
    local v = st.v[i]
    if o.amsgrad then
      st.vmax[i] = math.max(st.vmax[i], st.v[i])
      v = st.vmax[i]
    end
    local denom = math.sqrt(v) / math.sqrt(bc2) + eps
    p[i] = p[i] - lr / bc1 * st.m[i] / denom
  end
end

function R.Adam(o, p, g, st) adam(o, p, g, st, false) end
function R.AdamW(o, p, g, st) adam(o, p, g, st, true) end

function R.RMSprop(o, p, g, st)
  local lr, alpha, eps, mom = o.lr or 1e-2, o.alpha or 0.99, o.eps or 1e-8, o.momentum or 0
  if st.s == nil then st.s, st.a, st.buf = zeros(#p), zeros(#p), zeros(#p) end
  local d = effective_grad(o, p, g)
  for i = 1, #p do
    st.s[i] = alpha * st.s[i] + (1 - alpha) * d[i] * d[i]
    local avg
    if o.centered then
      st.a[i] = alpha * st.a[i] + (1 - alpha) * d[i]
      avg = math.sqrt(st.s[i] - st.a[i] * st.a[i])
    else
      avg = math.sqrt(st.s[i])
    end
    avg = avg + eps
    if mom > 0 then
      st.buf[i] = mom * st.buf[i] + d[i] / avg
      p[i] = p[i] - lr * st.buf[i]
    else
      p[i] = p[i] - lr * d[i] / avg
    end
  end
end

function R.Adagrad(o, p, g, st)
  local lr, lr_decay, eps = o.lr or 1e-2, o.lr_decay or 0, o.eps or 1e-10
  if st.sum == nil then
    st.t, st.sum = 0, {}
    for i = 1, #p do st.sum[i] = o.initial_accumulator_value or 0 end
  end
  st.t = st.t + 1
  local clr = lr / (1 + (st.t - 1) * lr_decay)
  local d = effective_grad(o, p, g)
  for i = 1, #p do
    st.sum[i] = st.sum[i] + d[i] * d[i]
    p[i] = p[i] - clr * d[i] / (math.sqrt(st.sum[i]) + eps)
  end
end

-- Torch7's optim.sgd and optim.adam on a flat x with gradient g (config names as Torch7's).
function R.torch7_sgd(c, x, g, st)
  local lr, lrd, wd = c.learningRate or 1e-3, c.learningRateDecay or 0, c.weightDecay or 0
  local mom = c.momentum or 0
  local damp = c.dampening or mom
  st.evalCounter = st.evalCounter or 0
  local d = {}
  for i = 1, #x do d[i] = g[i] + wd * x[i] end
  if mom ~= 0 then
    if st.buf == nil then
      st.buf = {}
      for i = 1, #x do st.buf[i] = d[i] end
    else
      for i = 1, #x do st.buf[i] = mom * st.buf[i] + (1 - damp) * d[i] end
    end
    for i = 1, #x do
      if c.nesterov then d[i] = d[i] + mom * st.buf[i] else d[i] = st.buf[i] end
    end
  end
  local clr = lr / (1 + st.evalCounter * lrd)
  for i = 1, #x do x[i] = x[i] - clr * (c.learningRates and c.learningRates[i] or 1) * d[i] end
  st.evalCounter = st.evalCounter + 1
end

function R.torch7_adam(c, x, g, st)
  local lr, lrd = c.learningRate or 1e-3, c.learningRateDecay or 0
  local b1, b2, eps, wd = c.beta1 or 0.9, c.beta2 or 0.999, c.epsilon or 1e-8, c.weightDecay or 0
  st.t = st.t or 0
  st.m, st.v = st.m or zeros(#x), st.v or zeros(#x)
  local clr = lr / (1 + st.t * lrd)
  st.t = st.t + 1
  local step = clr * math.sqrt(1 - b2 ^ st.t) / (1 - b1 ^ st.t)
  for i = 1, #x do
    local gi = g[i] + wd * x[i]
    st.m[i] = b1 * st.m[i] + (1 - b1) * gi
    st.v[i] = b2 * st.v[i] + (1 - b2) * gi * gi
    x[i] = x[i] - step * st.m[i] / (math.sqrt(st.v[i]) + eps)
  end
end

-- Learning rates in closed form, from the formulas in PyTorch's scheduler documentation.
function R.step_lr(base, e, step_size, gamma) return base * gamma ^ math.floor(e / step_size) end

function R.cosine_lr(base, e, T, eta_min)
  return eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T)) / 2
end

function R.linear_lr(base, e, s, f, n) return base * (s + (f - s) * math.min(e, n) / n) end

-- OneCycleLR's two-phase schedule: warm-up over pct_start of the steps, then the decay.
function R.one_cycle(e, o)
  local n, pct = o.total_steps, o.pct_start or 0.3
  local initial = o.max_lr / (o.div_factor or 25)
  local min_lr = initial / (o.final_div_factor or 1e4)
  local up_end = pct * n - 1
  local function anneal(a, b, t)
    if o.anneal_strategy == 'linear' then return a + (b - a) * t end
    return b + (a - b) * (1 + math.cos(math.pi * t)) / 2
  end
  local maxm, basem = o.max_momentum or 0.95, o.base_momentum or 0.85
  if e <= up_end then
    local t = e / up_end
    return anneal(initial, o.max_lr, t), anneal(maxm, basem, t)
  end
  local t = (e - up_end) / (n - 1 - up_end)
  return anneal(o.max_lr, min_lr, t), anneal(basem, maxm, t)
end

-- ---- running torch ---------------------------------------------------------------------------

function R.have_torch()
  local ok = os.execute('/usr/bin/python3 -c "import torch" >/dev/null 2>&1')
  return ok == 0 or ok == true
end

-- A Lua value as a Python literal (lists become tuples).
function R.py_value(v)
  if type(v) == 'boolean' then return v and 'True' or 'False' end
  if type(v) == 'table' then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = R.py_value(x) end
    return '(' .. table.concat(parts, ', ') .. ')'
  end
  if type(v) == 'string' then return "'" .. v .. "'" end
  return ('%.17g'):format(v)
end

function R.py_kwargs(o)
  local parts = {}
  for k, v in pairs(o) do parts[#parts + 1] = k .. '=' .. R.py_value(v) end
  table.sort(parts)
  return table.concat(parts, ', ')
end

-- Runs a Python script (a list of lines; warnings silenced) and returns a function giving its
-- output lines one at a time as lists of numbers (raising with the whole output otherwise).
function R.run_python(lines)
  local script = os.tmpname()
  local f = assert(io.open(script, 'w'))
  f:write("import warnings\nwarnings.filterwarnings('ignore')\n", table.concat(lines, '\n'), '\n')
  f:close()
  local pipe = assert(io.popen('/usr/bin/python3 ' .. script .. ' 2>&1'))
  local out = {}
  for line in pipe:lines() do out[#out + 1] = line end
  pipe:close()
  os.remove(script)
  local li = 0
  return function()
    li = li + 1
    local t = {}
    for v in (out[li] or ''):gmatch('%S+') do
      local x = tonumber(v)
      if x == nil then error('python said: ' .. table.concat(out, '\n')) end
      t[#t + 1] = x
    end
    if #t == 0 then error('python said: ' .. table.concat(out, '\n')) end
    return t
  end
end

-- A round trip through ember.save / ember.load when they exist (else the table itself).
function R.through_checkpoint(ember, sd)
  if not ember.save then return sd end
  local path = os.tmpname()
  ember.save(path, { optim = sd })
  local back = ember.load(path)
  os.remove(path)
  return back.optim
end

return R
