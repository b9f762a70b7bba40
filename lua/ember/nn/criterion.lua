-- ember.nn.criterion: Torch7's criterion idiom for every loss module. crit:forward(out, target)
-- is the loss (any module's forward); crit:backward(out, target) is the gradient of the loss
-- with respect to out, kept as crit.gradInput, as Torch7's criteria return it. A loss of
-- several inputs takes them as a table, as Torch7's did ({x1, x2} for a margin loss) and gets
-- a table of gradients back. A loss that does not reduce ('none') is differentiated as its sum.
-- Nothing is accumulated into out.grad: the inputs are differentiated as fresh leaves.
local M = {}

-- A backward method for loss `name` whose loss is call(self, inputs..., rest...).
function M.backward(name, call)
  return function(self, input, ...)
    local E = require 'ember'
    local tabled = type(input) == 'table'
    local xs = tabled and input or { input }
    local leaves, args = {}, {}
    for i, x in ipairs(xs) do
      if not E.is_tensor(x) then
        error(('%s:backward: expected the output tensor (or a table of them) and the target, got %s')
          :format(name, type(x)), 2)
      end
      leaves[i] = x:detach():requires_grad_(x:is_floating_point())
      args[i] = leaves[i]
    end
    if #xs == 0 then error(name .. ':backward: expected the output tensor and the target, got nil', 2) end
    local n = #args
    for i = 1, select('#', ...) do args[n + i] = select(i, ...) end
    local total = n + select('#', ...)
    local loss = E.enable_grad(function() return call(self, unpack(args, 1, total)) end)
    local wanted = {}
    for _, x in ipairs(leaves) do if x.requires_grad then wanted[#wanted + 1] = x end end
    local grads = #wanted > 0 and E.autograd.grad({ loss }, wanted,
      { grad_outputs = { E.ones_like(loss) }, allow_unused = true }) or {}
    local out, k = {}, 0
    for i, x in ipairs(leaves) do
      local g
      if x.requires_grad then k = k + 1; g = grads[k] end
      out[i] = g or E.zeros_like(xs[i])
    end
    rawset(self, 'gradInput', tabled and out or out[1])
    return self.gradInput
  end
end

return M
