-- ember.ops.linalg_ext: products and tensor algebra beyond matmul: einsum, tensordot, kron,
-- cross, cdist, addmv, addr and matrix_power.
--
-- Each is composed from views, elementwise ops, reductions and matmul, so it differentiates
-- and runs on every device those run on (matrix_power with a negative exponent needs
-- ember.linalg.inv, which is CPU-only). einsum reduces to one batched matmul per pair of
-- operands, left to right, after taking repeated labels' diagonals and summing labels no
-- later operand or the output needs.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

local A = require 'ember.ops.ext_args'
local fail, need_tensor, pdim, prod, index_of = A.fail, A.need_tensor, A.pdim, A.prod, A.index_of

local function permute(x, order)
  if #order == 0 then return x end
  local id = true
  for i, o in ipairs(order) do if o ~= i then id = false end end
  if id then return x end
  return methods.permute(x, order)
end

-- ---- einsum ----------------------------------------------------------------------------------
-- Labels of one term: letters, and '...' as labels '.k' .. '.1' numbered from the right so
-- that operands' ellipsis dims line up as broadcasting does.
local function term_labels(term, ndim, pos)
  local labels, ell = {}, nil
  local i = 1
  while i <= #term do
    local c = term:sub(i, i)
    if c == '.' then
      if term:sub(i, i + 2) ~= '...' or ell then
        error(('einsum: invalid ellipsis in the term "%s"'):format(term), 4)
      end
      ell = #labels + 1
      i = i + 3
    elseif c:match('%a') then
      labels[#labels + 1] = c
      i = i + 1
    else
      error(('einsum: invalid character "%s" in the term "%s"'):format(c, term), 4)
    end
  end
  if ndim == nil then return labels, ell end -- the output term
  local k = ndim - #labels
  if (ell == nil and k ~= 0) or k < 0 then
    error(('einsum: the term "%s" has %d labels for operand %d of %d dims'):format(
      term, #labels, pos, ndim), 4)
  end
  if ell then
    for j = 1, k do table.insert(labels, ell, '.' .. j) end   -- ends as .k .. .1
  end
  return labels, k
end

-- Repeated labels within one operand: their diagonal.
local function dedupe(x, labels)
  while true do
    local p, q
    for i = 1, #labels do
      for j = i + 1, #labels do
        if labels[i] == labels[j] then p, q = i, j; break end
      end
      if p then break end
    end
    if not p then return x, labels end
    local l = labels[p]
    x = methods.diagonal(x, 0, p, q)
    table.remove(labels, q)
    table.remove(labels, p)
    labels[#labels + 1] = l
  end
end

local function sum_labels(x, labels, keep)
  local dims, rest = {}, {}
  for i, l in ipairs(labels) do
    if keep[l] then rest[#rest + 1] = l else dims[#dims + 1] = i end
  end
  if #dims == 0 then return x, labels end
  return methods.sum(x, dims), rest
end

local function contract(a, la, b, lb, needed, sizes)
  local inb, ina = {}, {}
  for _, l in ipairs(lb) do inb[l] = true end
  for _, l in ipairs(la) do ina[l] = true end
  local batch, aonly, con, bonly = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if inb[l] then
      if needed[l] then batch[#batch + 1] = l else con[#con + 1] = l end
    else
      aonly[#aonly + 1] = l
    end
  end
  for _, l in ipairs(lb) do if not ina[l] then bonly[#bonly + 1] = l end end
  local function arrange(x, labels, groups)
    local order, shape = {}, {}
    for _, g in ipairs(groups) do
      for _, l in ipairs(g) do order[#order + 1] = index_of(labels, l); shape[#shape + 1] = sizes[l] end
    end
    return methods.expand(permute(x, order), shape)
  end
  local sb, sa, sc, sbo = {}, {}, {}, {}
  for i, l in ipairs(batch) do sb[i] = sizes[l] end
  for i, l in ipairs(aonly) do sa[i] = sizes[l] end
  for i, l in ipairs(con) do sc[i] = sizes[l] end
  for i, l in ipairs(bonly) do sbo[i] = sizes[l] end
  local A = methods.reshape(arrange(a, la, { batch, aonly, con }), { prod(sb), prod(sa), prod(sc) })
  local B = methods.reshape(arrange(b, lb, { batch, con, bonly }), { prod(sb), prod(sc), prod(sbo) })
  local shape, labels = {}, {}
  for _, g in ipairs({ batch, aonly, bonly }) do
    for _, l in ipairs(g) do shape[#shape + 1] = sizes[l]; labels[#labels + 1] = l end
  end
  return methods.reshape(methods.matmul(A, B), shape), labels
end

-- einsum(equation, a, b, ...) or einsum(equation, {a, b, ...}): Einstein summation as
-- PyTorch's (letters, '...' for broadcast dims, '->' for the output; without '->' the output
-- is the ellipsis dims then the labels used once, in alphabetical order).
function M.einsum(eq, ...)
  if type(eq) ~= 'string' then error('einsum: expected an equation string, got ' .. type(eq), 2) end
  local ops = { ... }
  if #ops == 1 and type(ops[1]) == 'table' and not is_tensor(ops[1]) then ops = ops[1] end
  eq = eq:gsub('%s', '')
  local lhs, rhs = eq:match('^(.-)%->(.*)$')
  if lhs == nil then lhs = eq end
  local terms = {}
  for t in (lhs .. ','):gmatch('([^,]*),') do terms[#terms + 1] = t end
  if #terms ~= #ops then
    error(('einsum: the equation has %d operands, got %d tensors'):format(#terms, #ops), 2)
  end
  local labels, sizes, count, max_ell = {}, {}, {}, 0
  for i, x in ipairs(ops) do
    if not is_tensor(x) then
      error(('einsum: expected a tensor for operand %d, got %s'):format(i, type(x)), 2)
    end
    local ls, k = term_labels(terms[i], x:dim(), i)
    labels[i] = ls
    max_ell = math.max(max_ell, k)
    for j, l in ipairs(ls) do
      local s = x:size(j)
      local known = sizes[l]
      if known and known ~= s and known ~= 1 and s ~= 1 then
        error(('einsum: label %s has size %d in operand %d but %d before'):format(
          l:sub(1, 1) == '.' and '...' or l, s, i, known), 2)
      end
      sizes[l] = math.max(known or s, s)
      if known and known == 1 then sizes[l] = s elseif known and s == 1 then sizes[l] = known end
      count[l] = (count[l] or 0) + 1
    end
  end
  local out
  if rhs then
    local ls, ell = term_labels(rhs)
    if ell then for j = 1, max_ell do table.insert(ls, ell, '.' .. j) end end
    out = ls
  else
    out = {}
    for j = max_ell, 1, -1 do out[#out + 1] = '.' .. j end
    local once = {}
    for l, c in pairs(count) do if c == 1 and l:sub(1, 1) ~= '.' then once[#once + 1] = l end end
    table.sort(once)
    for _, l in ipairs(once) do out[#out + 1] = l end
  end
  local in_out = {}
  for _, l in ipairs(out) do
    if in_out[l] then error(('einsum: output label %s appears twice'):format(l), 2) end
    if not sizes[l] then error(('einsum: output label %s is not in any operand'):format(l), 2) end
    in_out[l] = true
  end
  -- Labels each operand still needs: in the output or in a later operand.
  local function needed_after(i)
    local need = {}
    for l in pairs(in_out) do need[l] = true end
    for j = i + 1, #ops do for _, l in ipairs(labels[j]) do need[l] = true end end
    return need
  end
  local cur, cl = dedupe(ops[1], { unpack(labels[1]) })
  local keep = needed_after(1)
  cur, cl = sum_labels(cur, cl, keep)
  for i = 2, #ops do
    local b, bl = dedupe(ops[i], { unpack(labels[i]) })
    local need = needed_after(i)
    local keep_a, keep_b = {}, {}
    for l in pairs(need) do keep_a[l], keep_b[l] = true, true end
    for _, l in ipairs(bl) do keep_a[l] = true end
    for _, l in ipairs(cl) do keep_b[l] = true end
    cur, cl = sum_labels(cur, cl, keep_a)
    b, bl = sum_labels(b, bl, keep_b)
    cur, cl = contract(cur, cl, b, bl, need, sizes)
  end
  cur, cl = sum_labels(cur, cl, in_out)
  local order, shape = {}, {}
  for i, l in ipairs(out) do order[i] = index_of(cl, l); shape[i] = sizes[l] end
  return methods.expand(permute(cur, order), shape)
end

-- ---- tensordot -------------------------------------------------------------------------------
-- tensordot(a, b [, dims=2]): dims n contracts a's last n dims with b's first n; dims
-- {{a dims}, {b dims}} (1-based) contracts those pairs.
function M.tensordot(a, b, dims)
  need_tensor('tensordot', a, 'the first operand')
  need_tensor('tensordot', b, 'the second operand')
  dims = dims == nil and 2 or dims
  local da, db = {}, {}
  if type(dims) == 'number' then
    if dims ~= math.floor(dims) or dims < 0 or dims > a:dim() or dims > b:dim() then
      fail('tensordot', ('expected dims between 0 and %d, got %s'):format(
        math.min(a:dim(), b:dim()), tostring(dims)))
    end
    for i = 1, dims do da[i] = a:dim() - dims + i; db[i] = i end
  elseif type(dims) == 'table' and type(dims[1]) == 'table' and type(dims[2]) == 'table' then
    if #dims[1] ~= #dims[2] then
      fail('tensordot', ('expected as many dims of a as of b, got %d and %d'):format(#dims[1], #dims[2]))
    end
    for i = 1, #dims[1] do
      da[i] = pdim('tensordot', dims[1][i], a:dim())
      db[i] = pdim('tensordot', dims[2][i], b:dim())
      if a:size(da[i]) ~= b:size(db[i]) then
        fail('tensordot', ('contracted dims %d of a and %d of b have sizes %d and %d'):format(
          da[i], db[i], a:size(da[i]), b:size(db[i])))
      end
    end
  else
    fail('tensordot', 'expected dims to be a number or {{a dims}, {b dims}}')
  end
  local ca, cb = {}, {}
  for _, d in ipairs(da) do ca[d] = true end
  for _, d in ipairs(db) do cb[d] = true end
  local oa, ob, fa, fb, shape = {}, {}, {}, {}, {}
  for d = 1, a:dim() do if not ca[d] then oa[#oa + 1] = d; fa[#fa + 1] = a:size(d); shape[#shape + 1] = a:size(d) end end
  for _, d in ipairs(da) do oa[#oa + 1] = d end
  for _, d in ipairs(db) do ob[#ob + 1] = d end
  for d = 1, b:dim() do if not cb[d] then ob[#ob + 1] = d; fb[#fb + 1] = b:size(d); shape[#shape + 1] = b:size(d) end end
  local k = 1
  for _, d in ipairs(da) do k = k * a:size(d) end
  local A = methods.reshape(permute(a, oa), { prod(fa), k })
  local B = methods.reshape(permute(b, ob), { k, prod(fb) })
  return methods.reshape(methods.mm(A, B), shape)
end

-- ---- kron ------------------------------------------------------------------------------------
-- kron(a, b): the Kronecker product; the smaller rank gets leading size-1 dims.
function methods.kron(a, b)
  need_tensor('kron', a, 'the first operand')
  need_tensor('kron', b, 'the second operand')
  local n = math.max(a:dim(), b:dim())
  local sa, sb = {}, {}
  for i = 1, n do
    sa[i] = i > n - a:dim() and a:size(i - (n - a:dim())) or 1
    sb[i] = i > n - b:dim() and b:size(i - (n - b:dim())) or 1
  end
  local va, vb, out = {}, {}, {}
  for i = 1, n do
    va[2 * i - 1], va[2 * i] = sa[i], 1
    vb[2 * i - 1], vb[2 * i] = 1, sb[i]
    out[i] = sa[i] * sb[i]
  end
  if n == 0 then return methods.mul(a, b) end
  return methods.reshape(methods.mul(methods.reshape(a, va), methods.reshape(b, vb)), out)
end

-- ---- cross -----------------------------------------------------------------------------------
-- cross(a, b [, dim]): the cross product of 3-vectors along dim (default: the first dim of
-- size 3, as torch.cross); a and b broadcast.
function methods.cross(a, b, dim)
  need_tensor('cross', a, 'the first operand')
  need_tensor('cross', b, 'the second operand')
  local bt = require('ember.ops.shape_ext').broadcast_tensors(a, b)
  local x, y = bt[1], bt[2]
  local d
  if dim == nil then
    for i = 1, x:dim() do if x:size(i) == 3 then d = i; break end end
    if d == nil then fail('cross', 'no dimension of size 3 in shape ' .. tostring(x:size())) end
  else
    d = pdim('cross', dim, x:dim())
    if x:size(d) ~= 3 then
      fail('cross', ('expected dimension %d to have size 3, got %d'):format(dim, x:size(d)))
    end
  end
  local i1 = creation.tensor({ 2, 3, 1 }, { dtype = 'int64', device = x:device() })
  local i2 = creation.tensor({ 3, 1, 2 }, { dtype = 'int64', device = x:device() })
  return methods.index_select(x, d, i1) * methods.index_select(y, d, i2) -
    methods.index_select(x, d, i2) * methods.index_select(y, d, i1)
end

-- ---- cdist -----------------------------------------------------------------------------------
-- cdist(x1, x2 [, p=2]): [..., P, M] and [..., R, M] -> [..., P, R] p-norm distances between
-- rows; batch dims broadcast.
function M.cdist(x1, x2, p)
  need_tensor('cdist', x1, 'x1')
  need_tensor('cdist', x2, 'x2')
  p = p or 2
  if type(p) ~= 'number' or p < 0 then fail('cdist', 'expected p >= 0, got ' .. tostring(p)) end
  if x1:dim() < 2 or x2:dim() < 2 then
    fail('cdist', ('expected tensors of at least 2 dims, got %d-d and %d-d'):format(x1:dim(), x2:dim()))
  end
  if x1:size(-1) ~= x2:size(-1) then
    fail('cdist', ('expected rows of the same size, got %d and %d'):format(x1:size(-1), x2:size(-1)))
  end
  local diff = methods.unsqueeze(x1, -2) - methods.unsqueeze(x2, -3)
  return require('ember.linalg').vector_norm(diff, p, -1)
end

-- ---- addmv, addr, matrix_power ---------------------------------------------------------------
local function scalars(fn, opts)
  opts = require('ember.util.names').check_options(fn, opts, { 'beta', 'alpha' }, 3)
  return opts.beta or 1, opts.alpha or 1
end

local function add_scaled(fn, c, prodv, beta, alpha)
  local r = alpha == 1 and prodv or methods.mul(prodv, alpha)
  -- beta = 0 ignores c (its NaNs too), as PyTorch; c still sets the broadcast shape.
  if beta == 0 then return methods.add(r, methods.mul(creation.zeros_like(c), 0)) end
  return methods.add(beta == 1 and c or methods.mul(c, beta), r)
end

-- addmv(c, A, v [, {beta=1, alpha=1}]): beta * c + alpha * (A @ v).
function methods.addmv(c, a, v, opts)
  need_tensor('addmv', c, 'the added tensor')
  local beta, alpha = scalars('addmv', opts)
  return add_scaled('addmv', c, methods.mv(a, v), beta, alpha)
end
-- addr(c, u, v [, {beta=1, alpha=1}]): beta * c + alpha * outer(u, v).
function methods.addr(c, u, v, opts)
  need_tensor('addr', c, 'the added tensor')
  local beta, alpha = scalars('addr', opts)
  return add_scaled('addr', c, methods.outer(u, v), beta, alpha)
end
for _, name in ipairs({ 'addmv', 'addr' }) do
  methods[name .. '_'] = function(c, a, b, opts)
    local r = methods[name](c, a, b, opts)
    if r:size() ~= c:size() then
      error(("%s_: expected the added tensor to have the result's shape %s, got %s"):format(
        name, tostring(r:size()), tostring(c:size())), 2)
    end
    methods.copy_(c, r)
    return c
  end
end

-- matrix_power(n): A @ A @ ... (n times) for square matrices (batched); n = 0 gives the
-- identity, n < 0 the power of the inverse.
function methods.matrix_power(a, n)
  need_tensor('matrix_power', a)
  if type(n) ~= 'number' or n ~= math.floor(n) then
    fail('matrix_power', 'expected an integer exponent, got ' .. tostring(n))
  end
  if a:dim() < 2 or a:size(-1) ~= a:size(-2) then
    fail('matrix_power', 'expected square matrices, got shape ' .. tostring(a:size()))
  end
  if n == 0 then
    local e = creation.eye(a:size(-1), { dtype = a:dtype(), device = a:device() })
    return methods.clone(methods.expand(e, a:size()))
  end
  if n < 0 then a = require('ember.linalg').inv(a); n = -n end
  local result, base = nil, a
  while n > 0 do
    if n % 2 == 1 then result = result and methods.matmul(result, base) or base end
    n = math.floor(n / 2)
    if n > 0 then base = methods.matmul(base, base) end
  end
  return result == a and methods.clone(a) or result
end

-- Errors of the ops inside carry these functions' names.
local as_op = require 'ember.util.as_op'
as_op.wrap_all(M, { 'einsum', 'tensordot', 'cdist' })
as_op.wrap_all(methods, { 'kron', 'cross', 'addmv', 'addmv_', 'addr', 'addr_', 'matrix_power' })

return M
