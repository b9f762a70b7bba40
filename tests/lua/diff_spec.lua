-- The differential test against PyTorch: every case of tests/diff/golden/cases.lua (expanded
-- from tests/diff/cases/*.json by tests/diff/make_golden.py, which ran PyTorch 1.13) is run
-- through Ember and compared with PyTorch's outputs and input gradients, stored in
-- tests/diff/golden/golden.safetensors. PyTorch is not needed here.
--  * Inputs are read back from the golden file and given the case's layout (transposed,
--    stepped, expanded, offset) by the same view functions as the generator, so the op sees
--    the same strides; indices and classes are stored 0-based and get 1 added here.
--  * Outputs: dtype, shape, values (per-dtype tolerances, NaN where PyTorch has NaN, infinities
--    exactly); index outputs 1-based. Gradients: PyTorch's upstream gradient is fed to the
--    outputs and the inputs' gradients are compared (an Ember nil stands for PyTorch's zeros).
--  * A case that PyTorch refuses (error = true) must raise in Ember too.
--  * The cases also run on the Vulkan device (lavapipe; a subset by default, see VK_MODE): a
--    case whose op raises "not implemented on vulkan" is skipped there.
-- Cases that disagree today are listed in KNOWN below with the reason; an entry that no case
-- needs any more fails the test, so the table is kept honest. Adding an op: docs/testing.md.
package.path = 'tests/diff/?.lua;' .. package.path
local H = require 'helpers'
local ffi = require 'ffi'
local ember = H.ember
local OPS = require 'ops_ember'

local DIR = 'tests/diff/golden/'
local CASES = dofile(DIR .. 'cases.lua')
local POOL = ember.load(DIR .. 'golden.safetensors', { flat = true })

-- Known disagreements: a case matches an entry when every field given agrees (op, or a list of
-- ops; dtype: the first input's; kind, layout: any input's value kind or layout; where:
-- 'forward', 'grad' or 'error'; device: 'cpu' or 'vulkan'; msg: a plain substring of the
-- disagreement). Each entry says why; remove it when the cause is fixed.
local KNOWN = {
  -- wrong results and errors where PyTorch works (issue 11, "Wrong results" and "Errors")
  { op = 'atan2', dtype = 'float16', where = 'grad',
    why = 'atan2(float16, float32): the float32 gradient is computed through float16' },
  -- found by this test
  { op = 'softplus', where = 'grad', kind = 'special', msg = 'PyTorch nan',
    why = 'softplus(beta ~= 1) backward gives 0 at a NaN input; PyTorch NaN' },
  { op = 'matrix_power', where = 'grad', msg = 'does not require grad',
    why = 'matrix_power(A, 0) does not record A: backward fails where PyTorch gives zeros' },
  { op = 'binary_cross_entropy', where = 'grad', kind = 'const:0',
    why = 'binary_cross_entropy backward at input 0 or 1 gives NaN; PyTorch clamps the ' ..
      'denominator x (1 - x) to 1e-12' },
  { op = 'binary_cross_entropy', where = 'grad', kind = 'const:1',
    why = 'binary_cross_entropy backward at input 0 or 1 gives NaN (see above)' },
  { op = 'div', dtype = 'bfloat16', where = 'forward', kind = 'list:255,-255,6.96875,1000',
    why = "bfloat16 div(..., 'trunc') rounds the quotient to bfloat16 before truncating " ..
      '(255 / 36.5 = 6.99 gives 7): two roundings, not one' },
  { op = 'pow', dtype = 'float32', where = 'grad',
    why = 'pow(float32, float64): the float64 gradient is computed through float32 (relative ' ..
      'error 1e-8)' },
  { op = 'digamma', dtype = 'float64', where = 'grad',
    why = 'float64 digamma backward (trigamma) is off by 3e-10 relative: not float64-accurate' },
  { op = 'hardsigmoid', dtype = 'float64', where = 'grad',
    why = 'float64 hardsigmoid backward is off by 3e-8 (a float32 constant)' },
  { op = 'median', where = 'grad', msg = 'does not require grad',
    why = 'the median of an empty tensor does not record its input: backward fails where ' ..
      'PyTorch gives zeros' },
  { op = 'batch_norm_train', where = 'forward', msg = 'more than 1 value per channel',
    why = 'batch_norm in training refuses an empty batch; PyTorch returns an empty result' },
  -- special values (NaN, +-inf, huge) that Ember's composed formulas turn into other
  -- non-finite results than PyTorch's
  { op = { 'layer_norm', 'group_norm', 'instance_norm' }, kind = 'special', where = 'forward',
    why = 'a norm over an infinite input gives +-inf or 0 where PyTorch gives NaN' },
  { op = 'normalize', kind = 'special', where = 'forward',
    why = 'normalize with an infinite element: Ember gives finite values, PyTorch x / inf' },
  { op = 'cosine_similarity', kind = 'special', where = 'forward',
    why = 'cosine_similarity of huge inputs: sum(x1 x2) / sqrt(|x1|^2 |x2|^2) overflows to ' ..
      'inf / inf = NaN where PyTorch 1.13 gives 0' },
  { op = 'cosine_embedding_loss', kind = 'special', where = 'forward',
    why = 'cosine_embedding_loss of non-finite inputs: NaN where PyTorch gives 0' },
  { op = { 'conv_transpose1d', 'conv_transpose2d' }, kind = 'special', where = 'forward',
    why = 'conv_transpose multiplies infinite inputs by the zeros it pads with: NaN where ' ..
      'PyTorch gives inf' },
  { op = 'cross', kind = 'special', where = 'forward',
    why = 'cross of infinite inputs: NaN where PyTorch gives inf' },
  { op = 'cdist', kind = 'special', where = 'forward',
    why = 'cdist of huge inputs: Ember gives 2.4e38 where PyTorch overflows to inf' },
  { op = 'slogdet', kind = 'special', where = 'forward',
    why = 'slogdet of a matrix holding NaN and inf: another sign than PyTorch (meaningless there)' },
  -- where PyTorch is the odd one out
  { op = 'unique', kind = 'special', where = 'forward',
    why = "PyTorch 1.13's unique sorts NaN out of order; Ember keeps each NaN, last" },
  { op = 'div', kind = 'special', where = 'forward', msg = 'PyTorch nan',
    why = "div(..., 'floor') whose quotient overflows: Ember gives +-inf, PyTorch's " ..
      'fmod-based formula NaN' },
  { op = 'hardswish', kind = 'special', where = 'forward', msg = 'PyTorch inf',
    why = 'hardswish of huge x: Ember gives x, PyTorch overflows x (x + 3) / 6 to inf' },
  -- Vulkan: GLSL's precision rules
  { device = 'vulkan', op = { 'log', 'log2', 'log10', 'logit', 'pow' }, kind = 'special',
    why = 'Vulkan flushes subnormal inputs to zero (log of 2.9e-39)' },
  { device = 'vulkan', op = 'meshgrid', where = 'grad', msg = 'no line plan',
    why = 'the backward of a zero-size meshgrid fails on Vulkan: "sum: internal error: no ' ..
      'line plan"' },
  { device = 'vulkan', op = 'sin', kind = 'special', why = 'GLSL sin has no range reduction for huge arguments' },
  { device = 'vulkan', op = 'cos', kind = 'special', why = 'GLSL cos has no range reduction for huge arguments' },
  { device = 'vulkan', op = 'tan', kind = 'special', why = 'GLSL tan has no range reduction for huge arguments' },
  { device = 'vulkan', op = 'std', kind = 'special', where = 'forward',
    why = 'the Vulkan variance squares deviations in float32: inf for |x| > 1.8e19' },
  { device = 'vulkan', op = 'cumprod', kind = 'special', where = 'forward',
    why = 'the Vulkan scan multiplies in another order: an overflow then an underflow give NaN ' ..
      'where the running product gives -inf' },
}

local function find(list, v)
  for _, x in ipairs(list or {}) do if x == v then return true end end
  return false
end

-- ---- golden tensors ------------------------------------------------------------------------

-- "float32@12:3x4": 12 elements into the float32 pool, shape [3, 4] ("" is 0-d).
local function golden(ref)
  local dtype, off, shape = ref:match('^(%w+)@(%d+):([%dx]*)$')
  assert(dtype, 'bad golden reference ' .. ref)
  local sizes, n = {}, 1
  for d in shape:gmatch('%d+') do sizes[#sizes + 1] = tonumber(d); n = n * tonumber(d) end
  local pool = assert(POOL[dtype], 'no golden pool for ' .. dtype)
  local flat = n > 0 and pool:narrow(1, tonumber(off) + 1, n) or ember.zeros(0):to(dtype)
  return flat:reshape(sizes):clone()
end

local function shape_of(t)
  local s = {}
  for d = 1, t:dim() do s[d] = t:size(d) end
  return s
end

local function shape_str(s) return '[' .. table.concat(s, ',') .. ']' end

local function parse_shape(str)
  local s = {}
  for d in str:gmatch('%d+') do s[#s + 1] = tonumber(d) end
  return s
end

-- An input as cases.lua writes it, "float32@0:4x3 t randn g" (stored tensor, layout, value
-- kind, g when its gradient is checked, and an expanded view's shape), as
-- {dtype, view shape, layout, kind, grad, stored tensor}.
local function parse_input(str)
  local ref, layout, kind, g, eshape = str:match('^(%S+) (%a) (%S+) ([g-]) ?(%S*)$')
  assert(ref, 'bad input in cases.lua: ' .. str)
  local dtype, stored = ref:match('^(%w+)@%d+:([%dx]*)$')
  local s = parse_shape(stored)
  local n = #s
  if layout == 'e' then s = parse_shape(eshape)
  elseif layout == 't' and n >= 2 then s[n - 1], s[n] = s[n], s[n - 1]
  elseif layout == 's' and n >= 1 then s[n] = s[n] / 2
  elseif layout == 'o' and n >= 1 then s[1] = s[1] - 1 end
  return { dtype, s, layout, kind, g == 'g', ref }
end
for id, c in ipairs(CASES) do
  c.id = id
  for k, str in ipairs(c.inputs) do c.inputs[k] = parse_input(str) end
end

-- The view the op sees (make_golden.py's make_view).
local function view(base, shape, layout)
  local nd = base:dim()
  if layout == 't' and nd >= 2 then return base:transpose(nd - 1, nd) end
  if layout == 's' and nd >= 1 then return base:slice(nd, 1, math.max(base:size(nd), 1), 2) end
  if layout == 'e' and nd >= 1 then return base:expand(shape) end
  if layout == 'o' and nd >= 1 then return base:narrow(1, 2, base:size(1) - 1) end
  return base
end

-- Values that are positions: 0-based in PyTorch, 1-based in Ember ('+' marks any other kind).
local function is_index_kind(kind)
  local k = kind:match('^(%a+)')
  return k == 'index' or k == 'class' or k == 'perm' or kind:sub(1, 1) == '+'
end

-- ---- comparison ----------------------------------------------------------------------------

local TOL = { -- rtol, atol (atol scaled by the largest finite expected magnitude, at least 1)
  float64 = { 1e-10, 1e-12 }, float32 = { 1e-5, 1e-6 },
  float16 = { 2e-3, 1e-4 }, bfloat16 = { 1.6e-2, 1e-3 },
}

local EXP, MANT = 0x7ff0000000000000ULL, 0x000fffffffffffffULL

-- The elements of t as Lua numbers (int64 as exact int64 cdata), row-major.
local function values(t)
  t = t:to('cpu')
  local n = t:numel()
  local out = {}
  if n == 0 then return out end
  if t:dtype() == 'int64' then
    local c = t:contiguous()
    local p = ffi.cast('int64_t *', c:data_ptr())
    for i = 0, n - 1 do out[i + 1] = p[i] end
    out.keep = c
  else
    local c = t:to('float64'):contiguous()
    local p = ffi.cast('double *', c:data_ptr())
    local u = ffi.cast('uint64_t *', c:data_ptr())
    -- NaNs are read by their bits: a NaN with another payload than LuaJIT's own can come
    -- back as a tagged value (nil) from a double load.
    for i = 0, n - 1 do
      if bit.band(u[i], EXP) == EXP and bit.band(u[i], MANT) ~= 0ULL then
        out[i + 1] = 0 / 0
      else
        out[i + 1] = p[i]
      end
    end
    out.keep = c
  end
  return out
end

-- nil when got matches want, else what differs. `shift` is subtracted from got (1-based
-- indices); `scale` multiplies the dtype's tolerances.
local function compare(got, want, shift, scale, vk)
  if not ember.is_tensor(got) then return 'expected a tensor, got ' .. type(got) end
  if got:dtype() ~= want:dtype() then
    return ('dtype %s, PyTorch %s'):format(got:dtype(), want:dtype())
  end
  local gs, ws = shape_of(got), shape_of(want)
  if shape_str(gs) ~= shape_str(ws) then
    return ('shape %s, PyTorch %s'):format(shape_str(gs), shape_str(ws))
  end
  local g, w = values(got), values(want)
  local tol = TOL[want:dtype()] or { 0, 0 }
  local rtol, atol = tol[1] * scale * (vk and 4 or 1), tol[2] * scale * (vk and 4 or 1)
  local big = 1
  for i = 1, #w do
    local x = tonumber(w[i])
    if x == x and x ~= math.huge and x ~= -math.huge and math.abs(x) > big then big = math.abs(x) end
  end
  for i = 1, #w do
    local a, b = g[i] - (shift or 0), w[i]
    local ok
    if type(b) == 'cdata' then
      ok = a == b
    elseif b ~= b then
      ok = a ~= a
    elseif b == math.huge or b == -math.huge then
      ok = a == b
    else
      ok = a == a and math.abs(a - b) <= atol * big + rtol * math.abs(b)
    end
    if not ok then
      return ('element %d: %s, PyTorch %s'):format(i, tostring(a), tostring(b))
    end
  end
  return nil
end

-- ---- running a case ------------------------------------------------------------------------

local function describe_case(c)
  local parts = {}
  for _, i in ipairs(c.inputs) do
    parts[#parts + 1] = ('%s%s%s%s'):format(i[1], shape_str(i[2]), i[3] ~= 'c' and ':' .. i[3] or '',
      i[4] ~= 'randn' and ':' .. i[4] or '')
  end
  local kw = {}
  for k, v in pairs(c.kw) do
    kw[#kw + 1] = k .. '=' .. (type(v) == 'table' and shape_str(v) or tostring(v))
  end
  table.sort(kw)
  return ('#%d %s(%s%s)'):format(c.id, c.op, table.concat(parts, ', '),
    #kw > 0 and '; ' .. table.concat(kw, ', ') or '')
end

local function outputs(...)
  local r = { ... }
  if #r == 1 and type(r[1]) == 'table' and not ember.is_tensor(r[1]) then return r[1] end
  return r
end

local function inputs(c, device)
  local bases, views = {}, {}
  for k, i in ipairs(c.inputs) do
    local b = golden(i[6])
    if is_index_kind(i[4]) then b = b + ember.ones(1):to(b:dtype()) end
    if device then b = b:to(device) end
    if i[5] then b:requires_grad_() end
    bases[k], views[k] = b, view(b, i[2], i[3])
    OPS.BASES[views[k]] = b
  end
  return bases, views
end

-- nil when the case agrees; else (where, message).
local VK_MODE = os.getenv('EMBER_DIFF_VULKAN') or ''
local VK_GRADS = VK_MODE == 'all' or VK_MODE == 'grad'

local function run_case(c, device)
  local op = c.op ~= 'BASES' and OPS[c.op]
  if not op then return 'forward', 'no Ember mapping for op ' .. c.op .. ' (tests/diff/ops_ember.lua)' end
  local ok, bases, views = pcall(inputs, c, device)
  if not ok then return 'forward', 'building the inputs raised ' .. tostring(bases) end
  local res = { pcall(function() return outputs(op(views, c.kw)) end) }
  if c.error then
    if res[1] then return 'error', 'PyTorch raises, Ember gave a result' end
    return nil
  end
  if not res[1] then return 'forward', 'raised ' .. tostring(res[2]) end
  local outs = res[2]
  if #outs ~= #c.outs then return 'forward', ('%d outputs, PyTorch %d'):format(#outs, #c.outs) end
  for k, ref in ipairs(c.outs) do
    local shift = find(c.index_out, k) and 1 or 0
    local why = compare(outs[k], golden(ref), shift, c.tol or 1, device ~= nil)
    if why then return 'forward', ('output %d: %s'):format(k, why) end
  end
  if not c.grads or (device and not VK_GRADS) then return nil end
  local ts, gs = {}, {}
  for k, ref in ipairs(c.ups or {}) do
    if ref then
      ts[#ts + 1] = outs[k]
      local u = golden(ref)
      gs[#gs + 1] = device and u:to(device) or u
    end
  end
  if #ts > 0 then
    local okb, err = pcall(ember.autograd.backward, ts, gs)
    if not okb then return 'grad', 'backward raised ' .. tostring(err) end
  end
  for k, ref in ipairs(c.grads) do
    if ref then
      local want, got = golden(ref), bases[k].grad
      if got == nil then got = ember.zeros_like(want) end
      local why = compare(got, want, 0, (c.tol or 1) * 2, device ~= nil)
      if why then return 'grad', ('gradient of input %d: %s'):format(k, why) end
    end
  end
  return nil
end

local function known(c, where, msg, device)
  for _, e in ipairs(KNOWN) do
    local match = (e.op == nil or e.op == c.op or (type(e.op) == 'table' and find(e.op, c.op))) and (e.where == nil or e.where == where)
      and (e.dtype == nil or e.dtype == c.inputs[1][1])
      and (e.device == nil or e.device == (device and 'vulkan' or 'cpu'))
      and (e.msg == nil or (msg or ''):find(e.msg, 1, true) ~= nil)
    for field, slot in pairs { kind = 4, layout = 3 } do
      if match and e[field] then
        match = false
        for _, i in ipairs(c.inputs) do if i[slot] == e[field] then match = true end end
      end
    end
    if match then return e end
  end
  return nil
end

-- Runs every case on `device` (nil: the CPU); returns the failures not in KNOWN, the known
-- entries that now agree, and counts.
local now = os.getenv('EMBER_DIFF_PROFILE') == 'cpu' and os.clock or require('ember.progress').clock

-- EMBER_DIFF_PROFILE=1 prints the ops that took the most time (wall clock) to stderr.
local function profile_report(times)
  local list = {}
  for op, t in pairs(times) do list[#list + 1] = { op, t } end
  table.sort(list, function(a, b) return a[2] > b[2] end)
  for i = 1, math.min(20, #list) do io.stderr:write(('%-24s %.2f s\n'):format(list[i][1], list[i][2])) end
end

local function run_all(device, accept)
  local fails, used, n, skipped = {}, {}, 0, 0
  local times = os.getenv('EMBER_DIFF_PROFILE') and {}
  for _, c in ipairs(CASES) do
    if not accept or accept(c) then
      n = n + 1
      local t0 = times and now()
      local where, msg = run_case(c, device)
      if times then times[c.op] = (times[c.op] or 0) + now() - t0 end
      if where and device and msg:find('not implemented on', 1, true) then
        skipped = skipped + 1
      else
        local k = where and known(c, where, msg, device)
        if where and not k then
          fails[#fails + 1] = describe_case(c) .. ' ' .. where .. ': ' .. msg
        elseif k then
          used[k] = true
          if os.getenv('EMBER_DIFF_KNOWN') then
            io.stderr:write(('known: %s %s: %s (%s)\n'):format(describe_case(c), where, msg, k.why))
          end
        end
      end
    end
  end
  if times then profile_report(times) end
  -- On the CPU, where every case runs, an entry of KNOWN that no case needs is stale.
  local fixed = {}
  if not device then
    for _, e in ipairs(KNOWN) do
      if e.device ~= 'vulkan' and not used[e] then
        fixed[#fixed + 1] = 'KNOWN entry no longer needed (every case agrees): ' .. e.why
      end
    end
  end
  return fails, fixed, n, skipped
end

local MAX_SHOWN = tonumber(os.getenv('EMBER_DIFF_SHOW') or 60)

local function report(fails)
  if #fails == 0 then return end
  local shown = {}
  for i = 1, math.min(#fails, MAX_SHOWN) do shown[i] = fails[i] end
  error(('%d cases disagree with PyTorch:\n  %s%s'):format(#fails, table.concat(shown, '\n  '),
    #fails > MAX_SHOWN and '\n  ...' or ''), 0)
end

-- On Vulkan every kernel is compiled by lavapipe at its first use (tenths of a second each),
-- so the CI run takes, of each op, the forward of its first case in the dtypes models use;
-- EMBER_DIFF_VULKAN=grad adds its gradients and each op's first case of special values,
-- EMBER_DIFF_VULKAN=all runs every case with its gradients, EMBER_DIFF_VULKAN=none none.
local VK_DTYPES = { float32 = true, int64 = true, bool = true }
local VK_SPECIAL = VK_MODE == 'grad'
local function category(c)
  if c.error then return 'error' end
  for _, i in ipairs(c.inputs) do if i[4] == 'special' then return 'special' end end
  for _, i in ipairs(c.inputs) do
    for _, d in ipairs(i[2]) do if d == 0 then return 'empty' end end
  end
  for _, i in ipairs(c.inputs) do if i[3] ~= 'c' then return 'layout' end end
  return c.grads and 'grad' or 'plain'
end

describe('differential test against PyTorch', function()
  it('golden files hold the cases', function()
    assert(#CASES > 1000, 'expected the golden case list, got ' .. #CASES .. ' cases')
  end)

  it('agrees on the CPU', function()
    local fails, fixed = run_all(nil)
    for _, f in ipairs(fixed) do fails[#fails + 1] = f end
    report(fails)
  end)

  local VK = require('vk_helpers')
  if os.getenv('EMBER_DIFF_VULKAN') == 'none' then
    pending('Vulkan: EMBER_DIFF_VULKAN=none')
    return
  end
  if not VK.V then
    pending('Vulkan: no Vulkan device (' .. tostring(VK.why) .. ')')
    return
  end
  it('agrees on Vulkan (' .. VK.V .. ')', function()
    local seen = {}
    local fails = run_all(VK.V, function(c)
      if c.vulkan == false then return false end
      if os.getenv('EMBER_DIFF_VULKAN') == 'all' then
        for _, i in ipairs(c.inputs) do if i[1] == 'float64' and not VK.has_f64 then return false end end
        return true
      end
      for _, i in ipairs(c.inputs) do if not VK_DTYPES[i[1]] then return false end end
      local key = c.op .. ' ' .. (VK_SPECIAL and category(c) == 'special' and 'special' or 'first')
      if seen[key] then return false end
      seen[key] = true
      return true
    end)
    report(fails)
  end)
end)
