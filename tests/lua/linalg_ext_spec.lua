-- ember.linalg (lua/ember/linalg.lua over runtime/src/ops/linalg_decomp.c and cpu/lapack.c):
-- against PyTorch's values and gradients (tests/lua/golden/make_shape_linalg.py), identities
-- that need no reference (A inv(A) = I, Q R = A, U S Vh = A, V diag(W) V^T = A), finite-
-- difference gradients (every decomposition), float32, batches, zero-size and strided inputs, errors, and the
-- Vulkan rules: norms run there, decompositions say they are not implemented.
local H = require 'helpers'
local GC = require 'golden_cases'
local ember = H.ember
local L = ember.linalg
local f64 = { dtype = 'float64' }

local function shape(t) local s = {}; for i = 1, t:dim() do s[i] = t:size(i) end; return s end

describe('linalg against PyTorch', function()
  local cases = {
    inv = L.inv, det = L.det, cholesky = L.cholesky, svdvals = L.svdvals,
    eigvalsh = L.eigvalsh, solve = L.solve, solve_vec = L.solve, solve_bcast = L.solve,
    slogdet = function(a) return L.slogdet(a) end,
    cholesky_upper = function(a) return L.cholesky(a, { upper = true }) end,
    eigh_vec = function(a) local _, v = L.eigh(a); return v:abs() end,
    vector_norm_all = function(x) return L.vector_norm(x) end,
    matrix_norm_dims = function(x) return L.matrix_norm(x, 1, { 3, 1 }, true) end,
  }
  for name, o in pairs({ ['2'] = 2, ['1'] = 1, inf = math.huge, ninf = '-inf', ['0'] = 0, ['3p5'] = 3.5 }) do
    cases['vector_norm_' .. name] = function(x) return L.vector_norm(x, o, 2) end
  end
  for name, o in pairs({ fro = 'fro', nuc = 'nuc', ['1'] = 1, n1 = -1, inf = 'inf', ninf = -math.huge,
    ['2'] = 2, n2 = -2 }) do
    cases['matrix_norm_' .. name] = function(x) return L.matrix_norm(x, o) end
  end
  for name, f in pairs(cases) do
    it(name, function() GC.run(name, f) end)
  end
  it('qr', function()
    GC.run('qr', function(a) return L.qr(a) end)
    GC.run('qr_wide', function(a) return L.qr(a) end)
    GC.run('qr_complete', function(a) return L.qr(a, 'complete') end, nil, { grad = false })
  end)
  it('svd through U, S and Vh', function()
    local function reduced(a)
      local u, s, vh = L.svd(a, { full_matrices = false })
      return u:matmul(vh), s
    end
    GC.run('svd_uv', reduced)
    GC.run('svd_uv_wide', reduced)
    GC.run('svd_full_sq', function(a)
      local u, _, vh = L.svd(a)
      return u:narrow(2, 1, 3):pow(2), vh:pow(2)
    end)
  end)
  it('lstsq', function()
    GC.run('lstsq', L.lstsq, nil, { rtol = 1e-8 })
    GC.run('lstsq_batch', L.lstsq, nil, { rtol = 1e-8 })
  end)
end)

describe('linalg identities', function()
  local function close(a, b, tol) H.assert_close(a, b:totable(), tol or 1e-10, tol or 1e-10) end
  it('inv, solve, det on float32 and float64, batched and strided', function()
    for _, dt in ipairs({ 'float32', 'float64' }) do
      local tol = dt == 'float32' and 1e-4 or 1e-10
      local a = (ember.randn(2, 3, 4, 4, { dtype = dt }) + ember.eye(4, { dtype = dt }) * 4):transpose(3, 4)
      local ai = L.inv(a)
      assert.are.equal(dt, ai:dtype())
      close(a:matmul(ai), ember.eye(4, { dtype = dt }):expand(2, 3, 4, 4), tol)
      local b = ember.randn(2, 3, 4, 2, { dtype = dt })
      close(a:matmul(L.solve(a, b)), b, tol)
      close(L.solve(a, b:transpose(3, 4), { left = false }):matmul(a), b:transpose(3, 4), tol)
      local s, l = L.slogdet(a)
      close(L.det(a), s * l:exp(), tol)
      local p = a[1][1]:matmul(a[1][1]:t())
      close(L.logdet(p), select(2, L.slogdet(p)), tol)
    end
  end)

  it('qr, svd, eigh, cholesky reconstruct their input', function()
    local a = ember.randn(5, 3, f64)
    local q, r = L.qr(a)
    close(q:matmul(r), a)
    close(q:t():matmul(q), ember.eye(3, f64))
    local u, s, vh = L.svd(a, { full_matrices = false })
    close((u * s:unsqueeze(1)):matmul(vh), a)
    local uf, _, vhf = L.svd(a)
    assert.are.same({ 5, 5 }, shape(uf))
    assert.are.same({ 3, 3 }, shape(vhf))
    local m = a:t():matmul(a)
    local w, v = L.eigh(m)
    close((v * w:unsqueeze(1)):matmul(v:t()), m)
    close(w, s:flip(1):pow(2))
    local c = L.cholesky(m)
    close(c:matmul(c:t()), m)
    close(c, c:tril(), 0)
  end)

  it('singular and indefinite matrices are errors or zeros, as PyTorch', function()
    local sing = ember.tensor({ { 1, 2 }, { 2, 4 } }, f64)
    H.assert_error(function() L.inv(sing) end, 'inv: the matrix is singular')
    H.assert_error(function() L.solve(sing, ember.ones(2, f64)) end, 'solve: the matrix is singular')
    H.assert_error(function() L.cholesky(ember.tensor({ { 1, 2 }, { 2, 1 } }, f64)) end,
      'cholesky: the matrix is not positive-definite (its leading minor of order 2 is not)')
    local batch = ember.eye(2, f64):expand(3, 2, 2):clone()
    batch[2]:zero_()
    H.assert_error(function() L.inv(batch) end, 'matrix 2 of the batch')
    H.assert_close(L.det(ember.zeros(2, 2, f64)), 0)
    local s, l = L.slogdet(sing)
    H.assert_close(s, 0)
    assert.are.equal(-math.huge, l:item())
  end)

  it('gradients of det at a singular matrix come from the adjugate', function()
    local a = ember.tensor({ { 1, 2 }, { 2, 4 } }, f64):requires_grad_()
    L.det(a):backward()
    H.assert_close(a.grad, { { 4, -2 }, { -2, 1 } }, 1e-9, 1e-9)   -- adj(A)^T
  end)

  it('gradcheck of inv, det, slogdet, solve, cholesky, eigh, svdvals, norms', function()
    local g = ember.autograd.gradcheck
    local function well() return (ember.randn(2, 2, 2, f64) + ember.eye(2, f64) * 3):requires_grad_() end
    assert.is_true(g(L.inv, { well() }))
    assert.is_true(g(L.det, { well() }))
    assert.is_true(g(function(a) local _, l = L.slogdet(a); return l end, { well() }))
    assert.is_true(g(L.solve, { well(), ember.randn(2, 2, 2, f64):requires_grad_() }))
    assert.is_true(g(function(a) return L.cholesky(a:matmul(a:transpose(2, 3))) end, { well() }))
    assert.is_true(g(function(a)
      local w, v = L.eigh(a + a:transpose(2, 3))
      return w + (v * v):sum(2)
    end, { well() }))
    assert.is_true(g(L.svdvals, { ember.randn(4, 3, f64):requires_grad_() }))
    assert.is_true(g(function(a) return L.matrix_norm(a, 'nuc') end, { ember.randn(3, 3, f64):requires_grad_() }))
    assert.is_true(g(function(a) return L.norm(a, 3, 1) end, { ember.randn(3, 3, f64):requires_grad_() }))
  end)

  it('zero-size matrices', function()
    assert.are.same({ 2, 0, 0 }, shape(L.inv(ember.zeros(2, 0, 0, f64))))
    H.assert_close(L.det(ember.zeros(2, 0, 0, f64)), { 1, 1 })
    local q, r = L.qr(ember.zeros(0, 3, f64))
    assert.are.same({ 0, 0 }, shape(q)); assert.are.same({ 0, 3 }, shape(r))
    local u, s, vh = L.svd(ember.zeros(3, 0, f64))
    assert.are.same({ 3, 3 }, shape(u)); assert.are.same({ 0 }, shape(s)); assert.are.same({ 0, 0 }, shape(vh))
    assert.are.same({ 0, 2 }, shape(L.solve(ember.zeros(0, 0, f64), ember.zeros(0, 2, f64))))
    assert.are.same({ 0 }, shape(L.eigvalsh(ember.zeros(0, 0, f64))))
    H.assert_close(L.lstsq(ember.zeros(0, 2, f64), ember.zeros(0, 1, f64)), { { 0 }, { 0 } })
  end)

  it('gradcheck of qr, svd and lstsq; no gradient where PyTorch has none', function()
    local g = ember.autograd.gradcheck
    assert.is_true(g(function(a) local q, r = L.qr(a); return q:sum(1) + r:sum(1) end,
      { ember.randn(4, 3, f64):requires_grad_() }))
    assert.is_true(g(function(a) local q, r = L.qr(a); return q:sum(1) + r:sum(2) end,
      { ember.randn(2, 4, f64):requires_grad_() }))
    assert.is_true(g(function(a)
      local u, s, vh = L.svd(a, { full_matrices = false })
      return (u:matmul(vh) * 2):sum(2) + s
    end, { ember.randn(3, 4, f64):requires_grad_() }))
    assert.is_true(g(L.lstsq, { ember.randn(4, 2, f64):requires_grad_(), ember.randn(4, 2, f64):requires_grad_() }))
    local a = ember.randn(4, 3, f64):requires_grad_()
    local q = L.qr(a, 'complete')
    H.assert_error(function() q:sum():backward() end, "qr: backward not implemented for mode 'complete' with more rows")
    H.assert_error(function() L.qr(a, 'r') end, "qr: mode 'r' has no gradient")
    ember.no_grad(function() assert.are.same({ 3, 3 }, shape(select(2, L.qr(a, 'r')))) end)
  end)

  it('errors', function()
    H.assert_error(function() L.inv(ember.zeros(2, 3)) end, 'inv: expected square matrices, got 2 x 3')
    H.assert_error(function() L.inv(ember.zeros(3)) end, 'inv: expected the input to have at least 2 dims, got 1-d')
    H.assert_error(function() L.det(ember.zeros(2, 2, { dtype = 'int64' })) end, 'det: expected float32 or float64 the input, got int64')
    H.assert_error(function() L.solve(ember.eye(2), ember.ones(3)) end, 'solve: A is 2 x 2 but B has 3 rows')
    H.assert_error(function() L.solve(ember.eye(2), ember.ones(2, f64)) end, 'solve: expected A and B of one dtype')
    H.assert_error(function() L.cholesky(ember.eye(2), { uper = true }) end, 'cholesky: unknown option uper (did you mean upper?')
    H.assert_error(function() L.qr(ember.eye(2), 'full') end, "qr: expected mode 'reduced', 'complete' or 'r'")
    H.assert_error(function() L.matrix_norm(ember.eye(2), 3) end, 'matrix_norm: unsupported ord 3')
    H.assert_error(function() L.vector_norm(ember.ones(2, { dtype = 'int64' })) end, 'vector_norm: expected a floating-point tensor')
    H.assert_error(function() L.vector_norm(ember.zeros(2, 0), math.huge, 2) end,
      'vector_norm: cannot reduce over an empty dimension')
    H.assert_error(function() L.matrix_norm(ember.zeros(2, 0), 1) end, 'matrix_norm: cannot reduce over an empty dimension')
    -- positions point at the caller's line
    local ok, err = pcall(function() return L.inv(ember.zeros(2, 3)) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('linalg_ext_spec.lua:%d+: inv: expected square'), err)
  end)

  it('C callers get an error, not a result cut from the graph, when grad mode would record', function()
    local a = ember.eye(2, f64):requires_grad_()
    local ok, err = pcall(function() return require('ember.core').own(ember.C.em_linalg_inv(a.ptr)) end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find('inv: its gradient is defined by ember.linalg in Lua', 1, true))
  end)
end)

local VK = require('vk_helpers').open('linalg on vulkan')
if not VK then return end

describe('linalg on vulkan', function()
  it('decompositions say they are not implemented there', function()
    local a = VK.on(ember.eye(3))
    for _, name in ipairs({ 'inv', 'det', 'cholesky', 'svdvals', 'eigvalsh', 'logdet' }) do
      H.assert_error(function() L[name](a) end, name .. ': not implemented on vulkan')
    end
    H.assert_error(function() L.qr(a) end, 'qr: not implemented on vulkan')
    H.assert_error(function() L.solve(a, a) end, 'solve: not implemented on vulkan')
    H.assert_error(function() L.matrix_norm(a, 2) end, 'matrix_norm: not implemented on vulkan')
    H.assert_error(function() a:matrix_power(-1) end, 'matrix_power: not implemented on vulkan')
  end)
  it('norms run there', function()
    local x = ember.randn(3, 4)
    for _, o in ipairs({ 2, 1, math.huge, 0, 3 }) do
      VK.agree(L.vector_norm(VK.on(x), o, 2), L.vector_norm(x, o, 2), 'vector_norm ' .. o, true)
    end
    for _, o in ipairs({ 'fro', 1, -1, 'inf' }) do
      VK.agree(L.matrix_norm(VK.on(x), o), L.matrix_norm(x, o), 'matrix_norm ' .. o, true)
    end
    VK.agree(L.norm(VK.on(x)), L.norm(x), 'norm', true)
  end)
end)
