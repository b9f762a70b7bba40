-- ember.utils: training helpers that build on autograd (checkpoint).
local M = {}
M.checkpoint = require('ember.utils.checkpoint').checkpoint
return M
