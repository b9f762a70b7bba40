-- Timing helpers for the benchmarks: a monotonic clock, medians, and the PyTorch reference
-- runner (Debian's python3-torch, measured in the same run at 1 and 2 threads).
local B = {}

B.now = ember.clock -- monotonic wall clock

function B.median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  if n % 2 == 1 then return c[(n + 1) / 2] end
  return (c[n / 2] + c[n / 2 + 1]) / 2
end

-- Median seconds per call of f over `reps` samples of `inner` calls each, after a warm-up.
function B.time(f, inner, reps)
  inner, reps = inner or 1, reps or 7
  for _ = 1, math.max(1, math.floor(inner / 4)) do f() end
  local samples = {}
  for r = 1, reps do
    local t0 = B.now()
    for _ = 1, inner do f() end
    samples[r] = (B.now() - t0) / inner
  end
  return B.median(samples)
end

-- Runs tests/bench/torch_ref.py for `what` at 1 and 2 threads and returns the best result
-- (seconds), both figures, and the torch version. nil when torch is not installed.
function B.torch(what, args)
  local results, version = {}, nil
  for _, threads in ipairs({ 1, 2 }) do
    local env = threads == 1 and 'OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1'
      or 'OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE'
    local cmd = ('%s /usr/bin/python3 tests/bench/torch_ref.py %s %d %s 2>/dev/null'):format(
      env, what, threads, args or '')
    local p = io.popen(cmd)
    local out = p:read('*a')
    p:close()
    local v, secs = out:match('torch (%S+) (%S+)')
    if not secs then return nil end
    version = v
    results[threads] = tonumber(secs)
  end
  local best = math.min(results[1], results[2])
  return best, results, version
end

function B.row(fmt, ...) print(string.format(fmt, ...)) end

return B
