-- Classifies Fashion-MNIST test images with a checkpoint written by fashion_mnist.lua and
-- prints each prediction by name, next to the true label.
--   ember examples/predict.lua --checkpoint fashion_mnist.ckpt --count 10
local cli = require 'ember.util.cli'
local nn = ember.nn

local opts, help = cli.parse(arg, {
  { 'checkpoint', 'fashion_mnist.ckpt', 'checkpoint to load' },
  { 'count', 10, 'how many test images to classify' },
  { 'first', 1, 'index of the first test image' },
  { 'data', '/usr/share/datasets/fashion-mnist', 'folder with the IDX files' },
  { 'device', 'cpu', 'device to run on' },
}, 'usage: ember examples/predict.lua [options]')
if not opts then print(help) return end

local names = { 'T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt',
  'Sneaker', 'Bag', 'Ankle boot' }

local ckpt = ember.load(opts.checkpoint, { device = opts.device })
local kind = ckpt.model_kind or 'cnn'
local model
if kind == 'cnn' then
  model = nn.Sequential(
    nn.Conv2d(1, 32, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 5, { padding = 2 }), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))
else
  model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
end
model:to(opts.device)
model:load_state_dict(ckpt.model)
model:evaluate()

local images = ember.data.read_idx(opts.data .. '/t10k-images-idx3-ubyte.gz')
local labels = ember.data.read_idx(opts.data .. '/t10k-labels-idx1-ubyte.gz')
local n = math.min(opts.count, images:size(1) - opts.first + 1)
local x = ((images:narrow(1, opts.first, n):float() / 255) - 0.2860) / 0.3530
x = kind == 'cnn' and x:view(n, 1, 28, 28) or x:view(n, 784)
local probs = ember.no_grad(function() return model(x:to(opts.device)):softmax(2):cpu() end)
local correct = 0
for i = 1, n do
  local p, c = probs[i]:max(1)
  local predicted, truth = c:item(), labels[opts.first + i - 1] + 1
  if predicted == truth then correct = correct + 1 end
  print(('image %5d: %-12s (%.1f%%)  true: %-12s %s'):format(opts.first + i - 1, names[predicted],
    100 * p:item(), names[truth], predicted == truth and '' or '  <- wrong'))
end
print(('%d of %d correct'):format(correct, n))
