-- Where a GPU training step of nanoGPT's char config goes: run with EMBER_VK_PROFILE=1, which
-- times every kernel (GPU timestamps, docs/design.md "GPU time attribution") and prints the
-- table at exit. ember.profiler gives the same times per op, with a Chrome trace.
--   EMBER_VK_PROFILE=1 ember tests/gpu/gpt_profile.lua [fp32|bf16|fp16] [steps]
local G = require 'ember.models.gpt'
local precision, steps = arg[1] or 'bf16', tonumber(arg[2] or 5)
local dev = 'vulkan'
ember.manual_seed(1)
local model = G.GPT { vocab_size = 65, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384 }:to(dev)
local opt = G.optimizer(model, { lr = 1e-3, weight_decay = 0.1 })
local recipe = require('ember.precision').new(precision, dev)
local x = ember.randint(1, 66, { 64, 256 }):to(dev)
local y = ember.randint(1, 66, { 64, 256 }):to(dev)
for _ = 1, steps do
  opt:zero_grad()
  recipe:step(recipe:forward(function() return model:loss(x, y) end), opt)
end
ember.synchronize(dev)
print(('%s: %d steps, %d dispatches'):format(precision, steps, ember.devices()[2].dispatches or -1))
