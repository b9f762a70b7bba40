-- Classifies Fashion-MNIST test images with a checkpoint written by fashion_mnist.lua and
-- prints each prediction by name, next to the true label. --grid writes the images to a PNG
-- file with the predicted labels under them (green when right; red, with the true label, when
-- wrong).
--   ember examples/predict.lua --checkpoint fashion_mnist.ckpt --count 10 --grid predictions.png
local cli = require 'ember.util.cli'
local nn = ember.nn

local opts, help = cli.parse(arg, {
  { 'checkpoint', 'fashion_mnist.ckpt', 'checkpoint to load' },
  { 'count', 10, 'how many test images to classify' },
  { 'first', 1, 'index of the first test image' },
  { 'data', '/usr/share/datasets/fashion-mnist', 'folder with the IDX files' },
  { 'device', 'cpu', 'device to run on' },
  { 'grid', nil, 'write the images with their predicted labels to this PNG file', 'string' },
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
local predictions, truths = {}, {}
for i = 1, n do
  local p, c = probs[i]:max(1)
  local predicted, truth = c:item(), labels[opts.first + i - 1] + 1
  predictions[i], truths[i] = predicted, truth
  if predicted == truth then correct = correct + 1 end
  print(('image %5d: %-12s (%.1f%%)  true: %-12s %s'):format(opts.first + i - 1, names[predicted],
    100 * p:item(), names[truth], predicted == truth and '' or '  <- wrong'))
end
print(('%d of %d correct'):format(correct, n))

-- The grid: each image three times its size, its predicted label under it in the bitmap font.
if opts.grid then
  local plot = ember.plot
  local zoom, cols = 3, math.min(n, 8)
  local cell_w, cell_h = 28 * zoom + 12, 28 * zoom + 30
  local canvas = plot.Canvas(cols * cell_w + 8, math.ceil(n / cols) * cell_h + 8)
  for i = 1, n do
    local x = 8 + ((i - 1) % cols) * cell_w
    local y = 8 + math.floor((i - 1) / cols) * cell_h
    canvas:image(x, y, images[opts.first + i - 1], { scale = zoom })
    local right = predictions[i] == truths[i]
    local label = names[predictions[i]]
    local w = plot.text_size(label)
    canvas:text(x + math.floor((28 * zoom - w) / 2), y + 28 * zoom + 4, label,
      right and { 0, 140, 0 } or { 210, 0, 0 })
    if not right then
      local t = names[truths[i]]
      canvas:text(x + math.floor((28 * zoom - plot.text_size(t)) / 2), y + 28 * zoom + 15, t,
        { 120, 120, 120 })
    end
  end
  canvas:save(opts.grid)
  print('grid written to ' .. opts.grid)
end
