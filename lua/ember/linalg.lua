-- ember.linalg: norms, decompositions and solvers, as PyTorch's torch.linalg.
--
-- Norms (norm, vector_norm, matrix_norm with 'fro', 1, -1, inf, -inf) are compositions of
-- elementwise ops and reductions: they differentiate and run on every device. The
-- decompositions and solvers (inv, det, slogdet, solve, cholesky, qr, svd, svdvals, eigh,
-- eigvalsh, lstsq, and matrix_norm's 2, -2 and 'nuc') call LAPACK through the C ops
-- em_linalg_* (runtime/src/ops/linalg_decomp.c), which run on the CPU only: on Vulkan they raise
-- "<name>: not implemented on vulkan". Their gradients are autograd Functions here, written with
-- other ops, PyTorch's formulas: inv, det, slogdet, solve, cholesky, qr, svd, svdvals, eigh,
-- lstsq. (qr's mode 'complete' on a tall matrix has none, as in PyTorch.)
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local Function = require('ember.autograd.function').Function
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

-- where(cond, a, b); methods.where is the method form x:where(cond, y).
local where = require('ember.ops.pointwise').where

local M = {}

local function need_tensor(fn, x, what)
  if not is_tensor(x) then
    error(('%s: expected a tensor for %s, got %s'):format(fn, what or 'the input', type(x)), 3)
  end
end

local function mT(x) return methods.transpose(x, -2, -1) end
local function eye_like(n, x) return creation.eye(n, { dtype = x:dtype(), device = x:device() }) end
local function two(x) return methods.unsqueeze(methods.unsqueeze(x, -1), -1) end

local out2 = ffi.new('em_tensor *[2]')
local out3 = ffi.new('em_tensor *[3]')

-- Options tables: unknown keys are errors that suggest the closest valid one.
local function options(fn, opts, allowed)
  local list = {}
  for k in pairs(allowed) do list[#list + 1] = k end
  return require('ember.util.names').check_options(fn, opts, list, 3)
end

-- ---- the raw C ops (no gradient) -----------------------------------------------------------
local raw = {}
function raw.inv(a) return own(C.em_linalg_inv(a.ptr)) end
function raw.det(a) return own(C.em_linalg_det(a.ptr)) end
function raw.slogdet(a)
  check(C.em_linalg_slogdet(a.ptr, out2, out2 + 1))
  return own(out2[0]), own(out2[1])
end
function raw.solve(a, b) return own(C.em_linalg_solve(a.ptr, b.ptr)) end
function raw.cholesky(a, upper) return own(C.em_linalg_cholesky(a.ptr, upper and 1 or 0)) end
function raw.qr(a, complete)
  check(C.em_linalg_qr(a.ptr, complete and 1 or 0, out2, out2 + 1))
  return own(out2[0]), own(out2[1])
end
function raw.svd(a, full, uv)
  check(C.em_linalg_svd(a.ptr, full and 1 or 0, uv and 1 or 0, out3, out3 + 1, out3 + 2))
  if not uv then return own(out3[1]) end
  return own(out3[0]), own(out3[1]), own(out3[2])
end
function raw.eigh(a, upper, vectors)
  check(C.em_linalg_eigh(a.ptr, upper and 1 or 0, vectors and 1 or 0, out2, out2 + 1))
  if not vectors then return own(out2[0]) end
  return own(out2[0]), own(out2[1])
end
function raw.lstsq(a, b, rcond) return own(C.em_linalg_lstsq(a.ptr, b.ptr, rcond or -1)) end
M._raw = raw

-- ---- inv, det, slogdet -----------------------------------------------------------------------
local Inv = Function{
  name = 'LinalgInvBackward',
  forward = function(ctx, a)
    local y = raw.inv(a)
    ctx:save_for_backward(y)
    return y
  end,
  backward = function(ctx, g)
    local y = ctx:saved()
    local yt = mT(y)
    return -methods.matmul(methods.matmul(yt, g), yt)   -- -A^-T g A^-T
  end,
}

-- inv(A): the inverse of square matrices [..., n, n].
function M.inv(a)
  need_tensor('inv', a)
  return Inv(a)
end

local Det = Function{
  name = 'LinalgDetBackward',
  forward = function(ctx, a)
    local d = raw.det(a)
    ctx:save_for_backward(a, d)
    return d
  end,
  backward = function(ctx, g)
    local a, d = ctx:saved()
    -- d det / dA = det * A^-T; a singular A has no inverse: its gradient is the adjugate,
    -- computed here from the SVD (adj(A)^T = det(U) det(V) U diag(prod_{j~=i} s_j) Vh).
    local ok, ainv = pcall(raw.inv, a)
    if ok then return two(g * d) * mT(ainv) end
    local u, s, vh = raw.svd(a, false, true)
    local n = s:size(-1)
    local others = {}
    for i = 1, n do
      local parts = {}
      if i > 1 then parts[#parts + 1] = methods.narrow(s, -1, 1, i - 1) end
      if i < n then parts[#parts + 1] = methods.narrow(s, -1, i + 1, n - i) end
      others[i] = #parts == 0 and creation.ones_like(s) or
        methods.prod(require('ember.ops.index').cat(parts, -1), -1, true)
    end
    local p = require('ember.ops.index').cat(others, -1)
    local sgn = raw.det(u) * raw.det(vh)
    local adjT = methods.matmul(u * methods.unsqueeze(p, -2), vh)
    return two(g * sgn) * adjT
  end,
}

-- det(A): determinants of square matrices [..., n, n].
function M.det(a)
  need_tensor('det', a)
  return Det(a)
end

local Slogdet = Function{
  name = 'LinalgSlogdetBackward',
  forward = function(ctx, a)
    local s, l = raw.slogdet(a)
    ctx:save_for_backward(a)
    ctx:mark_non_differentiable(s)
    return s, l
  end,
  backward = function(ctx, _, gl)
    local a = ctx:saved()
    if gl == nil then return nil end
    return two(gl) * mT(raw.inv(a))
  end,
}

-- slogdet(A) -> sign, logabsdet: det(A) = sign * exp(logabsdet), without overflow.
function M.slogdet(a)
  need_tensor('slogdet', a)
  return Slogdet(a)
end

-- logdet(A): log(det(A)), NaN for a negative determinant, -inf for a singular A.
function M.logdet(a)
  local s, l = M.slogdet(a)
  local nan = creation.full({}, 0 / 0, { dtype = l:dtype(), device = l:device() })
  local ninf = creation.full({}, -math.huge, { dtype = l:dtype(), device = l:device() })
  return where(methods.lt(s, 0), nan, where(methods.eq(s, 0), ninf, l))
end

-- ---- solve -------------------------------------------------------------------------------------
local Solve = Function{
  name = 'LinalgSolveBackward',
  forward = function(ctx, a, b)
    local x = raw.solve(a, b)
    ctx:save_for_backward(a, x)
    return x
  end,
  backward = function(ctx, g)
    local a, x = ctx:saved()
    local gb = raw.solve(methods.contiguous(mT(a)), g)
    local ga = ctx.needs_input_grad[1] and -methods.matmul(gb, mT(x)) or nil
    return ga, gb
  end,
}

-- Broadcasts the batch dims of A [..., n, n] and B [..., n, k].
local function broadcast_batch(a, b)
  local ba, bb = a:size(), b:size()
  ba[#ba], ba[#ba - 1] = nil, nil
  local r1, r2 = bb[#bb - 1], bb[#bb]
  bb[#bb], bb[#bb - 1] = nil, nil
  local shape = require('ember.ops.shape_ext').broadcast_shapes(ba, bb)
  local sa, sb = { unpack(shape) }, { unpack(shape) }
  sa[#sa + 1], sa[#sa + 2] = a:size(-2), a:size(-1)
  sb[#sb + 1], sb[#sb + 2] = r1, r2
  return methods.contiguous(methods.expand(a, sa)), methods.contiguous(methods.expand(b, sb))
end

-- solve(A, B): X with A X = B. B is [..., n, k], or a vector [..., n] (when 1-D, or with one
-- dim less than A and A's batch shape), as PyTorch; batch dims broadcast.
function M.solve(a, b, opts)
  need_tensor('solve', a, 'A')
  need_tensor('solve', b, 'B')
  opts = options('solve', opts, { left = true })
  if opts.left == false then
    -- X A = B  <=>  A^T X^T = B^T
    return mT(M.solve(mT(a), mT(b)))
  end
  if a:dim() < 2 then error(('solve: expected A to have at least 2 dims, got %d-d'):format(a:dim()), 2) end
  local vector = b:dim() == 1
  if not vector and b:dim() == a:dim() - 1 then
    vector = true
    for i = 1, b:dim() do if b:size(i) ~= a:size(i) then vector = false end end
  end
  local bm = vector and methods.unsqueeze(b, -1) or b
  if bm:dim() < 2 then error('solve: expected B to have at least 1 dim', 2) end
  if bm:size(-2) ~= a:size(-1) then
    error(('solve: A is %d x %d but B has %d rows'):format(a:size(-2), a:size(-1), bm:size(-2)), 2)
  end
  local ea, eb = broadcast_batch(a, bm)
  local x = Solve(ea, eb)
  return vector and methods.squeeze(x, -1) or x
end

-- ---- cholesky --------------------------------------------------------------------------------
local Cholesky = Function{
  name = 'LinalgCholeskyBackward',
  forward = function(ctx, a, upper)
    local l = raw.cholesky(a, upper)
    ctx.upper = upper
    ctx:save_for_backward(l)
    return l
  end,
  backward = function(ctx, g)
    local l = ctx:saved()
    if ctx.upper then l, g = mT(l), mT(g) end
    local linv = raw.inv(methods.contiguous(l))
    local phi = methods.tril(methods.matmul(mT(l), g))
    phi = phi - methods.diag_embed(methods.diagonal(phi, 0, -2, -1)) * 0.5
    local ga = methods.matmul(methods.matmul(mT(linv), phi), linv)
    return (ga + mT(ga)) * 0.5, nil
  end,
}

-- cholesky(A [, {upper=false}]): L lower triangular with A = L L^T (U with A = U^T U).
function M.cholesky(a, opts)
  need_tensor('cholesky', a)
  opts = options('cholesky', opts, { upper = true })
  return Cholesky(a, opts.upper == true)
end

-- ---- qr --------------------------------------------------------------------------------------
-- X with X R^T = G for an invertible square R: (R^-1 G^T)^T, through solve.
local function right_solve_t(g, r)
  return mT(raw.solve(methods.contiguous(r), methods.contiguous(mT(g))))
end

local function zeros_like(t) return creation.zeros_like(t) end

local QR = Function{
  name = 'LinalgQrBackward',
  forward = function(ctx, a, complete)
    local q, r = raw.qr(a, complete)
    ctx:save_for_backward(q, r)
    ctx.complete = complete
    return q, r
  end,
  -- PyTorch's formula (m >= n: gA = [gQ + Q copyltu(M)] R^-T with M = gR R^T - Q^T gQ;
  -- m < n: through the leading square block of R). A complete factorization of a tall matrix
  -- leaves Q's extra columns undetermined: no gradient, as PyTorch.
  backward = function(ctx, gq, gr)
    local q, r = ctx:saved()
    local m, n = q:size(-2), r:size(-1)
    if ctx.complete and m > n then
      error('qr: backward not implemented for mode \'complete\' with more rows than columns ' ..
        '(Q is not determined by A there)', 0)
    end
    gq = gq or zeros_like(q)
    gr = gr or zeros_like(r)
    local inner = methods.matmul(gr, mT(r)) - methods.matmul(mT(q), gq)
    if m >= n then
      local sym = methods.triu(inner)
      sym = sym + mT(sym)
      sym = sym - methods.diag_embed(methods.diagonal(sym, 0, -2, -1)) * 0.5
      return right_solve_t(methods.matmul(q, sym) + gq, r), nil
    end
    local x = -inner
    local skew = methods.tril(x - mT(x))
    local ga = right_solve_t(methods.matmul(q, skew), methods.narrow(r, -1, 1, m))
    local pad = ga:size()
    pad[#pad] = n - m
    ga = require('ember.ops.index').cat({ ga, creation.zeros(pad, { dtype = ga:dtype(), device = ga:device() }) }, -1)
    return ga + methods.matmul(q, gr), nil
  end,
}

-- qr(A [, mode='reduced']) -> Q, R: mode 'reduced' (Q [m, k], R [k, n], k = min(m, n)),
-- 'complete' (Q [m, m], R [m, n]) or 'r' (R only, Q empty; no gradient).
function M.qr(a, mode)
  need_tensor('qr', a)
  mode = mode or 'reduced'
  if mode ~= 'reduced' and mode ~= 'complete' and mode ~= 'r' then
    error("qr: expected mode 'reduced', 'complete' or 'r', got " .. tostring(mode), 2)
  end
  if mode == 'r' then
    if a.requires_grad and C.em_grad_enabled() ~= 0 then
      error("qr: mode 'r' has no gradient (it depends on Q); use mode 'reduced'", 2)
    end
    local _, r = QR(a, false)
    return creation.zeros(0, { dtype = a:dtype(), device = a:device() }), r
  end
  local q, r = QR(a, mode == 'complete')
  return q, r
end

-- ---- svd, svdvals ------------------------------------------------------------------------------
-- PyTorch's svd_backward (distinct singular values assumed): with E_ij = S_j^2 - S_i^2,
-- gA = U [(skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)] Vh, plus the parts of gU and gVh
-- outside U's and Vh's spans for non-square A. Full matrices' extra columns are dropped first.
local function svd_backward(u, s, vh, gu, gs, gvh)
  local m, n, k = u:size(-2), vh:size(-1), s:size(-1)
  u, vh = methods.narrow(u, -1, 1, k), methods.narrow(vh, -2, 1, k)
  if gu == nil and gvh == nil then
    return methods.matmul(u * methods.unsqueeze(gs, -2), vh)
  end
  gu = gu and methods.narrow(gu, -1, 1, k) or zeros_like(u)
  gvh = gvh and methods.narrow(gvh, -2, 1, k) or zeros_like(vh)
  local function skew(x) return x - mT(x) end
  local uhgu = skew(methods.matmul(mT(u), gu))
  local vhgv = skew(methods.matmul(vh, mT(gvh)))
  local s2 = s * s
  local eye = creation.eye(k, { dtype = 'bool', device = s:device() })
  local one = creation.ones({}, { dtype = s:dtype(), device = s:device() })
  local e = where(eye, one, methods.unsqueeze(s2, -2) - methods.unsqueeze(s2, -1))
  local ga = (uhgu * methods.unsqueeze(s, -2) + methods.unsqueeze(s, -1) * vhgv) / e
  if gs ~= nil then ga = ga + methods.diag_embed(gs) end
  if m > n then
    local gusinv = gu / methods.unsqueeze(s, -2)
    ga = methods.matmul(u, ga) + gusinv - methods.matmul(u, methods.matmul(mT(u), gusinv))
    return methods.matmul(ga, vh)
  elseif m < n then
    local sinvgvh = gvh / methods.unsqueeze(s, -1)
    ga = methods.matmul(ga, vh) + sinvgvh - methods.matmul(methods.matmul(sinvgvh, mT(vh)), vh)
    return methods.matmul(u, ga)
  end
  return methods.matmul(methods.matmul(u, ga), vh)
end

local SVD = Function{
  name = 'LinalgSvdBackward',
  forward = function(ctx, a, full)
    local u, s, vh = raw.svd(a, full, true)
    ctx:save_for_backward(u, s, vh)
    return u, s, vh
  end,
  backward = function(ctx, gu, gs, gvh)
    local u, s, vh = ctx:saved()
    return svd_backward(u, s, vh, gu, gs, gvh), nil
  end,
}

-- svd(A [, {full_matrices=true}]) -> U, S, Vh with A = U diag(S) Vh, S descending.
function M.svd(a, opts)
  need_tensor('svd', a)
  opts = options('svd', opts, { full_matrices = true })
  return SVD(a, opts.full_matrices ~= false)
end

local SVDvals = Function{
  name = 'LinalgSvdvalsBackward',
  forward = function(ctx, a)
    local u, s, vh = raw.svd(a, false, true)
    ctx:save_for_backward(u, vh)
    return s
  end,
  backward = function(ctx, gs)
    local u, vh = ctx:saved()
    return methods.matmul(u * methods.unsqueeze(gs, -2), vh)
  end,
}

-- svdvals(A): the singular values, descending.
function M.svdvals(a)
  need_tensor('svdvals', a)
  return SVDvals(a)
end

-- ---- eigh, eigvalsh ----------------------------------------------------------------------------
local Eigh = Function{
  name = 'LinalgEighBackward',
  forward = function(ctx, a, upper)
    local w, v = raw.eigh(a, upper, true)
    ctx:save_for_backward(w, v)
    return w, v
  end,
  backward = function(ctx, gw, gv)
    local w, v = ctx:saved()
    local inner
    if gv ~= nil then
      -- The skew part of V^T gV over the eigenvalue gaps E_ij = w_j - w_i, gW on the diagonal.
      local vgv = methods.matmul(mT(v), gv)
      vgv = (vgv - mT(vgv)) * 0.5
      local e = methods.unsqueeze(w, -2) - methods.unsqueeze(w, -1)
      local n = w:size(-1)
      local eye = creation.eye(n, { dtype = 'bool', device = w:device() })
      local one = creation.ones({}, { dtype = w:dtype(), device = w:device() })
      inner = where(eye, creation.zeros({}, { dtype = w:dtype(), device = w:device() }),
        vgv / where(eye, one, e))
      if gw ~= nil then inner = inner + methods.diag_embed(gw) end
    else
      inner = methods.diag_embed(gw)
    end
    return methods.matmul(methods.matmul(v, inner), mT(v)), nil
  end,
}

-- eigh(A [, UPLO='L']) -> eigenvalues (ascending), eigenvectors (columns) of symmetric A,
-- reading its lower ('L') or upper ('U') triangle.
function M.eigh(a, uplo)
  need_tensor('eigh', a)
  uplo = uplo or 'L'
  if uplo ~= 'L' and uplo ~= 'U' then error("eigh: expected UPLO 'L' or 'U', got " .. tostring(uplo), 2) end
  return Eigh(a, uplo == 'U')
end

function M.eigvalsh(a, uplo)
  local w = M.eigh(a, uplo)
  return w
end

-- ---- lstsq -------------------------------------------------------------------------------------
-- The pseudo-inverse from the SVD, singular values under rcond * max(S) dropped.
local function pinv(a, rcond)
  local u, s, vh = raw.svd(a, false, true)
  local cut = methods.amax(s, -1, true) * (rcond or 0)
  local zero = creation.zeros({}, { dtype = s:dtype(), device = s:device() })
  local sinv = where(methods.gt(s, cut), methods.reciprocal(s), zero)
  return methods.matmul(mT(vh) * methods.unsqueeze(sinv, -2), mT(u))
end

-- The gradient of pinv(A) (PyTorch's pinv_backward), for X = pinv(A) B.
local function pinv_backward(g, p, a)
  local m, n = a:size(-2), a:size(-1)
  local ph, gh = mT(p), mT(g)
  local mm = methods.matmul
  if m <= n then
    local k = mm(gh, p)
    local kph = mm(k, ph)
    return -mT(mm(p, k)) + kph - mm(mm(a, p), kph) + mm(mm(ph, p), gh - mm(k, a))
  end
  local k = mm(p, gh)
  local phk = mm(ph, k)
  return -mT(mm(k, p)) + mm(mm(gh - mm(a, k), p), ph) + phk - mm(mm(phk, p), a)
end

local Lstsq = Function{
  name = 'LinalgLstsqBackward',
  forward = function(ctx, a, b, rcond)
    ctx:save_for_backward(a, b)
    return raw.lstsq(a, b, rcond)
  end,
  -- X = pinv(A) B (A of full rank, or the rank lstsq used): gB = pinv(A)^T gX and gA through
  -- pinv's gradient, as PyTorch.
  backward = function(ctx, gx)
    local a, b = ctx:saved()
    local p = pinv(a, 1e-15 * math.max(a:size(-2), a:size(-1)))
    local ga = ctx.needs_input_grad[1] and pinv_backward(methods.matmul(gx, mT(b)), p, a) or nil
    local gb = ctx.needs_input_grad[2] and methods.matmul(mT(p), gx) or nil
    return ga, gb, nil
  end,
}

-- lstsq(A, B [, {rcond=}]) -> solution: the least-squares (minimum-norm for a rank-deficient A)
-- X of A X = B; B is [..., m, k] or a vector [..., m]. The solution is also the result's field
-- `solution` in PyTorch; here it is the tensor itself.
function M.lstsq(a, b, opts)
  need_tensor('lstsq', a, 'A')
  need_tensor('lstsq', b, 'B')
  opts = options('lstsq', opts, { rcond = true })
  if a:dim() < 2 then error(('lstsq: expected A to have at least 2 dims, got %d-d'):format(a:dim()), 2) end
  local vector = b:dim() == a:dim() - 1
  local bm = vector and methods.unsqueeze(b, -1) or b
  if bm:dim() < 2 or bm:size(-2) ~= a:size(-2) then
    error(('lstsq: A has %d rows but B has %s'):format(a:size(-2),
      bm:dim() < 2 and 'no rows' or tostring(bm:size(-2))), 2)
  end
  local ea, eb = broadcast_batch(a, bm)
  local x = Lstsq(ea, eb, opts.rcond)
  return vector and methods.squeeze(x, -1) or x
end

-- ---- norms -------------------------------------------------------------------------------------
local named = { inf = math.huge, ['-inf'] = -math.huge }

-- amax / amin, with their error ("cannot reduce over an empty dimension") in fn's name.
local function extreme(fn, reduce, x, dim, keepdim)
  local ok, r = pcall(reduce, x, dim, keepdim)
  if ok then return r end
  local msg = tostring(r):match('am[ai][xn]: (.*)$')
  if msg then error(fn .. ': ' .. msg, 3) end
  error(r, 0)
end

local function order(fn, ord)
  if type(ord) == 'string' and named[ord] then return named[ord] end
  return ord
end

-- vector_norm(x [, ord=2] [, dim] [, keepdim]): the ord-norm of x's elements (all, or over
-- dim: a number or a table of dims). ord: any number, math.huge / 'inf', -math.huge / '-inf'
-- (largest / smallest absolute value), 0 (count of non-zeros).
function M.vector_norm(x, ord, dim, keepdim)
  need_tensor('vector_norm', x)
  ord = order('vector_norm', ord == nil and 2 or ord)
  if type(ord) ~= 'number' then
    error('vector_norm: expected ord to be a number, got ' .. tostring(ord), 2)
  end
  if not x:is_floating_point() then
    error('vector_norm: expected a floating-point tensor, got ' .. x:dtype(), 2)
  end
  keepdim = keepdim == true
  if ord == math.huge then return extreme('vector_norm', methods.amax, methods.abs(x), dim, keepdim) end
  if ord == -math.huge then return extreme('vector_norm', methods.amin, methods.abs(x), dim, keepdim) end
  if ord == 0 then
    local count = methods.sum(methods.to(methods.ne(x, 0), x:dtype()), dim, keepdim)
    if not x.requires_grad then return count end
    -- The count is piecewise constant: a zero gradient, through a where that never picks x (a
    -- product x * 0 would turn inf into NaN).
    local never = creation.zeros(x:size(), { dtype = 'bool', device = x:device() })
    local zero = creation.zeros({}, { dtype = x:dtype(), device = x:device() })
    return count + methods.sum(where(never, x, zero), dim, keepdim)
  end
  return methods.norm(x, ord, dim, keepdim)
end

-- Two distinct positive dims of an n-d tensor.
local function two_dims(fn, dim, n)
  dim = dim or { -2, -1 }
  if type(dim) ~= 'table' or #dim ~= 2 then error(fn .. ': expected dim to be a table of 2 dims', 3) end
  local d = {}
  for i = 1, 2 do
    local v = dim[i]
    if type(v) ~= 'number' or v == 0 or v ~= math.floor(v) or v > n or v < -n then
      error(('%s: dimension %s out of range for a %d-d tensor'):format(fn, tostring(v), n), 3)
    end
    d[i] = v > 0 and v or n + v + 1
  end
  if d[1] == d[2] then error(fn .. ': the two dims must differ', 3) end
  return d[1], d[2]
end

-- matrix_norm(A [, ord='fro'] [, dim={-2, -1}] [, keepdim]): 'fro', 'nuc' (sum of singular
-- values), inf / -inf (max / min row sum of |A|), 1 / -1 (max / min column sum), 2 / -2
-- (largest / smallest singular value). 'nuc', 2 and -2 use the SVD (CPU only).
function M.matrix_norm(a, ord, dim, keepdim)
  need_tensor('matrix_norm', a)
  ord = ord == nil and 'fro' or ord
  if a:dim() < 2 then error(('matrix_norm: expected at least 2 dims, got %d-d'):format(a:dim()), 2) end
  local r, c = two_dims('matrix_norm', dim, a:dim())
  keepdim = keepdim == true
  local res
  if ord == 'fro' then
    return M.vector_norm(a, 2, { r, c }, keepdim)
  elseif ord == 'nuc' or ord == 2 or ord == -2 then
    local s = M.svdvals(methods.movedim(a, { r, c }, { -2, -1 }))
    if ord == 'nuc' then res = methods.sum(s, -1)
    elseif ord == 2 then res = extreme('matrix_norm', methods.amax, s, -1)
    else res = extreme('matrix_norm', methods.amin, s, -1) end
    if keepdim then
      res = methods.unsqueeze(methods.unsqueeze(res, math.min(r, c)), math.max(r, c))
    end
    return res
  end
  local o = order('matrix_norm', ord)
  local abs = methods.abs(a)
  if o == math.huge or o == -math.huge then
    res = methods.sum(abs, c, true)
    res = extreme('matrix_norm', o > 0 and methods.amax or methods.amin, res, r, true)
  elseif o == 1 or o == -1 then
    res = methods.sum(abs, r, true)
    res = extreme('matrix_norm', o > 0 and methods.amax or methods.amin, res, c, true)
  else
    error(("matrix_norm: unsupported ord %s (expected 'fro', 'nuc', inf, -inf, 1, -1, 2, -2)"):format(
      tostring(ord)), 2)
  end
  if not keepdim then res = methods.squeeze(methods.squeeze(res, math.max(r, c)), math.min(r, c)) end
  return res
end

-- norm(A [, ord] [, dim] [, keepdim]): vector_norm when dim is one dim (or ord is nil and dim
-- nil: the 2-norm of all elements), matrix_norm when dim has two (or A is 2-D and ord given).
function M.norm(a, ord, dim, keepdim)
  need_tensor('norm', a)
  if type(dim) == 'number' or (type(dim) == 'table' and #dim == 1) then
    return M.vector_norm(a, ord == nil and 2 or ord, dim, keepdim)
  end
  if type(dim) == 'table' and #dim == 2 then return M.matrix_norm(a, ord, dim, keepdim) end
  if dim ~= nil then error('norm: expected dim to be a number or a table of 1 or 2 dims', 2) end
  if ord == nil then return M.vector_norm(a, 2, nil, keepdim) end
  if a:dim() == 1 then return M.vector_norm(a, ord, nil, keepdim) end
  if a:dim() == 2 then return M.matrix_norm(a, ord, nil, keepdim) end
  error(('norm: with ord given and no dim, expected a 1-D or 2-D tensor, got %d-d'):format(a:dim()), 2)
end

-- ---- products, from the tensor functions -----------------------------------------------------
function M.cross(a, b, dim) return methods.cross(a, b, dim or -1) end
function M.matrix_power(a, n) return methods.matrix_power(a, n) end
function M.matmul(a, b) return methods.matmul(a, b) end
function M.diagonal(a, offset, dim1, dim2) return methods.diagonal(a, offset or 0, dim1 or -2, dim2 or -1) end
M.tensordot = function(...) return require('ember.ops.linalg_ext').tensordot(...) end
M.vecdot = function(a, b, dim) return methods.sum(a * b, dim or -1) end

-- Errors of the ops inside carry these functions' names ("svdvals: not implemented on
-- vulkan", not "svd: ...").
require('ember.util.as_op').wrap_all(M, { 'inv', 'det', 'slogdet', 'logdet', 'solve',
  'cholesky', 'qr', 'svd', 'svdvals', 'eigh', 'eigvalsh', 'lstsq', 'vector_norm', 'matrix_norm',
  'norm', 'cross', 'matrix_power', 'vecdot', 'diagonal' })

return M
