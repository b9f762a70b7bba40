-- quant_dtype_spec: quantized formats as block dtypes of the core (DESIGN.md decision 13).
-- The generic paths move whole blocks, byte for byte, compared with the blocks the tensor held
-- (views, narrow, select, transposed copies, index_select, cat, save/load); the quantized
-- lookup of a QuantEmbedding equals dequantize-then-dense lookup; arithmetic, casts, fills
-- and reads of a block dtype raise "not implemented for <dtype>"; the profiler sees the
-- quantized ops.
local H = require 'tests.lua.helpers'
local ember = H.ember
local Q = ember.quant

local function bytes(q) return Q.bytes(q:contiguous()):totable() end
local function long(t) return ember.tensor(t, { dtype = 'int64' }) end

-- Row r, blocks a..b (1-based) of q's bytes, as a flat list.
local function block_bytes(q, r, a, b)
  local all, bb, per = bytes(q), q:element_size(), q:size(2)
  local out = {}
  for blk = a, b do
    for i = 1, bb do out[#out + 1] = all[r][(blk - 1) * bb + i] end
  end
  return out
end

describe('block dtypes', function()
  H.seed(12)
  local x = ember.randn({ 5, 128 })

  it('name every format as a dtype, with its block size and bytes', function()
    assert.are.equal('q4_k', ember.q4_k)
    assert.are.equal('int4_g32_sym', ember.int4_g32_sym)
    assert.are.equal(256, Q.block_elems('q4_k'))
    assert.are.equal(1, Q.block_elems('float32'))
    local q = Q.quantize(x, { format = 'int8', group = 32, symmetric = true })
    assert.are.equal('int8_g32_sym', q:dtype())
    assert.are.equal(34, q:element_size())
    assert.are.same({ 5, 4 }, { q:size(1), q:size(2) })
    assert.are.same({ 5, 128 }, { q:weight_size(1), q:weight_size(2) })
    assert.are.equal(128, q:weight_size(-1))
    assert.are.equal(5 * 4 * 34, q:nbytes())
    assert.is_true(q:is_quantized())
    assert.is_false(x:is_quantized())
    assert.is_false(q:is_floating_point())
    assert.matches('weight_size: dimension 3 out of range', select(2, pcall(q.weight_size, q, 3)))
  end)

  it('print their dtype, both shapes and the dequantized weights', function()
    local q = Q.quantize(ember.ones({ 2, 32 }), { format = 'q8_0' })
    local s = tostring(q)
    assert.truthy(s:find('tensor(q8_0, weights [2, 32], blocks [2, 1], 68 bytes)', 1, true), s)
    assert.truthy(s:find(tostring(q:dequantize()), 1, true), s)
    local big = tostring(Q.quantize(ember.ones({ 64, 256 }), { format = 'q4_k' }))
    assert.are.equal('tensor(q4_k, weights [64, 256], blocks [64, 1], 9216 bytes)', big)
  end)

  it('take views and copies along whole blocks, byte for byte', function()
    local q = Q.quantize(x, { format = 'q4_0' })  -- [5, 4] blocks of 18 bytes
    local n = q:narrow(2, 2, 2)
    assert.are.equal('q4_0', n:dtype())
    assert.is_false(n:is_contiguous())
    assert.are.same(block_bytes(q, 3, 2, 3), bytes(n)[3])
    assert.are.same(q:dequantize():narrow(2, 33, 64):totable(), n:contiguous():dequantize():totable())
    local row = q[4]
    assert.are.same({ 4 }, { row:size(1) })
    assert.are.same(block_bytes(q, 4, 1, 4), Q.bytes(row:contiguous()):totable())
    local t = q:t():contiguous()                -- [4, 5]: block (j, i) is q's (i, j)
    assert.are.same(block_bytes(q, 2, 3, 3), block_bytes(t, 3, 2, 2))
    local c = q:clone()
    assert.are.same(bytes(q), bytes(c))
    local v = q:view(20)
    assert.are.same(block_bytes(q, 2, 1, 1), { unpack(Q.bytes(v):totable(), 18 * 4 + 1, 18 * 5) })
  end)

  it('pick rows (and blocks) with index_select, as the dense weights would', function()
    for _, f in ipairs({ 'q8_0', 'q4_k', 'q6_k', 'int4' }) do
      local w = f:find('_k') and ember.randn({ 6, 256 }) or x
      local q = Q.quantize(w, { format = f })
      local idx = long({ 5, 1, 5, 2 })
      local r = q:index_select(1, idx)
      assert.are.equal(q:dtype(), r:dtype())
      assert.are.same({ 4, q:size(2) }, { r:size(1), r:size(2) })
      assert.are.same(q:dequantize():index_select(1, idx):totable(), r:dequantize():totable())
    end
    local q = Q.quantize(x, { format = 'q8_0' })
    local blocks = q:index_select(2, long({ 4, 1 }))
    assert.are.same(block_bytes(q, 1, 4, 4), { unpack(bytes(blocks)[1], 1, 34) })
    assert.matches('index 6 is out of bounds for dimension 1 with size 5', select(2, pcall(q.index_select, q, 1, long({ 6 }))))
  end)

  it('join with cat and stack', function()
    local q = Q.quantize(x, { format = 'q4_1' })
    local c = ember.cat({ q, q:narrow(1, 2, 2) }, 1)
    assert.are.same({ 7, 4 }, { c:size(1), c:size(2) })
    assert.are.same(bytes(q)[3], bytes(c)[7])
    local s = ember.stack({ q, q })
    assert.are.same(bytes(q)[5], bytes(s[2])[5])
  end)

  it('save and load byte for byte, views included', function()
    local q = Q.quantize(x, { format = 'int4', group = 64 })
    local k = Q.quantize(ember.randn({ 3, 512 }), { format = 'q4_k' })
    local path = os.tmpname()
    ember.save(path, { a = q, b = { k = k:narrow(2, 2, 1) }, n = 3 })
    local back = ember.load(path)
    os.remove(path)
    assert.are.equal('int4_g64', back.a:dtype())
    assert.are.same(bytes(q), bytes(back.a))
    assert.are.equal('q4_k', back.b.k:dtype())
    assert.are.same(bytes(k:narrow(2, 2, 1)), bytes(back.b.k))
    assert.are.equal(3, back.n)
  end)

  it('refuse arithmetic, casts, fills and reads with a clear error', function()
    local q = Q.quantize(x, { format = 'q8_0' })
    local cases = {
      { function() return q + q end, 'add: not implemented for q8_0' },
      { function() return q * 2 end, 'mul: not implemented for q8_0' },
      { function() return q:exp() end, 'q8_0' },
      { function() return q:sum() end, 'sum: not implemented for q8_0' },
      { function() return q:max() end, 'q8_0' },
      { function() return q:float() end, 'casting q8_0 to float32 is not implemented' },
      { function() return x:to('q8_0') end, 'casting float32 to q8_0 is not implemented' },
      { function() return q:fill_(1) end, 'fill_: not implemented for q8_0' },
      { function() return ember.zeros(2, { dtype = 'q8_0' }) end, 'zeros: not implemented for q8_0' },
      { function() return q[1][1]:item() end, 'item: not implemented for q8_0' },
      { function() return q:matmul(q:t()) end, 'not implemented for q8_0' },
      { function() return q:sort() end, 'sort: not implemented for q8_0' },
      { function() return q:gather(1, long({ { 1 } })) end, 'gather: not implemented for q8_0' },
      { function() return ember.nn.functional.embedding(long({ 1 }), q) end,
        'embedding: not implemented for q8_0' },
    }
    for i, c in ipairs(cases) do
      local ok, err = pcall(c[1])
      assert.is_false(ok, 'case ' .. i)
      assert.truthy(tostring(err):find(c[2], 1, true), 'case ' .. i .. ': ' .. tostring(err))
    end
  end)

  it('refuse to record a product with a quantized weight for autograd', function()
    local w = Q.quantize(ember.randn({ 4, 64 }), { format = 'q8_0' })
    local x = ember.randn({ 2, 64 }):requires_grad_()
    local ok, err = pcall(Q.linear, x, w)
    assert.is_false(ok)
    assert.truthy(err:find('has no backward (weight-only quantization is for inference: run it ' ..
      'under no_grad)', 1, true), err)
    local y = ember.no_grad(function() return Q.linear(x, w) end)
    assert.are.same({ 2, 4 }, { y:size(1), y:size(2) })
  end)

  it('are refused by the collectives, which have no MPI type for them', function()
    -- in a process of its own: MPI starts once per process
    local bin = os.getenv('EMBER_BIN') or 'build/ember'
    local p = io.popen(bin .. [[ -e "local d = ember.distributed
      if not pcall(d.init) then print('no MPI') return end
      local q = ember.quant.quantize(ember.randn(2, 32), {format = 'q8_0'})
      print(select(2, pcall(d.all_reduce, q)))" 2>&1]])
    local out = p:read('*a')
    p:close()
    if out:find('no MPI', 1, true) then return end -- without Open MPI there is nothing to check
    assert.truthy(out:find('all_reduce: t has the quantized dtype q8_0, which collectives do not move',
      1, true), out)
  end)

  it('show the quantized ops in the profiler', function()
    local w = Q.quantize(ember.randn({ 4, 64 }), { format = 'q8_0' })
    local p = ember.profiler.profile({ activities = { 'cpu' } }, function()
      local q = Q.quantize(ember.randn({ 2, 64 }), { format = 'q4_0' })
      local _ = q:dequantize()
      local _ = Q.linear(ember.randn({ 3, 64 }), w)
    end)
    local seen = {}
    for _, e in ipairs(p:events()) do seen[e.name] = true end
    assert.is_true(seen.quantize)
    assert.is_true(seen.dequantize)
    assert.is_true(seen.quant_linear)
  end)
end)

describe('QuantEmbedding', function()
  it('looks up the rows of blocks and dequantizes only those, as the dense lookup of the '
    .. 'dequantized weight', function()
    local nn = ember.nn
    ember.manual_seed(3)
    for _, f in ipairs({ 'q8_0', 'q4_k', 'int8' }) do
      local model = nn.Sequential(nn.Embedding(11, 256))
      local _, report = Q.quantize_model(model, { format = f, verbose = false })
      assert.are.same({ '0' }, report.quantized)
      local e = model[1]
      assert.are.equal('QuantEmbedding', e.__name)
      local idx = long({ { 3, 11, 1 }, { 3, 4, 7 } })
      local got = e:forward(idx)
      local dense = nn.functional.embedding(idx, e.weight:dequantize())
      assert.are.same({ 2, 3, 256 }, { got:size(1), got:size(2), got:size(3) })
      assert.are.same(dense:totable(), got:totable())
    end
    local m = nn.Sequential(nn.Embedding(4, 48))
    local _, r = Q.quantize_model(m, { format = 'q8_0', verbose = false })
    assert.matches('embedding_dim = 48 is not a multiple of the q8_0 block %(32%)', r.skipped[1][2])
  end)

  it('keeps the blocks in state_dict and ember.save', function()
    local nn = ember.nn
    local model = nn.Sequential(nn.Embedding(4, 64), nn.Linear(64, 8))
    Q.quantize_model(model, { format = 'q8_0', verbose = false })
    local sd = model:state_dict()
    assert.are.equal('q8_0', sd['0.weight']:dtype())
    assert.are.equal('q8_0', sd['1.weight']:dtype())
    local path = os.tmpname()
    ember.save(path, sd)
    local back = ember.load(path)
    os.remove(path)
    local fresh = nn.Sequential(nn.Embedding(4, 64), nn.Linear(64, 8))
    Q.quantize_model(fresh, { format = 'q8_0', verbose = false })
    fresh:load_state_dict(back)
    local idx = long({ 2, 4 })
    assert.are.same(model:forward(idx):totable(), fresh:forward(idx):totable())
  end)
end)
