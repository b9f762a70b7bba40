-- Joining, reordering and sorting (cat, stack, split, chunk, flip, roll, repeat, tril, triu,
-- sort, argsort, topk, unique) against plain-Lua references on nested tables, for every layout
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



local coords, with, zeros, int_table = H.coords, H.with, H.zeros, H.int_table


local all_dtypes = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16',
  'int32', 'int64' }

local function size_list(x)
  local s = {}
  for i = 1, x:dim() do s[i] = x:size(i) end
  return s
end

-- Builds out[c] = f(c) over a shape.
local function build(shape, f)
  local out = zeros(shape)
  for _, c in ipairs(coords(shape)) do set(out, c, f(c)) end
  return out
end

-- ---- cat, stack -----------------------------------------------------------------------------
local function ref_cat(ts, dim)
  local shape = H.shape_of(ts[1])
  local offsets, total = {}, 0
  for k, t in ipairs(ts) do offsets[k] = total; total = total + H.shape_of(t)[dim] end
  shape[dim] = total
  return build(shape, function(c)
    for k = #ts, 1, -1 do
      if c[dim] > offsets[k] then return get(ts[k], with(c, dim, c[dim] - offsets[k])) end
    end
  end)
end

describe('cat', function()
  it('matches the reference for every layout, dim and dtype', function()
    H.seed(101)
    for _, dt in ipairs(all_dtypes) do
      local a, b = int_table({ 3, 4 }), int_table({ 3, 4 })
      local bx = ember.tensor(b, { dtype = dt })
      for _, v in ipairs(H.variants(a, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        H.assert_close(ember.cat({ x, bx }, 1), ref_cat({ xt, b }, 1), 0, 0, dt .. ' ' .. name)
        H.assert_close(ember.cat({ bx, x, x }, 2), ref_cat({ b, xt, xt }, 2), 0, 0, dt .. ' ' .. name)
        H.assert_close(ember.cat({ x, bx }, -1), ref_cat({ xt, b }, 2), 0, 0, dt .. ' ' .. name)
        assert.are.equal(dt, ember.cat({ x, bx }):dtype())
      end
    end
  end)

  it('defaults to dim 1, takes Torch7 forms, 3-D and different sizes along dim', function()
    H.seed(102)
    local a, b = int_table({ 2, 3, 2 }), int_table({ 2, 1, 2 })
    local x, y = ember.tensor(a), ember.tensor(b)
    H.assert_close(ember.cat({ x, y }, 2), ref_cat({ a, b }, 2))
    H.assert_close(ember.cat(x, y, 2), ref_cat({ a, b }, 2))
    H.assert_close(x:cat(y, 2), ref_cat({ a, b }, 2))
    H.assert_close(ember.cat({ x, x }), ref_cat({ a, a }, 1))
    H.assert_close(ember.cat({ x }), a)
  end)

  it('promotes dtypes like PyTorch', function()
    local i = ember.tensor({ 1, 2 }, { dtype = 'int32' })
    local f = ember.tensor({ 0.5 }, { dtype = 'float32' })
    local r = ember.cat({ i, f })
    assert.are.equal('float32', r:dtype())
    H.assert_close(r, { 1, 2, 0.5 })
    assert.are.equal('int64', ember.cat({ i, ember.tensor({ 3 }, { dtype = 'int64' }) }):dtype())
    assert.are.equal('int32', ember.cat({ i, ember.tensor({ true }) }):dtype())
  end)

  it('skips legacy empty 1-D tensors and joins zero-size tensors', function()
    local x = ember.tensor({ { 1, 2 }, { 3, 4 } })
    local e = ember.zeros(0)
    H.assert_close(ember.cat({ e, x, e }, 2), { { 1, 2 }, { 3, 4 } })
    local r = ember.cat({ ember.zeros(0, 2), x, ember.zeros(0, 2) }, 1)
    H.assert_close(r, { { 1, 2 }, { 3, 4 } })
    local z = ember.cat({ ember.zeros(2, 0), ember.zeros(2, 0) }, 1)
    assert.are.same({ 4, 0 }, size_list(z))
    assert.are.same({ 0 }, size_list(ember.cat({ e, e })))
  end)

  it('reports mismatched tensors and bad arguments', function()
    H.assert_error(function() ember.cat({ ember.zeros(2, 3), ember.zeros(2, 3, 1) }) end,
      'cat: expected shapes that match except in dimension 1, got [2,3] and [2,3,1]')
    H.assert_error(function() ember.cat({ ember.zeros(2, 3), ember.zeros(2, 4) }, 1) end,
      'cat: expected shapes that match except in dimension 1, got [2,3] and [2,4]')
    H.assert_error(function() ember.cat({ ember.zeros(2), ember.tensor(1) }) end,
      'cat: a 0-d tensor (number 2 in the list) cannot be concatenated')
    H.assert_error(function() ember.cat({}) end, 'cat: expected a non-empty list of tensors')
    H.assert_error(function() ember.cat({ ember.zeros(2), 3 }) end, 'cat: expected tensors, got number at position 2')
    H.assert_error(function() ember.cat({ ember.zeros(2, 2) }, 3) end,
      'cat: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() ember.cat(5) end, 'cat: expected a list of tensors, got number')
    H.assert_error(function() ember.cat({ ember.zeros(2, 2) }, 0) end, 'cat: dimensions are 1-based in Lua; got 0')
  end)
end)

describe('stack', function()
  it('matches the reference at every position, on every layout', function()
    H.seed(111)
    local a, b = int_table({ 3, 4 }), int_table({ 3, 4 })
    local bx = ember.tensor(b)
    for _, v in ipairs(H.variants(a, { dtype = 'int32' })) do
      local name, x, xt = v[1], v[2], v[3]
      H.assert_close(ember.stack({ x, bx }), { xt, b }, 0, 0, name)
      H.assert_close(ember.stack({ x, bx }, 2), build({ 3, 2, 4 }, function(c)
        return get(({ xt, b })[c[2]], { c[1], c[3] })
      end), 0, 0, name)
      H.assert_close(ember.stack({ x, bx, x }, -1), build({ 3, 4, 3 }, function(c)
        return get(({ xt, b, xt })[c[3]], { c[1], c[2] })
      end), 0, 0, name)
    end
    assert.are.same({ 2, 0, 3 }, size_list(ember.stack({ ember.zeros(0, 3), ember.zeros(0, 3) })))
    assert.are.same({ 2 }, size_list(ember.stack({ ember.tensor(1), ember.tensor(2) })))
  end)

  it('reports tensors of different shapes', function()
    H.assert_error(function() ember.stack({ ember.zeros(2, 3), ember.zeros(2, 4) }) end,
      'stack: expected tensors of one shape, got [2,3] and [2,4]')
    H.assert_error(function() ember.stack({ ember.zeros(2) }, 3) end,
      'stack: dimension 3 out of range for a 2-d tensor')
  end)
end)

describe('split and chunk', function()
  it('return views of the right sizes', function()
    local x = ember.arange(1, 11):view(2, 5)
    local parts = x:split(2, 2)
    assert.are.equal(3, #parts)
    H.assert_close(parts[1], { { 1, 2 }, { 6, 7 } })
    H.assert_close(parts[3], { { 5 }, { 10 } })
    assert.is_true(parts[2]:is_same_storage(x))
    local p2 = ember.split(x, { 1, 4 }, 2)
    H.assert_close(p2[2], { { 2, 3, 4, 5 }, { 7, 8, 9, 10 } })
    local rows = x:split(1)
    H.assert_close(rows[2], { { 6, 7, 8, 9, 10 } })
    local ch = x:chunk(2, 2)
    assert.are.equal(2, #ch)
    H.assert_close(ch[1], { { 1, 2, 3 }, { 6, 7, 8 } })
    H.assert_close(ch[2], { { 4, 5 }, { 9, 10 } })
    assert.are.equal(2, #x:chunk(3, 1))      -- at most n chunks, as in PyTorch
    assert.are.equal(3, #ember.zeros(0, 2):chunk(3))  -- n empty pieces, as PyTorch
  end)

  it('reports bad sizes', function()
    local x = ember.zeros(2, 5)
    H.assert_error(function() x:split({ 2, 2 }, 2) end, 'split: sizes add up to 4, but dimension 2 has size 5')
    H.assert_error(function() x:split(0) end, 'split: expected a positive integer size, got 0')
    H.assert_error(function() x:chunk(0) end, 'chunk: expected a positive number of chunks, got 0')
    H.assert_error(function() x:split(1, 3) end, 'split: dimension 3 out of range for a 2-d tensor')
  end)
end)

-- ---- flip, roll, repeat ---------------------------------------------------------------------
describe('flip', function()
  it('matches the reference for every layout, dims and dtype', function()
    H.seed(121)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 3, 4 })
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        H.assert_close(x:flip(1), build({ 3, 4 }, function(c) return xt[4 - c[1]][c[2]] end), 0, 0, dt .. name)
        H.assert_close(x:flip(2), build({ 3, 4 }, function(c) return xt[c[1]][5 - c[2]] end), 0, 0, dt .. name)
        H.assert_close(x:flip({ 1, -1 }), build({ 3, 4 }, function(c) return xt[4 - c[1]][5 - c[2]] end), 0, 0, dt .. name)
      end
    end
    local t3 = int_table({ 2, 3, 4 })
    H.assert_close(ember.flip(ember.tensor(t3), 1, 3), build({ 2, 3, 4 }, function(c)
      return t3[3 - c[1]][c[2]][5 - c[3]]
    end))
    assert.are.same({ 0, 3 }, size_list(ember.zeros(0, 3):flip(1, 2)))
    H.assert_close(ember.tensor(4):flip(1), 4)
  end)

  it('reports repeated and bad dims', function()
    H.assert_error(function() ember.zeros(2, 3):flip(1, 1) end, 'flip: dimension 1 appears more than once')
    H.assert_error(function() ember.zeros(2, 3):flip(3) end, 'flip: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() ember.zeros(2, 3):flip() end, 'flip: expected the dimensions to flip')
  end)
end)

describe('roll', function()
  local function ref_roll(t, shape, shifts, dims)
    return build(shape, function(c)
      local src = {}
      for k = 1, #c do src[k] = c[k] end
      for k = 1, #dims do
        local d, n = dims[k], shape[dims[k]]
        src[d] = (src[d] - 1 - shifts[k]) % n + 1
      end
      return get(t, src)
    end)
  end

  it('matches the reference for every layout, shift and dtype', function()
    H.seed(131)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 3, 4 })
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local what = dt .. ' ' .. name
        H.assert_close(x:roll(1, 1), ref_roll(xt, { 3, 4 }, { 1 }, { 1 }), 0, 0, what)
        H.assert_close(x:roll(-1, 2), ref_roll(xt, { 3, 4 }, { -1 }, { 2 }), 0, 0, what)
        H.assert_close(x:roll({ 5, 2 }, { 1, 2 }), ref_roll(xt, { 3, 4 }, { 5, 2 }, { 1, 2 }), 0, 0, what)
        H.assert_close(x:roll(4, 2), xt, 0, 0, what)
      end
    end
  end)

  it('rolls the flattened tensor without dims, and adds shifts on one dim', function()
    local x = ember.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
    H.assert_close(x:roll(2), { { 5, 6, 1 }, { 2, 3, 4 } })
    H.assert_close(x:t():roll(1), { { 6, 1 }, { 4, 2 }, { 5, 3 } })
    H.assert_close(x:roll({ 1, 1 }, { 2, 2 }), { { 2, 3, 1 }, { 5, 6, 4 } })
    local t3 = int_table({ 2, 3, 4 })
    H.assert_close(ember.roll(ember.tensor(t3), { 1, -2, 3 }, { 1, 2, 3 }),
      ref_roll(t3, { 2, 3, 4 }, { 1, -2, 3 }, { 1, 2, 3 }))
    assert.are.same({ 0, 3 }, size_list(ember.zeros(0, 3):roll(1, 1)))
    assert.are.same({ 0, 3 }, size_list(ember.zeros(0, 3):roll(2)))
  end)

  it('reports mismatched shifts and dims', function()
    H.assert_error(function() ember.zeros(2, 3):roll({ 1, 2 }, { 1 }) end,
      'roll: expected as many dims as shifts, got 2 shifts and 1 dims')
    H.assert_error(function() ember.zeros(2, 3):roll({ 1, 2 }) end, 'roll: without dims, expected one shift, got 2')
    H.assert_error(function() ember.zeros(2, 3):roll(1, 3) end, 'roll: dimension 3 out of range for a 2-d tensor')
  end)
end)

describe('repeat', function()
  local function ref_repeat(t, shape, reps)
    local lead = #reps - #shape
    local ps, os = {}, {}
    for d = 1, #reps do
      ps[d] = d <= lead and 1 or shape[d - lead]
      os[d] = ps[d] * reps[d]
    end
    return build(os, function(c)
      local src = {}
      for d = lead + 1, #reps do src[d - lead] = (c[d] - 1) % ps[d] + 1 end
      return #src == 0 and t or get(t, src)
    end)
  end

  it('matches the reference for every layout and dtype', function()
    H.seed(141)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 2, 3 })
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local what = dt .. ' ' .. name
        H.assert_close(x:repeat_tensor(2, 3), ref_repeat(xt, { 2, 3 }, { 2, 3 }), 0, 0, what)
        H.assert_close(x['repeat'](x, { 1, 2 }), ref_repeat(xt, { 2, 3 }, { 1, 2 }), 0, 0, what)
        H.assert_close(x:repeatTensor(2, 1, 2), ref_repeat(xt, { 2, 3 }, { 2, 1, 2 }), 0, 0, what)
      end
    end
  end)

  it('handles size-1 dims, zero repeats, 0-d inputs and many repeated dims', function()
    H.seed(142)
    local col = ember.tensor({ { 1 }, { 2 } })
    H.assert_close(col:repeat_tensor(2, 3), ref_repeat({ { 1 }, { 2 } }, { 2, 1 }, { 2, 3 }))
    assert.are.same({ 0, 3 }, size_list(col:repeat_tensor(0, 3)))
    assert.are.same({ 4, 0 }, size_list(ember.zeros(2, 0):repeat_tensor(2, 5)))
    H.assert_close(ember.tensor(7):repeat_tensor(3), { 7, 7, 7 })
    -- four repeated dims of size > 1 plus one more need nine view dims: the general path
    local t5 = int_table({ 2, 2, 2, 2, 2 })
    local r = ember.tensor(t5):repeat_tensor(2, 3, 2, 1, 3)
    H.assert_close(r, ref_repeat(t5, { 2, 2, 2, 2, 2 }, { 2, 3, 2, 1, 3 }))
    H.assert_close(ember.tensor(t5):repeat_tensor(1, 2, 2, 2, 2, 2),
      ref_repeat(t5, { 2, 2, 2, 2, 2 }, { 1, 2, 2, 2, 2, 2 }))
    local t4 = int_table({ 2, 2, 2, 2 })
    -- a non-contiguous input on the general path: the reference reads the transposed table
    local x4 = ember.tensor(t4):transpose(1, 4)
    local t4t = build({ 2, 2, 2, 2 }, function(c) return t4[c[4]][c[2]][c[3]][c[1]] end)
    H.assert_close(x4:repeat_tensor(3, 2, 2, 3), ref_repeat(t4t, { 2, 2, 2, 2 }, { 3, 2, 2, 3 }))
  end)

  it('reports too few and negative repeats', function()
    H.assert_error(function() ember.zeros(2, 3):repeat_tensor(2) end,
      'repeat: expected between 2 and 8 repeats (one per dimension at least), got 1')
    H.assert_error(function() ember.zeros(2, 3):repeat_tensor(2, -1) end,
      'repeat: expected repeats >= 0, got -1 for dimension 2')
    H.assert_error(function() ember.zeros(2, 3):repeat_tensor(2 ^ 40, 2 ^ 40) end, 'repeat:')
  end)
end)

-- ---- tril, triu -----------------------------------------------------------------------------
describe('tril and triu', function()
  local function ref_tri(t, shape, k, lower)
    return build(shape, function(c)
      local i, j = c[#c - 1], c[#c]
      local keep
      if lower then keep = j - i <= k else keep = j - i >= k end
      if keep then return get(t, c) end
      return 0
    end)
  end

  it('match the reference for every layout, diagonal and dtype', function()
    H.seed(151)
    for _, dt in ipairs(all_dtypes) do
      for _, shape in ipairs({ { 3, 5 }, { 5, 3 } }) do
        local t = int_table(shape, 1, 9)
        for _, v in ipairs(H.variants(t, { dtype = dt })) do
          local name, x, xt = v[1], v[2], v[3]
          for k = -6, 6 do
            local what = ('%s %s k=%d'):format(dt, name, k)
            H.assert_close(x:tril(k), ref_tri(xt, shape, k, true), 0, 0, 'tril ' .. what)
            H.assert_close(x:triu(k), ref_tri(xt, shape, k, false), 0, 0, 'triu ' .. what)
          end
        end
      end
    end
  end)

  it('work on batches, in place, with defaults and huge diagonals', function()
    H.seed(152)
    local t = int_table({ 2, 3, 4 }, 1, 9)
    local x = ember.tensor(t)
    H.assert_close(x:tril(), ref_tri(t, { 2, 3, 4 }, 0, true))
    H.assert_close(ember.triu(x, -1), ref_tri(t, { 2, 3, 4 }, -1, false))
    H.assert_close(x:tril(2 ^ 62), t)
    H.assert_close(x:triu(-2 ^ 62), t)
    H.assert_close(x:tril(-2 ^ 62), zeros({ 2, 3, 4 }))
    local y = ember.tensor(t)
    assert.are.equal(y, y:triu_(1))
    H.assert_close(y, ref_tri(t, { 2, 3, 4 }, 1, false))
    y = ember.tensor(t)
    y:tril_()
    H.assert_close(y, ref_tri(t, { 2, 3, 4 }, 0, true))
    H.assert_close(ember.ones(2, 2, { dtype = 'bool' }):tril(), { { true, false }, { true, true } })
    assert.are.same({ 0, 3 }, size_list(ember.zeros(0, 3):tril()))
    assert.are.same({ 2, 0, 3 }, size_list(ember.zeros(2, 0, 3):triu(1)))
  end)

  it('report inputs with fewer than 2 dims', function()
    H.assert_error(function() ember.zeros(3):tril() end,
      'tril: expected a tensor with at least 2 dimensions, got 1')
    H.assert_error(function() ember.zeros(3):triu() end,
      'triu: expected a tensor with at least 2 dimensions, got 1')
    H.assert_error(function() ember.zeros(3, 3):triu(0.5) end, 'triu: expected integer indices, got 0.5')
  end)
end)

-- ---- sort, argsort, topk, unique ------------------------------------------------------------
-- A stable reference sort of one list: positions ordered by value, NaN largest, ties by position.
local function ref_sort_list(vals, descending)
  local pos = {}
  for i = 1, #vals do pos[i] = i end
  local function key_before(a, b) -- strict "a comes before b" on values
    local va, vb = vals[a], vals[b]
    local na, nb = va ~= va, vb ~= vb
    if descending then
      if na ~= nb then return na end
      return not na and va > vb
    end
    if na ~= nb then return nb end
    return not na and va < vb
  end
  table.sort(pos, function(a, b)
    if key_before(a, b) then return true end
    if key_before(b, a) then return false end
    return a < b
  end)
  local out = {}
  for i = 1, #pos do out[i] = vals[pos[i]] end
  return out, pos
end

-- Sorts every line of t along dim (tables of any rank).
local function ref_sort(t, shape, dim, descending)
  local values, indices = zeros(shape), zeros(shape)
  local lines = {}
  for _, c in ipairs(coords(shape)) do
    if c[dim] == 1 then lines[#lines + 1] = c end
  end
  for _, c in ipairs(lines) do
    local vals = {}
    for i = 1, shape[dim] do vals[i] = get(t, with(c, dim, i)) end
    local sv, sp = ref_sort_list(vals, descending)
    for i = 1, shape[dim] do
      set(values, with(c, dim, i), sv[i])
      set(indices, with(c, dim, i), sp[i])
    end
  end
  return values, indices
end

describe('sort and argsort', function()
  it('match a stable reference for every layout, dim, direction and dtype', function()
    H.seed(161)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 6 }, 0, 3)    -- few distinct values: many ties
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        for dim = 1, 2 do
          for _, desc in ipairs({ false, true }) do
            local what = ('%s %s dim=%d desc=%s'):format(dt, name, dim, tostring(desc))
            local ev, ei = ref_sort(xt, { 4, 6 }, dim, desc)
            local gv, gi = x:sort(dim, desc)
            H.assert_close(gv, ev, 0, 0, what)
            H.assert_close(gi, ei, 0, 0, what)
            assert.are.equal(dt, gv:dtype())
            assert.are.equal('int64', gi:dtype())
            H.assert_close(x:argsort(dim, desc), ei, 0, 0, what)
          end
        end
      end
    end
  end)

  it('puts NaN last ascending and first descending, and keeps -0 and 0 in order', function()
    local x = ember.tensor({ 3, 0 / 0, -1, 0 / 0, 2, -0.0, 0 })
    local v, i = x:sort()
    H.assert_close(v, { -1, -0.0, 0, 2, 3, 0 / 0, 0 / 0 })
    H.assert_close(i, { 3, 6, 7, 5, 1, 2, 4 })
    local vd, id = x:sort(true)
    H.assert_close(vd, { 0 / 0, 0 / 0, 3, 2, -0.0, 0, -1 })
    H.assert_close(id, { 2, 4, 1, 5, 6, 7, 3 })
    for _, dt in ipairs({ 'float16', 'bfloat16', 'float64' }) do
      local y = ember.tensor({ 1, 0 / 0, -2, 1 / 0, -1 / 0 }, { dtype = dt })
      local yv, yi = y:sort()
      H.assert_close(yv, { -1 / 0, -2, 1, 1 / 0, 0 / 0 }, 0, 0, dt)
      H.assert_close(yi, { 5, 3, 1, 4, 2 }, 0, 0, dt)
    end
  end)

  it('sorts long lines (the radix path) of every dtype stably, with NaN, inf and -0', function()
    H.seed(163)
    local specials = { 0 / 0, 1 / 0, -1 / 0, -0.0, 0 }
    for _, dt in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16',
      'int32', 'int64', 'bool' }) do
      local is_float = dt:find('float') ~= nil
      local lo = (dt == 'uint8' or dt == 'bool') and 0 or -3
      local hi = dt == 'bool' and 1 or 3
      local vals = {}
      for i = 1, 700 do
        if is_float and i % 9 == 0 then vals[i] = specials[1 + (i / 9) % #specials]
        else vals[i] = math.floor(H.uniform(lo, hi + 1)) * (is_float and 0.5 or 1) end
      end
      local x = ember.tensor(vals, { dtype = dt })
      for _, desc in ipairs({ false, true }) do
        local ev, ei = ref_sort_list(vals, desc)
        local gv, gi = x:sort(1, desc)
        if dt == 'bool' then ev = H.map(function(v) return v ~= 0 end, ev) end
        H.assert_close(gv, ev, 0, 0, dt .. ' desc=' .. tostring(desc))
        H.assert_close(gi, ei, 0, 0, dt .. ' desc=' .. tostring(desc))
      end
    end
    -- a transposed input whose lines are long
    local t = H.nested({ 300, 3 }, function() return math.floor(H.uniform(0, 20)) end)
    local cols = ember.tensor(t):t()   -- [3, 300], lines strided
    local gv, gi = cols:sort(2)
    for r = 1, 3 do
      local line = {}
      for j = 1, 300 do line[j] = t[j][r] end
      local ev, ei = ref_sort_list(line, false)
      H.assert_close(gv:select(1, r), ev, 0, 0, 'row ' .. r)
      H.assert_close(gi:select(1, r), ei, 0, 0, 'row ' .. r)
    end
    -- int64 keys beyond 2^53 on the radix path
    local ffi = require 'ffi'
    local n = 300
    local big = ffi.new('int64_t[?]', n)
    for i = 0, n - 1 do big[i] = 1152921504606846976LL + (n - i) end   -- 2^60 + (n - i): ties as doubles
    local sizes = ffi.new('int64_t[1]', { n })
    local bt = require('ember.core').own(ember.C.em_from_buffer(big, ember.C.EM_INT64, 1, sizes, ember.C.EM_INT64, 0))
    local _, bi = bt:sort()
    local got = bi:totable()
    for j = 1, n do assert.are.equal(n - j + 1, got[j]) end
  end)

  it('sorts long lines, many lines (threads), 3-D, bool, int64 and 0-d inputs', function()
    H.seed(162)
    local long = H.nested({ 3000 }, function() return math.floor(H.uniform(0, 500)) end)
    local lv, li = ember.tensor(long, { dtype = 'int32' }):sort(1, true)
    local ev, ei = ref_sort(long, { 3000 }, 1, true)
    H.assert_close(lv, ev, 0, 0)
    H.assert_close(li, ei, 0, 0)
    local many = H.nested({ 2500, 20 }, function() return math.floor(H.uniform(0, 50)) end)
    local mv, mi = ember.tensor(many):sort(2)
    local mev, mei = ref_sort(many, { 2500, 20 }, 2, false)
    H.assert_close(mv, mev, 0, 0)
    H.assert_close(mi, mei, 0, 0)
    local t3 = int_table({ 2, 3, 4 })
    for dim = 1, 3 do
      local v3, i3 = ember.tensor(t3):sort(dim)
      local e3v, e3i = ref_sort(t3, { 2, 3, 4 }, dim, false)
      H.assert_close(v3, e3v, 0, 0, 'dim ' .. dim)
      H.assert_close(i3, e3i, 0, 0, 'dim ' .. dim)
    end
    local bv, bi = ember.tensor({ true, false, true, false }):sort()
    H.assert_close(bv, { false, false, true, true })
    H.assert_close(bi, { 2, 4, 1, 3 })
    -- int64 keys beyond 2^53 compare exactly
    local ffi = require 'ffi'
    local big = ffi.new('int64_t[3]', { 9007199254740993LL, 9007199254740992LL, -5LL })
    local sizes = ffi.new('int64_t[1]', { 3 })
    local bigt = ember.C.em_from_buffer(big, ember.C.EM_INT64, 1, sizes, ember.C.EM_INT64, 0)
    local bt = require('ember.core').own(bigt)
    local _, bidx = bt:sort()
    H.assert_close(bidx, { 3, 2, 1 })
    local sv, si = ember.tensor(5):sort()
    assert.are.equal(0, sv:dim())
    assert.are.equal(5, sv:item())
    assert.are.equal(1, si:item())
    local ez, ezi = ember.zeros(0, 3):sort(1)
    assert.are.same({ 0, 3 }, size_list(ez))
    assert.are.same({ 0, 3 }, size_list(ezi))
  end)

  it('reports bad dims', function()
    H.assert_error(function() ember.zeros(2, 3):sort(3) end, 'sort: dimension 3 out of range for a 2-d tensor')
    H.assert_error(function() ember.zeros(2, 3):argsort(-3) end, 'argsort: dimension -3 out of range for a 2-d tensor')
  end)
end)

describe('topk', function()
  it('matches the reference for every layout, k, direction and dtype', function()
    H.seed(171)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 }, 0, 4)
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        for _, largest in ipairs({ true, false }) do
          for k = 0, 5 do
            local ev, ei = ref_sort(xt, { 4, 5 }, 2, largest)
            local cut = function(m) return H.map(function(r) return r end, m) end
            local evk, eik = {}, {}
            for i = 1, 4 do
              evk[i], eik[i] = {}, {}
              for j = 1, k do evk[i][j] = ev[i][j]; eik[i][j] = ei[i][j] end
            end
            local gv, gi = x:topk(k, 2, largest)
            local what = ('%s %s k=%d largest=%s'):format(dt, name, k, tostring(largest))
            assert.are.same({ 4, k }, size_list(gv), what)
            if k > 0 then
              H.assert_close(gv, cut(evk), 0, 0, what)
              H.assert_close(gi, cut(eik), 0, 0, what)
            end
          end
        end
      end
    end
  end)

  it('defaults to the largest along the last dim, and ranks NaN largest', function()
    local x = ember.tensor({ { 1, 5, 3 }, { 0 / 0, 2, 9 } })
    local v, i = x:topk(2)
    H.assert_close(v, { { 5, 3 }, { 0 / 0, 9 } })
    H.assert_close(i, { { 2, 3 }, { 1, 3 } })
    local v1, i1 = ember.topk(x, 1, 1, false)
    H.assert_close(v1, { { 1, 2, 3 } })
    H.assert_close(i1, { { 1, 2, 1 } })
    local s, si = ember.tensor(4):topk(1)
    assert.are.equal(4, s:item())
    assert.are.equal(1, si:item())
    assert.are.same({ 0 }, size_list(ember.tensor(4):topk(0)))
    assert.are.same({ 0, 2 }, size_list(ember.zeros(0, 3):topk(2)))
  end)

  it('reports k out of range', function()
    H.assert_error(function() ember.zeros(2, 3):topk(4) end,
      'topk: k (4) is out of range for dimension 2 with size 3')
    H.assert_error(function() ember.zeros(2, 3):topk(-1, 1) end,
      'topk: k (-1) is out of range for dimension 1 with size 2')
    H.assert_error(function() ember.zeros(2, 3):topk(1, 3) end, 'topk: dimension 3 out of range')
    H.assert_error(function() ember.zeros(2, 3):topk(1.5) end, 'topk: expected integer indices, got 1.5')
  end)
end)

describe('unique', function()
  local function ref_unique(t)
    local flat = H.flatten(t)
    local sorted = ref_sort_list(flat, false)
    local values, counts = {}, {}
    for _, v in ipairs(sorted) do
      if #values > 0 and values[#values] == v then
        counts[#counts] = counts[#counts] + 1
      else
        values[#values + 1] = v
        counts[#counts + 1] = 1
      end
    end
    local inverse = H.map(function(v)
      for u = 1, #values do if values[u] == v then return u end end
    end, t)
    return values, inverse, counts
  end

  it('matches the reference for every layout and dtype', function()
    H.seed(181)
    for _, dt in ipairs(all_dtypes) do
      local t = int_table({ 4, 5 }, 0, 6)
      for _, v in ipairs(H.variants(t, { dtype = dt })) do
        local name, x, xt = v[1], v[2], v[3]
        local ev, einv, ecnt = ref_unique(xt)
        local gv, ginv, gcnt = x:unique({ return_inverse = true, return_counts = true })
        H.assert_close(gv, ev, 0, 0, dt .. ' ' .. name)
        H.assert_close(ginv, einv, 0, 0, dt .. ' ' .. name)
        H.assert_close(gcnt, ecnt, 0, 0, dt .. ' ' .. name)
        assert.are.equal(dt, gv:dtype())
        H.assert_close(x:unique(), ev, 0, 0, dt .. ' ' .. name)
        local v2, c2 = ember.unique(x, { return_counts = true })
        H.assert_close(v2, ev)
        H.assert_close(c2, ecnt)
      end
    end
  end)

  it('keeps each NaN apart, and handles bool, 0-d and zero-size inputs', function()
    local v, inv, cnt = ember.tensor({ 2, 0 / 0, 1, 0 / 0, 2 }):unique({ return_inverse = true, return_counts = true })
    H.assert_close(v, { 1, 2, 0 / 0, 0 / 0 })
    H.assert_close(inv, { 2, 3, 1, 4, 2 })
    H.assert_close(cnt, { 1, 2, 1, 1 })
    H.assert_close(ember.tensor({ true, false, true }):unique(), { false, true })
    local sv, sinv = ember.tensor(3):unique({ return_inverse = true })
    H.assert_close(sv, { 3 })
    assert.are.equal(0, sinv:dim())
    assert.are.equal(1, sinv:item())
    local ev, einv, ecnt = ember.zeros(0, 3):unique({ return_inverse = true, return_counts = true })
    assert.are.same({ 0 }, size_list(ev))
    assert.are.same({ 0, 3 }, size_list(einv))
    assert.are.same({ 0 }, size_list(ecnt))
  end)

  it('reports a bad options argument', function()
    H.assert_error(function() ember.zeros(2):unique(true) end, 'unique: expected an options table, got boolean')
  end)
end)
