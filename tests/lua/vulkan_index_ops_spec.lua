-- Indexing and sorting on the Vulkan device against the CPU, beyond the kernels' own spec
-- (vulkan_index_spec.lua): sorts of lines too long for one workgroup (the multi-pass merge
-- sort), with unique and topk built on them, and the ops composed from the indexing kernels
-- end to end (x[idx], x[mask], masked_select/masked_fill, embedding) with their gradients.
local VK = require('vk_helpers').open('vulkan indexing ops')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local on, agree, data, has_f64 = VK.on, VK.agree, VK.data, VK.has_f64
local rand_index = VK.rand_index


-- Values with many ties (stability shows in the indices) and, for floats, NaN, infinities
-- and signed zeros.
local function sort_data(dtype, shape, lo, hi)
  local x = data(dtype, shape, lo or -6, hi or 6)
  if VK.is_float(dtype) then
    local special = { 0 / 0, -0.0, 0.0, 1 / 0, -1 / 0 }
    local u = H.rand_table(shape, 0, 1)
    local m = H.map(function(v) return v < 0.1 and 1 or 0 end, u)
    local pick = H.map(function(v) return special[1 + math.floor(v * 333) % 5] end, u)
    x = ember.where(ember.tensor(m, { dtype = 'bool' }), ember.tensor(pick, { dtype = dtype }),
      x:floor())
  end
  return x
end

-- Sorted values compared bit for bit through NaN masks (NaN never equals itself).
local function agree_sorted(gv, gi, wv, wi, what)
  agree(gi, wi, what .. ' indices')
  agree(gv:isnan(), wv:isnan(), what .. ' nan')
  local z = ember.zeros(1, { dtype = wv:dtype() })
  agree(ember.where(gv:isnan(), on(z), gv), ember.where(wv:isnan(), z, wv), what .. ' values')
end

describe('vulkan indexing ops (' .. V .. ')', function()
  it('sort of long lines: every dtype, both directions, stable, NaN as the CPU', function()
    local dtypes = { 'float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
      'int64', 'bool' }
    if has_f64 then dtypes[#dtypes + 1] = 'float64' end
    for _, dtype in ipairs(dtypes) do
      -- more than one chunk, not a power of two: a ragged last run in every merge pass
      local x = sort_data(dtype, { 2, 5001 })
      for _, desc in ipairs({ false, true }) do
        local what = dtype .. (desc and ' desc' or '')
        local wv, wi = x:sort(2, desc)
        local gv, gi = on(x):sort(2, desc)
        agree_sorted(gv, gi, wv, wi, what)
      end
    end
  end)

  it('sort of long lines: layouts, dims, 1-D of 100k, argsort, zero rows', function()
    local x = sort_data('float32', { 3, 9000 }, -300, 300)
    for _, v in ipairs({
      { 'contiguous dim 2', x, 2 },
      { 'transposed dim 1', x:t():contiguous():t(), 2 },
      { 'columns (dim 1)', x:t():contiguous(), 1 },
      { 'sliced', ember.cat({ x, x }, 2)[{ {}, { 1, -1, 2 } }], 2 },
    }) do
      local name, t, dim = v[1], v[2], v[3]
      local tv = name == 'transposed dim 1' and on(x:t():contiguous()):t()
          or name == 'sliced' and on(ember.cat({ x, x }, 2))[{ {}, { 1, -1, 2 } }] or on(t)
      for _, desc in ipairs({ false, true }) do
        local wv, wi = t:sort(dim, desc)
        local gv, gi = tv:sort(dim, desc)
        agree_sorted(gv, gi, wv, wi, name .. (desc and ' desc' or ''))
      end
    end
    local y = data('float32', { 100000 }, -1e4, 1e4)
    local wv, wi = y:sort(1)
    local gv, gi = on(y):sort(1)
    agree_sorted(gv, gi, wv, wi, '1-D 100k')
    local z = data('int32', { 3, 7000, 2 }, -50, 50)
    agree(on(z):argsort(2, true), z:argsort(2, true), '3-D argsort')
    local e = ember.zeros(0, 5000)
    agree(select(2, on(e):sort(2)), select(2, e:sort(2)), 'zero rows')
  end)

  it('sort of short lines, many to a workgroup: lengths 1 to 129, 3-D, topk', function()
    for _, n in ipairs({ 1, 2, 3, 17, 64, 128, 129 }) do
      for _, dtype in ipairs({ 'float32', 'int16' }) do
        local x = sort_data(dtype, { 1000, n })
        for _, desc in ipairs({ false, true }) do
          local what = dtype .. ' n=' .. n .. (desc and ' desc' or '')
          local wv, wi = x:sort(2, desc)
          local gv, gi = on(x):sort(2, desc)
          agree_sorted(gv, gi, wv, wi, what)
        end
      end
    end
    local y = sort_data('float64', { 30, 11, 40 })
    if has_f64 then
      local wv, wi = y:sort(2)
      local gv, gi = on(y):sort(2)
      agree_sorted(gv, gi, wv, wi, 'float64 3-D middle dim')
    end
    local z = data('float32', { 5000, 10 })
    local tv, ti = z:topk(3, 2)
    local gv, gi = on(z):topk(3, 2)
    agree(gv, tv, 'topk values')
    agree(gi, ti, 'topk indices')
  end)

  it('unique and topk over long inputs', function()
    local x = data('int32', { 20000 }, -300, 300)
    local u, inv, cnt = on(x):unique({ return_inverse = true, return_counts = true })
    local u0, inv0, cnt0 = x:unique({ return_inverse = true, return_counts = true })
    agree(u, u0, 'unique values')
    agree(inv, inv0, 'unique inverse')
    agree(cnt, cnt0, 'unique counts')
    local f = sort_data('float32', { 90, 70 })
    agree(on(f):unique(), f:unique(), 'unique of a 2-D float tensor with NaN')
    local y = data('float32', { 4, 30000 })
    for _, largest in ipairs({ true, false }) do
      local tv, ti = y:topk(9, 2, largest)
      local gv, gi = on(y):topk(9, 2, largest)
      agree(gv, tv, 'topk values')
      agree(gi, ti, 'topk indices')
    end
  end)

  it('sort backward through long lines (values.grad scattered to x)', function()
    local x = data('float32', { 2, 6000 })
    local g = data('float32', { 2, 6000 })
    local grads = {}
    for _, dev in ipairs({ 'cpu', V }) do
      local p = x:to(dev):requires_grad_(true)
      local v = p:sort(2, true)
      v:backward(g:to(dev))
      grads[dev] = p.grad
    end
    agree(grads[V], grads.cpu, 'x.grad')
  end)

  it('x[idx], x[mask], masked_select, masked_fill and assignment through them', function()
    for _, dtype in ipairs({ 'float32', 'int64', 'float16', 'bool' }) do
      for _, v in ipairs(VK.layouts(function(s) return data(dtype, s) end, 37, 45)) do
        local name, xc, xv = v[1], v[2], v[3]
        local what = dtype .. ' ' .. name
        if xc:numel() == 0 then goto continue end
        local r, c = xc:size(1), xc:size(2)
        local idx = rand_index({ r + 23 }, r)
        agree(xv[on(idx)], xc[idx], what .. ' x[idx]')
        local mask = data('float32', { r, c }):gt(0)
        agree(xv[on(mask)], xc[mask], what .. ' x[mask]')
        local row = data('float32', { 1, c }):gt(0) -- a broadcast mask
        agree(xv:masked_select(on(row)), xc:masked_select(row), what .. ' masked_select bcast')
        agree(xv:masked_fill(on(mask), 1), xc:masked_fill(mask, 1), what .. ' masked_fill')
        if name ~= 'broadcast' then
          local a, b = xc:clone(), xv:clone()
          a[mask] = 0
          b[on(mask)] = 0
          agree(b, a, what .. ' x[mask] = 0')
          a[idx] = 1
          b[on(idx)] = 1
          agree(b, a, what .. ' x[idx] = 1')
        end
        ::continue::
      end
    end
    local big = data('float32', { 70000 })
    local m = big:gt(0.5)
    agree(on(big)[on(m)], big[m], 'x[mask] over 70k elements')
  end)

  it('scatter and index_copy in parallel: 1-D, many repeats, the last one wins', function()
    for _, dtype in ipairs({ 'float32', 'int8', 'int64' }) do
      local x = data(dtype, { 3000 }, -100, 100)
      local idx = rand_index({ 20000 }, 3000)
      local src = data(dtype, { 20000 }, -100, 100)
      agree(on(x):index_copy(1, on(idx), on(src)), x:index_copy(1, idx, src), dtype .. ' index_copy')
      agree(on(x):scatter(1, on(idx), on(src)), x:scatter(1, idx, src), dtype .. ' scatter')
      local a, b = x:clone(), on(x)
      a[idx] = 7
      b[on(idx)] = 7
      agree(b, a, dtype .. ' x[idx] = 7')
    end
    -- 2-D: along dim 1 of a transposed target, and scatter along dim 2 with few lines
    local x = data('float32', { 9, 400 }):t()
    local idx = rand_index({ 2000 }, 400)
    local src = data('float32', { 2000, 9 })
    agree(on(x:t():contiguous()):t():index_copy(1, on(idx), on(src)),
      x:index_copy(1, idx, src), 'index_copy into a transposed tensor')
    local y = data('int32', { 3, 500 }, -9, 9)
    local si = rand_index({ 3, 4000 }, 500)
    local ss = data('int32', { 3, 4000 }, -9, 9)
    agree(on(y):scatter(2, on(si), on(ss)), y:scatter(2, si, ss), 'scatter dim 2')
  end)

  it('index_select of whole rows (embedding lookups): word sizes, dims, offsets', function()
    for _, dtype in ipairs({ 'float32', 'int8', 'float16', 'int64', 'bool' }) do
      for _, shape in ipairs({ { 3, 20, 8 }, { 3, 20, 5 }, { 2, 9, 4 } }) do
        local x = data(dtype, shape, -50, 50)
        for dim = 1, 3 do
          local idx = rand_index({ 31 }, shape[dim])
          local what = dtype .. ' ' .. table.concat(shape, 'x') .. ' dim ' .. dim
          agree(on(x):index_select(dim, on(idx)), x:index_select(dim, idx), what)
        end
        -- x at an offset in its storage (rows 2..), still contiguous
        local big = data(dtype, { shape[1] + 1, shape[2], shape[3] }, -50, 50)
        local idx = rand_index({ 40 }, shape[1])
        agree(on(big):narrow(1, 2, shape[1]):index_select(1, on(idx)),
          big:narrow(1, 2, shape[1]):index_select(1, idx), dtype .. ' offset')
      end
    end
    -- more rows than one grid dimension holds, and a strided index
    local w = data('float32', { 50, 4 })
    local idx = rand_index({ 70000 }, 50)
    agree(on(w):index_select(1, on(idx)), w:index_select(1, idx), 'rows beyond 65535')
    local si = rand_index({ 60 }, 50)
    agree(on(w):index_select(1, on(si)[{ { 1, -1, 3 } }]), w:index_select(1, si[{ { 1, -1, 3 } }]),
      'strided index')
  end)

  it('int64 scatter_add and index_add in parallel: carries between the 32-bit halves', function()
    local big = { 4294967295, -4294967297, 2147483647, -1, 1, 8589934593, -3, 4294967296 }
    local t = H.map(function(v) return big[1 + math.floor(v * 8)] end, H.rand_table({ 20000 }, 0, 1))
    local src = ember.tensor(t, { dtype = 'int64' })
    local idx = rand_index({ 20000 }, 37)
    local x = ember.tensor(H.map(function(v) return big[1 + math.floor(v * 8)] end,
      H.rand_table({ 37 }, 0, 1)), { dtype = 'int64' })
    agree(on(x):scatter_add(1, on(idx), on(src)), x:scatter_add(1, idx, src), 'scatter_add')
    agree(on(x):index_add(1, on(idx), on(src), -3), x:index_add(1, idx, src, -3), 'index_add')
    local x2 = ember.zeros(37, 3, { dtype = 'int64' })
    local s2 = ember.cat({ src:view(20000, 1), src:view(20000, 1), src:view(20000, 1) }, 2)
    agree(on(x2):index_add(1, on(idx), on(s2)), x2:index_add(1, idx, s2), 'index_add 2-D')
  end)

  it('float scatter_add and index_add: deterministic, bit for bit the CPU', function()
    local exact = { 0, 0 }
    for _, dt in ipairs({ 'float32', 'float64', 'float16', 'bfloat16' }) do
      if dt == 'float32' or has_f64 then
        local src = data(dt, { 30000 }, -1e3, 1e3)
        local idx = rand_index({ 30000 }, 41)
        local x = data(dt, { 41 }, -1, 1)
        agree(on(x):index_add(1, on(idx), on(src), 0.1), x:index_add(1, idx, src, 0.1),
          dt .. ' index_add', exact)
        agree(on(x):scatter_add(1, on(idx), on(src)), x:scatter_add(1, idx, src),
          dt .. ' scatter_add', exact)
        -- 2-D: index_add along dim 1 of a transposed target; scatter_add along dim 2
        local x2 = data(dt, { 6, 41 }):t()
        local s2 = data(dt, { 3000, 6 })
        local i2 = rand_index({ 3000 }, 41)
        agree(on(x2:t():contiguous()):t():index_add(1, on(i2), on(s2)), x2:index_add(1, i2, s2),
          dt .. ' index_add transposed', exact)
        local y = data(dt, { 4, 50 })
        local si = rand_index({ 4, 900 }, 50)
        local ss = data(dt, { 4, 900 })
        agree(on(y):scatter_add(2, on(si), on(ss)), y:scatter_add(2, si, ss),
          dt .. ' scatter_add dim 2', exact)
        -- an embedding's gradient: rows of a [V, D] table, lines fastest
        local g = data(dt, { 2000, 64 })
        local ti = rand_index({ 2000 }, 30)
        local w = ember.zeros(30, 64, { dtype = dt })
        agree(on(w):index_add(1, on(ti), on(g)), w:index_add(1, ti, g), dt .. ' rows', exact)
      end
    end
  end)

  it('nonzero over many blocks: dtypes, layouts, sparse and dense', function()
    for _, dtype in ipairs({ 'float32', 'int8', 'float16', 'int64', 'bool' }) do
      local x = sort_data(dtype, { 70, 130 }, -1, 2) -- NaN, -0.0 among the floats
      agree(on(x):nonzero(), x:nonzero(), dtype .. ' contiguous')
      agree(on(x:t():contiguous()):t():nonzero(), x:nonzero(), dtype .. ' transposed')
    end
    local y = data('float32', { 5, 3001, 3 }):gt(2.5) -- sparse, 3-D, a ragged last block
    agree(on(y):nonzero(), y:nonzero(), 'sparse 3-D')
    agree(on(ember.ones(3, 9000)):nonzero(), ember.ones(3, 9000):nonzero(), 'dense')
    local s = ember.cat({ y, y }, 3)[{ {}, {}, { 1, -1, 2 } }]
    agree(on(ember.cat({ y, y }, 3))[{ {}, {}, { 1, -1, 2 } }]:nonzero(), s:nonzero(), 'sliced')
  end)

  it('gradients of the composed ops match the CPU', function()
    local F = require 'ember.nn.functional'
    local x = data('float32', { 40, 24 })
    local idx = rand_index({ 7, 50 }, 40)
    local rows = rand_index({ 90 }, 40)
    local mask = data('float32', { 40, 24 }):gt(0)
    local gidx = rand_index({ 40, 5 }, 24)
    local cases = {
      { 'embedding', function(p, d) return F.embedding(idx:to(d), p, { padding_idx = 3 }) end },
      { 'x[idx]', function(p, d) return p[rows:to(d)] end },
      { 'masked_select', function(p, d) return p:masked_select(mask:to(d)) end },
      { 'masked_fill', function(p, d) return p:masked_fill(mask:to(d), 2) end },
      { 'gather', function(p, d) return p:gather(2, gidx:to(d)) end },
      { 'scatter_add', function(p, d)
        return ember.zeros(40, 24):to(d):scatter_add(2, gidx:to(d), p:narrow(2, 1, 5))
      end },
      { 'index_add', function(p, d)
        return ember.zeros(40, 24):to(d):index_add(1, rows:to(d), p[rows:to(d)], 0.5)
      end },
      { 'index_copy (x and src)', function(p, d)
        return (p * 2):index_copy(1, rows:narrow(1, 1, 12):to(d), p:narrow(1, 3, 12))
      end },
      { 'index_fill', function(p, d) return p:index_fill(2, gidx[1]:to(d), -1) end },
      { 'scatter (x and src)', function(p, d)
        return (p * 3):scatter(2, gidx:to(d), p:narrow(2, 2, 5))
      end },
      { 'x:index (Torch7 name)', function(p, d) return p:index(1, rows:to(d)) end },
      { 'topk', function(p, d) return (p:topk(3, 2)) end },
      { 'sort', function(p, d) return (p:sort(1, true)) end },
    }
    for _, c in ipairs(cases) do
      local grads = {}
      for _, dev in ipairs({ 'cpu', V }) do
        local p = x:clone():to(dev):requires_grad_(true) -- x:to('cpu') would be x itself
        local y = c[2](p, dev)
        y:backward(ember.ones(y:size()):to(dev):mul(1.5))
        grads[dev] = p.grad
      end
      agree(grads[V], grads.cpu, c[1] .. ': x.grad', { 1e-5, 1e-5 })
    end
  end)
end)
