-- A standalone check of the Vulkan device against the CPU, for machines without busted (the
-- GPU machine): every op with a Vulkan kernel, on random inputs in several layouts and sizes
-- that cross workgroups. Prints one line per failure and ends with "N passed, N failed".
--   ember tests/gpu/check.lua [device]
local dev = arg[1] or 'vulkan'
local passed, failed = 0, 0

local function check(what, got, want, rtol, atol)
  local ok, err = pcall(function()
    if got:device() == 'cpu' then error('result stayed on the cpu') end
    local g, w = got:to('cpu'):double(), want:double()
    if tostring(g:size()) ~= tostring(w:size()) then
      error('shape ' .. tostring(g:size()) .. ' vs ' .. tostring(w:size()))
    end
    if g:numel() == 0 then return end
    local both_nan = g:isnan():logical_and(w:isnan())
    local diff = ember.where(both_nan, 0, (g - w):abs())
    local bound = w:abs() * rtol + atol
    local bad = diff:gt(bound):sum():item()
    if bad > 0 then error(('%d of %d elements differ (max diff %g)'):format(bad, g:numel(), diff:max():item())) end
  end)
  if ok then passed = passed + 1 else failed = failed + 1; print('FAIL ' .. what .. ': ' .. tostring(err)) end
end

local function try(what, f)
  local ok, err = pcall(f)
  if ok then passed = passed + 1 else failed = failed + 1; print('FAIL ' .. what .. ': ' .. tostring(err)) end
end

print('devices:')
for _, d in ipairs(ember.devices()) do
  print(('  %-10s %-8s %s'):format(d.name, d.type, d.description or ''))
end
local V = ember.device(dev).name
print('checking ' .. V)

ember.manual_seed(1)
local shapes = { { 7 }, { 33, 65 }, { 3, 130, 257 }, { 0, 5 }, { 1000003 } }
local layouts = {
  contiguous = function(x) return x end,
  transposed = function(x) return x:dim() >= 2 and x:transpose(1, 2):contiguous():transpose(1, 2) or x end,
  sliced = function(x) return x:dim() >= 1 and x:size(1) > 2 and x:narrow(1, 2, x:size(1) - 2) or x end,
}
local unary = { 'neg', 'abs', 'exp', 'log1p', 'sqrt', 'tanh', 'sigmoid', 'relu', 'sin', 'floor',
  'silu', 'gelu', 'erf', 'reciprocal', 'square' }
local binary = { 'add', 'sub', 'mul', 'div', 'maximum', 'minimum', 'pow', 'atan2', 'eq', 'lt' }

for _, shape in ipairs(shapes) do
  for lname, layout in pairs(layouts) do
    local a = layout(ember.rand(shape) * 4 - 2)
    local b = layout(ember.rand(shape) + 0.5)
    local va, vb = a:to(V), b:to(V)
    local tag = ('%s %s'):format(tostring(a:size()), lname)
    for _, op in ipairs(unary) do
      local x = (op == 'sqrt' or op == 'log1p' or op == 'reciprocal') and b or a
      local vx = (x == b) and vb or va
      check(op .. ' ' .. tag, vx[op](vx), x[op](x), 1e-5, 1e-6)
    end
    for _, op in ipairs(binary) do
      local x, vx = op == 'pow' and b or a, op == 'pow' and vb or va
      check(op .. ' ' .. tag, vx[op](vx, vb), x[op](x, b), 1e-5, 1e-6)
    end
    check('scalar ' .. tag, va * 3 + 1, a * 3 + 1, 1e-6, 1e-6)
    check('where ' .. tag, ember.where(va:gt(0), va, vb), ember.where(a:gt(0), a, b), 0, 0)
    check('clamp ' .. tag, va:clamp(-0.5, 0.5), a:clamp(-0.5, 0.5), 0, 0)
    check('addcmul ' .. tag, va:addcmul(vb, vb, 0.5), a:addcmul(b, b, 0.5), 1e-6, 1e-6)
    for _, dt in ipairs({ 'float64', 'int32', 'int64', 'bool', 'float16' }) do
      local ok_dt = pcall(function() return va:to(dt) end)
      if ok_dt then check('to ' .. dt .. ' ' .. tag, va:to(dt), a:to(dt), 1e-3, 1e-3) end
    end
  end
end

-- broadcasting
local m, r = ember.randn(300, 1, 5), ember.randn(7, 5)
check('broadcast add', m:to(V) + r:to(V), m + r, 1e-6, 1e-6)

-- transfers and memory statistics
try('round trip', function()
  local x = ember.randn(1000)
  assert((x:to(V):to('cpu') - x):abs():max():item() == 0)
end)
try('memory stats', function()
  local s = ember.memory.stats(V)
  assert(s.allocated > 0 and s.reserved >= s.allocated, 'allocated ' .. s.allocated)
end)
try('device mismatch error', function()
  local ok, err = pcall(function() return ember.ones(3):to(V) + ember.ones(3) end)
  assert(not ok and tostring(err):find('expected all tensors on ' .. V, 1, true), tostring(err))
end)
try('out of memory is catchable', function()
  ember.memory.set_limit(V, 16 * 1024 * 1024)
  local ok, err = pcall(function() return ember.zeros(8 * 1024 * 1024, { device = V }) end)
  ember.memory.set_limit(V, 0)
  assert(not ok and tostring(err):find('out of memory on ' .. V, 1, true), tostring(err))
  local y = ember.ones(10, { device = V })
  assert(y:to('cpu'):sum():item() == 10)
end)

print(('%d passed, %d failed'):format(passed, failed))
os.exit(failed == 0 and 0 or 1)
