-- The Vulkan device against the CPU: every op with a Vulkan kernel runs on both, on the same
-- logical inputs in several layouts (contiguous, transposed, sliced, offset, broadcast,
-- zero-size, large enough to cross workgroups, more dimensions than the kernels take at once),
-- and the results must agree within per-dtype tolerances. Plus transfers, memory statistics,
-- out-of-memory recovery, device mismatch errors, and runs in child processes: descriptor
-- pools instead of push descriptors, specialized pipelines, a tiny dispatch grid, the on-disk
-- pipeline cache. tests/lua/device_spec.lua runs this whole file once more under the Khronos
-- validation layer (EMBER_VK_SPEC_CHILD set) with zero messages allowed.
--
-- The device under test and the comparison helpers are in vk_helpers.lua.
local VK = require('vk_helpers').open('vulkan')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local info, has_f64, nested = VK.info, VK.has_f64, VK.nested
local on, agree, data, layouts, is_float = VK.on, VK.agree, VK.data, VK.layouts, VK.is_float
local tolerances = VK.tolerances

describe('vulkan (' .. V .. ': ' .. info.description .. ')', function()
  describe('transfers', function()
    it('round-trips every dtype through to(device) and to("cpu")', function()
      for _, dtype in ipairs({ 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8',
        'int16', 'int32', 'int64', 'bool' }) do
        for _, shape in ipairs({ { 0 }, { 1 }, { 3 }, { 5, 7 }, { 33, 65 } }) do
          local x = data(dtype, shape, -100, 100)
          local y = x:to(V)
          assert.are.equal(V, y:device())
          assert.are.same(x:totable(), y:to('cpu'):totable(), dtype)
        end
      end
      -- int64 beyond 2^53 and exact float64 bits survive
      local big = ember.tensor({ 9007199254740993, -9007199254740993 }, { dtype = 'int64' })
      assert.are.same(big:to('cpu'):totable(), big:to(V):to('cpu'):totable())
      local d = ember.tensor({ 1 / 3, -1e-300, 1e300 }, { dtype = 'float64' })
      assert.are.same(d:totable(), d:to(V):to('cpu'):totable())
    end)

    it('creates tensors directly on the device', function()
      local z = ember.zeros(3, 4, { device = V })
      assert.are.equal(V, z:device())
      assert.are.same({ { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }, z:totable())
      assert.are.same({ 7, 7 }, ember.full({ 2 }, 7, { device = V, dtype = 'int64' }):totable())
      assert.are.same({ true, true }, ember.ones(2, { device = V, dtype = 'bool' }):totable())
      assert.are.equal(2.5, ember.tensor(2.5, { device = V }):item())
      assert.are.equal(V, ember.zeros_like(z):device())
    end)

    it('copies between devices into strided views, and item() reads one element', function()
      local x = on(ember.arange(1, 13):view(3, 4))
      local host = ember.zeros(4, 3)
      host:copy_(x:t())
      assert.are.same(ember.arange(1, 13):view(3, 4):t():totable(), host:totable())
      local dst = on(ember.zeros(3, 8))
      dst[{ {}, { 1, -1, 2 } }]:copy_(ember.arange(1, 13):view(3, 4))
      local want = ember.zeros(3, 8)
      want[{ {}, { 1, -1, 2 } }]:copy_(ember.arange(1, 13):view(3, 4))
      assert.are.same(want:totable(), dst:totable())
      assert.are.equal(7, x[2][3])
      assert.are.equal(7, x[{ 2, 3 }]:item())
    end)
  end)

  describe('copy, cast and fill', function()
    it('copies between overlapping views of one tensor as the CPU does', function()
      for _, dtype in ipairs({ 'float32', 'int8', 'int64' }) do
        local c = data(dtype, { 40, 9 }, -50, 50)
        local v = on(c)
        c[{ { 2, 40 } }]:copy_(c[{ { 1, 39 } }])     -- shift down by a row
        v[{ { 2, 40 } }]:copy_(v[{ { 1, 39 } }])
        agree(v, c, dtype .. ' shifted rows')
        c[{ {}, { 1, 8 } }]:copy_(c[{ {}, { 2, 9 } }]) -- shift left, strided
        v[{ {}, { 1, 8 } }]:copy_(v[{ {}, { 2, 9 } }])
        agree(v, c, dtype .. ' shifted columns')
        local sq = data(dtype, { 12, 12 }, -9, 9)
        local vsq = on(sq)
        sq:copy_(sq:t():clone())
        vsq:copy_(vsq:t())
        agree(vsq, sq, dtype .. ' copy_ reads the whole source first: x:copy_(x:t()) transposes')
      end
    end)

    local dtypes = { 'float32', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
      'int64', 'bool' }
    if has_f64 then table.insert(dtypes, 2, 'float64') end

    it('casts every pair of dtypes as the CPU does (wrapping, saturating, rounding)', function()
      local values = { 0, 1, -1, 2.5, -2.5, 3.7, -3.7, 127.9, 128, 255, 256, 300.7, -129.2,
        65504, 70000, 1e10, -1e10, 1 / 0, -1 / 0, 0 / 0, 1e-8, 2 ^ 31, 2 ^ 40 + 0.5 }
      for _, from in ipairs(dtypes) do
        local src = ember.tensor(values, { dtype = 'float64' }):to(from)
        local vsrc = on(src)
        for _, to in ipairs(dtypes) do
          agree(vsrc:to(to), src:to(to), from .. ' -> ' .. to)
          -- strided source and destination
          local cs = ember.stack({ src, src }, 2)[{ {}, 2 }]
          agree(on(ember.stack({ src, src }, 2))[{ {}, 2 }]:to(to), cs:to(to),
            from .. ' -> ' .. to .. ' (strided)')
        end
      end
    end)

    it('copies and fills every layout', function()
      for _, dtype in ipairs(dtypes) do
        for _, l in ipairs(layouts(function(s) return data(dtype, s, -50, 50) end, 5, 6)) do
          local name, c, v = l[1], l[2], l[3]
          agree(v:clone(), c:clone(), dtype .. ' clone ' .. name)
          agree(v:contiguous(), c:contiguous(), dtype .. ' contiguous ' .. name)
          if name ~= 'broadcast' then
            local vc, cc = v:clone(), c:clone()
            agree(v:fill_(3), c:fill_(3), dtype .. ' fill_ ' .. name)
            agree(vc:zero_(), cc:zero_(), dtype .. ' zero_ ' .. name)
          end
        end
      end
    end)

    it('arange and linspace match the CPU exactly', function()
      for _, dtype in ipairs({ 'float32', 'int32', 'int64', 'float16', 'uint8' }) do
        agree(ember.arange(-5, 600, 3, { dtype = dtype, device = V }),
          ember.arange(-5, 600, 3, { dtype = dtype }), 'arange ' .. dtype)
      end
      agree(ember.arange(0, 1, 0.1, { device = V }), ember.arange(0, 1, 0.1), 'arange 0.1')
      agree(ember.arange(0.5, 1000.5, 1.5, { device = V, dtype = 'int32' }),
        ember.arange(0.5, 1000.5, 1.5, { dtype = 'int32' }), 'arange fractional to int')
      agree(ember.linspace(-1, 1, 1001, { device = V }), ember.linspace(-1, 1, 1001), 'linspace')
      agree(ember.linspace(0, 10, 7, { device = V, dtype = 'int64' }),
        ember.linspace(0, 10, 7, { dtype = 'int64' }), 'linspace int64')
      agree(ember.linspace(3, 3, 1, { device = V }), ember.linspace(3, 3, 1), 'linspace 1')
      if has_f64 then
        agree(ember.arange(0, 1, 1 / 7, { device = V, dtype = 'float64' }),
          ember.arange(0, 1, 1 / 7, { dtype = 'float64' }), 'arange float64')
      end
      assert.are.equal(0, ember.arange(0, 0, 1, { device = V }):numel())
      assert.are.same({ 1, 0, 0, 1 }, ember.eye(2, { device = V }):view(4):totable())
    end)
  end)

  describe('unary ops', function()
    local float_ops = { 'neg', 'abs', 'sign', 'exp', 'log', 'log1p', 'expm1', 'sqrt', 'rsqrt',
      'sin', 'cos', 'tan', 'tanh', 'sigmoid', 'relu', 'gelu', 'silu', 'softplus', 'floor',
      'ceil', 'round', 'trunc', 'reciprocal', 'square', 'erf', 'isnan', 'isinf', 'isfinite',
      'logical_not' }
    local approx = { exp = true, log = true, log1p = true, expm1 = true, sqrt = true,
      rsqrt = true, sin = true, cos = true, tan = true, tanh = true, sigmoid = true,
      gelu = true, silu = true, softplus = true, reciprocal = true, erf = true }

    it('agree with the CPU on float32 in every layout', function()
      for _, l in ipairs(layouts(function(s) return data('float32', s, -1.5, 1.5) end, 6, 7)) do
        local name, c, v = l[1], l[2], l[3]
        for _, op in ipairs(float_ops) do
          agree(v[op](v), c[op](c), op .. ' ' .. name, approx[op])
        end
        agree(v:gelu('tanh'), c:gelu('tanh'), 'gelu tanh ' .. name, true)
      end
    end)

    it('agree on float16, bfloat16 and float64', function()
      local dtypes = { 'float16', 'bfloat16' }
      if has_f64 then dtypes[#dtypes + 1] = 'float64' end
      for _, dtype in ipairs(dtypes) do
        local c = data(dtype, { 9, 31 }, -1.5, 1.5)
        local v = on(c)
        for _, op in ipairs(float_ops) do
          agree(v[op](v), c[op](c), dtype .. ' ' .. op, approx[op])
        end
        agree(v:gelu('tanh'), c:gelu('tanh'), dtype .. ' gelu tanh', true)
      end
    end)

    it('handle special values as C does', function()
      -- (sin, cos and tan of huge arguments are left out: GPUs reduce them inexactly)
      local c = ember.tensor({ 0, -0.0, 1 / 0, -1 / 0, 0 / 0, -1, 1e-30, -1e-30, 100, -100, 88.5,
        -88.5, 0.5, -0.5, 1.5, 2.5, 1e-4, -1e-4, 1 + 2 ^ -20, 30, -30, 1e4 })
      local v = on(c)
      for _, op in ipairs(float_ops) do
        agree(v[op](v), c[op](c), 'special ' .. op, approx[op])
      end
    end)

    it('float64 transcendental functions match libm over wide ranges', function()
      if not has_f64 then return pending('the device lacks shaderFloat64') end
      local ranges = { exp = { -700, 700 }, log = { 1e-300, 1e300 }, log1p = { -0.999, 1e10 },
        expm1 = { -40, 40 }, sin = { -1e5, 1e5 }, cos = { -1e5, 1e5 }, tan = { -1e3, 1e3 },
        tanh = { -30, 30 }, sigmoid = { -50, 50 }, erf = { -7, 7 }, gelu = { -10, 10 },
        silu = { -30, 30 }, softplus = { -40, 40 } }
      for op, r in pairs(ranges) do
        local c
        if op == 'log' then
          c = ember.logspace and ember.logspace(-300, 300, 4001, 10, { dtype = 'float64' }) or
            ember.pow(10, ember.linspace(-300, 300, 4001, { dtype = 'float64' }))
        else
          c = ember.linspace(r[1], r[2], 4001, { dtype = 'float64' })
        end
        local v = on(c)
        -- tan near its poles, and gelu's 1 + erf(x) for x << 0, amplify the last bit of
        -- their inputs (the CPU's results carry the same amplified rounding).
        local tol = (op == 'tan' or op == 'gelu') and 1e-10 or 4e-15
        agree(v[op](v), c[op](c), 'float64 ' .. op, { tol, 1e-300 })
      end
      local x = ember.tensor({ -3.5, -2, -0.5, 0, 0.5, 2, 3.5, 1e-8 }, { dtype = 'float64' })
      local y = ember.tensor({ 2, 3, -0.5, -1, 0.25, 1e-3, 7, -2 }, { dtype = 'float64' })
      agree(on(x):abs():pow(on(y)), x:abs():pow(y), 'float64 pow')
      agree(on(x):pow(on(y):round()), x:pow(y:round()), 'float64 pow integral exponents')
      agree(on(y):atan2(on(x)), y:atan2(x), 'float64 atan2')
    end)

    it('agree on integer and bool dtypes', function()
      local int_ops = { 'neg', 'abs', 'sign', 'relu', 'floor', 'ceil', 'round', 'trunc',
        'square', 'bitwise_not', 'isnan', 'isinf', 'isfinite', 'logical_not', 'exp', 'sqrt' }
      for _, dtype in ipairs({ 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
        local c = data(dtype, { 11, 29 }, -128, 127)
        if dtype == 'int8' then c[1][1] = -128 end
        local v = on(c)
        for _, op in ipairs(int_ops) do
          agree(v[op](v), c[op](c), dtype .. ' ' .. op, op == 'exp' or op == 'sqrt')
        end
      end
      local b = data('bool', { 5, 40 })
      local vb = on(b)
      for _, op in ipairs({ 'sign', 'bitwise_not', 'logical_not', 'isnan', 'isfinite' }) do
        agree(vb[op](vb), b[op](b), 'bool ' .. op)
      end
    end)

    it('work in place on strided tensors', function()
      local c = data('float32', { 8, 12 }, -2, 2)
      local v = on(c)
      c[{ {}, { 1, -1, 3 } }]:exp_()
      v[{ {}, { 1, -1, 3 } }]:exp_()
      agree(v, c, 'exp_ on every third column', true)
      local ci = data('int16', { 8, 12 }, -300, 300)
      local vi = on(ci)
      ci:t():neg_()
      vi:t():neg_()
      agree(vi, ci, 'int16 neg_ through a transpose')
      local cb = data('uint8', { 3, 17 }, 0, 255)
      local vb = on(cb)
      cb[{ 2 }]:square_()
      vb[{ 2 }]:square_()
      agree(vb, cb, 'uint8 square_ of one row (packed bytes)')
    end)
  end)

  describe('binary ops', function()
    local float_ops = { 'add', 'sub', 'mul', 'div', 'floor_divide', 'pow', 'fmod', 'remainder',
      'maximum', 'minimum', 'atan2', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_and',
      'logical_or', 'logical_xor' }
    local int_ops = { 'add', 'sub', 'mul', 'floor_divide', 'pow', 'fmod', 'remainder',
      'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_and', 'logical_or',
      'logical_xor', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift',
      'bitwise_right_shift', 'div' }
    local approx = { div = true, pow = true, atan2 = true }

    -- pairs of layouts: a [r, c] in one layout with b in another (or broadcast shapes)
    local function pairs_of(dtype, lo, hi, blo, bhi)
      local la = layouts(function(s) return data(dtype, s, lo, hi) end, 5, 9)
      local lb = layouts(function(s) return data(dtype, s, blo or lo, bhi or hi) end, 5, 9)
      local out = {}
      for i = 1, #la do
        local j = i % #lb + 1
        if (la[i][1] == 'zero-size') == (lb[j][1] == 'zero-size') and
            (la[i][1] == 'large') == (lb[j][1] == 'large') then
          out[#out + 1] = { la[i][1] .. ' with ' .. lb[j][1], la[i][2], la[i][3], lb[j][2], lb[j][3] }
        end
      end
      out[#out + 1] = { 'zero-size pair', la[6][2], la[6][3], lb[6][2], lb[6][3] }
      out[#out + 1] = { 'large pair', la[7][2], la[7][3], lb[7][2], lb[7][3] }
      -- a column against a row: broadcasting makes the output shape
      local col, row = data(dtype, { 6, 1 }, lo, hi), data(dtype, { 1, 5 }, blo or lo, bhi or hi)
      out[#out + 1] = { 'column with row', col, on(col), row, on(row) }
      local s = data(dtype, {}, blo or lo, bhi or hi)
      out[#out + 1] = { '0-dim operand', la[1][2], la[1][3], s, on(s) }
      return out
    end

    it('agree with the CPU on float32, with broadcasting', function()
      for _, p in ipairs(pairs_of('float32', -4, 4, 0.5, 3)) do
        for _, op in ipairs(float_ops) do
          agree(p[3][op](p[3], p[5]), p[2][op](p[2], p[4]), op .. ' ' .. p[1], approx[op])
        end
      end
      -- negative divisors and bases too
      local a, b = data('float32', { 7, 13 }, -9, 9), data('float32', { 7, 13 }, -4, 4)
      for _, op in ipairs({ 'floor_divide', 'fmod', 'remainder', 'pow', 'atan2' }) do
        agree(on(a)[op](on(a), on(b)), a[op](a, b), op .. ' signed', approx[op])
      end
    end)

    it('agree on the other float dtypes', function()
      local dtypes = { 'float16', 'bfloat16' }
      if has_f64 then dtypes[#dtypes + 1] = 'float64' end
      for _, dtype in ipairs(dtypes) do
        local a, b = data(dtype, { 7, 19 }, -4, 4), data(dtype, { 19 }, 0.5, 3)
        for _, op in ipairs(float_ops) do
          agree(on(a)[op](on(a), on(b)), a[op](a, b), dtype .. ' ' .. op, approx[op])
        end
      end
    end)

    it('agree on integer dtypes, wrapping as the CPU does', function()
      for _, dtype in ipairs({ 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
        local lo = dtype == 'uint8' and 0 or -100
        local a = data(dtype, { 9, 23 }, lo, 127)
        local b = data(dtype, { 9, 23 }, 1, 9)   -- nonzero, positive (pow, shifts)
        local nb = data(dtype, { 23 }, dtype == 'uint8' and 1 or -9, 9):clamp(1, 9)
        for _, op in ipairs(int_ops) do
          agree(on(a)[op](on(a), on(b)), a[op](a, b), dtype .. ' ' .. op, op == 'div')
          agree(on(a)[op](on(a), on(nb)), a[op](a, nb), dtype .. ' ' .. op .. ' broadcast', op == 'div')
        end
        -- signed divisors, shifts past the width, scalars
        if dtype ~= 'uint8' then
          local r = data(dtype, { 9, 23 }, -9, 9)
          local sb = r:masked_fill(r:eq(0), 3)
          for _, op in ipairs({ 'floor_divide', 'fmod', 'remainder' }) do
            agree(on(a)[op](on(a), on(sb)), a[op](a, sb), dtype .. ' ' .. op .. ' signed')
          end
          local sh = ember.tensor({ -1, 0, 1, 7, 8, 15, 16, 31, 32, 63, 64, 100 }, { dtype = dtype })
          local x = ember.tensor({ -100, 100, -3, 3, -1, 1, 5, -5, 7, -7, 9, -9 }, { dtype = dtype })
          for _, op in ipairs({ 'bitwise_left_shift', 'bitwise_right_shift' }) do
            agree(on(x)[op](on(x), on(sh)), x[op](x, sh), dtype .. ' ' .. op .. ' widths')
          end
        end
        agree(on(a) * 3, a * 3, dtype .. ' * 3')
        agree(on(a) + 2.5, a + 2.5, dtype .. ' + 2.5 (float result)')
        agree(on(a):add(on(b), 3), a:add(b, 3), dtype .. ' add alpha')
        agree(on(a):sub(on(b), 2), a:sub(b, 2), dtype .. ' sub alpha')
      end
      local m = ember.tensor({ -2147483648, 2147483647, 5 }, { dtype = 'int32' })
      local d = ember.tensor({ -1, -1, -1 }, { dtype = 'int32' })
      for _, op in ipairs({ 'floor_divide', 'fmod', 'remainder', 'mul', 'add', 'sub' }) do
        agree(on(m)[op](on(m), on(d)), m[op](m, d), 'int32 extremes ' .. op)
      end
    end)

    it('agree on bool (logic for arithmetic)', function()
      local a, b = data('bool', { 6, 21 }), data('bool', { 6, 21 })
      for _, op in ipairs({ 'add', 'mul', 'maximum', 'minimum', 'eq', 'ne', 'lt', 'le', 'gt',
        'ge', 'logical_and', 'logical_or', 'logical_xor', 'bitwise_and', 'bitwise_or',
        'bitwise_xor' }) do
        agree(on(a)[op](on(a), on(b)), a[op](a, b), 'bool ' .. op)
      end
      agree(on(a) + on(b):float(), a + b:float(), 'bool + float promotes')
    end)

    it('mix dtypes through promotion and scalars', function()
      local a, b = data('int32', { 4, 5 }, -9, 9), data('float32', { 5 }, -2, 2)
      agree(on(a) * on(b), a * b, 'int32 * float32')
      agree(on(a):div(3), a:div(3), 'int / int is float', true)
      agree(2 - on(b), 2 - b, 'reversed scalar')
      agree(on(b) ^ 2, b ^ 2, 'pow 2')
      agree(on(b):abs() ^ 0.5, b:abs() ^ 0.5, 'pow 0.5', true)
      local u, i = data('uint8', { 3, 7 }, 0, 255), data('int8', { 7 }, -100, 100)
      agree(on(u) + on(i), u + i, 'uint8 + int8')
    end)

    it('take Lua numbers as immediates: every class, either side, no device allocation', function()
      local dtypes = { 'float32', 'float16', 'bfloat16', 'int32', 'int64', 'int8', 'uint8' }
      if has_f64 then dtypes[#dtypes + 1] = 'float64' end
      for _, dtype in ipairs(dtypes) do
        local a = data(dtype, { 5, 9 }, -20, 20)
        local va = on(a)
        agree(va + 3, a + 3, dtype .. ' + 3')
        agree(7 * va, 7 * a, '7 * ' .. dtype)
        agree(5 - va, 5 - a, '5 - ' .. dtype)
        if is_float(dtype) then agree(va * 2.5, a * 2.5, dtype .. ' * 2.5') end
        agree(va:t() + 1, a:t() + 1, dtype .. ' transposed + 1')
      end
      local x = on(ember.ones(1000))
      x = x * 2 -- the first use creates the pipeline
      ember.synchronize()
      local s0 = ember.memory.stats(V)
      local y = x * 3 + 1
      local s1 = ember.memory.stats(V)
      assert.are.equal(s0.num_allocs + 2, s1.num_allocs) -- the two results, no scalar tensors
      assert.are.equal(7, y[1])
    end)

    it('work in place, including on strided and packed-byte views', function()
      local c, d = data('float32', { 6, 10 }, -3, 3), data('float32', { 10 }, -3, 3)
      local v = on(c)
      c:add_(d)
      v:add_(on(d))
      agree(v, c, 'add_ broadcast')
      c:t():mul_(2)
      v:t():mul_(2)
      agree(v, c, 'mul_ through a transpose')
      local cb, vb = data('int8', { 5, 13 }, -50, 50), nil
      vb = on(cb)
      cb[{ {}, { 2, -1, 2 } }]:add_(7)
      vb[{ {}, { 2, -1, 2 } }]:add_(7)
      agree(vb, cb, 'int8 add_ on every other column (neighbouring bytes untouched)')
      local h = data('float16', { 3, 9 }, -2, 2)
      local vh = on(h)
      h[{ {}, { 1, -1, 2 } }]:mul_(3)
      vh[{ {}, { 1, -1, 2 } }]:mul_(3)
      agree(vh, h, 'float16 mul_ on every other column')
      local sq = on(ember.ones(4, 4))
      H.assert_error(function() return sq:add_(sq:t()) end, 'partial overlap')
    end)
  end)

  describe('ternary ops', function()
    it('where, masked_fill, clamp, lerp, addcmul and addcdiv agree', function()
      local dtypes = { 'float32', 'float16', 'int32', 'int64', 'uint8', 'int8', 'bool' }
      if has_f64 then dtypes[#dtypes + 1] = 'float64' end
      for _, dtype in ipairs(dtypes) do
        local cond = data('bool', { 7, 11 })
        local a, b = data(dtype, { 7, 11 }, -20, 20), data(dtype, { 11 }, -20, 20)
        agree(ember.where(on(cond), on(a), on(b)), ember.where(cond, a, b), dtype .. ' where')
        agree(ember.where(on(cond):t():contiguous():t(), on(a), 5), ember.where(cond, a, 5),
          dtype .. ' where scalar')
        agree(on(a):masked_fill(on(cond), 1), a:masked_fill(cond, 1), dtype .. ' masked_fill')
        if dtype ~= 'bool' then
          agree(on(a):clamp(-5, 7), a:clamp(-5, 7), dtype .. ' clamp')
          agree(on(a):clamp_min(2), a:clamp_min(2), dtype .. ' clamp_min')
          agree(on(a):clamp(nil, on(b)), a:clamp(nil, b), dtype .. ' clamp tensor max')
          agree(on(a):clamp(on(b), on(b) + 3), a:clamp(b, b + 3), dtype .. ' clamp both tensors')
          agree(on(a):addcmul(on(b), on(a), 2), a:addcmul(b, a, 2), dtype .. ' addcmul')
        end
        if is_float(dtype) then
          local w = data(dtype, { 7, 11 }, -1, 2)
          agree(on(a):lerp(on(b), on(w)), a:lerp(b, w), dtype .. ' lerp', true)
          agree(on(a):lerp(on(b), 0.25), a:lerp(b, 0.25), dtype .. ' lerp scalar', true)
          local nz = data(dtype, { 11 }, 0.5, 3)
          agree(on(a):addcdiv(on(a), on(nz), -0.5), a:addcdiv(a, nz, -0.5), dtype .. ' addcdiv', true)
        end
      end
      local x = ember.tensor({ 0 / 0, 1, 5, -3 })
      agree(on(x):clamp(0, 2), x:clamp(0, 2), 'clamp keeps NaN')
      agree(on(x):clamp(on(ember.tensor({ 0, 0 / 0, 0, 0 })), 2),
        x:clamp(ember.tensor({ 0, 0 / 0, 0, 0 }), 2), 'a NaN bound wins')
      agree(on(x):clamp(3, 1), x:clamp(3, 1), 'lo > hi gives hi')
      local y = on(ember.arange(12):float():view(3, 4))
      y:clamp_(2, 9)
      assert.are.same(ember.arange(12):float():view(3, 4):clamp(2, 9):totable(), y:totable())
    end)
  end)

  describe('dimensions', function()
    it('splits views with more dimensions than the kernels take into several dispatches', function()
      local c = data('float32', { 2, 3, 2, 3, 2, 3 }, -2, 2)
      local p = c:permute(6, 4, 2, 1, 3, 5)
      local vp = on(c):permute(6, 4, 2, 1, 3, 5)
      agree(vp:contiguous(), p:contiguous(), '6-d permuted copy')
      agree(vp + vp:exp(), p + p:exp(), '6-d permuted add', true)
      local s = data('int16', { 2, 2, 2, 2, 2, 2, 2, 9 }, -50, 50)
      local vs = on(s)
      local idx = { {}, {}, {}, {}, {}, {}, {}, { 1, -1, 2 } }
      agree(vs[idx]:transpose(1, 8):mul(3), s[idx]:transpose(1, 8):mul(3), '8-d strided int16')
    end)

    it('handles 0-dim tensors', function()
      local s = ember.tensor(2.5)
      agree(on(s) * on(s), s * s, '0-dim * 0-dim')
      agree(on(s):exp(), s:exp(), '0-dim exp', true)
      agree(on(ember.ones(3, 4)) + on(s), ember.ones(3, 4) + s, '0-dim broadcast')
    end)
  end)

  describe('ops built from copies', function()
    it('cat, stack, flip, roll, repeat, tril, triu and reshape agree', function()
      for _, dtype in ipairs({ 'float32', 'int64', 'uint8', 'bool' }) do
        local a, b = data(dtype, { 5, 7 }, -9, 9), data(dtype, { 3, 7 }, -9, 9)
        local va, vb = on(a), on(b)
        agree(ember.cat({ va, vb }, 1), ember.cat({ a, b }, 1), dtype .. ' cat')
        agree(ember.cat({ va:t(), va:t() }, 2), ember.cat({ a:t(), a:t() }, 2), dtype .. ' cat strided')
        agree(ember.stack({ va, va }, 2), ember.stack({ a, a }, 2), dtype .. ' stack')
        agree(va:flip(1, 2), a:flip(1, 2), dtype .. ' flip')
        agree(va:roll(2, 2), a:roll(2, 2), dtype .. ' roll')
        agree(va:repeat_tensor(2, 3), a:repeat_tensor(2, 3), dtype .. ' repeat')
        agree(va:tril(-1), a:tril(-1), dtype .. ' tril')
        agree(va:triu(2), a:triu(2), dtype .. ' triu')
        agree(va:t():reshape(35), a:t():reshape(35), dtype .. ' reshape copies')
      end
    end)
  end)

  describe('errors', function()
    it('names the op and both devices when devices are mixed', function()
      local a, b = ember.ones(3), ember.ones(3, { device = V })
      H.assert_error(function() return b + a end,
        'add: expected all tensors on ' .. V .. ', got cpu for argument 2')
      H.assert_error(function() return a * b end,
        'mul: expected all tensors on cpu, got ' .. V .. ' for argument 2')
      H.assert_error(function() return ember.where(b:gt(0), a, b) end, 'where: expected all tensors')
      H.assert_error(function() return b:copy_(a):add_(a) end, 'add: expected all tensors on ' .. V)
    end)

    it('refuses a tensor larger than the device can bind', function()
      if not info.max_tensor_bytes or info.max_tensor_bytes > 2 ^ 31 then
        return pending('this device binds up to ' .. tostring(info.max_tensor_bytes) .. ' bytes')
      end
      local n = info.max_tensor_bytes / 4 + 1
      H.assert_error(function() return ember.empty(n, { device = V }) end,
        'exceeds the largest storage buffer the device allows')
    end)
  end)

  describe('memory', function()
    it('keeps statistics: allocated, reserved, peak, count; empty_cache frees the cache', function()
      ember.synchronize(V)
      ember.memory.empty_cache(V)
      local s0 = ember.memory.stats(V)
      assert.are.equal(V, s0.device)
      -- 72 MiB: more than a shared large slab (64 MiB), so it gets a slab of its own, which
      -- empty_cache can free whatever other tensors earlier specs left alive
      local x = ember.empty(18 * 1024, 1024, { device = V })
      local s1 = ember.memory.stats(V)
      assert.are.equal(s0.allocated + 72 * 2 ^ 20, s1.allocated)
      assert.is_true(s1.reserved >= s1.allocated)
      assert.is_true(s1.peak >= s1.allocated)
      assert.are.equal(s0.num_allocs + 1, s1.num_allocs)
      x = nil
      ember.memory.collect()
      local s2 = ember.memory.stats(V)
      assert.are.equal(s0.allocated, s2.allocated)
      assert.is_true(s2.cached >= 72 * 2 ^ 20) -- the block stays cached for reuse
      local y = ember.empty(18 * 1024, 1024, { device = V })
      assert.are.equal(s2.reserved, ember.memory.stats(V).reserved) -- reused, nothing new
      y = nil
      ember.memory.collect() -- y's block goes back to the cache, so its slab can be freed
      ember.memory.empty_cache(V)
      local s3 = ember.memory.stats(V)
      assert.is_true(s3.reserved < s2.reserved)
      assert.are.equal(s3.allocated + s3.cached, s3.reserved)
      ember.memory.reset_peak(V)
      assert.are.equal(s3.allocated, ember.memory.stats(V).peak)
      local _ = y
    end)

    it('raises a catchable out-of-memory error at the limit, with the figures, and recovers', function()
      ember.memory.collect()
      local keep = on(ember.arange(1000):float())
      local base = ember.memory.stats(V).allocated
      -- The limit sits 1 MiB above what is live now (earlier specs may leave tensors behind),
      -- and is lifted whatever happens, so that a failure here cannot starve later tests.
      ember.memory.set_limit(V, base + 2 ^ 20)
      finally(function() ember.memory.set_limit(V, 0) end)
      local ok, err = pcall(ember.empty, 2 * 2 ^ 20 / 4, { device = V })
      assert.is_false(ok)
      assert.truthy(tostring(err):find('out of memory on ' .. V .. ': tried to allocate 2.0 MiB', 1, true), err)
      local limit = ('limit %.1f MiB'):format((base + 2 ^ 20) / 2 ^ 20)
      assert.truthy(tostring(err):find(limit, 1, true), err .. ' (expected ' .. limit .. ')')
      assert.truthy(tostring(err):find('(allocated ', 1, true), err)
      -- the process and existing tensors are intact, and a smaller request fits
      assert.are.equal(999, keep[1000])
      local small = ember.empty(1000, { device = V })
      assert.are.equal(1000, small:numel())
      local ok2 = pcall(function() return keep * 2 end)
      assert.is_true(ok2)
      ember.memory.set_limit(V, 0)
      assert.are.equal(2 ^ 19, ember.empty(2 ^ 19, { device = V }):numel())
    end)

    it('runs many ops without waiting, and synchronize waits for them', function()
      local x = on(ember.zeros(256, 256))
      for _ = 1, 300 do x:add_(1) end
      ember.synchronize(V)
      ember.synchronize()
      ember.device(V):synchronize()
      assert.are.equal(300, x[256][256])
    end)
  end)

  -- ---- child processes -----------------------------------------------------------------------
  local function child(env, code) return H.child(code, env) end

  local check_ops = ([[
    local ember = require 'ember'
    local V = %q
    local a = ember.arange(-600, 600):float():view(40, 30) / 7
    local b = ember.arange(30):float() - 10
    local got = ((a:to(V):t() * b:to(V):view(30, 1)):exp():clamp(0, 5) + 1):to('cpu')
    local want = (a:t() * b:view(30, 1)):exp():clamp(0, 5) + 1
    local err = (got - want):abs():max():item()
    local big = ember.arange(100000, { device = V, dtype = 'int32' }):mul(3):to('cpu')
    local whole = big:eq(ember.arange(100000, { dtype = 'int32' }):mul(3)):all():item()
    print(err < 1e-4, whole and big[100000] or -1, ember.get_default_device())
  ]]):format(V)

  -- kernels/pointwise.comp's vec4 path: float32/int32 operands that are one contiguous,
  -- 16-byte-aligned dimension (or stride-0 scalars) go 4 elements per invocation, with a tail
  -- for n % 4; misaligned views fall back to the general kernel. Both must agree with the CPU,
  -- and with each other bit for bit (the same math functions).
  describe('vec4 path', function()
    -- max |got - want| over all elements, on the CPU
    local function maxdiff(got, want)
      if want:numel() == 0 then return 0 end
      return (got:to('cpu'):double() - want:double()):abs():max():item()
    end
    local function exact(got, want, what)
      assert.are.equal(V, got:device(), what)
      assert.are.equal(want:dtype(), got:dtype(), what .. ': dtype')
      assert.are.same(want:shape(), got:shape(), what .. ': shape')
      assert.are.equal(0, maxdiff(got, want), what)
    end
    local sizes = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1000003 }

    it('contiguous float32: binary, scalar on either side, add with alpha, in place', function()
      for _, n in ipairs(sizes) do
        local x, y = ember.randn(n), ember.randn(n)
        local vx, vy = on(x), on(y)
        local what = 'n=' .. n
        exact(vx + vy, x + y, what .. ' x + y')
        exact(vx * 2, x * 2, what .. ' x * 2')
        exact(2 - vx, 2 - x, what .. ' 2 - x')
        exact(vx - vy * 1, x - y, what .. ' x - y')
        exact(vx:add(vy, 3), x:add(y, 3), what .. ' add alpha')
        exact(vx:maximum(vy), x:maximum(y), what .. ' maximum')
        exact(vx:clamp(-0.5, 0.5), x:clamp(-0.5, 0.5), what .. ' clamp')
        exact(vx:clamp(nil, vy), x:clamp(nil, y), what .. ' clamp tensor max')
        exact(vx:relu(), x:relu(), what .. ' relu')
        assert.is_true(maxdiff(vx:exp(), x:exp()) <= 1e-5 * 60, what .. ' exp')
        assert.is_true(maxdiff(vx / (vy:abs() + 1), x / (y:abs() + 1)) <= 1e-5, what .. ' div')
        assert.is_true(maxdiff(vx:addcmul(vy, vx, 0.5), x:addcmul(y, x, 0.5)) <= 1e-5,
          what .. ' addcmul')
        local ix = vx:clone()
        ix:mul_(3)
        exact(ix, x * 3, what .. ' mul_ in place')
        ix:add_(vy)
        exact(ix, x * 3 + y, what .. ' add_ in place')
      end
    end)

    it('contiguous int32, exactly', function()
      for _, n in ipairs(sizes) do
        local a, b = (ember.randn(n) * 1000):int(), (ember.randn(n) * 30):int()
        local va, vb = on(a), on(b)
        local what = 'int32 n=' .. n
        exact(va + vb, a + b, what .. ' add')
        exact(va * 3, a * 3, what .. ' mul scalar')
        exact(7 - va, 7 - a, what .. ' scalar - x')
        exact(va:bitwise_xor(vb), a:bitwise_xor(b), what .. ' xor')
        exact(va:neg(), a:neg(), what .. ' neg')
        exact(va:clamp(-100, 100), a:clamp(-100, 100), what .. ' clamp')
      end
    end)

    it('misaligned and offset views: fallback and aligned offsets agree with the CPU', function()
      for _, n in ipairs({ 1, 3, 4, 5, 8, 9, 1000003 }) do
        local base, other = ember.randn(n + 4), ember.randn(n + 4)
        local vb, vo = on(base), on(other)
        for _, start in ipairs({ 2, 3, 4, 5 }) do -- element offsets 1, 2, 3 and 4 (aligned)
          local x, y = base:narrow(1, start, n), other:narrow(1, 1, n)
          local vx, vy = vb:narrow(1, start, n), vo:narrow(1, 1, n)
          local what = 'n=' .. n .. ' narrow(1, ' .. start .. ', n)'
          exact(vx * 2, x * 2, what .. ' * 2')
          exact(vx + vy, x + y, what .. ' + aligned')
          exact(vy - vx, y - x, what .. ' aligned -')
          local out = on(ember.zeros(n + 4)):narrow(1, start, n) -- a misaligned output
          out:copy_(vx)
          out:mul_(vy)
          exact(out, x * y, what .. ' misaligned output in place')
        end
      end
    end)

    it('gives bit-identical results to the general kernel', function()
      local n = 1001
      local base = data('float32', { n + 1 }, -4, 4)
      local w = data('float32', { n + 1 }, -1, 2)
      local vb, vw = on(base), on(w)
      local mis, wmis = vb:narrow(1, 2, n), vw:narrow(1, 2, n) -- general kernel
      -- vec4 path: the same values uploaded afresh. Not mis:clone(): a buffer-copy read followed
      -- by a dispatch that reads the same buffer draws a WRITE_AFTER_READ from synchronization
      -- validation, which counts every descriptor of binding 0 as written.
      local al, wal = on(base:narrow(1, 2, n):contiguous()), on(w:narrow(1, 2, n):contiguous())
      local function same(f, what)
        local g, v = f(mis, wmis):to('cpu'), f(al, wal):to('cpu')
        assert.are.equal(0, (g - v):abs():max():item(), what)
      end
      same(function(x) return x:exp() end, 'exp')
      same(function(x) return x:tanh() end, 'tanh')
      same(function(x) return x:sigmoid() end, 'sigmoid')
      same(function(x) return x:sin() end, 'sin')
      same(function(x) return x:gelu() end, 'gelu')
      same(function(x, y) return x / y end, 'div')
      same(function(x, y) return (x:abs() + 0.5):pow(y) end, 'pow')
      same(function(x, y) return x:atan2(y) end, 'atan2')
      same(function(x, y) return x:lerp(x * 2, y) end, 'lerp')
      same(function(x, y) return x:addcdiv(x, y:abs() + 1, 0.3) end, 'addcdiv')
      same(function(x, y) return x:clamp(y, y + 1) end, 'clamp')
    end)

    it('leaves other dtypes and bool results to the general kernel', function()
      for _, dtype in ipairs({ 'float16', 'bfloat16', 'int64', 'uint8' }) do
        local a, b = data(dtype, { 9 }, -20, 20), data(dtype, { 9 }, -20, 20)
        exact(on(a) + on(b), a + b, dtype .. ' add')
      end
      local x, y = ember.randn(9), ember.randn(9)
      exact(on(x):lt(on(y)), x:lt(y), 'lt gives bool')
      exact(on(x):isnan(), x:isnan(), 'isnan gives bool')
      exact(on(x) + on(y:int()), x + y:int(), 'mixed dtypes')
    end)
  end)

  describe('in child processes', function()
    it('uses descriptor pools where push descriptors are missing', function()
      local out, err, rc = child('EMBER_VK_TEST=no-push-descriptors', check_ops)
      assert.are.equal(0, rc, err)
      assert.are.equal('true\t299997\tcpu\n', out)
      assert.falsy(err:find('vulkan validation', 1, true), err)
    end)

    if nested then return end -- the rest does not need a second run under validation

    -- Every kernel slot is filled on Vulkan (tests/c/test_backend_slots.c checks the table), so
    -- the "not implemented" path is reached by emptying slots with a test hook. Each op must
    -- raise "<op>: not implemented on <device>" (kind EM_ERR_NOT_IMPLEMENTED) and leave no
    -- result: no CPU fallback computes it, and an in-place op leaves its tensor as it was.
    it('raises "not implemented" for an op whose kernel slot is empty, never a CPU copy', function()
      local slots = { 'gemm', 'sort', 'reduce', 'arange', 'random', 'conv2d', 'unary',
        'index_select' }
      local env = 'EMBER_VK_TEST=' .. table.concat(H.map(function(n)
        return 'empty-slot:' .. n
      end, slots), ',')
      local out, err, rc = child(env, ([[
        local ember = require 'ember'
        local F = require('ember.nn').functional
        local C = ember.C
        local V = %q
        local x = ember.tensor({ { 1, -2, 3 }, { 4, 5, -6 } }):to(V)
        local w = ember.ones(1, 1, 2, 2):to(V)
        local idx = ember.tensor({ 2, 1 }, { dtype = 'int64' }):to(V)
        local cases = {
          { 'matmul', function() return x:matmul(x:t()) end },
          { 'sort', function() return x:sort(2) end },
          { 'sum', function() return x:sum(1) end },
          { 'arange', function() return ember.arange(5, { device = V }) end },
          { 'rand', function() return ember.rand(4, { device = V }) end },
          { 'conv2d', function() return F.conv2d(x:view(1, 1, 2, 3), w) end },
          { 'exp_', function() return x:exp_() end },
          { 'index_select', function() return x:index_select(1, idx) end },
        }
        for _, c in ipairs(cases) do
          local ok, e = pcall(c[2])
          local kind = C.em_last_error_kind() == C.EM_ERR_NOT_IMPLEMENTED and 'not-implemented'
            or 'kind ' .. tonumber(C.em_last_error_kind())
          -- the message without the Lua position some methods put in front (error level)
          print(c[1], ok, (tostring(e):gsub('^[^:]+:%%d+: ', '')), kind)
        end
        -- the failed in-place op wrote nothing; the slots left filled still run on the device
        local y = x + x
        print(y:device(), table.concat(y:to('cpu'):view(-1):totable(), ' '))
      ]]):format(V))
      assert.are.equal(0, rc, err)
      local want = {}
      for _, op in ipairs({ 'matmul', 'sort', 'sum', 'arange', 'rand', 'conv2d', 'exp_',
        'index_select' }) do
        local fn = op == 'exp_' and 'exp' or op -- the runtime names in-place ops without the _
        want[#want + 1] = ('%s\tfalse\t%s: not implemented on %s\tnot-implemented'):format(op, fn, V)
      end
      want[#want + 1] = V .. '\t2 -4 6 8 10 -12'
      assert.are.equal(table.concat(want, '\n') .. '\n', out)
    end)

    it('refuses a misspelt slot name in the test hook', function()
      local out, err, rc = child('EMBER_VK_TEST=empty-slot:gem', ([[
        local ember = require 'ember'
        print(pcall(ember.device, %q))
      ]]):format(V))
      assert.are.equal(0, rc, err)
      assert.truthy(out:find("EMBER_VK_TEST: backend: expected a kernel slot name of struct " ..
        "em_backend, got 'gem'", 1, true), out)
    end)

    it('specialized pipelines (one per op and formats) agree with the CPU', function()
      -- lavapipe specializes only dispatches of 64K elements on; force it for small ones.
      local code = ([[
        local ember = require 'ember'
        local H = require 'helpers'
        local V = %q
        local bad = {}
        local function check(what, c, v, tol)
          local ok, err = pcall(H.assert_close, v:to('cpu'), c:totable(), tol or 1e-5, tol or 1e-6, what)
          if not ok then bad[#bad + 1] = err end
        end
        for _, dtype in ipairs({ 'float32', 'float16', 'int32', 'uint8', 'int64', 'bool' }) do
          local a = (ember.arange(-40, 40):view(8, 10) / 3):to(dtype)
          local b = (ember.arange(10) - 4):to(dtype)
          local va, vb = a:to(V), b:to(V)
          check(dtype .. ' copy', a:t():contiguous(), va:t():contiguous())
          check(dtype .. ' cast', a:t():float(), va:t():float())
          check(dtype .. ' fill', a:clone():fill_(3), va:clone():fill_(3))
          check(dtype .. ' where', ember.where(a:gt(b), a, b), ember.where(va:gt(vb), va, vb))
          if dtype ~= 'bool' then
            check(dtype .. ' add', a + b, va + vb)
            check(dtype .. ' sub strided', a:t() - 1, va:t() - 1)
            check(dtype .. ' maximum', a:maximum(b), va:maximum(vb))
            check(dtype .. ' clamp', a:clamp(-2, 3), va:clamp(-2, 3))
            check(dtype .. ' clamp_max', a:clamp_max(1), va:clamp_max(1))
            check(dtype .. ' neg', a:t():neg(), va:t():neg())
            check(dtype .. ' exp', a:exp(), va:exp(), 1e-3)
          end
          check(dtype .. ' eq', a:eq(b), va:eq(vb))
        end
        check('arange', ember.arange(0, 50, 0.5), ember.arange(0, 50, 0.5, { device = V }))
        check('linspace', ember.linspace(0, 1, 33), ember.linspace(0, 1, 33, { device = V }))
        print(#bad == 0 and 'ok' or table.concat(bad, '\n'))
      ]]):format(V)
      local out, err, rc = child('EMBER_VK_SPECIALIZE=1', code)
      assert.are.equal(0, rc, err)
      assert.are.equal('ok\n', out)
    end)

    it('loops over elements when the dispatch grid is smaller than the tensor', function()
      local out, err, rc = child('EMBER_VK_TEST=small-grid', check_ops)
      assert.are.equal(0, rc, err)
      assert.are.equal('true\t299997\tcpu\n', out)
    end)

    it('copies dense ranges with the vec4 copy kernel as on a GPU', function()
      local code = ([[
        local ember = require 'ember'
        local V = %q
        local bad = 0
        for _, dtype in ipairs({ 'float32', 'int8', 'float16', 'int64', 'bool' }) do
          for _, n in ipairs({ 1, 3, 4, 7, 16, 33, 1000, 4099, 20003 }) do -- the last: 4 quads an iteration
            local c = (ember.rand(n + 9) * 100):to(dtype)
            local v = c:to(V)
            local pairs_ = {
              { c:clone(), v:clone() },                              -- aligned
              { c:narrow(1, 5, n):clone(), v:narrow(1, 5, n):clone() }, -- offset source
              { c:narrow(1, 2, n):contiguous(), v:narrow(1, 2, n):contiguous() },
            }
            local dc, dv = ember.zeros(n + 9, { dtype = dtype }), ember.zeros(n + 9, { dtype = dtype, device = V })
            dc:narrow(1, 5, n):copy_(c:narrow(1, 1, n))
            dv:narrow(1, 5, n):copy_(v:narrow(1, 1, n))
            pairs_[#pairs_ + 1] = { dc, dv }
            for _, p in ipairs(pairs_) do
              local want, got = p[1]:totable(), p[2]:to('cpu'):totable()
              for i = 1, #want do if want[i] ~= got[i] then bad = bad + 1 end end
            end
          end
        end
        print(bad)
      ]]):format(V)
      local out, err, rc = child('EMBER_VK_TEST=gpu-copies,small-grid', code)
      assert.are.equal(0, rc, err)
      assert.are.equal('0\n', out)
    end)

    it('EMBER_DEVICE selects the device at start-up', function()
      local out, err, rc = child('EMBER_DEVICE=' .. V,
        'local e = require "ember" print(e.get_default_device(), e.zeros(2):device())')
      assert.are.equal(0, rc, err)
      assert.are.equal(V .. '\t' .. V .. '\n', out)
    end)

    it('saves the pipeline cache on disk and survives a corrupt one', function()
      local dir = os.tmpname()
      os.remove(dir)
      local out, err, rc = child('EMBER_CACHE_DIR=' .. dir, check_ops)
      assert.are.equal(0, rc, err)
      local ls = io.popen('ls ' .. dir):read('*a')
      local file = ls:match('(vulkan%-[%w%-]+%.bin)')
      assert.truthy(file, 'no cache file in ' .. dir .. ': ' .. ls)
      local f = io.open(dir .. '/' .. file, 'r+b')
      f:seek('set', 40)
      f:write(string.rep('\255', 64))
      f:close()
      out, err, rc = child('EMBER_CACHE_DIR=' .. dir, check_ops)
      assert.are.equal(0, rc, err)
      assert.are.equal('true\t299997\tcpu\n', out)
      f = io.open(dir .. '/' .. file, 'wb')
      f:write('short')
      f:close()
      out, err, rc = child('EMBER_CACHE_DIR=' .. dir, check_ops)
      assert.are.equal(0, rc, err)
      os.execute('rm -rf ' .. dir)
    end)
  end)

  if nested and os.getenv('EMBER_VK_VALIDATION') then
    it('validation layer active', function()
      assert.are.equal(0, ember.device(V):info().validation_messages)
    end)
  end
end)
