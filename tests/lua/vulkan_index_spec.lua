-- Indexing and sorting on the Vulkan device against the CPU: index_select, gather, scatter,
-- scatter_add, index_add/copy/fill (the index_select, gather, scatter and index_put slots) and
-- sort (with argsort and topk built on it), on every dtype, contiguous/transposed/sliced
-- inputs, zero-size and workgroup-crossing sizes, repeated indices (accumulated with atomics,
-- or the last one winning as on the CPU), and gradients through embedding-style lookups.
local VK = require('vk_helpers').open('vulkan indexing')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local on, agree, data, has_f64 = VK.on, VK.agree, VK.data, VK.has_f64
local rand_index = VK.rand_index

local DTYPES = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
  'int64', 'bool' }

-- The layouts of a [r, c] input: contiguous, transposed, sliced, offset.
local function views(x)
  local r, c = x:size(1), x:size(2)
  if r == 0 then return { { 'zero-size', function(t) return t end, x } }, r, c end
  return {
    { 'contiguous', function(t) return t end, x },
    { 'transposed', function(t) return t:t() end, x:t():contiguous() },
    { 'sliced', function(t) return t[{ {}, { 1, -1, 2 } }] end, ember.cat({ x, x }, 2) },
    { 'offset', function(t) return t:narrow(1, 2, r) end, ember.cat({ x[{ { 1, 1 } }], x }, 1) },
  }, r, c
end

local function skip(dtype) return dtype == 'float64' and not has_f64 end

describe('vulkan indexing (' .. V .. ')', function()
  it('index_select and gather: every dtype, layouts, dims', function()
    for _, dtype in ipairs(DTYPES) do
      if not skip(dtype) then
        for _, shape in ipairs({ { 5, 7 }, { 67, 130 }, { 0, 4 } }) do
          local x0 = shape[1] == 0 and ember.zeros(0, 4, { dtype = dtype })
              or data(dtype, shape, -50, 50)
          local vs = views(x0)
          for _, v in ipairs(vs) do
            local name, f, base = v[1], v[2], v[3]
            local xc, xv = f(base), f(on(base))
            for dim = 1, 2 do
              local n = xc:size(dim)
              if n > 0 then
                local what = dtype .. ' ' .. name .. ' dim ' .. dim
                local idx = rand_index({ 2 * n + 3 }, n)
                agree(xv:index_select(dim, on(idx)), xc:index_select(dim, idx), what .. ' select')
                local ishape = { xc:size(1), xc:size(2) }
                ishape[dim] = n + 2
                local gi = rand_index(ishape, n)
                agree(xv:gather(dim, on(gi)), xc:gather(dim, gi), what .. ' gather')
                -- a transposed index
                local gt = rand_index({ ishape[2], ishape[1] }, n):t()
                agree(xv:gather(dim, on(gt)), xc:gather(dim, gt), what .. ' gather index^T')
              end
            end
          end
        end
      end
    end
  end)

  it('index_select across many workgroups and in 3-D', function()
    local x = data('float32', { 300, 257 })
    local idx = rand_index({ 500 }, 300)
    agree(on(x):index_select(1, on(idx)), x:index_select(1, idx), 'rows')
    local y = data('int16', { 4, 33, 9 })
    local iy = rand_index({ 40 }, 33)
    agree(on(y):index_select(2, on(iy)), y:index_select(2, iy), '3-D middle dim')
    local e = ember.tensor({}, { dtype = 'int64' })
    agree(on(y):index_select(2, on(e)), y:index_select(2, e), 'empty index')
  end)

  it('scatter and index_copy: the last repeated index wins, as on the CPU', function()
    for _, dtype in ipairs(DTYPES) do
      if not skip(dtype) then
        for _, v in ipairs((views(data(dtype, { 6, 9 }, -20, 20)))) do
          local name, f, base = v[1], v[2], v[3]
          for dim = 1, 2 do
            local xc = f(base)
            local n = xc:size(dim)
            local what = dtype .. ' ' .. name .. ' dim ' .. dim
            local sshape = { xc:size(1), xc:size(2) }
            sshape[dim] = n + 3 -- more entries than positions: repeats
            local src = data(dtype, sshape, -20, 20)
            local idx = rand_index(sshape, n)
            local want = xc:clone():scatter_(dim, idx, src)
            local xv = f(on(base))
            xv:scatter_(dim, on(idx), on(src))
            agree(xv, want, what .. ' scatter_')
            local i1 = rand_index({ n + 3 }, n)
            local s1shape = { xc:size(1), xc:size(2) }
            s1shape[dim] = n + 3
            local s1 = data(dtype, s1shape, -20, 20)
            agree(f(on(base)):index_copy(dim, on(i1), on(s1)), xc:index_copy(dim, i1, s1),
              what .. ' index_copy')
            agree(f(on(base)):index_fill(dim, on(i1), 1), xc:index_fill(dim, i1, 1),
              what .. ' index_fill')
          end
        end
      end
    end
  end)

  it('scatter_add and index_add accumulate repeated indices (atomics)', function()
    for _, dtype in ipairs(DTYPES) do
      if not skip(dtype) then
        for _, v in ipairs((views(data(dtype, { 6, 9 }, -4, 4)))) do
          local name, f, base = v[1], v[2], v[3]
          for dim = 1, 2 do
            local xc = f(base)
            local n = xc:size(dim)
            local what = dtype .. ' ' .. name .. ' dim ' .. dim
            local sshape = { xc:size(1), xc:size(2) }
            sshape[dim] = 3 * n
            local src = data(dtype, sshape, -4, 4)
            local idx = rand_index(sshape, n)
            local tol = dtype == 'float16' and { 4e-3, 4e-3 } or dtype == 'bfloat16'
                and { 3e-2, 3e-2 } or { 1e-5, 1e-5 }
            agree(f(on(base)):scatter_add(dim, on(idx), on(src)), xc:scatter_add(dim, idx, src),
              what .. ' scatter_add', tol)
            local i1 = rand_index({ 3 * n }, n)
            local alpha = dtype == 'bool' and 1 or (VK.is_float(dtype) and 0.5 or 3)
            agree(f(on(base)):index_add(dim, on(i1), on(src), alpha),
              xc:index_add(dim, i1, src, alpha), what .. ' index_add', tol)
          end
        end
      end
    end
  end)

  it('index_add with many repeats across workgroups (embedding-gradient shape)', function()
    local src = data('float32', { 5000, 64 })
    local idx = rand_index({ 5000 }, 37)
    local x = ember.zeros(37, 64)
    agree(on(x):index_add(1, on(idx), on(src)), x:index_add(1, idx, src), 'f32', { 1e-4, 1e-4 })
    local si = data('int32', { 3000, 5 }, -100, 100)
    local ii = rand_index({ 3000 }, 11)
    local xi = ember.zeros(11, 5, { dtype = 'int32' })
    agree(on(xi):index_add(1, on(ii), on(si)), xi:index_add(1, ii, si), 'i32 exact')
  end)

  it('gradients: index_select and gather backward on the device', function()
    local w = data('float32', { 50, 16 })
    local idx = rand_index({ 300 }, 50)
    local gi = rand_index({ 20, 16 }, 50)
    local g1, g2 = data('float32', { 300, 16 }), data('float32', { 20, 16 })
    local grads = {}
    -- (the seed gradients are given: sum() is another area's kernel)
    for _, dev in ipairs({ 'cpu', V }) do
      local p = w:to(dev):requires_grad_(true)
      p:index_select(1, idx:to(dev)):backward(g1:to(dev))
      p:gather(1, gi:to(dev)):backward(g2:to(dev)) -- accumulates into p.grad
      grads[dev] = p.grad
    end
    agree(grads[V], grads.cpu, 'w.grad', { 1e-4, 1e-4 })
  end)

  -- embedding checks its indices' range with amax, a reduction kernel of another area: until
  -- that is on this device the test waits.
  local has_amax = pcall(function() return on(ember.ones(2)):amax() end)
  local embed_it = has_amax and it or function(name) pending(name .. ' (needs amax on ' .. V .. ')') end
  embed_it('nn.functional.embedding forward and backward (padding_idx) on the device', function()
    local F = require 'ember.nn.functional'
    local w = data('float32', { 40, 24 })
    local idx = rand_index({ 7, 50 }, 40)
    local g = data('float32', { 7, 50, 24 })
    local outs, grads = {}, {}
    for _, dev in ipairs({ 'cpu', V }) do
      local p = w:to(dev):requires_grad_(true)
      local y = F.embedding(idx:to(dev), p, { padding_idx = 3 })
      y:backward(g:to(dev))
      outs[dev], grads[dev] = y, p.grad
    end
    agree(outs[V], outs.cpu, 'embedding forward')
    agree(grads[V], grads.cpu, 'embedding weight.grad', { 1e-4, 1e-4 })
  end)

  -- Values with many ties (stability shows in the indices), NaN and signed zeros for floats.
  local function sort_data(dtype, shape)
    local x = data(dtype, shape, -6, 6)
    if VK.is_float(dtype) then
      local t = H.rand_table(shape, 0, 1)
      local special = { 0 / 0, -0.0, 0.0, 1 / 0, -1 / 0 }
      local m = H.map(function(v) return v < 0.15 and 1 or 0 end, t)
      local pick = H.map(function(v) return special[1 + math.floor(v * 5 * 6.66) % 5] end, t)
      x = ember.where(ember.tensor(m, { dtype = 'bool' }),
        ember.tensor(pick, { dtype = dtype }), x:floor())
    end
    return x
  end

  it('sort: stable, both directions, every dtype, NaN and -0.0 as the CPU', function()
    for _, dtype in ipairs(DTYPES) do
      if not skip(dtype) then
        local shapes = dtype == 'float32' and { { 7, 13 }, { 3, 300 }, { 37, 5 } }
            or { { 5, 300 } }
        for _, shape in ipairs(shapes) do
          local base = sort_data(dtype, shape)
          local vs = views(base)
          if dtype ~= 'float32' then vs = { vs[1], vs[2] } end -- layouts: float32 covers them
          for _, v in ipairs(vs) do
            local name, f, b = v[1], v[2], v[3]
            local xc, xv = f(b), f(on(b))
            for dim = 1, 2 do
              for _, desc in ipairs({ false, true }) do
                local what = dtype .. ' ' .. name .. ' dim ' .. dim .. (desc and ' desc' or '')
                local wv, wi = xc:sort(dim, desc)
                local gv, gi = xv:sort(dim, desc)
                agree(gi, wi, what .. ' indices')
                -- values bit for bit (NaN compares unequal, so compare through the indices)
                agree(gv:isnan(), wv:isnan(), what .. ' nan')
                agree(ember.where(gv:isnan(), on(ember.zeros(1, { dtype = dtype })), gv),
                  ember.where(wv:isnan(), ember.zeros(1, { dtype = dtype }), wv), what .. ' values')
              end
            end
          end
        end
      end
    end
  end)

  it('sort: long lines, 3-D, zero-size; argsort and topk', function()
    local x = sort_data('float32', { 4, 2048 })
    local wv, wi = x:sort(2)
    local gv, gi = on(x):sort(2)
    agree(gi, wi, 'n=2048 indices')
    local y = data('int32', { 3, 200, 5 }, -1000, 1000)
    local _, a = y:sort(2, true)
    local _, b = on(y):sort(2, true)
    agree(b, a, '3-D middle dim')
    agree(on(y):argsort(3), y:argsort(3), 'argsort')
    local tv, ti = y:topk(7, 2)
    local uv, ui = on(y):topk(7, 2)
    agree(uv, tv, 'topk values')
    agree(ui, ti, 'topk indices')
    local z = ember.zeros(0, 5)
    local zv, zi = on(z):sort(2)
    agree(zi, (select(2, z:sort(2))), 'zero-size')
    local long = on(data('float32', { 2, 100000 }))
    local ok, err = pcall(function() return long:sort(2) end)
    if not ok then assert.truthy(tostring(err):find('not implemented on vulkan', 1, true)) end
  end)

  it('nonzero: every dtype, layouts, more than one chunk, NaN and -0.0', function()
    for _, dtype in ipairs(DTYPES) do
      if not skip(dtype) then
        local base = sort_data(dtype, { 45, 70 })
        if not VK.is_float(dtype) and dtype ~= 'bool' then base = base:clamp(-1, 1) end
        local vs = views(base)
        if dtype ~= 'float32' then vs = { vs[1], vs[2] } end
        for _, v in ipairs(vs) do
          local name, f, b = v[1], v[2], v[3]
          agree(f(on(b)):nonzero(), f(b):nonzero(), dtype .. ' ' .. name)
        end
      end
    end
    local z = ember.zeros(3, 0)
    agree(on(z):nonzero(), z:nonzero(), 'zero-size')
    local y = data('int8', { 3, 4, 5 }, -1, 2)
    agree(on(y):nonzero(), y:nonzero(), '3-D')
  end)
end)

-- Index checks on the device (check_index, vk_index_check.c): a bad index is not read back at
-- the call, which would make the host wait for the device's queue on every index op, but
-- reported at the next synchronization with the CPU's message; meanwhile the kernels skip it
-- (gathers give 0 there), so nothing outside the tensors is read or written.
describe('vulkan index checks on the device (' .. V .. ')', function()
  local F = require 'ember.nn.functional'
  local function waits() return ember.device(V):info().host_waits end
  local R, C = 5, 3 -- the indexed tensors are [R, C], indexed along dim 1

  -- Naive references over tables, skipping what an index outside [1, R] addresses.
  local function ok(i) return i >= 1 and i <= R end
  local function zeros(r, c)
    local t = {}
    for i = 1, r do
      t[i] = {}
      for j = 1, c do t[i][j] = 0 end
    end
    return t
  end
  local function select_ref(x, idx)
    local out = zeros(#idx, C)
    for k, i in ipairs(idx) do
      for j = 1, C do out[k][j] = ok(i) and x[i][j] or 0 end
    end
    return out
  end
  local function gather_ref(x, gi)
    local out = zeros(#gi, C)
    for r = 1, #gi do
      for j = 1, C do out[r][j] = ok(gi[r][j]) and x[gi[r][j]][j] or 0 end
    end
    return out
  end
  local function scatter_ref(x, gi, src, acc)
    for r = 1, #gi do
      for j = 1, C do
        local i = gi[r][j]
        if ok(i) then x[i][j] = acc and x[i][j] + src[r][j] or src[r][j] end
      end
    end
    return x
  end
  local function put_ref(x, idx, src, acc)
    for k, i in ipairs(idx) do
      for j = 1, C do
        if ok(i) then
          local v = type(src) == 'number' and src or src[k][j]
          x[i][j] = acc and x[i][j] + v or v
        end
      end
    end
    return x
  end

  -- The cases: make(b) gives the CPU operands with the bad index b among good ones; run(t)
  -- calls the op on them (t's tensors on either device) and returns what it wrote; ref(t)
  -- the expected contents of that, bad indices skipped, from t's (CPU) operands.
  local function ints(dtype) return function(v) return ember.tensor(v, { dtype = dtype }) end end
  local i64 = ints('int64')
  local function xdata(dtype) return data(dtype, { R, C }, -9, 9) end
  local function sel_case(name, dtype, transposed)
    return {
      name = name,
      make = function(b)
        local x = transposed and xdata(dtype):t():contiguous():t() or xdata(dtype)
        return { x = x, idx = i64({ 2, b, 1, R, 3 }) }
      end,
      run = function(t) return t.x:index_select(1, t.idx) end,
      ref = function(t) return select_ref(t.x:totable(), t.idx:totable()) end,
    }
  end
  local function scatter_case(name, dtype, acc, inplace)
    local fname = (acc and 'scatter_add' or 'scatter') .. (inplace and '_' or '')
    return {
      name = name .. ' ' .. fname,
      make = function(b)
        return { x = xdata(dtype), idx = i64({ { 1, b, 2 }, { 4, 1, 3 } }),
          src = data(dtype, { 2, C }, -9, 9) }
      end,
      run = function(t)
        local r = t.x[fname](t.x, 1, t.idx, t.src)
        return r
      end,
      ref = function(t)
        return scatter_ref(t.x:totable(), t.idx:totable(), t.src:totable(), acc)
      end,
      inplace = inplace,
    }
  end
  local function put_case(name, dtype, fname, inplace)
    local acc = fname == 'index_add'
    local m = fname .. (inplace and '_' or '')
    return {
      name = name .. ' ' .. m,
      make = function(b)
        return { x = xdata(dtype), idx = i64({ 2, b, 4, 1 }), src = data(dtype, { 4, C }, -9, 9) }
      end,
      run = function(t)
        if fname == 'index_fill' then return t.x[m](t.x, 1, t.idx, 7) end
        return t.x[m](t.x, 1, t.idx, t.src)
      end,
      ref = function(t)
        local src = fname == 'index_fill' and 7 or t.src:totable()
        return put_ref(t.x:totable(), t.idx:totable(), src, acc)
      end,
      inplace = inplace,
    }
  end
  local cases = {
    sel_case('rows', 'float32'),                  -- index_rows.comp
    sel_case('general', 'int16', true),           -- index.comp's GATHER
    {
      name = 'gather',
      make = function(b) return { x = xdata('float32'), idx = i64({ { 1, b, 2 }, { 5, 1, 1 } }) } end,
      run = function(t) return t.x:gather(1, t.idx) end,
      ref = function(t) return gather_ref(t.x:totable(), t.idx:totable()) end,
    },
    scatter_case('float32', 'float32', false, true),  -- index_last.comp
    scatter_case('float32', 'float32', false, false),
    scatter_case('float32', 'float32', true, true),   -- index_seg.comp
    scatter_case('int64', 'int64', true, true),       -- index.comp's SCATTER, 2-word atomics
    put_case('float32', 'float32', 'index_add', true),
    put_case('int32', 'int32', 'index_add', true),
    put_case('float32', 'float32', 'index_add', false),
    put_case('uint8', 'uint8', 'index_copy', true),
    put_case('float32', 'float32', 'index_copy', false),
    put_case('int8', 'int8', 'index_fill', true),
    put_case('float32', 'float32', 'index_fill', false),
    {
      name = 'embedding',
      make = function(b) return { x = xdata('float32'), idx = i64({ { 2, b }, { 1, R } }) } end,
      run = function(t) return F.embedding(t.idx, t.x) end,
      ref = function(t)
        local idx = t.idx:totable()
        return { select_ref(t.x:totable(), idx[1]), select_ref(t.x:totable(), idx[2]) }
      end,
    },
  }
  if has_f64 then cases[#cases + 1] = put_case('float64', 'float64', 'index_add', true) end

  -- Every kind of synchronization raises the report.
  local syncs = {
    { 'to', function(r) return r:to('cpu') end },
    { 'totable', function(r) return r:totable() end },
    { 'item', function(r) return r:sum():item() end },
    { 'synchronize', function() ember.synchronize(V) end },
  }

  local function on_all(t)
    local d = {}
    for k, v in pairs(t) do d[k] = on(v) end
    return d
  end

  -- Bad values (1-based, as Lua gives them): past the end, 0 and negative (C: -1 and -2),
  -- and one whose low 32 bits are a good index (C: 2^32 + 1).
  local BAD = { R + 1, 0, -1, 2 ^ 32 + 2 }

  it('report a bad or negative index at the next synchronization, with the CPU message', function()
    local n = 0
    for _, case in ipairs(cases) do
      for _, b in ipairs(BAD) do
        n = n + 1
        local sync = syncs[n % #syncs + 1]
        local what = case.name .. ' index ' .. b .. ' at ' .. sync[1]
        local t = case.make(b)
        -- the reference message: the CPU refuses at the call, before writing anything
        local okc, want = pcall(case.run, t)
        assert.is_false(okc, what .. ': the CPU accepted it')
        want = tostring(want):gsub('^[^:]*:%d+: ', '')
        local x0 = t.x:totable()
        local d = on_all(t)
        -- guards: device tensors made around the operands, which nothing may touch
        local guard = on(ember.arange(1, 257, { dtype = 'float32' }))
        ember.synchronize(V)
        local w0 = waits()
        local r = case.run(d)
        assert.are.equal(w0, waits(), what .. ': the op waited for the device')
        local okd, err = pcall(sync[2], r)
        assert.is_false(okd, what .. ': nothing was reported')
        err = tostring(err)
        assert.truthy(err:find(want, 1, true), what .. ': expected "' .. want .. '", got: ' .. err)
        assert.truthy(err:find('reported at its next synchronization', 1, true), what)
        -- reported once; then the device and every tensor on it carry on
        ember.synchronize(V)
        H.assert_close(guard:to('cpu'), ember.arange(1, 257, { dtype = 'float32' }):totable(),
          0, 0, what .. ': guard')
        H.assert_close(d.x:to('cpu'), case.inplace and case.ref(t) or x0, 1e-6, 1e-6,
          what .. ': the input')
        if not case.inplace then
          H.assert_close(r:to('cpu'), case.ref(t), 1e-6, 1e-6, what .. ': the result')
        end
        -- a correct op afterwards works
        local good = case.make(3)
        agree(case.run(on_all(good)), case.run(good), what .. ': a good op after it')
      end
    end
  end)
end)
