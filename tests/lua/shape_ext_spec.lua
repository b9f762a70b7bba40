-- Shaping functions (lua/ember/ops/shape_ext.lua) and the products of ops/linalg_ext.lua
-- against PyTorch's values and gradients (tests/lua/golden/make_shape_linalg.py), plain-loop
-- references, zero-size and strided inputs, errors, and on Vulkan against the CPU.
local H = require 'helpers'
local GC = require 'golden_cases'
local ember = H.ember
local f64 = { dtype = 'float64' }
local function shape(t) local s = {}; for i = 1, t:dim() do s[i] = t:size(i) end; return s end

describe('shaping against PyTorch', function()
  local cases = {
    diag1 = function(x) return x:diag(1) end,
    diag2 = function(x) return ember.diag(x, -1) end,
    diagonal = function(x) return x:diagonal(1, 1, 3) end,
    diagonal_neg = function(x) return x:diagonal(-2, 3, 2) end,
    diag_embed = function(x) return x:diag_embed(-1, 1, 3) end,
    trace = function(x) return x:trace() end,
    movedim = function(x) return x:movedim({ 1, 2 }, { 3, 1 }) end,
    tile = function(x) return x:tile(2, 1, 2) end,
    rot90 = function(x) return x:rot90(3, { 2, 3 }) end,
    unflatten = function(x) return x:unflatten(2, { 2, -1 }) end,
    kron = function(a, b) return ember.kron(a, b) end,
    cross = function(a, b) return a:cross(b, 2) end,
    cdist2 = function(a, b) return ember.cdist(a, b) end,
    cdist1 = function(a, b) return ember.cdist(a, b, 1) end,
    cdist3 = function(a, b) return ember.cdist(a, b, 3) end,
    einsum_bmm = function(a, b) return ember.einsum('bij,bjk->bik', a, b) end,
    einsum_diag = function(a) return ember.einsum('ii->i', a) end,
    einsum_outer = function(a, b) return ember.einsum('i,j', a, b) end,
    einsum_ellipsis = function(a, b) return ember.einsum('...ij,...jk', a, b) end,
    einsum_sum = function(a) return ember.einsum('ijk->kj', { a }) end,
    einsum_bilinear = function(a, b, c) return ember.einsum('bn,anm,bm->ba', a, b, c) end,
    einsum_trace = function(a, b) return ember.einsum('ij,ji', a, b) end,
    tensordot = function(a, b) return ember.tensordot(a, b, { { 2, 3 }, { 2, 1 } }) end,
    tensordot_n = function(a, b) return ember.tensordot(a, b, 1) end,
    addmv = function(c, a, v) return c:addmv(a, v, { beta = 0.5, alpha = 2 }) end,
    addr = function(c, u, v) return ember.addr(c, u, v, { beta = 0.5, alpha = 2 }) end,
    matrix_power3 = function(a) return a:matrix_power(3) end,
    matrix_power_neg = function(a) return ember.linalg.matrix_power(a, -2) end,
  }
  for name, f in pairs(cases) do
    it(name, function() GC.run(name, f) end)
  end
  it('repeat_interleave', function()
    GC.run('repeat_interleave', function(x)
      return x:repeat_interleave(ember.tensor({ 1, 0, 2 }, { dtype = 'int64' }), 2)
    end)
  end)
  it('logspace', function()
    H.assert_close(ember.logspace(-1, 2, 5, 3, f64), GC.get('logspace.out1'):totable(), 1e-12, 0)
  end)
end)

describe('shaping by hand', function()
  it('diagonal is a view of a contiguous tensor, and works on transposed input', function()
    local x = ember.arange(0, 12, 1, f64):view(3, 4)
    local d = x:diagonal()
    assert.is_true(d:is_same_storage(x))
    H.assert_close(d, { 0, 5, 10 })
    H.assert_close(x:t():diagonal(1), { 4, 9 })
    H.assert_close(x:diagonal(5), {})
    H.assert_close(x:diagonal(-3), {})
  end)

  it('zero-size inputs', function()
    assert.are.same({ 0, 0 }, shape(ember.zeros(0, f64):diag()))
    assert.are.same({ 2, 0 }, shape(ember.zeros(2, 0, 3, f64):diagonal(0, 2, 3)))
    assert.are.same({ 0, 2, 2 }, shape(ember.zeros(0, 2, f64):diag_embed()))
    assert.are.same({ 0, 6 }, shape(ember.zeros(0, 3, f64):tile(2, 2)))
    assert.are.same({}, ember.zeros(0, 3):unbind(1))
    assert.are.equal(3, #ember.zeros(0, 3):unbind(2))
    assert.are.same({ 0, 3 }, shape(ember.kron(ember.zeros(0, 3), ember.ones(2, 1))))
    local pieces = ember.zeros(5, 0):tensor_split(3)
    assert.are.same({ 2, 0 }, shape(pieces[1]))
    assert.are.same({ 1, 0 }, shape(pieces[3]))
    H.assert_close(ember.einsum('ij,jk->ik', ember.zeros(2, 0), ember.zeros(0, 3)),
      { { 0, 0, 0 }, { 0, 0, 0 } })
  end)

  it('tril_indices and triu_indices are 1-based', function()
    H.assert_close(ember.tril_indices(3, 3), { { 1, 2, 2, 3, 3, 3 }, { 1, 1, 2, 1, 2, 3 } })
    H.assert_close(ember.triu_indices(2, 4, 1), { { 1, 1, 1, 2, 2 }, { 2, 3, 4, 3, 4 } })
    H.assert_close(ember.tril_indices(3, 2, -1), { { 2, 3, 3 }, { 1, 1, 2 } })
    assert.are.equal('int64', ember.tril_indices(2, 2):dtype())
    assert.are.same({ 2, 0 }, shape(ember.triu_indices(0, 3)))
    -- the indices pick the triangle that tril keeps
    local x = ember.randn(4, 5)
    local idx = ember.tril_indices(4, 5, 1)
    local picked = x:index_put({ idx[1], idx[2] }, 0)
    H.assert_close(picked + x:tril(1), x:totable(), 0, 0)
  end)

  it('unbind, tensor_split, hstack/vstack/dstack', function()
    local x = ember.arange(0, 6, 1, f64):view(2, 3)
    local u = x:unbind(2)
    assert.are.equal(3, #u)
    H.assert_close(u[2], { 1, 4 })
    local s = ember.arange(0, 7, 1, f64):tensor_split(3)
    H.assert_close(s[1], { 0, 1, 2 }); H.assert_close(s[2], { 3, 4 }); H.assert_close(s[3], { 5, 6 })
    s = ember.arange(0, 7, 1, f64):tensor_split({ 1, 5, 3 })   -- PyTorch's split points
    H.assert_close(s[1], { 0 }); H.assert_close(s[2], { 1, 2, 3, 4 }); H.assert_close(s[3], {})
    H.assert_close(s[4], { 3, 4, 5, 6 })
    local a, b = ember.tensor({ 1, 2 }, f64), ember.tensor({ 3, 4 }, f64)
    H.assert_close(ember.hstack({ a, b }), { 1, 2, 3, 4 })
    H.assert_close(ember.vstack({ a, b }), { { 1, 2 }, { 3, 4 } })
    H.assert_close(ember.dstack({ a, b }), { { { 1, 3 }, { 2, 4 } } })
    H.assert_close(ember.hstack({ x, x }), { { 0, 1, 2, 0, 1, 2 }, { 3, 4, 5, 3, 4, 5 } })
    H.assert_close(ember.column_stack({ a, b }), { { 1, 3 }, { 2, 4 } })
  end)

  it('movedim, broadcast_to, broadcast_tensors, meshgrid', function()
    assert.are.same({ 4, 2, 3 }, shape(ember.zeros(2, 3, 4):movedim(3, 1)))
    assert.are.same({ 3, 4, 2 }, shape(ember.zeros(2, 3, 4):movedim(1, -1)))
    local b = ember.tensor({ 1, 2, 3 }, f64):broadcast_to(2, 3)
    H.assert_close(b, { { 1, 2, 3 }, { 1, 2, 3 } })
    local bt = ember.broadcast_tensors(ember.zeros(3, 1), ember.zeros(1, 4), ember.zeros(4))
    for _, t in ipairs(bt) do assert.are.same({ 3, 4 }, shape(t)) end
    assert.are.same({ 2, 3, 4 }, { unpack(ember.broadcast_shapes({ 3, 1 }, { 2, 1, 4 })) })
    local g = ember.meshgrid(ember.tensor({ 1, 2 }, f64), ember.tensor({ 3, 4, 5 }, f64))
    H.assert_close(g[1], { { 1, 1, 1 }, { 2, 2, 2 } })
    H.assert_close(g[2], { { 3, 4, 5 }, { 3, 4, 5 } })
    g = ember.meshgrid({ ember.tensor({ 1, 2 }, f64), ember.tensor({ 3, 4, 5 }, f64) }, { indexing = 'xy' })
    assert.are.same({ 3, 2 }, shape(g[1]))
    H.assert_close(g[1], { { 1, 2 }, { 1, 2 }, { 1, 2 } })
  end)

  it('as_strided views the storage and has a gradient that accumulates overlaps', function()
    local x = ember.arange(0, 6, 1, f64)
    local v = x:as_strided({ 2, 3 }, { 1, 2 })
    H.assert_close(v, { { 0, 2, 4 }, { 1, 3, 5 } })
    assert.is_true(v:is_same_storage(x))
    local w = ember.tensor({ 1, 2, 3, 4 }, f64):requires_grad_()
    local o = w:as_strided({ 3, 2 }, { 1, 1 })   -- overlapping windows [1,2], [2,3], [3,4]
    H.assert_close(o, { { 1, 2 }, { 2, 3 }, { 3, 4 } })
    o:sum():backward()
    H.assert_close(w.grad, { 1, 2, 2, 1 })
    assert.is_true(ember.autograd.gradcheck(function(t)
      return t:as_strided({ 2, 2 }, { 1, 2 }, 1) * 3
    end, { ember.randn(6, f64):requires_grad_() }))
    H.assert_error(function() x:as_strided({ 4 }, { 2 }) end, 'outside its storage')
  end)

  it('new_zeros/new_ones/new_full/new_tensor/type_as keep dtype and device', function()
    local x = ember.zeros(2, f64)
    local z = x:new_zeros(3, 4)
    assert.are.equal('float64', z:dtype())
    assert.are.same({ 3, 4 }, shape(z))
    assert.are.equal('int32', x:new_ones({ 2 }, { dtype = 'int32' }):dtype())
    H.assert_close(x:new_full({ 2 }, 7), { 7, 7 })
    assert.are.equal('float64', x:new_tensor({ 1, 2 }):dtype())
    assert.are.equal('float64', ember.ones(2):type_as(x):dtype())
    H.assert_error(function() x:new_zeros(2, { dtpye = 'int32' }) end, 'unknown option dtpye (did you mean dtype?')
  end)

  it('repeat_interleave with a scalar, without dim, and the counts form', function()
    local x = ember.tensor({ { 1, 2 }, { 3, 4 } }, f64)
    H.assert_close(x:repeat_interleave(2), { 1, 1, 2, 2, 3, 3, 4, 4 })
    H.assert_close(x:repeat_interleave(ember.tensor({ 2, 1 }, { dtype = 'int64' }), 1),
      { { 1, 2 }, { 1, 2 }, { 3, 4 } })
    H.assert_close(ember.repeat_interleave(ember.tensor({ 2, 0, 1 }, { dtype = 'int64' })), { 1, 1, 3 })
  end)

  it('einsum gradients against finite differences', function()
    local a = ember.randn(2, 3, f64):requires_grad_()
    local b = ember.randn(3, 3, f64):requires_grad_()
    assert.is_true(ember.autograd.gradcheck(function(p, q)
      return ember.einsum('ij,jj,kj->ik', p, q, p)
    end, { a, b }))
  end)

  it('errors name the function and what it got', function()
    H.assert_error(function() ember.zeros(3):diagonal() end, 'diagonal: expected a tensor of at least 2 dims')
    H.assert_error(function() ember.zeros(2, 3):diagonal(0, 1, 1) end, 'dim1 and dim2 must differ')
    H.assert_error(function() ember.zeros(2, 2, 2):trace() end, 'trace: expected a 2-D tensor, got 3-d')
    H.assert_error(function() ember.zeros(2, 2, 2):diag() end, 'diag: expected a 1-D or 2-D tensor, got 3-d')
    H.assert_error(function() ember.zeros(2, 3):movedim(0, 1) end, 'dimensions are 1-based')
    H.assert_error(function() ember.zeros(6):unflatten(1, { 4, -1 }) end, 'do not multiply')
    H.assert_error(function() ember.einsum('ij,jk', ember.zeros(2, 3), ember.zeros(4, 2)) end,
      'einsum: label j has size 4 in operand 2 but 3 before')
    H.assert_error(function() ember.einsum('ij', ember.zeros(2)) end, 'einsum: the term "ij" has 2 labels')
    H.assert_error(function() ember.cross(ember.zeros(2, 2), ember.zeros(2, 2)) end, 'cross: no dimension of size 3')
    H.assert_error(function() ember.zeros(2, 3):matrix_power(2) end, 'matrix_power: expected square matrices')
    H.assert_error(function() ember.cdist(ember.zeros(2, 3, 4), ember.zeros(3, 3, 4)) end, 'cdist: shapes')
    H.assert_error(function() ember.einsum('ij,jk', ember.zeros(2, 3), ember.zeros(3, 2, f64)) end,
      'einsum: expected both operands to have the same dtype')
    H.assert_error(function() ember.meshgrid(ember.zeros(2), { indexing = 'yx' }) end, "expected indexing 'ij' or 'xy'")
    H.assert_error(function() ember.tensordot(ember.zeros(2, 3), ember.zeros(4), { { 2 }, { 1 } }) end,
      'contracted dims 2 of a and 1 of b have sizes 3 and 4')
  end)
end)

describe('layouts', function()
  -- Each function on a transposed, a sliced and an expanded (stride 0) input gives what it
  -- gives on a contiguous copy of the same values.
  local i64 = { dtype = 'int64' }
  local fns = {
    diagonal = function(x) return x:diagonal(1) end,
    diag_embed = function(x) return x:diag_embed(-1) end,
    trace = function(x) return x:trace() end,
    movedim = function(x) return x:movedim(1, 2) end,
    tile = function(x) return x:tile(2, 1) end,
    rot90 = function(x) return x:rot90(1) end,
    repeat_interleave = function(x) return x:repeat_interleave(2, 2) end,
    unflatten = function(x) return x:unflatten(2, { 2, 2 }) end,
    kron = function(x) return ember.kron(x, x) end,
    einsum = function(x) return ember.einsum('ij,kj->ik', x, x) end,
    tensordot = function(x) return ember.tensordot(x, x, { { 2 }, { 2 } }) end,
    cdist = function(x) return ember.cdist(x, x:narrow(1, 1, 2)) end,
    take = function(x) return x:take(ember.tensor({ 1, 6, 16 }, i64)) end,
    take_along_dim = function(x) return x:take_along_dim(ember.tensor({ { 2 }, { 1 }, { 4 }, { 3 } }, i64), 2) end,
    index_put = function(x) return x:index_put({ ember.tensor({ 2, 4 }, i64) }, 1, true) end,
    scatter_reduce = function(x)
      return x:scatter_reduce(2, ember.tensor({ { 1, 1 }, { 2, 4 }, { 3, 3 }, { 4, 1 } }, i64), x, 'amax')
    end,
    masked_scatter = function(x) return x:masked_scatter(ember.tensor({ true, false, true, false }), x) end,
    vector_norm = function(x) return ember.linalg.vector_norm(x, 3, 1) end,
    matrix_norm = function(x) return ember.linalg.matrix_norm(x, 'nuc') end,
    inv = function(x) return ember.linalg.inv(x + ember.eye(4, f64) * 5) end,
    solve = function(x) return ember.linalg.solve(x + ember.eye(4, f64) * 5, x) end,
    det = function(x) return ember.linalg.det(x) end,
    qr = function(x) return ember.linalg.qr(x) end,
    eigvalsh = function(x) return ember.linalg.eigvalsh(x) end,
  }
  local base = ember.randn(4, 4, f64)
  local layouts = {
    transposed = base:t():contiguous():t(),
    sliced = ember.randn(4, 8, f64):slice(2, 1, 8, 2),
    expanded = ember.randn(1, 4, f64):expand(4, 4),
  }
  for lname, x in pairs(layouts) do
    it(lname, function()
      assert.is_false(x:is_contiguous())
      for name, f in pairs(fns) do
        H.assert_close(f(x), f(x:contiguous()):totable(), 1e-12, 1e-12, lname .. ' ' .. name)
      end
    end)
  end
end)

describe('reference entries', function()
  it('every function of the shaping, indexing and linalg extras has a ?name entry', function()
    local repl = require 'ember.repl'
    local names = { 'diag', 'diagonal', 'diag_embed', 'trace', 'tril_indices', 'triu_indices',
      'movedim', 'unbind', 'unflatten', 'tensor_split', 'hstack', 'vstack', 'dstack', 'tile',
      'repeat_interleave', 'rot90', 'broadcast_to', 'broadcast_tensors', 'meshgrid', 'as_strided',
      'new_zeros', 'new_ones', 'new_full', 'type_as', 'logspace', 'take', 'take_along_dim',
      'index_put', 'scatter_reduce', 'masked_scatter', 'einsum', 'tensordot', 'kron', 'cross',
      'cdist', 'addmv', 'addr', 'matrix_power', 'linalg.norm', 'linalg.vector_norm',
      'linalg.matrix_norm', 'linalg.inv', 'linalg.det', 'linalg.slogdet', 'linalg.solve',
      'linalg.cholesky', 'linalg.qr', 'linalg.svd', 'linalg.eigh', 'linalg.lstsq' }
    for _, n in ipairs(names) do
      local text, found = repl.help_text(n)
      assert(found ~= false, n .. ': ' .. tostring(text))
      assert.is_function(n:find('^linalg') and ember.linalg[n:sub(8)] or ember[n], n)
    end
  end)
end)

local VK = require('vk_helpers').open('shaping on vulkan')
if not VK then return end

describe('shaping on vulkan against the cpu', function()
  local function both(f, ...)
    local cpu = { ... }
    local dev = {}
    for i, t in ipairs(cpu) do dev[i] = VK.on(t) end
    VK.agree(f(unpack(dev)), f(unpack(cpu)), 'vulkan', true)
  end
  it('composed functions run on the device', function()
    local x = ember.randn(3, 4)
    both(function(t) return t:diagonal(1) end, x)
    both(function(t) return t:diag_embed(1) end, ember.randn(2, 3))
    both(function(t) return t:t():rot90() end, x)
    both(function(t) return t:tile(2, 2) end, x)
    both(function(t) return t:repeat_interleave(2, 1) end, x)
    both(function(a, b) return ember.einsum('ij,kj->ik', a, b) end, x, ember.randn(5, 4))
    both(function(a, b) return ember.kron(a, b) end, x, ember.randn(2, 2))
    both(function(a, b) return ember.cross(a, b) end, ember.randn(4, 3), ember.randn(4, 3))
    both(function(a, b) return ember.cdist(a, b) end, ember.randn(4, 3), ember.randn(5, 3))
    both(function(a) return a:matrix_power(3) end, ember.randn(3, 3))
    both(function(a) return ember.linalg.vector_norm(a, math.huge, 2) end, x)
    both(function(a) return ember.linalg.matrix_norm(a, 1) end, x)
  end)
  it('gradients flow on the device', function()
    local x = VK.on(ember.randn(3, 3)):requires_grad_()
    ember.einsum('ii', x):backward()
    VK.agree(x.grad, ember.eye(3), 'trace grad')
  end)
end)
