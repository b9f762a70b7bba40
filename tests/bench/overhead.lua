-- Benchmark: the cost of a tiny op made from Lua (c = a + b on one-element tensors), against
-- `a + b` in PyTorch on this CPU. Goal: at most 1/10 of PyTorch's time.
local B = dofile('tests/bench/bench.lua')
local a, b = ember.ones(1), ember.ones(1)
local ember_s = B.time(function() local c = a + b end, 200000, 9)
print('\n== Tiny op overhead: c = a + b on 1-element float32 tensors')
B.row('%-28s %10.1f ns', 'ember (Lua)', ember_s * 1e9)
local torch_s, per, version = B.torch('tiny_add')
if torch_s then
  B.row('%-28s %10.1f ns  (1 thread %.1f ns, 2 threads %.1f ns)', 'pytorch ' .. version,
    torch_s * 1e9, per[1] * 1e9, per[2] * 1e9)
  B.row('%-28s %10.3f  (goal <= 0.100)', 'ratio ember / pytorch', ember_s / torch_s)
else
  print('pytorch: not available (make bench installs python3-torch)')
end
