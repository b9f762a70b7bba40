-- Runs the PyTorch golden cases of tests/lua/golden/shape_linalg.safetensors (written by
-- tests/lua/golden/make_shape_linalg.py): for a case, the inputs are loaded (index inputs
-- moved to 1-based, masks to bool), Ember's function computes the outputs, and the outputs
-- and the gradients of sum(out_j * r_j) are compared with PyTorch's.
local H = require 'helpers'
local ember = H.ember

local M = {}
local get, _, G = H.golden('tests/lua/golden/shape_linalg.safetensors')
M.get = get

-- PyTorch's 0-based indices as Ember's 1-based ones (negative indices count from the end in
-- both).
function M.index(t)
  local l = t:to('int64')
  return ember.where(l:ge(0), l + 1, l)
end
function M.mask(t) return t:ne(0) end

-- kinds: per input, 'index', 'mask' or nil (float64, requires grad). opts: grad = false to
-- skip gradients (Ember raises "backward not implemented"), rtol/atol, device to run on.
function M.run(name, f, kinds, opts)
  kinds, opts = kinds or {}, opts or {}
  local rtol, atol = opts.rtol or 1e-9, opts.atol or 1e-10
  local ins = {}
  local i = 1
  while G[name .. '.in' .. i] do
    local t = get(name .. '.in' .. i)
    if kinds[i] == 'index' then t = M.index(t)
    elseif kinds[i] == 'mask' then t = M.mask(t)
    else t = t:clone():requires_grad_() end
    if opts.device then t = t:to(opts.device):detach() ; if not kinds[i] then t:requires_grad_() end end
    ins[i] = t
    i = i + 1
  end
  local outs = { f(unpack(ins)) }
  local loss
  local j = 1
  while G[name .. '.out' .. j] do
    local want = get(name .. '.out' .. j)
    local got = outs[j]
    assert(got, name .. ': missing output ' .. j)
    H.assert_close(got:to('cpu'):to('float64'), want:totable(), rtol, atol, name .. ' out' .. j)
    if G[name .. '.r' .. j] then
      local r = get(name .. '.r' .. j):to(got:device())
      local term = (got * r):sum()
      loss = loss and loss + term or term
    end
    j = j + 1
  end
  if opts.grad == false or loss == nil then return outs end
  loss:backward()
  for k, t in ipairs(ins) do
    local key = name .. '.grad' .. k
    if G[key] then
      assert(t.grad, name .. ': no gradient for input ' .. k)
      H.assert_close(t.grad:to('cpu'), get(key):totable(), rtol, atol, name .. ' grad' .. k)
    end
  end
  return outs
end

return M
