-- ember.models: the reference models that the main job, the benchmarks and the tests share.
--   models.fashion_cnn()  the "2 Conv+pooling" network of Fashion-MNIST's benchmark:
--                         conv5x5-32, pool, conv5x5-64, pool, fc1024, dropout 0.4, fc10 (1x28x28 in)
--   models.fashion_mlp()  784-256-128-10 with ReLUs (784 in)
--   models.build(name)    one of them by name ('cnn' or 'mlp')
local M = {}

local function nn() return require('ember').nn end

function M.fashion_cnn()
  local n = nn()
  return n.Sequential(
    n.Conv2d(1, 32, 5, { padding = 2 }), n.ReLU(), n.MaxPool2d(2),
    n.Conv2d(32, 64, 5, { padding = 2 }), n.ReLU(), n.MaxPool2d(2),
    n.Flatten(), n.Linear(64 * 7 * 7, 1024), n.ReLU(), n.Dropout(0.4), n.Linear(1024, 10))
end

function M.fashion_mlp()
  local n = nn()
  return n.Sequential(n.Linear(784, 256), n.ReLU(), n.Linear(256, 128), n.ReLU(), n.Linear(128, 10))
end

-- The input shape of one sample for each model.
M.input_shape = { cnn = { 1, 28, 28 }, mlp = { 784 } }

function M.build(kind)
  if kind == 'cnn' then return M.fashion_cnn() end
  if kind == 'mlp' then return M.fashion_mlp() end
  error("models.build: expected 'cnn' or 'mlp', got '" .. tostring(kind) .. "'", 2)
end

return M
