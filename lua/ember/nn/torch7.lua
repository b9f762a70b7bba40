-- ember.nn's Torch7 names for layers PyTorch renamed: nn.LookupTable is Embedding with Torch7's
-- arguments. (The criterion idiom crit:forward(out, target) / crit:backward(out, target) is
-- on every loss module: nn/criterion.lua.)
local Module = require 'ember.nn.module'
local Embedding = require('ember.nn.linear').Embedding

local M = {}

-- LookupTable(nIndex, nOutput [, paddingValue [, maxNorm [, normType]]]): the rows of an
-- nIndex x nOutput weight picked by 1-based indices, as Torch7's. paddingValue (0: none) is
-- an index whose row gets no gradient; its row starts at zero, as PyTorch's padding_idx
-- (Torch7 left it random). maxNorm renormalization is not implemented.
local LookupTable = Module:extend('LookupTable')
function LookupTable:__init(nIndex, nOutput, paddingValue, maxNorm, normType)
  if type(nIndex) == 'table' or type(nOutput) == 'table' or type(paddingValue) == 'table' then
    error('LookupTable: expected LookupTable(nIndex, nOutput [, paddingValue]) as in Torch7; '
      .. 'for an options table use nn.Embedding', 3)
  end
  if maxNorm ~= nil or normType ~= nil then
    error('LookupTable: maxNorm is not implemented', 3)
  end
  if paddingValue ~= nil and (type(paddingValue) ~= 'number' or paddingValue ~= math.floor(paddingValue)
    or paddingValue < 0 or paddingValue > (tonumber(nIndex) or 0)) then
    error(('LookupTable: expected paddingValue to be 0 or an index in 1 .. %s, got %s'):format(
      tostring(nIndex), tostring(paddingValue)), 3)
  end
  local padding = paddingValue ~= nil and paddingValue > 0 and paddingValue or nil
  Embedding.__init(self, nIndex, nOutput, { padding_idx = padding })
  self.nIndex, self.nOutput, self.paddingValue = nIndex, nOutput, paddingValue or 0
end
LookupTable.forward = Embedding.forward
function LookupTable:extra_repr() return ('%d, %d'):format(self.nIndex, self.nOutput) end
M.LookupTable = LookupTable

return M
