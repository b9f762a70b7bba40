-- quant_linear_vk_spec: ember.quant.linear with a quantized (block dtype) weight on Vulkan (vk_quant_matmul.c: the
-- matrix-vector kernel for m <= 8, the tiled one above, the packed-int8 dot-product kernel for
-- Q8_0/Q4_0/Q4_K/Q6_K where the device has it) against the dequantize-then-dense product computed here in
-- float64 from the CPU's dequantized weight. Shapes: m = 1, 3 and 33, K of one block and of
-- many, N not a multiple of the kernels' 4 and 64 rows, a large N; zero and outlier blocks.
local VK = require('vk_helpers').open('vulkan quant linear')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local Q = ember.quant
local ffi = require 'ffi'

local function rand_rows(rows, cols, scale)
  local t = {}
  for r = 1, rows do
    t[r] = {}
    for j = 1, cols do t[r][j] = (H.random() - 0.5) * scale end
  end
  return t
end

-- Checks got [m, n] against x W^T in float64. The bound per output: float32 rounding of the
-- sum (plain kernels), plus, for the integer path (int8 true), x's int8 rounding (half a step
-- of each 32-block's amax / 127 times that block's sum of |W|), or for the tensor-core path
-- (int8 'f16') x and W rounded to float16 (2^-11 of each product, twice).
local function check(got, x, w, int8)
  local m, k, n = #x, #x[1], #w
  for i = 1, m do
    for j = 1, n do
      local ref, mag, q8 = 0, 0, 0
      for b = 0, k / 32 - 1 do
        local amax, wsum = 0, 0
        for l = b * 32 + 1, b * 32 + 32 do
          local xv, wv = x[i][l], w[j][l]
          ref = ref + xv * wv
          mag = mag + math.abs(xv * wv)
          amax = math.max(amax, math.abs(xv))
          wsum = wsum + math.abs(wv)
        end
        q8 = q8 + amax / 127 * 0.5 * wsum * 1.0001
      end
      local tol = 2e-6 * mag + (int8 == 'f16' and 1.2e-3 * mag + 1e-6 or int8 and q8 or 0) + 1e-30
      local g = got[i][j]
      if not (math.abs(g - ref) <= tol) then
        error(('out[%d][%d] = %.9g, expected %.9g (within %.3g)'):format(i, j, g, ref, tol), 2)
      end
    end
  end
end

local function run(q, g, x)
  local got = Q.linear(ember.tensor(x):to(V), g)
  assert.are.equal(V, tostring(got:device()))
  return got:cpu():totable()
end

describe('vulkan quant.linear (' .. V .. ')', function()
  local cases = { { format = 'q8_0' }, { format = 'q4_0' }, { format = 'q4_1' },
    { format = 'q4_k' }, { format = 'q6_k' }, { format = 'int8', group = 64 },
    { format = 'int8', group = 32, symmetric = true }, { format = 'int4', group = 128 },
    { format = 'int4', group = 32, symmetric = true } }
  for _, c in ipairs(cases) do
    local f = c.format
    local name = f .. (c.group and (' group ' .. c.group) or '') .. (c.symmetric and ' symmetric' or '')
    local be = f:find('_k') and 256 or (c.group or 32)
    local int8 = f == 'q8_0' or f == 'q4_0' or f == 'q4_k' or f == 'q6_k'  -- the integer path may take these
    it(name .. ' matches the dequantized product (m = 1, 3, 33; K one block and many)', function()
      H.seed(7)
      -- many blocks, m = 3 (matrix-vector) and m = 33 (tiled), N = 70 (not a multiple of 4 or 64)
      local k = be * (be == 256 and 2 or 3)
      local wt = rand_rows(70, k, 4)
      for l = 1, k do wt[5][l] = 0 end                      -- a zero row
      wt[9][k - 3] = 3000                                   -- one huge outlier
      local q = Q.quantize(ember.tensor(wt), c)
      local g = q:to(V)
      local w = q:dequantize():totable()
      local wt1 = rand_rows(1030, be, 1)
      local q1 = Q.quantize(ember.tensor(wt1), c)
      local g1, w1 = q1:to(V), q1:dequantize():totable()
      -- the formats with an integer path: each shape through it (where the device has it) and
      -- through the float kernel (EMBER_VK_QUANT_DOT=0)
      for _, dot in ipairs(int8 and { '0', 'auto' } or { 'auto' }) do
        VK.with_env('EMBER_VK_QUANT_DOT', dot, function()
          local x = rand_rows(3, k, 2)
          for l = 1, k do x[2][l] = 0 end                   -- a zero activation row
          check(run(q, g, x), x, w, dot ~= '0' and int8)
          -- m = 33: the float32 tile kernel, and the default (tensor cores where the device
          -- has them: float16 operands)
          local x33 = rand_rows(33, k, 2)
          for l = 1, k do x33[2][l] = 0 end
          -- (EMBER_VK_QUANT_MATVEC_MAX=8: by default 33 rows would take the matrix-vector kernel)
          VK.with_env('EMBER_VK_QUANT_MATVEC_MAX', '8', function()
            VK.with_env('EMBER_VK_QUANT_COOP', '0', function() check(run(q, g, x33), x33, w, false) end)
            if dot ~= '0' then check(run(q, g, x33), x33, w, 'f16') end
          end)
          -- K of one block, m = 1, N = 1030 (many workgroups, a partial last one)
          local x1 = rand_rows(1, be, 3)
          check(run(q1, g1, x1), x1, w1, dot ~= '0' and int8)
        end)
      end
    end)
  end

  it('leading dimensions follow nn.Linear', function()
    H.seed(3)
    local q = Q.quantize(ember.tensor(rand_rows(6, 64, 2)), { format = 'q8_0' })
    local xt = rand_rows(6, 64, 2)
    local got = Q.linear(ember.tensor(xt):to(V):view(2, 3, 64), q:to(V))
    assert.are.same({ 2, 3, 6 }, { got:size(1), got:size(2), got:size(3) })
    check(got:cpu():view(6, 6):totable(), xt, q:dequantize():totable(), true)
  end)

  it('a view of x off a vec4 boundary and an empty batch', function()
    H.seed(4)
    local wt = rand_rows(5, 32, 2)
    local q = Q.quantize(ember.tensor(wt), { format = 'q4_1' })
    local g = q:to(V)
    local flat = rand_rows(1, 32 * 3 + 1, 2)[1]
    local x = ember.tensor(flat):to(V):narrow(1, 2, 96):view(3, 32)  -- offset 1 element
    local xs = {}
    for i = 1, 3 do
      xs[i] = {}
      for l = 1, 32 do xs[i][l] = flat[1 + (i - 1) * 32 + l] end
    end
    check(Q.linear(x, g):cpu():totable(), xs, q:dequantize():totable(), false)
    local e = Q.linear(ember.zeros({ 0, 32 }):to(V), g)
    assert.are.same({ 0, 5 }, { e:size(1), e:size(2) })
  end)

  it('the integer-dot and plain matrix-vector kernels (EMBER_VK_QUANT_DOT)', function()
    H.seed(5)
    local k = 256 * 2
    local wt = rand_rows(13, k, 2)
    local x = rand_rows(2, k, 2)
    for _, f in ipairs({ 'q8_0', 'q4_0', 'q4_k', 'q6_k' }) do
      local q = Q.quantize(ember.tensor(wt), { format = f })
      local g = q:to(V)
      local w = q:dequantize():totable()
      local plain
      VK.with_env('EMBER_VK_QUANT_DOT', '0', function()
        plain = run(q, g, x)
        check(plain, x, w, false)
      end)
      VK.with_env('EMBER_VK_QUANT_DOT', '1', function()
        local ok, got = pcall(run, q, g, x)
        if not ok then
          assert.matches('integer-dot kernel is not implemented on ' .. V, got, 1, true)
          return
        end
        check(got, x, w, true)
        -- a different path ran: x's int8 rounding shows in the low bits
        local differs = false
        for i = 1, #got do
          for j = 1, #got[i] do differs = differs or got[i][j] ~= plain[i][j] end
        end
        assert.is_true(differs)
      end)
    end
  end)

  it('blocks starting past a word boundary of their storage (the word-wise reads)', function()
    H.seed(6)
    for _, f in ipairs({ 'q8_0', 'q4_0', 'q4_k' }) do
      -- a block tensor starts at a whole block: one block in, byte 34 (q8_0) or 18 (q4_0) is
      -- not a multiple of 4
      local be = Q.block_elems(f)
      local big = Q.quantize(ember.tensor(rand_rows(1, 5 * 256 + be, 2)), { format = f })
      local function rows(t) return t:view(-1):narrow(1, 2, 5 * 256 / be):view(5, 256 / be) end
      local q, r = rows(big), rows(big:to(V))
      assert.are.equal(1, r:storage_offset())
      local x = rand_rows(2, 256, 2)
      for _, dot in ipairs({ '0', 'auto' }) do
        VK.with_env('EMBER_VK_QUANT_DOT', dot, function()
          check(run(q, r, x), x, q:dequantize():totable(), dot ~= '0')
        end)
      end
    end
  end)

  it('the matrix-vector kernel walks x in chunks of 8 rows (EMBER_VK_QUANT_MATVEC_MAX=64)', function()
    H.seed(8)
    for _, f in ipairs({ 'q4_0', 'q4_1' }) do  -- the integer path where the device has it, the float one
      local q = Q.quantize(ember.tensor(rand_rows(11, 64, 2)), { format = f })
      local x = rand_rows(19, 64, 2)
      VK.with_env('EMBER_VK_QUANT_MATVEC_MAX', '64', function()
        check(run(q, q:to(V), x), x, q:dequantize():totable(), f == 'q4_0')
      end)
    end
  end)

  it('the matrix-vector kernel loops over weight rows past its grid (EMBER_VK_TEST=small-grid)', function()
    local out, err, rc = H.child(([[
      local ember = require 'ember'
      local Q = ember.quant
      ember.manual_seed(2)
      local q = Q.quantize(ember.rand(37, 64) - 0.5, { format = 'q4_1' })
      local x = ember.rand(2, 64) - 0.5
      local got = Q.linear(x:to(%q), q:to(%q)):cpu():double()
      local want = x:double():matmul(q:dequantize():double():t())
      print((got - want):abs():max():item() < 1e-5)
    ]]):format(V, V), 'EMBER_VK_TEST=small-grid')
    assert.are.equal(0, rc, err)
    assert.are.equal('true\n', out)
  end)

  it('float16 and bfloat16 x and out through the C function (float32 arithmetic)', function()
    H.seed(9)
    local C = ember.C
    local q = Q.quantize(ember.tensor(rand_rows(9, 64, 2)), { format = 'q4_1' })
    local g = q:to(V)
    local w = q:dequantize():totable()
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      for _, m in ipairs({ 2, 12 }) do
        -- x rounded to dt first, so the reference sees the same activations
        local x = ember.tensor(rand_rows(m, 64, 2)):to(dt)
        local xt = x:float():totable()
        local out = ember.empty({ m, 9 }, { dtype = dt, device = V })
        assert.are.equal(0, C.em_quant_linear_grouped(x:to(V).ptr, Q.bytes(g).ptr, 2, 0, 0, out.ptr))
        -- out is the result rounded to dt: within half its ulp (2^-11 or 2^-8 relative, doubled
        -- here); where m = 12 takes the tensor-core tiles, the weights are staged in float16,
        -- each within 2^-11 of its value: at most 2^-11 of sum |x w| more
        local got = out:cpu():float():totable()
        local rel = dt == 'float16' and 2 ^ -10 or 2 ^ -7
        for i = 1, m do
          for j = 1, 9 do
            local ref, mag = 0, 0
            for l = 1, 64 do ref = ref + xt[i][l] * w[j][l]; mag = mag + math.abs(xt[i][l] * w[j][l]) end
            assert.is_true(math.abs(got[i][j] - ref) <= rel * math.abs(ref) + 2 ^ -11 * mag,
              ('%s m=%d out[%d][%d] = %g, expected %g'):format(dt, m, i, j, got[i][j], ref))
          end
        end
      end
    end
    local xi = ember.zeros({ 1, 64 }, { dtype = 'int32' }):to(V)
    local out = ember.empty({ 1, 9 }, { device = V })
    assert.are.equal(-1, C.em_quant_linear_grouped(xi.ptr, Q.bytes(g).ptr, 2, 0, 0, out.ptr))
    assert.matches('quant_linear: not implemented on ' .. V .. ' for int32 activations',
      ffi.string(C.em_last_error()), 1, true)
  end)

  it('em_quant_linear_grouped on the CPU takes the affine formats with their group', function()
    H.seed(10)
    local C = ember.C
    local q = Q.quantize(ember.tensor(rand_rows(7, 128, 2)), { format = 'int4', group = 64 })
    local x = rand_rows(3, 128, 2)
    local out = ember.empty({ 3, 7 })
    assert.are.equal(0, C.em_quant_linear_grouped(ember.tensor(x).ptr, Q.bytes(q).ptr,
      6, 64, 0, out.ptr))
    check(out:totable(), x, q:dequantize():totable(), true)
    assert.are.equal(-1, C.em_quant_linear(ember.tensor(x).ptr, Q.bytes(q).ptr, 6, out.ptr))
    assert.matches('call em_quant_linear_grouped', ffi.string(C.em_last_error()), 1, true)
  end)

  it('refuses mismatched devices and shapes with the function named', function()
    local g = Q.quantize(ember.zeros({ 2, 64 }), { format = 'q8_0' }):to(V)
    local ok, err = pcall(Q.linear, ember.zeros({ 1, 64 }), g)
    assert.is_false(ok)
    assert.matches('ember.quant.linear: expected all tensors on cpu, got ' .. V .. ' for argument 2', err, 1, true)
    ok, err = pcall(Q.linear, ember.zeros({ 1, 32 }):to(V), g)
    assert.is_false(ok)
    assert.matches("expected the input's last dimension to be 64", err, 1, true)
  end)
end)
