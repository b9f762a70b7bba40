-- Indexing ops (index_select, gather, scatter, scatter_add, index_add, index_copy, index_fill,
-- masked_select, nonzero) against plain-Lua references on nested tables, for every layout
-- H.variants makes (contiguous, transposed, sliced, broadcast), zero-size inputs and several
-- dtypes. Indices are 1-based in Lua.
local H = require 'tests.lua.helpers'
local ember = H.ember

-- ---- plain-Lua reference helpers ------------------------------------------------------------
local function get(t, c)
  local v = t
  for k = 1, #c do v = v[c[k]] end
  return v
end

local function set(t, c, val)
  local v = t
  for k = 1, #c - 1 do v = v[c[k]] end
  v[c[#c]] = val
end

local function copy(t)
  if type(t) ~= 'table' then return t end
  local r = {}
  for i = 1, #t do r[i] = copy(t[i]) end
  return r
end



local coords, with, zeros, int_table = H.coords, H.with, H.zeros, H.int_table


local function as_bool(t) return H.map(function(v) return v ~= 0 end, t) end

local all_dtypes = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16',
  'int32', 'int64' }

-- The values a table has once stored in dtype (bool: truth values).
local function expect(dt, t)
  if dt == 'bool' then return as_bool(t) end
  return t
end

local function i64(t) return ember.tensor(t, { dtype = 'int64' }) end

-- ---- index_select ---------------------------------------------------------------------------
local function ref_index_select(t, shape, dim, idx)
  local oshape = copy(shape)
  oshape[dim] = #idx
  local out = zeros(oshape)
  for _, c in ipairs(coords(oshape)) do set(out, c, get(t, with(c, dim, idx[c[dim]]))) end
  return out
end

describe('index_select', function()
  it('matches the reference for every layout, dim and dtype', function()
    H.seed(11)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 })
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local idx1, idx2 = { 4, 1, 1, 3 }, { 5, 2, 2, 1, 3, 5 }
        H.assert_close(x:index_select(1, idx1), ref_index_select(xt, { 4, 5 }, 1, idx1), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:index_select(2, i64(idx2)), ref_index_select(xt, { 4, 5 }, 2, idx2), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:index_select(-1, i64(idx2)), ref_index_select(xt, { 4, 5 }, 2, idx2), 0, 0, dt .. ' ' .. name)
        assert.are.equal(dt, x:index_select(1, idx1):dtype())
      end
    end
  end)

  it('handles bool tensors, 3-D inputs and every integer index dtype', function()
    H.seed(12)
    local b = int_table({ 3, 4 }, 0, 1)
    local xb = ember.tensor(b, { dtype = 'bool' })
    H.assert_close(xb:index_select(2, { 4, 1 }), as_bool(ref_index_select(b, { 3, 4 }, 2, { 4, 1 })))
    local t = int_table({ 3, 4, 5 })
    local x = ember.tensor(t)
    for _, idt in ipairs({ 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
      local idx = ember.tensor({ 4, 2, 4 }, { dtype = idt })
      H.assert_close(x:index_select(2, idx), ref_index_select(t, { 3, 4, 5 }, 2, { 4, 2, 4 }), 0, 0, idt)
    end
    H.assert_close(x:index_select(3, { 5 }), ref_index_select(t, { 3, 4, 5 }, 3, { 5 }))
    -- a non-contiguous index tensor
    local idx = i64({ { 3, 9 }, { 1, 9 }, { 2, 9 } }):select(2, 1)
    H.assert_close(x:index_select(1, idx), ref_index_select(t, { 3, 4, 5 }, 1, { 3, 1, 2 }))
    -- an expanded (stride-0) index
    H.assert_close(x:index_select(1, i64({ 2 }):expand(3)), ref_index_select(t, { 3, 4, 5 }, 1, { 2, 2, 2 }))
    assert.are.equal(3, ember.index_select(x, 1, idx):size(1))
  end)

  it('handles zero-size inputs and empty index lists', function()
    local e = ember.zeros(0, 3)
    local r = e:index_select(2, { 3, 1 })
    assert.are.same({ 0, 2 }, { r:size(1), r:size(2) })
    local x = ember.tensor({ { 1, 2 }, { 3, 4 } })
    local r2 = x:index_select(1, {})
    assert.are.same({ 0, 2 }, { r2:size(1), r2:size(2) })
    H.assert_close(x:index_select(2, ember.zeros(0, { dtype = 'int64' })):size(), { 2, 0 })
  end)

  it('splits long index lists across threads correctly', function()
    H.seed(13)
    local n = 100000
    local t = int_table({ 7 }, 0, 100)
    local idx = {}
    for i = 1, n do idx[i] = 1 + (i * 31) % 7 end
    local r = ember.tensor(t):index_select(1, idx):totable()
    for i = 1, n do
      if r[i] ~= t[idx[i]] then error(('element %d: got %s expected %s'):format(i, r[i], t[idx[i]])) end
    end
  end)

  it('serves x[index_tensor] from tensor indexing', function()
    local x = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 } })
    H.assert_close(x[i64({ 3, 1 })], { { 5, 6 }, { 1, 2 } })
  end)

  it('reports bad indices, index dtypes and dims in Lua terms', function()
    local x = ember.zeros(4, 5)
    H.assert_error(function() x:index_select(2, { 1, 6 }) end,
      'index_select: index 6 is out of bounds for dimension 2 with size 5')
    H.assert_error(function() x:index_select(1, { 0 }) end,
      'index_select: index 0 is out of bounds for dimension 1 with size 4')
    H.assert_error(function() x:index_select(1, { -1 }) end, 'index -1 is out of bounds')
    H.assert_error(function() x:index_select(1, ember.tensor({ 1, 2 })) end,
      'index_select: expected an integer index tensor, got float32')
    H.assert_error(function() x:index_select(1, ember.tensor({ true })) end,
      'index_select: expected an integer index tensor, got bool')
    H.assert_error(function() x:index_select(1, { 1.5 }) end, 'index_select: expected integer indices, got 1.5')
    H.assert_error(function() x:index_select(1, i64({ { 1 } })) end,
      'index_select: expected a 0-d or 1-D index tensor, got 2-D')
    H.assert_error(function() x:index_select(3, { 1 }) end,
      'index_select: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() ember.zeros(0, 3):index_select(1, { 1 }) end,
      'index 1 is out of bounds for dimension 1 with size 0')
  end)
end)

-- ---- gather ---------------------------------------------------------------------------------
local function ref_gather(t, dim, idx)
  local ishape = H.shape_of(idx)
  local out = zeros(ishape)
  for _, c in ipairs(coords(ishape)) do set(out, c, get(t, with(c, dim, get(idx, c)))) end
  return out
end

describe('gather', function()
  it('matches the reference for every layout, dim and dtype', function()
    H.seed(21)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 })
      local idx1 = H.nested({ 3, 5 }, function() return math.floor(H.uniform(1, 5)) end)  -- [1,4]
      local idx2 = H.nested({ 4, 7 }, function() return math.floor(H.uniform(1, 6)) end)  -- [1,5]
      local idx3 = H.nested({ 2, 3 }, function() return math.floor(H.uniform(1, 6)) end)  -- smaller
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        H.assert_close(x:gather(1, i64(idx1)), ref_gather(xt, 1, idx1), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:gather(2, i64(idx2)), ref_gather(xt, 2, idx2), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:gather(2, idx3), ref_gather(xt, 2, idx3), 0, 0, dt .. ' ' .. name)
      end
    end
  end)

  it('takes transposed index tensors, 3-D inputs and bool tensors', function()
    H.seed(22)
    local t = int_table({ 3, 4, 5 })
    local x = ember.tensor(t)
    for dim = 1, 3 do
      local shape = { 2, 3, 4 }
      local size = ({ 3, 4, 5 })[dim]
      local idx = H.nested(shape, function() return math.floor(H.uniform(1, size + 1)) end)
      H.assert_close(x:gather(dim, idx), ref_gather(t, dim, idx), 0, 0, 'dim ' .. dim)
    end
    local idx = H.nested({ 5, 4 }, function() return math.floor(H.uniform(1, 5)) end)
    local it = ember.tensor(idx, { dtype = 'int32' })   -- [5,4]; its transpose is [4,5]
    local tt = {}
    for i = 1, 4 do tt[i] = {} for j = 1, 5 do tt[i][j] = idx[j][i] end end
    local x2t = int_table({ 4, 5 })
    H.assert_close(ember.tensor(x2t):gather(1, it:t()), ref_gather(x2t, 1, tt))
    H.assert_close(ember.tensor(x2t):gather(2, i64({ { 5, 1 } }):expand(4, 2)),
      ref_gather(x2t, 2, { { 5, 1 }, { 5, 1 }, { 5, 1 }, { 5, 1 } }))
    local b = int_table({ 2, 3 }, 0, 1)
    H.assert_close(ember.tensor(b, { dtype = 'bool' }):gather(2, { { 3, 1 }, { 2, 2 } }),
      as_bool(ref_gather(b, 2, { { 3, 1 }, { 2, 2 } })))
  end)

  it('handles zero-size index tensors and inputs', function()
    local r = ember.zeros(3, 4):gather(2, ember.zeros(3, 0, { dtype = 'int64' }))
    assert.are.same({ 3, 0 }, { r:size(1), r:size(2) })
    local r2 = ember.zeros(0, 4):gather(2, ember.zeros(0, 2, { dtype = 'int64' }))
    assert.are.same({ 0, 2 }, { r2:size(1), r2:size(2) })
  end)

  it('splits long gathers across threads correctly', function()
    H.seed(23)
    local n = 80000
    local t = int_table({ 2, 9 }, 0, 100)
    local idx = { {}, {} }
    for j = 1, n do idx[1][j] = 1 + (j * 7) % 9; idx[2][j] = 1 + (j * 5) % 9 end
    local r = ember.tensor(t):gather(2, idx):totable()
    for i = 1, 2 do
      for j = 1, n do
        if r[i][j] ~= t[i][idx[i][j]] then error(('element %d,%d differs'):format(i, j)) end
      end
    end
  end)

  it('reports bad shapes and indices', function()
    local x = ember.zeros(3, 5)
    H.assert_error(function() x:gather(2, { { 1, 7 } }) end,
      'gather: index 7 is out of bounds for dimension 2 with size 5')
    H.assert_error(function() x:gather(2, { 1, 2 }) end,
      'gather: expected an index with as many dimensions as the input (2), got 1')
    H.assert_error(function() x:gather(2, i64({ { 1 }, { 1 }, { 1 }, { 1 } })) end,
      'gather: index of shape [4,1] is larger than the input of shape [3,5] in dimension 1')
    H.assert_error(function() x:gather(1, ember.tensor({ { 1.0 } })) end,
      'gather: expected an integer index tensor, got float32')
  end)
end)

-- ---- scatter, scatter_add -------------------------------------------------------------------
local function ref_scatter(t, dim, idx, src, accumulate)
  local out = copy(t)
  for _, c in ipairs(coords(H.shape_of(idx))) do
    local target = with(c, dim, get(idx, c))
    local v = type(src) == 'table' and get(src, c) or src
    if accumulate then set(out, target, get(out, target) + v) else set(out, target, v) end
  end
  return out
end

describe('scatter and scatter_add', function()
  it('scatter matches the reference on every layout and dtype', function()
    H.seed(31)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 })
      local src = int_table({ 4, 5 })
      -- distinct targets per line, so the result does not depend on the order of writes
      local idx1 = { { 2, 1, 4, 3 }, { 4, 3, 1, 2 } }                   -- dim 1: [2,4]
      local idx2 = { { 5, 1, 3 }, { 2, 4, 1 }, { 1, 2, 3 }, { 3, 5, 4 } } -- dim 2: [4,3]
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local s = ember.tensor(src, { dtype = dt })
        H.assert_close(x:scatter(1, idx1, s), ref_scatter(xt, 1, idx1, src), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:scatter(2, i64(idx2), s), ref_scatter(xt, 2, idx2, src), 0, 0, dt .. ' ' .. name)
        H.assert_close(x:scatter(2, idx2, 7), ref_scatter(xt, 2, idx2, 7), 0, 0, dt .. ' ' .. name)
        H.assert_close(x, xt, 0, 0, 'the input is untouched')
      end
    end
  end)

  it('scatter_add accumulates repeated indices on every layout and dtype', function()
    H.seed(32)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 3, 4 }, 0, 5)
      local src = int_table({ 3, 6 }, 0, 5)
      local idx = H.nested({ 3, 6 }, function() return math.floor(H.uniform(1, 5)) end)
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local s = ember.tensor(src, { dtype = dt })
        H.assert_close(x:scatter_add(2, idx, s), ref_scatter(xt, 2, idx, src, true), 0, 0, dt .. ' ' .. name)
      end
      local y = ember.tensor(t, { dtype = dt })
      local r = y:scatter_add_(2, idx, ember.tensor(src, { dtype = dt }))
      assert.are.equal(y, r)
      H.assert_close(y, ref_scatter(t, 2, idx, src, true), 0, 0, dt .. ' in place')
    end
  end)

  it('writes in place through transposed targets and bool tensors', function()
    H.seed(33)
    local base = int_table({ 5, 4 })
    local x = ember.tensor(base):t()              -- [4,5], non-contiguous
    local xt = {}
    for i = 1, 4 do xt[i] = {} for j = 1, 5 do xt[i][j] = base[j][i] end end
    local idx = { { 1, 2 }, { 3, 4 } }
    local src = { { 10, 20 }, { 30, 40 } }
    x:scatter_(1, idx, ember.tensor(src))
    H.assert_close(x, ref_scatter(xt, 1, idx, src))
    local b = ember.zeros(2, 3, { dtype = 'bool' })
    b:scatter_(2, { { 3 }, { 1 } }, true)
    H.assert_close(b, { { false, false, true }, { true, false, false } })
    local bb = ember.zeros(1, 2, { dtype = 'bool' })
    bb:scatter_add_(2, { { 1, 1 } }, ember.tensor({ { true, false } }))
    H.assert_close(bb, { { true, false } })
  end)

  it('uses only the part of src that index covers, and accepts empty indices', function()
    local x = ember.zeros(2, 3)
    local src = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } })
    H.assert_close(x:scatter(2, { { 3 } }, src), { { 0, 0, 1 }, { 0, 0, 0 } })
    H.assert_close(x:scatter(2, ember.zeros(2, 0, { dtype = 'int64' }), src), { { 0, 0, 0 }, { 0, 0, 0 } })
    local e = ember.zeros(0, 3)
    assert.are.equal(0, e:scatter(1, ember.zeros(0, 3, { dtype = 'int64' }), 1):numel())
    assert.are.equal(0, e:scatter_add(2, ember.zeros(0, 2, { dtype = 'int64' }), ember.ones(0, 2)):numel())
    -- an expanded (stride-0) index: every row scatters into column 2
    local ix = i64({ { 2 } }):expand(2, 1)
    H.assert_close(x:scatter_add(2, ix, src), { { 0, 1, 0 }, { 0, 4, 0 } })
  end)

  it('reads indices and sources that alias the target as they were', function()
    -- x holds its own index: the write must not change which positions are read.
    local x = ember.tensor({ { 2, 1, 1 } }, { dtype = 'int64' })
    x:scatter_(2, x, x)
    H.assert_close(x, { { 1, 2, 1 } })
  end)

  it('reports bad shapes, dtypes, targets and indices', function()
    local x = ember.zeros(3, 4)
    H.assert_error(function() x:scatter(2, { { 5 } }, 1) end,
      'scatter: index 5 is out of bounds for dimension 2 with size 4')
    H.assert_error(function() x:scatter_(2, { { 5 } }, 1) end,
      'scatter_: index 5 is out of bounds for dimension 2 with size 4')
    H.assert_error(function() x:scatter(2, { { 1, 1 } }, ember.zeros(1, 1)) end,
      'scatter: index of shape [1,2] is larger than the source of shape [1,1] in dimension 2')
    H.assert_error(function() x:scatter(2, { 1 }, ember.zeros(3, 4)) end,
      'scatter: expected an index with as many dimensions as the input (2), got 1')
    H.assert_error(function() x:scatter(2, { { 1 } }, ember.zeros(4)) end,
      'scatter: expected a source with as many dimensions as the input (2), got 1')
    H.assert_error(function() x:scatter(2, ember.tensor({ { 1.0 } }), 1) end,
      'scatter: expected an integer index tensor, got float32')
    local xi = ember.zeros(3, 4, { dtype = 'int32' })
    H.assert_error(function() xi:scatter_add_(2, { { 1 } }, ember.ones(1, 1)) end,
      'scatter_add_: result type float32 cannot be stored in place into a int32 tensor')
    local ex = ember.zeros(1, 4):expand(3, 4)
    H.assert_error(function() ex:scatter_(2, { { 1 } }, 1) end,
      'scatter_: cannot write in place into an expanded tensor (stride 0 in dimension 1)')
    H.assert_error(function() x:scatter(2, { { 1 } }, 'a') end, 'scatter: expected a tensor or a number, got string')
  end)
end)

-- ---- index_add, index_copy, index_fill ------------------------------------------------------
local function ref_index_put(t, dim, idx, src, alpha, accumulate)
  local out = copy(t)
  local sshape = H.shape_of(t)
  sshape[dim] = #idx
  for _, c in ipairs(coords(sshape)) do
    local target = with(c, dim, idx[c[dim]])
    local v = type(src) == 'table' and get(src, c) or src
    if accumulate then set(out, target, get(out, target) + alpha * v) else set(out, target, v) end
  end
  return out
end

describe('index_add, index_copy and index_fill', function()
  it('match the reference on every layout and dtype', function()
    H.seed(41)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 }, 0, 5)
      local src1 = int_table({ 3, 5 }, 0, 5)     -- along dim 1: 3 indices
      local src2 = int_table({ 4, 2 }, 0, 5)     -- along dim 2: 2 indices
      local dup, uniq, cols = { 2, 4, 2 }, { 4, 1, 3 }, { 5, 2 }
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local s1, s2 = ember.tensor(src1, { dtype = dt }), ember.tensor(src2, { dtype = dt })
        local what = dt .. ' ' .. name
        H.assert_close(x:index_add(1, dup, s1), ref_index_put(xt, 1, dup, src1, 1, true), 0, 0, what)
        H.assert_close(x:index_add(1, dup, s1, 2), ref_index_put(xt, 1, dup, src1, 2, true), 0, 0, what)
        H.assert_close(x:index_add(2, cols, s2), ref_index_put(xt, 2, cols, src2, 1, true), 0, 0, what)
        H.assert_close(x:index_copy(1, uniq, s1), ref_index_put(xt, 1, uniq, src1), 0, 0, what)
        H.assert_close(x:index_copy(2, i64(cols), s2), ref_index_put(xt, 2, cols, src2), 0, 0, what)
        H.assert_close(x:index_fill(2, cols, 3), ref_index_put(xt, 2, cols, 3), 0, 0, what)
        H.assert_close(x:index_fill(1, dup, 7), ref_index_put(xt, 1, dup, 7), 0, 0, what)
        H.assert_close(x, xt, 0, 0, what .. ': the input is untouched')
      end
    end
  end)

  it('work in place, with float alphas, on 3-D and transposed targets', function()
    H.seed(42)
    local t = int_table({ 2, 3, 4 })
    local src = H.rand_table({ 2, 3, 2 })
    local x = ember.tensor(t, { dtype = 'float64' })
    assert.are.equal(x, x:index_add_(3, { 4, 4 }, ember.tensor(src, { dtype = 'float64' }), -0.5))
    H.assert_close(x, ref_index_put(t, 3, { 4, 4 }, src, -0.5, true), 1e-12, 1e-12)
    local base = int_table({ 5, 4 })
    local y = ember.tensor(base):t()   -- [4,5]
    local yt = {}
    for i = 1, 4 do yt[i] = {} for j = 1, 5 do yt[i][j] = base[j][i] end end
    y:index_copy_(2, { 5, 1 }, ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 } }))
    H.assert_close(y, ref_index_put(yt, 2, { 5, 1 }, { { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 } }))
    y:index_fill_(1, { 2 }, -1)
    H.assert_close(y, ref_index_put(ref_index_put(yt, 2, { 5, 1 }, { { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 } }), 1, { 2 }, -1))
    local b = ember.zeros(2, 2, { dtype = 'bool' })
    b:index_fill_(2, { 2 }, true)
    H.assert_close(b, { { false, true }, { false, true } })
    -- Torch7's in-place names
    local z = ember.zeros(3)
    z:indexFill(1, { 1, 3 }, 2)
    z:indexAdd(1, { 3 }, ember.tensor({ 5 }))
    z:indexCopy(1, { 2 }, ember.tensor({ 9 }))
    H.assert_close(z, { 2, 9, 7 })
  end)

  it('accept a broadcast (expanded) source and empty index lists', function()
    local x = ember.zeros(3, 2)
    local src = ember.tensor({ { 1, 2 } }):expand(2, 2)
    H.assert_close(x:index_add(1, { 1, 1 }, src), { { 2, 4 }, { 0, 0 }, { 0, 0 } })
    H.assert_close(x:index_copy(1, {}, ember.zeros(0, 2)), { { 0, 0 }, { 0, 0 }, { 0, 0 } })
    H.assert_close(x:index_fill(2, {}, 5), { { 0, 0 }, { 0, 0 }, { 0, 0 } })
    local e = ember.zeros(0, 2)
    assert.are.equal(0, e:index_fill(2, { 1 }, 5):numel())
    assert.are.equal(0, e:index_add(2, { 2, 2 }, ember.ones(0, 2)):numel())
    assert.are.same({ 2, 0 }, { ember.zeros(2, 0):index_copy(1, { 2 }, ember.zeros(1, 0)):size(1), 0 })
  end)

  it('report bad shapes, alphas, targets and indices', function()
    local x = ember.zeros(3, 4)
    H.assert_error(function() x:index_add(1, { 1, 2 }, ember.zeros(3, 4)) end,
      'index_add: expected a source of shape [3,4] except 2 in dimension 1 (one slice per index), got [3,4]')
    H.assert_error(function() x:index_copy(2, { 5 }, ember.zeros(3, 1)) end,
      'index_copy: index 5 is out of bounds for dimension 2 with size 4')
    H.assert_error(function() x:index_fill(1, { 4 }, 1) end,
      'index_fill: index 4 is out of bounds for dimension 1 with size 3')
    H.assert_error(function() x:index_fill(1, ember.tensor({ 1 }), 1) end,
      'index_fill: expected an integer index tensor, got float32')
    H.assert_error(function() x:index_copy(1, i64({ { 1 } }), ember.zeros(1, 4)) end,
      'index_copy: expected a 0-d or 1-D index tensor, got 2-D')
    local xi = ember.zeros(3, { dtype = 'int64' })
    H.assert_error(function() xi:index_add_(1, { 1 }, ember.ones(1, { dtype = 'int64' }), 0.5) end,
      'index_add_: alpha must be an integer for a int64 tensor, got 0.5')
    H.assert_error(function() xi:index_add_(1, { 1 }, ember.ones(1)) end,
      'index_add_: result type float32 cannot be stored in place into a int64 tensor')
    local ex = ember.zeros(1, 4):expand(3, 4)
    H.assert_error(function() ex:index_fill_(2, { 1 }, 1) end,
      'index_fill_: cannot write in place into an expanded tensor')
    H.assert_error(function() x:index_fill(1, { 1 }, 'a') end, 'index_fill: expected a number, got string')
    H.assert_error(function() ember.tensor(1):index_fill(1, { 1, 1 }, 0) end,
      'index_fill: a 0-d input takes exactly one index, got 2')
  end)
end)

-- ---- masked_select --------------------------------------------------------------------------
local function ref_masked_select(t, m)
  local out = {}
  local ft, fm = H.flatten(t), H.flatten(m)
  for i = 1, #ft do if fm[i] ~= 0 then out[#out + 1] = ft[i] end end
  return out
end

describe('masked_select', function()
  it('matches the reference on every layout and dtype', function()
    H.seed(51)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 })
      local m = int_table({ 4, 5 }, 0, 1)
      local mask = ember.tensor(m, { dtype = 'bool' })
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        H.assert_close(x:masked_select(mask), ref_masked_select(xt, m), 0, 0, dt .. ' ' .. name)
      end
    end
  end)

  it('broadcasts the mask and the input together', function()
    local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    H.assert_close(x:masked_select(ember.tensor({ true, false, true })), { 1, 3, 4, 6 })
    local col = ember.tensor({ { 10 }, { 20 } })
    local m = ember.tensor({ { true, false, true }, { false, true, true } })
    H.assert_close(col:masked_select(m), { 10, 10, 20, 20 })
    H.assert_close(ember.masked_select(x, ember.tensor(true)), { 1, 2, 3, 4, 5, 6 })
    H.assert_close(x[m], { 1, 3, 5, 6 })   -- x[bool tensor]
  end)

  it('handles zero-size inputs and empty selections', function()
    assert.are.equal(0, ember.zeros(0, 3):masked_select(ember.zeros(0, 3, { dtype = 'bool' })):numel())
    local r = ember.ones(2, 2):masked_select(ember.zeros(2, 2, { dtype = 'bool' }))
    assert.are.same({ 0 }, { r:size(1) })
  end)

  it('reports non-bool masks and shapes that cannot broadcast', function()
    H.assert_error(function() ember.zeros(2):masked_select({ true, false }) end,
      'masked_select: expected a bool mask tensor, got table')
    H.assert_error(function() ember.zeros(2, 3):masked_select(ember.ones(2, 3)) end,
      'masked_select: expected a bool mask, got float32')
    H.assert_error(function() ember.zeros(2, 3):masked_select(ember.ones(2, 2, { dtype = 'bool' })) end,
      'masked_select: shapes [2,3] and [2,2] cannot broadcast')
  end)
end)

-- ---- nonzero --------------------------------------------------------------------------------
local function ref_nonzero(t)
  local out = {}
  for _, c in ipairs(coords(H.shape_of(t))) do
    local v = get(t, c)
    if v ~= 0 then out[#out + 1] = c end   -- NaN ~= 0 is true: NaN counts as nonzero
  end
  return out
end

describe('nonzero', function()
  it('matches the reference on every layout and dtype', function()
    H.seed(61)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 }, 0, 2)
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local r = x:nonzero()
        assert.are.equal('int64', r:dtype())
        local expected = ref_nonzero(xt)
        if #expected == 0 then assert.are.same({ 0, 2 }, { r:size(1), r:size(2) })
        else H.assert_close(r, expected, 0, 0, dt .. ' ' .. name) end
      end
    end
  end)

  it('counts NaN as nonzero and -0 as zero; handles 3-D, 0-d, bool and zero-size', function()
    H.assert_close(ember.tensor({ 0 / 0, -0.0, 1, 0 }):nonzero(), { { 1 }, { 3 } })
    H.assert_close(ember.tensor({ 0 / 0, -0.0, 1 }, { dtype = 'float16' }):nonzero(), { { 1 }, { 3 } })
    H.assert_close(ember.tensor({ 0 / 0, -0.0, 1 }, { dtype = 'bfloat16' }):nonzero(), { { 1 }, { 3 } })
    local t = int_table({ 2, 3, 4 }, 0, 1)
    H.assert_close(ember.tensor(t):nonzero(), ref_nonzero(t))
    local z = ember.tensor(5):nonzero()
    assert.are.same({ 1, 0 }, { z:size(1), z:size(2) })
    assert.are.same({ 0, 0 }, { ember.tensor(0):nonzero():size(1), ember.tensor(0):nonzero():size(2) })
    H.assert_close(ember.tensor({ true, false, true }):nonzero(), { { 1 }, { 3 } })
    local e = ember.zeros(0, 3):nonzero()
    assert.are.same({ 0, 2 }, { e:size(1), e:size(2) })
    local cols = ember.tensor({ { 0, 1 }, { 1, 1 } }):nonzero({ as_tuple = true })
    H.assert_close(cols[1], { 1, 2, 2 })
    H.assert_close(cols[2], { 2, 1, 2 })
  end)

  it('finds the same positions when the work is split across threads', function()
    local n = 200003
    local t = {}
    for i = 1, n do t[i] = (i % 7 == 0 or i % 11 == 0) and i or 0 end
    local r = ember.tensor(t, { dtype = 'int32' }):nonzero():totable()
    local k = 0
    for i = 1, n do
      if t[i] ~= 0 then
        k = k + 1
        if r[k][1] ~= i then error(('row %d: got %s expected %d'):format(k, r[k][1], i)) end
      end
    end
    assert.are.equal(k, #r)
  end)
end)
