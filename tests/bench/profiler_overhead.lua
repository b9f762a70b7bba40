-- The profiler's cost on the tiny op, c = a + b on one-element float32 tensors
-- (docs/performance.md, "The profiler's overhead").
--   ./build/ember tests/bench/profiler_overhead.lua
--       ns per op, process CPU time, median of 9 samples of 2e5 ops: the profiler off, on
--       (CPU times only) and full (record_shapes and profile_memory too); 'off' alone runs
--       only the first (a library without the profiler can run it)
--   EMBER_OPENMP_TUNED=1 valgrind --tool=callgrind ./build/ember tests/bench/profiler_overhead.lua N [on|full]
--       N ops (run with N = 20000 and 120000: the difference over 100000 ops is the cost of one)
local ffi = require 'ffi'
local C = require('ember.core').C
local a, b = ember.ones(1), ember.ones(1)

local function start(mode)
  if mode == 'on' or mode == 'full' then
    local full = mode == 'full' and 1 or 0
    C.em_profiler_start(ffi.new('em_profiler_options', { record_shapes = full, profile_memory = full }))
  end
end
local function stop(mode)
  if mode == 'on' or mode == 'full' then C.em_profiler_stop() end
end

local n = tonumber(arg[1])
if n then
  start(arg[2])
  for _ = 1, n do local c = a + b end
  stop(arg[2])
  return
end

local N = 200000
local function sample(mode)
  start(mode)
  local t = os.clock()
  for _ = 1, N do local c = a + b end
  t = os.clock() - t
  stop(mode)
  return t / N * 1e9
end
for _, mode in ipairs(arg[1] == 'off' and { 'off' } or { 'off', 'on', 'full' }) do
  sample(mode)
  local s = {}
  for i = 1, 9 do s[i] = sample(mode) end
  table.sort(s)
  print(('%-5s %7.1f ns/op'):format(mode, s[5]))
end
