-- ember.amp: automatic mixed precision, PyTorch's torch.amp in one place (docs/amp.md):
--   ember.amp.autocast(opts, f, ...)   = ember.autocast (lua/ember/autocast.lua)
--   ember.amp.GradScaler(opts)         dynamic loss scaling for 16-bit gradients (amp/grad_scaler.lua)
local autocast = require 'ember.autocast'
return {
  autocast = autocast.autocast,
  autocast_enter = autocast.autocast_enter,
  autocast_exit = autocast.autocast_exit,
  is_autocast_enabled = autocast.is_autocast_enabled,
  GradScaler = require 'ember.amp.grad_scaler',
}
