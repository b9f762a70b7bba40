-- Writes Ember's own checkpoints (ember.save) into the safetensors fuzz corpus:
--   build/ember tests/fuzz/make_checkpoints.lua
-- They carry what only Ember's files have: nested keys, metadata of every leaf type and the
-- __ember_types__ entry (lua/ember/serialize.lua).
local ember = require 'ember'
local dir = 'tests/fuzz/corpus/safetensors/'
ember.save(dir .. 'ember_model', {
  model = { { weight = ember.ones(2, 3), bias = ember.zeros(3) } },
  optim = { lr = 0.001, momentum = 0.9, nesterov = true, step = 12, name = 'sgd' },
  empty = {},
})
ember.save(dir .. 'ember_state_dict', { ['layers.0.weight'] = ember.ones(2, 2):double(),
  ['layers.0.bias'] = ember.zeros(2, { dtype = 'int64' }) })
ember.save(dir .. 'ember_scalars', { x = ember.tensor(3.5), n = 1, flag = false,
  half = ember.ones(2):half(), bf = ember.ones(1):bfloat16() })
