-- ember.ops.linalg: matrix products (OpenBLAS on the CPU): matmul with NumPy's batching
-- rules, mm, mv, bmm, dot, outer (Torch7's ger), addmm and baddbmm, as methods and as
-- ember.* functions. Products of integer tensors are exact (wrapping like PyTorch's).
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local function need_tensor(fn, x, what)
  if not is_tensor(x) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what, type(x)), 3)
  end
end

-- Two-operand products: name -> C function.
local products = {
  matmul = C.em_matmul, mm = C.em_mm, mv = C.em_mv, bmm = C.em_bmm, dot = C.em_dot,
  outer = C.em_outer,
}

for name, cfun in pairs(products) do
  local function f(a, b)
    need_tensor(name, a, 'the first operand')
    need_tensor(name, b, 'the second operand')
    return own(cfun(a.ptr, b.ptr), cfun, a.ptr, b.ptr)
  end
  methods[name] = f
  M[name] = f
end
methods.ger, M.ger = methods.outer, methods.outer   -- Torch7's name for outer

-- addmm(c, a, b [, {beta=, alpha=}]): beta * c + alpha * (a @ b); c broadcasts to the result.
local function scalars(fn, opts)
  if opts == nil then return 1, 1 end
  if type(opts) ~= 'table' then
    error(fn .. ': expected an options table {beta=, alpha=}, got ' .. type(opts), 3)
  end
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  if type(beta) ~= 'number' then error(fn .. ': expected a number for beta, got ' .. type(beta), 3) end
  if type(alpha) ~= 'number' then error(fn .. ': expected a number for alpha, got ' .. type(alpha), 3) end
  return beta, alpha
end

local function add_product(name, cfun)
  local function f(c, a, b, opts)
    need_tensor(name, c, 'the added tensor')
    need_tensor(name, a, 'the first operand')
    need_tensor(name, b, 'the second operand')
    local beta, alpha = scalars(name, opts)
    return own(cfun(c.ptr, a.ptr, b.ptr, beta, alpha), cfun, c.ptr, a.ptr, b.ptr, beta, alpha)
  end
  methods[name] = f
  M[name] = f
  -- In place on c (Torch7's addmm writes its result): the product goes through a temporary,
  -- because c may overlap a or b.
  methods[name .. '_'] = function(c, a, b, opts)
    local r = f(c, a, b, opts)
    if r:size() ~= c:size() then
      error(('%s_: expected the added tensor to have the result\'s shape %s, got %s'):format(
        name, tostring(r:size()), tostring(c:size())), 2)
    end
    check(C.em_copy_(c.ptr, r.ptr))
    return c
  end
end
add_product('addmm', C.em_addmm)
add_product('baddbmm', C.em_baddbmm)

return M
