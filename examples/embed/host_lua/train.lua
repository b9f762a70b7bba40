-- train.lua: the Lua half of the host_lua example. The C program (host_lua.c) owns the data
-- and the weights; this script returns the function it calls with them. The function trains
-- the weights in place (they are the C program's memory: nothing is copied either way) and
-- returns the final loss, which the C program takes back as a tensor.
--
--   train(x, y, w, b, {steps = ..., lr = ...}) -> loss
--     x [n, k] inputs, y [n, 1] targets, w [k, 1] and b [1] the weights, trained with Adam on
--     the mean squared error of x w + b against y.
local nn = ember.nn

return function(x, y, w, b, opts)
  w:requires_grad_()
  b:requires_grad_()
  local opt = ember.optim.Adam({ w, b }, { lr = opts.lr })
  local loss
  for step = 1, opts.steps do
    opt:zero_grad()
    loss = nn.functional.mse_loss(x:matmul(w) + b, y)
    loss:backward()
    opt:step()
    if step % 100 == 0 then print(('step %4d  loss %.6f'):format(step, loss:item())) end
  end
  -- The host's tensors go back as it gave them: no autograd state left on them.
  w:requires_grad_(false)
  b:requires_grad_(false)
  return loss:detach()
end
