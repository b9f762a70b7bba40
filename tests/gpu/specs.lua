-- A minimal busted-compatible runner for the GPU machine, where busted itself cannot run (its
-- C modules do not load into the static `ember` program). It provides describe, it, pending,
-- setup/teardown, before_each/after_each and finally, with luassert's assert, runs the spec
-- files given, prints each failure and a summary line:
--   ember tests/gpu/specs.lua tests/lua/vulkan_spec.lua tests/lua/vulkan_matmul_spec.lua ...
-- luassert and say must be on package.path (LUA_PATH), as Debian's lua-busted installs them.
package.path = 'lua/?.lua;lua/?/init.lua;tests/lua/?.lua;' .. package.path
local ok_assert, luassert = pcall(require, 'luassert')
if not ok_assert then error('specs.lua needs luassert on package.path: ' .. tostring(luassert), 0) end

local passed, failed, pend = 0, 0, 0
local failures = {}
local stack = {} -- describe blocks: { name, setup = {}, teardown = {}, before = {}, after = {} }
local current_finally

local function full_name(name)
  local parts = {}
  for _, b in ipairs(stack) do parts[#parts + 1] = b.name end
  parts[#parts + 1] = name
  return table.concat(parts, ' ')
end

local function run_protected(f)
  local ok, err = xpcall(f, function(e)
    return (type(e) == 'table' and e.message or tostring(e)) .. '\n' .. debug.traceback('', 2)
  end)
  return ok, err
end

function describe(name, body)
  local block = { name = name, setup = {}, teardown = {}, before = {}, after = {}, tests = {} }
  stack[#stack + 1] = block
  local ok, err = run_protected(body)
  if not ok then
    failed = failed + 1
    failures[#failures + 1] = full_name('(describe body)') .. '\n' .. err
  end
  stack[#stack] = nil
  -- run this block's tests with its setup and teardown
  if #block.tests > 0 or #block.setup > 0 then
    stack[#stack + 1] = block
    local setup_ok = true
    for _, f in ipairs(block.setup) do
      local sok, serr = run_protected(f)
      if not sok then
        setup_ok = false
        failed = failed + 1
        failures[#failures + 1] = full_name('(setup)') .. '\n' .. serr
      end
    end
    if setup_ok then
      for _, t in ipairs(block.tests) do t() end
    end
    for _, f in ipairs(block.teardown) do run_protected(f) end
    stack[#stack] = nil
  end
end
context = describe

local function add_test(name, body)
  local block = stack[#stack]
  local test = function()
    local befores, afters = {}, {}
    for _, b in ipairs(stack) do
      for _, f in ipairs(b.before) do befores[#befores + 1] = f end
      for _, f in ipairs(b.after) do table.insert(afters, 1, f) end
    end
    local ok, err = true, nil
    for _, f in ipairs(befores) do
      if ok then ok, err = run_protected(f) end
    end
    current_finally = nil
    if os.getenv('SPECS_VERBOSE') then -- each test's name as it starts: finds a hang
      io.stdout:write('.. ', full_name(name), '\n')
      io.stdout:flush()
    end
    if ok then ok, err = run_protected(body) end
    if current_finally then run_protected(current_finally) end
    for _, f in ipairs(afters) do run_protected(f) end
    if ok then
      passed = passed + 1
    else
      failed = failed + 1
      failures[#failures + 1] = full_name(name) .. '\n' .. tostring(err)
    end
    collectgarbage()
  end
  if block then block.tests[#block.tests + 1] = test else test() end
end
function it(name, body)
  if body == nil then pend = pend + 1 return end
  add_test(name, body)
end
test = it
function pending() pend = pend + 1 end
function setup(f) stack[#stack].setup[#stack[#stack].setup + 1] = f end
lazy_setup, strict_setup = setup, setup
function teardown(f) stack[#stack].teardown[#stack[#stack].teardown + 1] = f end
lazy_teardown, strict_teardown = teardown, teardown
function before_each(f) stack[#stack].before[#stack[#stack].before + 1] = f end
function after_each(f) stack[#stack].after[#stack[#stack].after + 1] = f end
function finally(f) current_finally = f end
assert = luassert
spy = require 'luassert.spy'
stub = require 'luassert.stub'
mock = require 'luassert.mock'

local t0 = os.clock()
for _, file in ipairs(arg) do
  local before = failed
  local chunk, err = loadfile(file)
  if not chunk then
    failed = failed + 1
    failures[#failures + 1] = file .. ': ' .. err
  else
    stack = {}
    local ok, lerr = run_protected(chunk)
    if not ok then
      failed = failed + 1
      failures[#failures + 1] = file .. ' (top level)\n' .. lerr
    end
  end
  print(('%s: %s'):format(file, failed == before and 'ok' or (failed - before) .. ' failed'))
  io.stdout:flush() -- a run cut short by a timeout still shows how far it got
end
for _, f in ipairs(failures) do print('FAIL ' .. f) end
print(('specs: %d passed, %d failed, %d pending, %.1f s cpu'):format(passed, failed, pend, os.clock() - t0))
if failed > 0 then os.exit(1) end
