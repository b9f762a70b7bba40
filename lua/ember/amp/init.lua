-- ember.amp: automatic mixed precision. GradScaler, dynamic loss scaling for 16-bit gradients
-- (amp/grad_scaler.lua; docs/amp.md).
return {
  GradScaler = require 'ember.amp.grad_scaler',
}
