-- Where a GPU training step of nanoGPT's char config goes: run with EMBER_VK_PROFILE=1, which
-- times every kernel (GPU timestamps, docs/design.md "GPU time attribution") and prints the
-- table at exit. ember.profiler gives the same times per op, with a Chrome trace.
--   EMBER_VK_PROFILE=1 ember tests/gpu/gpt_profile.lua [fp32|bf16|fp16] [steps]
--   ember tests/gpu/gpt_profile.lua bf16 3 trace.json    (ember.profiler: table and trace)
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

-- With an output path as argument 3: three more steps under ember.profiler, the table of GPU
-- time per op and kernel (self_vulkan_time_total) printed, the Chrome trace written there.
if arg[3] then
  local prof = ember.profiler.profile({ activities = { 'cpu', 'vulkan' } }, function(p)
    for _ = 1, 3 do
      opt:zero_grad()
      recipe:step(recipe:forward(function() return model:loss(x, y) end), opt)
      ember.synchronize(dev)
      p:step()
    end
  end)
  print(prof:key_averages():table({ sort_by = 'self_vulkan_time_total', row_limit = 25 }))
  prof:export_chrome_trace(arg[3])
  print('trace: ' .. arg[3])
end
