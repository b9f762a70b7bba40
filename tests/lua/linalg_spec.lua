-- Matrix products (matmul, mm, mv, bmm, dot, outer, addmm, baddbmm) against plain Lua loops in
-- double precision. Each product is checked on contiguous, transposed, sliced, offset-block
-- and expanded (stride-0) operands, on sizes that take the direct loop, gemv/dot and gemm
-- paths, for floating and integer dtypes, and every documented error is provoked.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'

-- ---- the reference ------------------------------------------------------------------------

-- A tensor's values as a flat Lua array (row-major) and its shape.
local function flat(x)
  local s = x:size()
  local shape = {}
  for i = 1, #s do shape[i] = s[i] end
  if x:numel() == 0 then return {}, shape end
  return H.flatten(x:totable()), shape
end

local function prod(t, i, j)
  local p = 1
  for k = i or 1, j or #t do p = p * t[k] end
  return p
end

-- NumPy matmul of flat arrays: 1-D operands become a row / a column and the added dim is
-- dropped; batch dims broadcast. Returns values and shape of beta * c + alpha * (a @ b), where
-- c (optional, flat with its shape) broadcasts to the result.
local function ref_matmul(av, ash, bv, bsh, opts)
  opts = opts or {}
  local as, bs = { unpack(ash) }, { unpack(bsh) }
  local drop_m, drop_n = #as == 1, #bs == 1
  if drop_m then as = { 1, as[1] } end
  if drop_n then bs = { bs[1], 1 } end
  local M, K, N = as[#as - 1], as[#as], bs[#bs]
  assert(K == bs[#bs - 1], 'reference: inner sizes differ')
  local na, nb = #as - 2, #bs - 2
  local n = math.max(na, nb)
  local batch = {}
  for i = 1, n do
    local x = as[i - (n - na)] or 1
    local y = bs[i - (n - nb)] or 1
    if i - (n - na) < 1 then x = 1 end
    if i - (n - nb) < 1 then y = 1 end
    batch[i] = x == 1 and y or x
  end
  -- linear index of a batch position in an operand with (right-aligned) batch dims
  local function batch_index(shape, nbd, idx)
    local lin = 0
    for d = 1, nbd do
      local size = shape[d]
      local i = idx[d + (n - nbd)]
      lin = lin * size + (size == 1 and 0 or i)
    end
    return lin
  end
  local out = {}
  local idx = {}
  for d = 1, n do idx[d] = 0 end
  local total = prod(batch)
  for _ = 1, total do
    local ab = batch_index(as, na, idx) * M * K
    local bb = batch_index(bs, nb, idx) * K * N
    for i = 0, M - 1 do
      for j = 0, N - 1 do
        local s = 0
        for k = 0, K - 1 do s = s + av[ab + i * K + k + 1] * bv[bb + k * N + j + 1] end
        out[#out + 1] = s
      end
    end
    for d = n, 1, -1 do
      idx[d] = idx[d] + 1
      if idx[d] < batch[d] then break end
      idx[d] = 0
    end
  end
  local shape = {}
  for i = 1, n do shape[i] = batch[i] end
  if not drop_m then shape[#shape + 1] = M end
  if not drop_n then shape[#shape + 1] = N end
  local alpha, beta = opts.alpha or 1, opts.beta or 1
  if opts.c or alpha ~= 1 then
    -- broadcast c (right-aligned) onto the result
    local cv, cs = opts.c, opts.c_shape
    local strides, acc = {}, 1
    for d = #shape, 1, -1 do strides[d] = acc; acc = acc * shape[d] end
    for lin = 0, #out - 1 do
      local r = alpha * out[lin + 1]
      if cv and beta ~= 0 then
        local ci, rest = 0, lin
        local coords = {}
        for d = 1, #shape do coords[d] = math.floor(rest / strides[d]); rest = rest % strides[d] end
        for d = 1, #cs do
          local size = cs[d]
          local coord = coords[d + #shape - #cs]
          ci = ci * size + (size == 1 and 0 or coord)
        end
        r = r + beta * cv[ci + 1]
      end
      out[lin + 1] = r
    end
  end
  return out, shape
end

-- Checks a result against reference values and shape.
local function check(x, ev, es, rtol, atol, what)
  local gv, gs = flat(x)
  assert.are.same(es, gs, (what or '') .. ': shape')
  for i = 1, #ev do
    local g, e = gv[i], ev[i]
    if not (g == e or math.abs(g - e) <= (atol or 0) + (rtol or 0) * math.abs(e)) then
      error(('%s: element %d: got %.17g, expected %.17g'):format(what or '', i, g, e), 2)
    end
  end
end

-- Checks op(a, b) against the reference computed from the operands' own values.
local function check_product(op, a, b, rtol, atol, what)
  local av, ash = flat(a)
  local bv, bsh = flat(b)
  local ev, es = ref_matmul(av, ash, bv, bsh)
  check(op(a, b), ev, es, rtol, atol, what)
end

-- ---- operands in several layouts ------------------------------------------------------------

local function ints(lo, hi) return function() return math.floor(H.uniform(lo, hi + 1)) end end

-- rows x cols values of the dtype's kind
local function values(rows, cols, dtype)
  local f = (dtype and dtype:match('int')) and ints(-9, 9) or function() return H.uniform(-2, 2) end
  return H.nested({ rows, cols }, f)
end

local function transpose(t, rows, cols)
  local r = {}
  for j = 1, cols do
    r[j] = {}
    for i = 1, rows do r[j][i] = t[i][j] end
  end
  return r
end

-- The same [rows, cols] matrix laid out five ways: {name, tensor}.
local function layouts(rows, cols, dtype)
  local t = values(rows, cols, dtype)
  local o = { dtype = dtype }
  local out = { { 'contiguous', ember.tensor(t, o) } }
  out[#out + 1] = { 'transposed', ember.tensor(transpose(t, rows, cols), o):t() }
  local wide = {}
  for i = 1, rows do
    wide[i] = {}
    for j = 1, cols do wide[i][2 * j - 1] = t[i][j]; wide[i][2 * j] = 7 end
  end
  out[#out + 1] = { 'sliced', ember.tensor(wide, o)[{ {}, { 1, -1, 2 } }] }
  -- a block inside a bigger matrix: offset != 0 and a row stride larger than cols
  local big = H.nested({ rows + 2, cols + 3 }, function() return 5 end)
  for i = 1, rows do for j = 1, cols do big[i + 1][j + 2] = t[i][j] end end
  out[#out + 1] = { 'block', ember.tensor(big, o)[{ { 2, rows + 1 }, { 3, cols + 2 } }] }
  -- expanded: one row repeated (row stride 0)
  out[#out + 1] = { 'expanded', ember.tensor({ t[1] }, o):expand(rows, cols) }
  return out
end

-- A vector of n values three ways: contiguous, strided (every other element), expanded.
local function vectors(n, dtype)
  local t = H.flatten(values(1, n, dtype))
  local o = { dtype = dtype }
  local wide = {}
  for i = 1, n do wide[2 * i - 1] = t[i]; wide[2 * i] = 3 end
  return {
    { 'contiguous', ember.tensor(t, o) },
    { 'strided', ember.tensor(wide, o)[{ { 1, -1, 2 } }] },
    { 'expanded', ember.tensor({ t[1] }, o):expand(n) },
  }
end

local tol = {
  float32 = { 1e-5, 1e-4 }, float64 = { 1e-12, 1e-12 },
  float16 = { 4e-3, 2e-2 }, bfloat16 = { 2e-2, 1e-1 },
  int64 = { 0, 0 }, int32 = { 0, 0 }, int16 = { 0, 0 }, int8 = { 0, 0 }, uint8 = { 0, 0 },
}

-- ---- mm and the layouts ---------------------------------------------------------------------

describe('mm', function()
  -- (M, K, N): the direct loop (M*N*K <= 64), gemm, and sizes crossing BLAS's blocking
  local sizes = { { 3, 4, 5 }, { 2, 4, 3 }, { 9, 11, 7 }, { 70, 130, 90 } }

  for _, dtype in ipairs({ 'float32', 'float64', 'int64', 'int32' }) do
    it('multiplies every pair of layouts (' .. dtype .. ')', function()
      H.seed(11)
      for _, s in ipairs(sizes) do
        local M, K, N = s[1], s[2], s[3]
        local big = M * K * N > 100000
        for ia, la in ipairs(layouts(M, K, dtype)) do
          for ib, lb in ipairs(layouts(K, N, dtype)) do
            -- the big size: every layout of a against contiguous b, and the reverse
            if not big or ia == 1 or ib == 1 then
              check_product(ember.mm, la[2], lb[2], tol[dtype][1], tol[dtype][2],
                ('%s %dx%dx%d %s @ %s'):format(dtype, M, K, N, la[1], lb[1]))
            end
          end
        end
      end
    end)
  end

  for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
    it('computes ' .. dtype .. ' through float32', function()
      H.seed(12)
      for _, s in ipairs({ { 2, 3, 2 }, { 8, 20, 6 } }) do
        for _, la in ipairs(layouts(s[1], s[2], dtype)) do
          local b = layouts(s[2], s[3], dtype)[2][2]
          local r = ember.mm(la[2], b)
          assert.are.equal(dtype, r:dtype())
          check_product(ember.mm, la[2], b, tol[dtype][1], tol[dtype][2], dtype .. ' ' .. la[1])
        end
      end
    end)
  end

  it('keeps the dtype, and int8 wraps like PyTorch', function()
    local a = ember.tensor({ { 100, 1 } }, { dtype = 'int8' })
    local b = ember.tensor({ { 2 }, { 3 } }, { dtype = 'int8' })
    local r = ember.mm(a, b)
    assert.are.equal('int8', r:dtype())
    assert.are.equal(-53, r:item()) -- 203 wraps to -53
    local u = ember.mm(ember.tensor({ { 200 } }, { dtype = 'uint8' }),
      ember.tensor({ { 2 } }, { dtype = 'uint8' }))
    assert.are.equal(144, u:item()) -- 400 mod 256
  end)

  it('is exact for int64 beyond 2^53', function()
    local x, y = 2 ^ 31 + 1, 2 ^ 31 + 3
    local a = ember.tensor({ { x, 1 } }, { dtype = 'int64' })
    local b = ember.tensor({ { y }, { 5 } }, { dtype = 'int64' })
    local got = ember.mm(a, b)[1]:select(1, 1):item_int64()
    local want = ffi.cast('int64_t', x) * ffi.cast('int64_t', y) + 5
    assert.is_true(got == want, tostring(got) .. ' ~= ' .. tostring(want))
  end)

  it('gives zeros for K = 0 and empty results for M = 0 or N = 0', function()
    for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'int64' }) do
      local o = { dtype = dtype }
      local r = ember.mm(ember.zeros(3, 0, o), ember.zeros(0, 4, o))
      check(r, H.flatten(H.nested({ 3, 4 }, function() return 0 end)), { 3, 4 }, 0, 0, dtype)
      assert.are.same({ 0, 4 }, { ember.mm(ember.zeros(0, 5, o), ember.zeros(5, 4, o)):size(1), 4 })
      local e = ember.mm(ember.zeros(3, 5, o), ember.zeros(5, 0, o))
      assert.are.same({ 3, 0 }, { e:size(1), e:size(2) })
      assert.are.equal(0, e:numel())
    end
  end)

  it('never lets garbage in a fresh output through', function()
    -- freed NaN buffers get reused by the allocator; beta = 0 must not read them
    for _ = 1, 3 do
      local junk = ember.full({ 40, 50 }, 0 / 0)
      junk = nil
      collectgarbage()
      collectgarbage()
      for _, s in ipairs({ { 40, 30, 50 }, { 1, 2000, 1 }, { 2000, 30, 1 }, { 1, 30, 2000 } }) do
        local r = ember.mm(ember.ones(s[1], s[2]), ember.ones(s[2], s[3]))
        local v = flat(r)
        for i = 1, #v do assert.are.equal(s[2], v[i]) end
      end
    end
  end)
end)

-- ---- matmul's rank combinations -------------------------------------------------------------

describe('matmul', function()
  local function rand(shape, dtype)
    local f = (dtype and dtype:match('int')) and ints(-9, 9) or function() return H.uniform(-2, 2) end
    if #shape == 0 then return ember.tensor(f(), { dtype = dtype }) end
    if prod(shape) == 0 then return ember.zeros(shape, { dtype = dtype }) end
    return ember.tensor(H.nested(shape, f), { dtype = dtype })
  end

  local cases = {
    { {5}, {5} },                  -- dot -> 0-d
    { {3, 5}, {5} },               -- mv
    { {5}, {5, 4} },               -- row vector
    { {3, 5}, {5, 4} },            -- mm
    { {2, 3, 5}, {5} },            -- batched mv
    { {5}, {2, 5, 4} },            -- vector @ batch
    { {2, 3, 5}, {5, 4} },         -- shared right matrix (folded into one gemm)
    { {3, 5}, {2, 5, 4} },         -- shared left matrix
    { {2, 3, 5}, {2, 5, 4} },      -- bmm
    { {2, 1, 3, 5}, {4, 5, 2} },   -- batch dims broadcast both ways
    { {1, 2, 3, 5}, {3, 1, 5, 2} },
    { {2, 3, 4, 6}, {6, 5} },
    { {3, 40, 70}, {70, 30} },     -- big enough for BLAS, folded
    { {3, 40, 70}, {3, 70, 30} },
    { {0, 3, 5}, {5, 4} },          -- empty batch
    { {2, 3, 0}, {0, 4} },          -- K = 0
  }

  for _, dtype in ipairs({ 'float32', 'float64', 'int64' }) do
    it('follows NumPy rules for every rank combination (' .. dtype .. ')', function()
      H.seed(21)
      for _, c in ipairs(cases) do
        local a, b = rand(c[1], dtype), rand(c[2], dtype)
        check_product(ember.matmul, a, b, tol[dtype][1], tol[dtype][2],
          ('%s [%s] @ [%s]'):format(dtype, table.concat(c[1], ','), table.concat(c[2], ',')))
        check_product(function(x, y) return x:matmul(y) end, a, b, tol[dtype][1], tol[dtype][2])
      end
    end)
  end

  it('returns a 0-d tensor for two vectors', function()
    local r = ember.matmul(ember.tensor{ 1, 2, 3 }, ember.tensor{ 4, 5, 6 })
    assert.are.equal(0, r:dim())
    assert.are.equal(32, r:item())
  end)

  it('handles expanded (stride-0) and permuted batch dims', function()
    H.seed(22)
    local m = rand({ 1, 3, 5 })
    local a = m:expand(4, 3, 5)                        -- batch stride 0
    local b = rand({ 5, 4, 2 }):permute(2, 1, 3)       -- [4,5,2], batch stride not outermost
    check_product(ember.matmul, a, b, 1e-5, 1e-5, 'expanded @ permuted')
    check_product(ember.bmm, a, b, 1e-5, 1e-5, 'bmm expanded @ permuted')
    -- 4-D with batch dims that cannot be merged into one stride
    local x = rand({ 3, 2, 4, 5 }):transpose(1, 2)    -- [2,3,4,5]
    local y = rand({ 1, 3, 5, 6 })
    check_product(ember.matmul, x, y, 1e-5, 1e-5, 'transposed batch @ broadcast')
    -- transposed inner matrices in a batch, big enough for gemm
    local p = rand({ 3, 20, 30 }):transpose(2, 3)     -- [3,30,20]
    local q = rand({ 3, 40, 20 }):transpose(2, 3)     -- [3,20,40]
    check_product(ember.matmul, p, q, 1e-5, 1e-4, 'transposed inner')
    -- a shared right matrix: the batch folds into one gemm only when rows are evenly spaced
    local w = rand({ 70, 30 })
    check_product(ember.matmul, rand({ 3, 50, 70 })[{ {}, { 1, 40 }, {} }], w, 1e-5, 1e-4,
      'uneven batch @ shared')
    check_product(ember.matmul, rand({ 3, 40, 80 })[{ {}, {}, { 1, 70 } }], w, 1e-5, 1e-4,
      'padded rows @ shared')
    check_product(ember.matmul, rand({ 3, 1, 70 }), w, 1e-5, 1e-4, 'single rows @ shared')
  end)

  it('copies overlapping rows (unfold) that BLAS cannot take', function()
    H.seed(24)
    local v = rand({ 60 })
    local a = v:unfold(1, 30, 1)                      -- [31,30], strides (1,1)
    check_product(ember.matmul, a, rand({ 30, 20 }), 1e-5, 1e-4, 'unfold @ matrix')
    check_product(ember.matmul, rand({ 20, 31 }), a, 1e-5, 1e-4, 'matrix @ unfold')
    check_product(ember.mv, a, rand({ 30 }), 1e-5, 1e-4, 'mv unfold')
  end)

  it('reads negative strides (as_strided views)', function()
    H.seed(25)
    local core = require 'ember.core'
    local function strided(base, sizes, strides, offset)
      local n = #sizes
      local sz, st = ffi.new('int64_t[?]', n, sizes), ffi.new('int64_t[?]', n, strides)
      return core.own(ember.C.em_as_strided(base.ptr, n, sz, st, offset))
    end
    for _, dtype in ipairs({ 'float32', 'float64', 'int64' }) do
      local base = rand({ 200 }, dtype)
      -- batch reversed, rows reversed, columns reversed: every stride negative somewhere
      local a = strided(base, { 3, 4, 5 }, { -20, 5, 1 }, 40)
      local b = strided(base, { 3, 5, 6 }, { 30, -6, -1 }, 100 + 29)
      check_product(ember.bmm, a, b, tol[dtype][1], tol[dtype][2], dtype .. ' negative strides')
      local big = strided(base, { 12, 15 }, { -15, 1 }, 165)
      local v = strided(base, { 15 }, { -2 }, 199)
      check_product(ember.mv, big, v, tol[dtype][1], tol[dtype][2], dtype .. ' mv negative')
      check_product(ember.matmul, big, big:t(), tol[dtype][1], tol[dtype][2], dtype .. ' mm negative')
    end
  end)

  it('runs many small matrices in a batch', function()
    H.seed(23)
    check_product(ember.bmm, rand({ 64, 6, 5 }), rand({ 64, 5, 7 }), 1e-5, 1e-5, 'many small')
    check_product(ember.bmm, rand({ 16, 20, 20 }), rand({ 16, 20, 20 }), 1e-5, 1e-4, 'mid')
    check_product(ember.bmm, rand({ 16, 20, 20 }, 'int32'), rand({ 16, 20, 20 }, 'int32'), 0, 0,
      'mid int32')
  end)
end)

-- ---- vector products ------------------------------------------------------------------------

describe('mv, dot and outer', function()
  it('mv takes every matrix layout and vector layout', function()
    H.seed(31)
    for _, dtype in ipairs({ 'float32', 'float64', 'int64' }) do
      for _, s in ipairs({ { 3, 4 }, { 90, 120 } }) do
        for _, la in ipairs(layouts(s[1], s[2], dtype)) do
          for _, lv in ipairs(vectors(s[2], dtype)) do
            check_product(ember.mv, la[2], lv[2], tol[dtype][1], tol[dtype][2],
              ('mv %s %s %s'):format(dtype, la[1], lv[1]))
          end
        end
      end
    end
  end)

  it('a vector times a matrix (gemv on the right operand)', function()
    H.seed(32)
    for _, lb in ipairs(layouts(120, 90, 'float32')) do
      for _, lv in ipairs(vectors(120, 'float32')) do
        check_product(ember.matmul, lv[2], lb[2], 1e-5, 1e-4, 'vec @ ' .. lb[1] .. ' ' .. lv[1])
      end
    end
  end)

  it('dot on strided, expanded and long vectors', function()
    H.seed(33)
    for _, dtype in ipairs({ 'float32', 'float64', 'int32', 'float16' }) do
      for _, n in ipairs({ 1, 7, 5000 }) do
        local vs, ws = vectors(n, dtype), vectors(n, dtype)
        for i = 1, 3 do
          local r = ember.dot(vs[i][2], ws[4 - i][2])
          assert.are.equal(0, r:dim())
          assert.are.equal(dtype, r:dtype())
          local rt = dtype == 'float16' and 1e-2 or tol[dtype][1]
          local at = dtype == 'float16' and n * 1e-2 or (dtype == 'float32' and 1e-3 or 0)
          check_product(ember.dot, vs[i][2], ws[4 - i][2], rt, at,
            ('dot %s n=%d %s.%s'):format(dtype, n, vs[i][1], ws[4 - i][1]))
        end
      end
    end
    assert.are.equal(0, ember.dot(ember.zeros(0), ember.zeros(0)):item())
  end)

  it('outer (alias ger) on every vector layout', function()
    H.seed(34)
    for _, dtype in ipairs({ 'float32', 'int64' }) do
      for _, lu in ipairs(vectors(4, dtype)) do
        for _, lv in ipairs(vectors(30, dtype)) do
          local u, v = lu[2], lv[2]
          local uv, vv = flat(u), flat(v)
          local ev = {}
          for i = 1, 4 do for j = 1, 30 do ev[#ev + 1] = uv[i] * vv[j] end end
          check(ember.outer(u, v), ev, { 4, 30 }, 1e-6, 1e-6, 'outer ' .. lu[1] .. ' ' .. lv[1])
          check(u:ger(v), ev, { 4, 30 }, 1e-6, 1e-6, 'ger')
        end
      end
    end
    assert.are.equal(0, ember.outer(ember.zeros(0), ember.zeros(3)):numel())
  end)
end)

-- ---- addmm and baddbmm ----------------------------------------------------------------------

describe('addmm and baddbmm', function()
  local function addmm_ref(c, a, b, beta, alpha)
    local av, ash = flat(a)
    local bv, bsh = flat(b)
    local cv, cs = flat(c)
    return ref_matmul(av, ash, bv, bsh, { c = cv, c_shape = cs, beta = beta, alpha = alpha })
  end

  it('computes beta * c + alpha * a @ b with c broadcast', function()
    H.seed(41)
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      local o = { dtype = dtype }
      for _, s in ipairs({ { 3, 4, 5 }, { 30, 40, 50 } }) do
        local M, K, N = s[1], s[2], s[3]
        local a = layouts(M, K, dtype)[2][2]
        local b = layouts(K, N, dtype)[3][2]
        local cs = {
          ember.tensor(values(M, N, dtype), o), ember.tensor(H.flatten(values(1, N, dtype)), o),
          ember.tensor(values(M, 1, dtype), o), ember.tensor(1.5, o),
          ember.tensor(values(N, M, dtype), o):t(),
        }
        for ci, c in ipairs(cs) do
          for _, ab in ipairs({ { 1, 1 }, { 0.5, 2 }, { 0, 1 }, { -1, 0.25 } }) do
            local ev, es = addmm_ref(c, a, b, ab[1], ab[2])
            local r = ember.addmm(c, a, b, { beta = ab[1], alpha = ab[2] })
            check(r, ev, es, 1e-5, 1e-4, ('%s c#%d beta=%g alpha=%g'):format(dtype, ci, ab[1], ab[2]))
            if ab[1] == 1 and ab[2] == 1 then check(c:addmm(a, b), ev, es, 1e-5, 1e-4, 'method') end
          end
        end
      end
    end
  end)

  it('adds c in float16 and bfloat16 too', function()
    H.seed(44)
    for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
      local o = { dtype = dtype }
      local a = ember.tensor(values(6, 9, dtype), o)
      local b = ember.tensor(values(9, 4, dtype), o)
      local c = ember.tensor(values(6, 4, dtype), o)
      local ev, es = addmm_ref(c, a, b, 0.5, -2)
      local r = ember.addmm(c, a, b, { beta = 0.5, alpha = -2 })
      assert.are.equal(dtype, r:dtype())
      check(r, ev, es, tol[dtype][1], 4 * tol[dtype][2], dtype)
    end
  end)

  it('ignores c when beta is 0, NaN included', function()
    local c = ember.full({ 2, 2 }, 0 / 0)
    local a, b = ember.tensor{ { 1, 2 }, { 3, 4 } }, ember.tensor{ { 1, 0 }, { 0, 1 } }
    check(ember.addmm(c, a, b, { beta = 0 }), { 1, 2, 3, 4 }, { 2, 2 }, 0, 0, 'beta 0')
    -- and propagates it otherwise
    local r = flat(ember.addmm(c, a, b, { beta = 1 }))
    assert.is_true(r[1] ~= r[1])
  end)

  it('with K = 0 gives beta * c', function()
    for _, dtype in ipairs({ 'float32', 'float16', 'int64' }) do
      local o = { dtype = dtype }
      local c = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, o)
      local r = ember.addmm(c, ember.zeros(2, 0, o), ember.zeros(0, 3, o), { beta = 3, alpha = 2 })
      check(r, { 3, 6, 9, 12, 15, 18 }, { 2, 3 }, 0, 0, dtype)
      check(ember.addmm(c, ember.zeros(2, 0, o), ember.zeros(0, 3, o), { beta = 0 }),
        { 0, 0, 0, 0, 0, 0 }, { 2, 3 }, 0, 0, dtype .. ' beta 0')
    end
  end)

  it('takes integer alpha and beta for integer tensors', function()
    H.seed(42)
    local o = { dtype = 'int64' }
    local a = ember.tensor(values(4, 5, 'int64'), o)
    local b = ember.tensor(values(5, 3, 'int64'), o):t():contiguous():t()
    local c = ember.tensor(H.flatten(values(1, 3, 'int64')), o)
    local ev, es = addmm_ref(c, a, b, 2, -3)
    check(ember.addmm(c, a, b, { beta = 2, alpha = -3 }), ev, es, 0, 0, 'int64 addmm')
    local c32 = ember.tensor(values(4, 3, 'int32'), { dtype = 'int32' })
    local a32, b32 = a:int(), b:int()
    ev, es = addmm_ref(c32, a32, b32, 3, 2)
    check(ember.addmm(c32, a32, b32, { beta = 3, alpha = 2 }), ev, es, 0, 0, 'int32 addmm')
  end)

  it('addmm_ writes into c', function()
    local c = ember.tensor{ { 1, 1 }, { 1, 1 } }
    local a = ember.tensor{ { 1, 2 }, { 3, 4 } }
    local r = c:addmm_(a, a, { beta = 2 })
    assert.are.equal(c, r)
    check(c, { 9, 12, 17, 24 }, { 2, 2 }, 0, 0, 'addmm_')
    -- c may be an operand too: the product reads the old values
    local m = ember.tensor{ { 1, 2 }, { 3, 4 } }
    m:addmm_(m, m)
    check(m, { 8, 12, 18, 26 }, { 2, 2 }, 0, 0, 'addmm_ aliasing')
  end)

  it('baddbmm broadcasts c over the batch', function()
    H.seed(43)
    for _, dtype in ipairs({ 'float32', 'int64' }) do
      local o = { dtype = dtype }
      local a = ember.tensor(H.nested({ 3, 4, 5 }, function() return math.floor(H.uniform(-5, 5)) end), o)
      local b = ember.tensor(H.nested({ 3, 5, 2 }, function() return math.floor(H.uniform(-5, 5)) end), o)
      for _, c in ipairs({ ember.ones({ 3, 4, 2 }, o), ember.tensor({ 1, -2 }, o),
        ember.tensor({ { { 1 }, { 2 }, { 3 }, { 4 } } }, o) }) do
        local ev, es = addmm_ref(c, a, b, 2, 3)
        check(ember.baddbmm(c, a, b, { beta = 2, alpha = 3 }), ev, es, 1e-5, 1e-5, dtype)
        ev, es = addmm_ref(c, a, b, 1, 1)
        check(c:baddbmm(a, b), ev, es, 1e-5, 1e-5, dtype .. ' method')
      end
      -- K = 0
      local z = ember.baddbmm(ember.ones({ 2, 3, 4 }, o), ember.zeros({ 2, 3, 0 }, o),
        ember.zeros({ 2, 0, 4 }, o), { beta = 5 })
      check(z, H.flatten(H.nested({ 2, 3, 4 }, function() return 5 end)), { 2, 3, 4 }, 0, 0, 'K=0')
    end
    local c = ember.zeros(2, 2, 2)
    c:baddbmm_(ember.ones(2, 2, 3), ember.ones(2, 3, 2))
    check(c, H.flatten(H.nested({ 2, 2, 2 }, function() return 3 end)), { 2, 2, 2 }, 0, 0, '_')
  end)
end)

-- ---- errors ---------------------------------------------------------------------------------

describe('linalg errors', function()
  local a23, b45 = ember.zeros(2, 3), ember.zeros(4, 5)

  it('names both shapes when sizes do not match', function()
    H.assert_error(function() ember.mm(a23, b45) end,
      'mm: shapes [2,3] and [4,5] cannot be multiplied (3 != 4)')
    H.assert_error(function() ember.matmul(ember.zeros(3), ember.zeros(4)) end,
      'matmul: shapes [3] and [4] cannot be multiplied (3 != 4)')
    H.assert_error(function() ember.matmul(ember.zeros(2, 3, 4), ember.zeros(5, 6)) end,
      'matmul: shapes [2,3,4] and [5,6] cannot be multiplied (4 != 5)')
    H.assert_error(function() ember.mv(a23, ember.zeros(2)) end,
      'mv: shapes [2,3] and [2] cannot be multiplied (3 != 2)')
    H.assert_error(function() ember.dot(ember.zeros(3), ember.zeros(4)) end,
      'dot: shapes [3] and [4] cannot be multiplied (3 != 4)')
    H.assert_error(function() ember.bmm(ember.zeros(2, 3, 4), ember.zeros(2, 5, 6)) end,
      'bmm: shapes [2,3,4] and [2,5,6] cannot be multiplied (4 != 5)')
    H.assert_error(function() ember.addmm(ember.zeros(2, 5), a23, b45) end,
      'addmm: shapes [2,3] and [4,5] cannot be multiplied (3 != 4)')
  end)

  it('refuses batch dims that do not broadcast, and unequal bmm batches', function()
    H.assert_error(function() ember.matmul(ember.zeros(2, 3, 4), ember.zeros(3, 4, 5)) end,
      'matmul: shapes [2,3,4] and [3,4,5] cannot be multiplied (batch dimensions do not broadcast)')
    H.assert_error(function() ember.bmm(ember.zeros(2, 3, 4), ember.zeros(3, 4, 5)) end,
      'bmm: shapes [2,3,4] and [3,4,5] have different batch sizes (2 != 3)')
    H.assert_error(function()
      ember.baddbmm(ember.zeros(2, 3, 5), ember.zeros(2, 3, 4), ember.zeros(1, 4, 5))
    end, 'baddbmm: shapes [2,3,4] and [1,4,5] have different batch sizes (2 != 1)')
  end)

  it('checks the number of dimensions', function()
    H.assert_error(function() ember.mm(ember.zeros(3), b45) end, 'mm: expected 2-D tensors, got 1-D and 2-D')
    H.assert_error(function() ember.mv(a23, ember.zeros(3, 1)) end,
      'mv: expected a 2-D matrix and a 1-D vector, got 2-D and 2-D')
    H.assert_error(function() ember.bmm(a23, a23) end, 'bmm: expected 3-D tensors, got 2-D and 2-D')
    H.assert_error(function() ember.dot(a23, ember.zeros(3)) end, 'dot: expected 1-D tensors, got 2-D and 1-D')
    H.assert_error(function() ember.outer(ember.zeros(3), a23) end,
      'outer: expected 1-D tensors, got 1-D and 2-D')
    H.assert_error(function() ember.matmul(ember.tensor(2), ember.zeros(3)) end,
      'matmul: expected tensors with at least 1 dimension, got 0-D and 1-D')
    H.assert_error(function() ember.addmm(ember.zeros(2), ember.zeros(2), ember.zeros(2)) end,
      'addmm: expected 2-D tensors, got 1-D and 1-D')
    H.assert_error(function() ember.baddbmm(ember.zeros(2), a23, a23) end,
      'baddbmm: expected 3-D tensors, got 2-D and 2-D')
  end)

  it('refuses mixed dtypes and bool', function()
    H.assert_error(function() ember.mm(a23, ember.zeros({ 3, 2 }, { dtype = 'float64' })) end,
      'mm: expected both operands to have the same dtype, got float32 and float64')
    H.assert_error(function() ember.matmul(ember.zeros({ 3 }, { dtype = 'int64' }), ember.zeros(3)) end,
      'matmul: expected both operands to have the same dtype, got int64 and float32')
    local bo = { dtype = 'bool' }
    H.assert_error(function() ember.mm(ember.zeros({ 2, 2 }, bo), ember.zeros({ 2, 2 }, bo)) end,
      'mm: expected floating or integer tensors, got bool')
    H.assert_error(function() ember.addmm(ember.zeros({ 2, 2 }, { dtype = 'float64' }), a23, a23:t()) end,
      "addmm: expected the added tensor to have the operands' dtype float32, got float64")
  end)

  it('checks the added tensor and the scalars', function()
    H.assert_error(function() ember.addmm(ember.zeros(3), a23, ember.zeros(3, 4)) end,
      'addmm: shape [3] cannot broadcast to [2,4]')
    H.assert_error(function() ember.addmm(ember.zeros(3), a23, ember.zeros(3, 4), { beta = 0 }) end,
      'addmm: shape [3] cannot broadcast to [2,4]')
    H.assert_error(function()
      ember.baddbmm(ember.zeros(2, 3), ember.zeros(2, 3, 4), ember.zeros(2, 4, 5))
    end, 'baddbmm: shape [2,3] cannot broadcast to [2,3,5]')
    local i = { dtype = 'int64' }
    H.assert_error(function()
      ember.addmm(ember.zeros({ 2, 2 }, i), ember.zeros({ 2, 2 }, i), ember.zeros({ 2, 2 }, i),
        { alpha = 0.5 })
    end, 'addmm: expected integer beta and alpha for int64 tensors, got alpha = 0.5')
    H.assert_error(function()
      ember.addmm(ember.zeros({ 2, 2 }, i), ember.zeros({ 2, 2 }, i), ember.zeros({ 2, 2 }, i),
        { beta = 1e300 })
    end, 'addmm: expected integer beta and alpha for int64 tensors, got beta = 1e+300')
    H.assert_error(function() ember.addmm(ember.zeros(2, 2), a23, a23:t(), 2) end,
      'addmm: expected an options table {beta=, alpha=}, got number')
    H.assert_error(function() ember.addmm(ember.zeros(2, 2), a23, a23:t(), { beta = 'x' }) end,
      'addmm: expected a number for beta, got string')
    H.assert_error(function() ember.zeros(2):addmm_(a23, a23:t()) end,
      "addmm_: expected the added tensor to have the result's shape [2, 2], got [2]")
  end)

  it('refuses non-tensor operands', function()
    H.assert_error(function() ember.mm(a23, 3) end, 'mm: expected a tensor for the second operand, got number')
    H.assert_error(function() ember.matmul({}, a23) end,
      'matmul: expected a tensor for the first operand, got table')
    H.assert_error(function() ember.addmm(nil, a23, a23) end,
      'addmm: expected a tensor for the added tensor, got nil')
  end)

  it('reports sizes BLAS cannot take instead of crashing', function()
    local huge = 3000000000
    local a = ember.zeros(1, 1):expand(1, huge)
    local b = ember.zeros(1, 1):expand(huge, 1)
    H.assert_error(function() ember.mm(a, b) end, 'mm: sizes beyond 2147483647 are not supported by BLAS')
  end)
end)

-- ---- batched products over any batch layout -------------------------------------------------
-- The definition hands up to two batch dims that cannot be merged to the kernel in one call
-- ([B1, B2, M, K] operands with their own batch strides); these check that call against the
-- float64 loops on the layouts a model makes: attention's [B, H, T, hd] views of a [B, T, 3C]
-- tensor, transposed and broadcast (stride-0) batch dims, a third batch dim (looped over by
-- the definition), zero-size batches, and the gradients through such views.

describe('batched products', function()
  local function rand(shape, dtype)
    local f = (dtype and dtype:match('int')) and ints(-9, 9) or function() return H.uniform(-2, 2) end
    if prod(shape) == 0 then return ember.zeros(shape, { dtype = dtype }) end
    return ember.tensor(H.nested(shape, f), { dtype = dtype })
  end

  -- q, k, v as [B, H, T, hd] views of one [B, T, 3 * H * hd] tensor (nanoGPT's split)
  local function qkv(B, T, Hn, hd, dtype)
    local x = rand({ B, T, 3 * Hn * hd }, dtype)
    local v = x:view(B, T, 3, Hn, hd)
    local function part(i) return v:select(3, i):transpose(2, 3) end
    return part(1), part(2), part(3), x
  end

  it("multiplies attention's strided [B, H, T, hd] views (q @ k^T, att @ v)", function()
    H.seed(31)
    -- (B, T, H, hd): the direct loop (T*T*hd <= 64), BLAS, and sizes across its blocking
    for _, s in ipairs({ { 2, 3, 2, 2 }, { 2, 9, 3, 5 }, { 3, 33, 4, 16 }, { 1, 70, 2, 24 } }) do
      for _, dtype in ipairs({ 'float32', 'float64', 'bfloat16', 'float16', 'int32' }) do
        local q, k, v = qkv(s[1], s[2], s[3], s[4], dtype)
        local what = ('%s B=%d T=%d H=%d hd=%d'):format(dtype, s[1], s[2], s[3], s[4])
        assert.is_false(q:is_contiguous())
        local t = tol[dtype]
        check_product(ember.matmul, q, k:transpose(-2, -1), t[1], t[2], what .. ' q @ k^T')
        local att = rand({ s[1], s[3], s[2], s[2] }, dtype)
        check_product(ember.matmul, att, v, t[1], t[2], what .. ' att @ v')
        -- the transposed product of the backward: att^T @ v's layout
        check_product(ember.matmul, att:transpose(-2, -1), v, t[1], t[2], what .. ' att^T @ v')
      end
    end
  end)

  it('multiplies 4-D batches with transposed and broadcast batch dims', function()
    H.seed(32)
    for _, dtype in ipairs({ 'float32', 'float64', 'bfloat16', 'int64' }) do
      local t = tol[dtype]
      local cases = {
        -- transposed batch dims on both sides
        { rand({ 3, 2, 7, 5 }, dtype):transpose(1, 2), rand({ 3, 2, 5, 6 }, dtype):transpose(1, 2) },
        -- b shared along the outer dim (stride 0), a transposed
        { rand({ 4, 3, 9, 8 }, dtype):transpose(1, 2), rand({ 1, 4, 8, 10 }, dtype):expand(3, 4, 8, 10) },
        -- a shared along the inner dim, b with transposed matrices
        { rand({ 2, 1, 6, 12 }, dtype):expand(2, 5, 6, 12), rand({ 2, 5, 11, 12 }, dtype):transpose(3, 4) },
        -- broadcast in both dims by matmul's rules, edges of BLAS's blocks
        { rand({ 2, 1, 65, 33 }, dtype), rand({ 3, 33, 17 }, dtype) },
      }
      for i, c in ipairs(cases) do
        check_product(ember.matmul, c[1], c[2], t[1], t[2], ('%s 4-D case %d'):format(dtype, i))
      end
    end
  end)

  it('multiplies 5-D batches (a third batch dim the definition walks)', function()
    H.seed(33)
    for _, dtype in ipairs({ 'float32', 'float64' }) do
      local t = tol[dtype]
      local a = rand({ 4, 2, 3, 6, 5 }, dtype):permute(2, 3, 1, 4, 5) -- [2,3,4,6,5], no dims merge
      local b = rand({ 3, 1, 4, 5, 7 }, dtype):permute(2, 1, 3, 4, 5):expand(2, 3, 4, 5, 7)
      check_product(ember.matmul, a, b, t[1], t[2], dtype .. ' 5-D')
      check_product(ember.matmul, a, rand({ 4, 5, 7 }, dtype), t[1], t[2], dtype .. ' 5-D @ 3-D')
    end
  end)

  it('gives empty results for zero-size batches', function()
    local function shape(x) return { unpack(x:size()) } end
    local a = ember.zeros(0, 3, 4, 5)
    assert.are.same({ 0, 3, 4, 6 }, shape(ember.matmul(a, ember.ones(3, 5, 6))))
    local b = ember.ones(2, 0, 5, 6)
    assert.are.same({ 2, 0, 4, 6 }, shape(ember.matmul(ember.ones(2, 1, 4, 5), b)))
    local c = ember.ones(7, 2, 3, 4, 5):transpose(1, 2):narrow(2, 1, 0) -- [2,0,3,4,5]
    assert.are.same({ 2, 0, 3, 4, 2 }, shape(ember.matmul(c, ember.ones(5, 2))))
    -- the gradient of an empty batched product is empty too
    local e = ember.zeros(2, 0, 4, 5):requires_grad_()
    ember.matmul(e, ember.ones(2, 1, 5, 3)):sum():backward()
    assert.are.same({ 2, 0, 4, 5 }, shape(e.grad))
  end)

  it('runs bmm and baddbmm over transposed and broadcast batches', function()
    H.seed(34)
    for _, dtype in ipairs({ 'float32', 'float64', 'bfloat16' }) do
      local t = tol[dtype]
      local a = rand({ 9, 4, 7 }, dtype):transpose(1, 2)      -- [4,9,7], batch stride 7
      local b = rand({ 1, 7, 11 }, dtype):expand(4, 7, 11)    -- batch stride 0
      check_product(ember.bmm, a, b, t[1], t[2], dtype .. ' bmm')
      local c = rand({ 9, 11 }, dtype)
      local av, ash = flat(a)
      local bv, bsh = flat(b)
      local cv, cs = flat(c)
      local ev, es = ref_matmul(av, ash, bv, bsh, { c = cv, c_shape = cs, beta = 0.5, alpha = 2 })
      check(ember.baddbmm(c, a, b, { beta = 0.5, alpha = 2 }), ev, es, t[1], t[2], dtype .. ' baddbmm')
    end
  end)

  it("gives the gradients of attention's products on the views", function()
    H.seed(35)
    local B, T, Hn, hd = 2, 6, 3, 4
    local q, k, v, x = qkv(B, T, Hn, hd, 'float64')
    x = x:detach():requires_grad_()
    local xv = x:view(B, T, 3, Hn, hd)
    local function part(i) return xv:select(3, i):transpose(2, 3) end
    local att = part(1):matmul(part(2):transpose(-2, -1))
    local y = att:matmul(part(3))
    local g = rand({ B, Hn, T, hd }, 'float64')
    y:backward(g)
    -- the same gradients from the float64 loops: datt = g v^T, dv = att^T g, dq = datt k,
    -- dk = datt^T q
    local function mm(p, pt, r, rt)
      local pv, ps = flat(pt and p:transpose(-2, -1) or p)
      local rv, rs = flat(rt and r:transpose(-2, -1) or r)
      local ev, es = ref_matmul(pv, ps, rv, rs)
      return ember.tensor(ev, { dtype = 'float64' }):view(es)
    end
    local attv = mm(q, false, k, true)
    local datt = mm(g, false, v, true)
    local want = { mm(datt, false, k, false), mm(datt, true, q, false), mm(attv, true, g, false) }
    local gx = x.grad:view(B, T, 3, Hn, hd)
    for i = 1, 3 do
      local got = gx:select(3, i):transpose(2, 3)
      local wv, ws = flat(want[i])
      check(got, wv, ws, 1e-12, 1e-12, ('d%s'):format(({ 'q', 'k', 'v' })[i]))
    end
  end)
end)

-- ---- bfloat16 on the CPU's bf16 instructions -------------------------------------------------
-- cpu/gemm_bf16.c multiplies bfloat16 with AMX tiles or AVX-512 BF16 where the CPU has them,
-- and EMBER_CPU_BF16 chooses the path: every path is checked against the float64 product of
-- the same (bf16-rounded) inputs, with one rounding of the result allowed (2^-8 relative) on top
-- of float32 accumulation. On a CPU without the instructions all three run the portable path.

describe('bfloat16 matmul paths', function()
  pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
  local function with_env(name, value, f)
    ffi.C.setenv(name, value, 1)
    local ok, err = pcall(f)
    ffi.C.unsetenv(name)
    if not ok then error(err, 0) end
  end
  local function rand(shape)
    return ember.tensor(H.nested(shape, function() return H.uniform(-2, 2) end),
      { dtype = 'bfloat16' })
  end
  -- got (bfloat16) against the float64 product of the bf16 inputs: 2^-8 of the value for the
  -- final rounding, and float32 accumulation error over K terms of |a||b| <= 4
  local function agree(got, a, b, what, c, beta, alpha)
    local av, ash = flat(a:to('float64'))
    local bv, bsh = flat(b:to('float64'))
    local opts
    if c then
      local cv, cs = flat(c:to('float64'))
      opts = { c = cv, c_shape = cs, beta = beta, alpha = alpha }
    end
    local ev, es = ref_matmul(av, ash, bv, bsh, opts)
    assert.are.equal('bfloat16', got:dtype(), what)
    local K = a:size(a:dim())
    check(got:to('float64'), ev, es, 2 ^ -8, 4 * K * 2 ^ -22 * (alpha and math.abs(alpha) or 1) + 1e-30, what)
  end

  for _, mode in ipairs({ '1', 'avx512', '0' }) do
    it('EMBER_CPU_BF16=' .. mode .. ': products of every shape and layout', function()
      H.seed(41)
      with_env('EMBER_CPU_BF16', mode, function()
        -- (M, K, N): tiny, tile edges (32), K not a multiple of 32, several K tiles, gemv
        for _, s in ipairs({ { 1, 1, 1 }, { 7, 5, 3 }, { 32, 32, 32 }, { 33, 65, 17 },
          { 65, 37, 100 }, { 64, 300, 96 }, { 1, 70, 50 }, { 50, 70, 1 } }) do
          local M, K, N = s[1], s[2], s[3]
          local what = ('%s %dx%dx%d'):format(mode, M, K, N)
          local a, b = rand({ M, K }), rand({ K, N })
          agree(a:matmul(b), a, b, what)
          local at, bt = rand({ K, M }):t(), rand({ N, K }):t() -- x @ w:t() (Linear)
          agree(at:matmul(bt), at, bt, what .. ' transposed')
          local as = rand({ M, 2 * K })[{ {}, { 1, -1, 2 } }] -- column stride 2
          agree(as:matmul(b), as, b, what .. ' strided')
        end
        -- batches: shared weight (stride 0), 4-D attention-like views, bmm
        local x, w = rand({ 3, 20, 40 }), rand({ 40, 33 })
        agree(x:matmul(w), x, w, mode .. ' batch @ shared')
        local qkv = rand({ 2, 17, 3 * 2 * 8 }):view(2, 17, 3, 2, 8)
        local q, k = qkv:select(3, 1):transpose(2, 3), qkv:select(3, 2):transpose(2, 3)
        agree(q:matmul(k:transpose(-2, -1)), q, k:transpose(-2, -1), mode .. ' q @ k^T')
        local a3, b3 = rand({ 4, 9, 70 }):transpose(1, 2), rand({ 1, 70, 5 }):expand(9, 70, 5)
        agree(ember.bmm(a3, b3), a3, b3, mode .. ' bmm')
        -- alpha and beta, rounded once
        local c, a, b = rand({ 33, 40 }), rand({ 33, 50 }), rand({ 50, 40 })
        agree(ember.addmm(c, a, b, { beta = 0.5, alpha = -2 }), a, b, mode .. ' addmm', c, 0.5, -2)
        local c3, x3, y3 = rand({ 40 }), rand({ 2, 33, 50 }), rand({ 2, 50, 40 })
        agree(ember.baddbmm(c3, x3, y3, { beta = 1, alpha = 1 }), x3, y3, mode .. ' baddbmm', c3, 1, 1)
      end)
    end)
  end

  it('keeps NaN and infinity, ignores c when beta = 0, and refuses a misspelt path', function()
    for _, mode in ipairs({ '1', 'avx512', '0' }) do
      with_env('EMBER_CPU_BF16', mode, function()
        local a = ember.tensor({ { 1, 0 / 0 }, { 1, 2 }, { 3e38, 3e38 } }, { dtype = 'bfloat16' })
        local b = ember.tensor({ { 1, 1 }, { 1, 1 } }, { dtype = 'bfloat16' })
        local r = a:matmul(b):to('float64'):totable()
        assert.is_true(r[1][1] ~= r[1][1] and r[1][2] ~= r[1][2], mode .. ': NaN')
        assert.are.same({ 3, 3 }, r[2], mode)
        assert.are.equal(math.huge, r[3][1], mode .. ': overflow to infinity')
        local nan = ember.full({ 1, 2 }, 0 / 0, { dtype = 'bfloat16' })
        local z = ember.addmm(nan, a[{ { 2, 2 } }], b, { beta = 0 }):to('float64'):totable()
        assert.are.same({ { 3, 3 } }, z, mode .. ': beta = 0')
      end)
    end
    with_env('EMBER_CPU_BF16', 'amx2', function()
      H.assert_error(function() ember.ones(2, 2, { dtype = 'bfloat16' }):matmul(ember.ones(2, 2, { dtype = 'bfloat16' })) end,
        "matmul: EMBER_CPU_BF16: expected 0, 1, auto, amx or avx512, got 'amx2'")
    end)
  end)
end)
