-- Shared by nn_functional_ext_spec, loss_ext_spec and conv3d_spec: runs one case of
-- tests/lua/golden/nn_functional.safetensors (make_nn_functional.py) in Ember and compares
-- the output, the pooling indices and the gradients of sum(out * r) with PyTorch's.
--
--   G.check('hardtanh', { 'x' }, function(t) return F.hardtanh(t.x, -1.5, 2) end)
--
-- Inputs come as float64 tensors requiring grad (names in `ints` as int64, without grad), on
-- opts.device (default the CPU). f returns the output and, for pooling, the indices (1-based:
-- PyTorch's + 1). opts.skip_grad names inputs whose PyTorch gradient is not compared.
local H = require 'helpers'
local ember = H.ember

local M = {}
local get, _, all = H.golden('tests/lua/golden/nn_functional.safetensors')
M.get = get

-- The case's inputs: float64 leaves requiring grad, except the names in ints (int64).
function M.inputs(name, names, ints, device, dtype)
  local t = {}
  for _, k in ipairs(names) do
    local v = get(name .. '.in.' .. k)
    if ints and ints[k] then
      t[k] = v:long():to(device or 'cpu')
    else
      t[k] = v:to(dtype or 'float64'):to(device or 'cpu'):requires_grad_()
    end
  end
  return t
end

local function cpu64(x) return x:detach():to('cpu'):double() end

-- Runs and compares; returns the output and the inputs (for CPU / Vulkan comparisons).
function M.check(name, names, f, opts)
  opts = opts or {}
  local rtol, atol = opts.rtol or 1e-5, opts.atol or 1e-6
  local t = M.inputs(name, names, opts.ints, opts.device, opts.dtype)
  local y, idx = f(t)
  H.assert_close(cpu64(y), get(name .. '.out'):double():totable(), rtol, atol, name .. ' output')
  if all[name .. '.idx'] then
    assert(idx, name .. ': expected indices')
    H.assert_close(idx:to('cpu'):long(), (get(name .. '.idx'):long() + 1):totable(), 0, 0,
      name .. ' indices')
  end
  local r = all[name .. '.r']
  if r and not opts.no_grad then
    local s = (y * r:to(y:dtype()):to(y:device())):sum()
    s:backward()
    for _, k in ipairs(names) do
      local g = all[name .. '.grad.' .. k]
      if g and not (opts.ints and opts.ints[k]) and not (opts.skip_grad and opts.skip_grad[k]) then
        -- no gradient reached k: PyTorch's must be zero (an input used only in a mask)
        local got = t[k].grad and cpu64(t[k].grad) or g:double() * 0
        H.assert_close(got, g:double():totable(), rtol, atol, name .. ' grad ' .. k)
      end
    end
  end
  return y, t
end

-- Every case name in the file that starts with prefix.
function M.cases(prefix)
  local list, seen = {}, {}
  for k in pairs(all) do
    local c = type(k) == 'string' and k:match('^([^.]+)%.out$')
    if c and c:sub(1, #prefix) == prefix and not seen[c] then
      seen[c] = true
      list[#list + 1] = c
    end
  end
  table.sort(list)
  return list
end

M.ember = ember
return M
