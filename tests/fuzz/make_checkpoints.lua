-- Writes Ember's own checkpoints (ember.save) into the safetensors and checkpoint fuzz corpora:
--   build/ember tests/fuzz/make_checkpoints.lua      (after tests/fuzz/make_corpus.py)
-- They carry what only Ember's files have: nested keys, metadata of every leaf type and the
-- __ember_types__ entry (lua/ember/serialize.lua).
local ffi = require 'ffi'
local ember = require 'ember'
local files = {
  ember_model = {
    model = { { weight = ember.ones(2, 3), bias = ember.zeros(3) } },
    optim = { lr = 0.001, momentum = 0.9, nesterov = true, step = 12, name = 'sgd' },
    empty = {},
  },
  ember_state_dict = { sd = { ['layers.0.weight'] = ember.ones(2, 2):double(),
    ['layers.0.bias'] = ember.zeros(2, { dtype = 'int64' }) } },
  ember_scalars = { x = ember.tensor(3.5), n = 1, flag = false, half = ember.ones(2):half(),
    bf = ember.ones(1):bfloat16(), nan = 0 / 0, inf = math.huge },
  ember_int64 = { seed = ffi.new('int64_t', -9007199254740993LL),
    count = ffi.new('uint64_t', 18446744073709551615ULL), text = 'a "quoted" \\ \n line' },
  ember_arrays = { { 1, 2, { 3 } }, { ['0'] = 'zero', ['012'] = 'not a number' } },
}
for name, obj in pairs(files) do
  for _, dir in ipairs({ 'safetensors', 'checkpoint' }) do
    ember.save('tests/fuzz/corpus/' .. dir .. '/' .. name, obj)
  end
end
