-- The gemm slot on Vulkan (runtime/src/vulkan/vk_matmul.c, kernels/matmul.comp) against the
-- CPU: every floating dtype, sizes around and across the 64- and 128-wide tiles (the large tile
-- forced through EMBER_VK_MATMUL_TILE=L), K = 0 and empty results, operands transposed, sliced,
-- offset and broadcast (stride 0), batches with a shared matrix, alpha and beta, the vector
-- products built on gemm, the gradients of matmul and linear, and the integer dtypes. Batched
-- products over any batch layout (attention's [B, H, T, hd] views, transposed and broadcast
-- batch dims) are one dispatch each, counted through the device's dispatch counter.
--
-- The cooperative-matrix kernel (float16 on tensor cores) needs a device that lavapipe is not:
-- tests/gpu/matmul.lua checks it on a GPU.
local VK = require('vk_helpers').open('vulkan matmul')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local on, with_env = VK.on, VK.with_env
-- random data in [-3, 3]; shapes with a zero dimension give an empty tensor of that shape
local function data(dtype, shape)
  for _, n in ipairs(shape) do
    if n == 0 then return ember.zeros(shape, { dtype = dtype }) end
  end
  return VK.data(dtype, shape)
end

local dtypes = { 'float32', 'float16', 'bfloat16' }
if VK.has_f64 then table.insert(dtypes, 2, 'float64') end

-- Rounding differences grow with K: the accumulation order differs from the CPU's BLAS. The
-- 16-bit types are accumulated in float32 on both devices and differ by the final rounding.
local function tol(dtype, K)
  local scale = 9 * (K + 1) -- |a*b| <= 9 for data in [-3, 3]
  if dtype == 'float32' then return { 1e-5, 2e-7 * scale } end
  if dtype == 'float64' then return { 1e-12, 1e-15 * scale } end
  if dtype == 'float16' then return { 2e-3, 2e-6 * scale } end
  return { 1.6e-2, 2e-5 * scale }
end

-- Each layout of a rows x cols operand: a function of (dtype, rows, cols) giving the CPU tensor
-- and the same view of its Vulkan copy.
local layouts = {
  contiguous = function(dt, r, c) local x = data(dt, { r, c }) return x, on(x) end,
  transposed = function(dt, r, c)
    local x = data(dt, { c, r }) return x:t(), on(x):t()
  end,
  sliced = function(dt, r, c) -- both strides beyond 1
    local x = data(dt, { 2 * r, 3 * c })
    local f = function(t) return t[{ { 1, -1, 2 }, { 2, -1, 3 } }] end
    return f(x), f(on(x))
  end,
  offset = function(dt, r, c) -- contiguous rows, an odd first element
    local x = data(dt, { r * c + 1 })
    local f = function(t) return t:narrow(1, 2, r * c):view(r, c) end
    return f(x), f(on(x))
  end,
  broadcast = function(dt, r, c)
    local x = data(dt, { 1, c })
    return x:expand(r, c), on(x):expand(r, c)
  end,
}

local function check(what, got, want, K)
  local t = tol(want:dtype(), K)
  VK.agree(got, want, what, t)
end

local sizes = { { 1, 1, 1 }, { 7, 7, 7 }, { 65, 65, 65 }, { 129, 67, 33 }, { 5, 70, 131 },
  { 36, 68, 20 } } -- the last: whole aligned chunks, so the vector loads and stores

describe('vulkan matmul (' .. V .. ')', function()
  it('matches the CPU for every dtype, size and pair of layouts', function()
    for _, dt in ipairs(dtypes) do
      for _, s in ipairs(sizes) do
        local M, N, K = s[1], s[2], s[3]
        for la, fa in pairs(layouts) do
          for lb, fb in pairs(layouts) do
            -- every pair for float32; the 16-bit and float64 kernels share the load code, so
            -- the diagonal and one mixed pair suffice there
            if dt == 'float32' or la == lb or (la == 'transposed' and lb == 'contiguous') then
              local a, va = fa(dt, M, K)
              local b, vb = fb(dt, K, N)
              check(('%s %dx%dx%d %s @ %s'):format(dt, M, N, K, la, lb), va:matmul(vb),
                a:matmul(b), K)
            end
          end
        end
      end
    end
  end)

  it('uses the 128-wide tiles correctly (forced), across their edges', function()
    with_env('EMBER_VK_MATMUL_TILE', 'L', function()
      for _, dt in ipairs({ 'float32', 'float16', 'bfloat16' }) do
        for _, s in ipairs({ { 130, 260, 70 }, { 128, 128, 16 }, { 3, 129, 17 } }) do
          local M, N, K = s[1], s[2], s[3]
          for _, l in ipairs({ 'contiguous', 'transposed', 'sliced' }) do
            local a, va = layouts[l](dt, M, K)
            local b, vb = layouts[l](dt, K, N)
            check(('%s L %dx%dx%d %s'):format(dt, M, N, K, l), va:matmul(vb), a:matmul(b), K)
          end
        end
      end
    end)
  end)

  it('runs the pipelines specialized to the layouts (products of 2^24 multiply-adds)', function()
    -- a CPU driver gets generic pipelines for smaller products (vk_matmul.c: specialize)
    for _, tile in ipairs({ 'L', 'S' }) do
      with_env('EMBER_VK_MATMUL_TILE', tile, function()
        for _, dt in ipairs({ 'float32', 'float16' }) do
          for _, l in ipairs({ { 'contiguous', 'contiguous' }, { 'transposed', 'sliced' },
            { 'offset', 'transposed' } }) do
            local a, va = layouts[l[1]](dt, 256, 256)
            local b, vb = layouts[l[2]](dt, 256, 256)
            check(('%s %s 256^3 %s @ %s'):format(dt, tile, l[1], l[2]), va:matmul(vb),
              a:matmul(b), 256)
          end
        end
      end)
    end
  end)

  it('handles K = 0 and empty results', function()
    for _, dt in ipairs(dtypes) do
      for _, s in ipairs({ { 3, 5, 0 }, { 0, 4, 3 }, { 4, 0, 3 }, { 0, 0, 0 } }) do
        local a, b = data(dt, { s[1], s[3] }), data(dt, { s[3], s[2] })
        local got = on(a):matmul(on(b))
        assert.are.same({ s[1], s[2] }, { got:size(1), got:size(2) })
        check(('%s %dx%dx%d'):format(dt, s[1], s[2], s[3]), got, a:matmul(b), 0)
      end
      -- K = 0 with beta: beta * c
      local c = data(dt, { 3, 5 })
      local a, b = data(dt, { 3, 0 }), data(dt, { 0, 5 })
      check(dt .. ' addmm K=0', ember.addmm(on(c), on(a), on(b), { beta = 0.5 }),
        ember.addmm(c, a, b, { beta = 0.5 }), 0)
    end
  end)

  it('multiplies batches, with broadcast and shared matrices', function()
    for _, dt in ipairs(dtypes) do
      local cases = {
        { { 3, 33, 17 }, { 3, 17, 20 } },      -- bmm
        { { 2, 3, 33, 17 }, { 17, 20 } },      -- one b for every batch (stride 0)
        { { 9, 17 }, { 4, 17, 6 } },           -- one a for every batch
        { { 4, 1, 9, 5 }, { 3, 5, 66 } },      -- batch dims broadcast both ways
      }
      for _, c in ipairs(cases) do
        local a, b = data(dt, c[1]), data(dt, c[2])
        local K = c[1][#c[1]]
        check(('%s batched %s @ %s'):format(dt, table.concat(c[1], 'x'), table.concat(c[2], 'x')),
          on(a):matmul(on(b)), a:matmul(b), K)
      end
      -- transposed batch members, and an expanded batch of one matrix
      local a, b = data(dt, { 5, 20, 30 }), data(dt, { 1, 20, 7 })
      check(dt .. ' bmm transposed/expanded',
        on(a):transpose(2, 3):matmul(on(b):expand(5, 20, 7)),
        a:transpose(2, 3):matmul(b:expand(5, 20, 7)), 20)
    end
  end)

  -- kernels the device has been given so far (em_device_info.dispatches)
  local function dispatches() return ember.device(V):info().dispatches end
  -- f's result and how many kernels it dispatched
  local function counted(f)
    local before = dispatches()
    local r = f()
    return r, dispatches() - before
  end

  it("runs attention's products on strided [B, H, T, hd] views as ONE dispatch", function()
    -- q, k, v: [B, H, T, hd] views of one [B, T, 3 * H * hd] tensor (a transposed
    -- [B, T, 3, H, hd]), whose B and H dims cannot be merged into one batch stride
    for _, dt in ipairs(dtypes) do
      for _, s in ipairs({ { 2, 9, 3, 5 }, { 2, 65, 4, 16 }, { 3, 130, 2, 24 } }) do
        local B, T, Hn, hd = s[1], s[2], s[3], s[4]
        local x = data(dt, { B, T, 3 * Hn * hd })
        local function parts(t)
          local w = t:view(B, T, 3, Hn, hd)
          return w:select(3, 1):transpose(2, 3), w:select(3, 2):transpose(2, 3),
            w:select(3, 3):transpose(2, 3)
        end
        local q, k, v = parts(x)
        local vq, vk, vv = parts(on(x))
        local what = ('%s B=%d T=%d H=%d hd=%d'):format(dt, B, T, Hn, hd)
        local att, n = counted(function() return vq:matmul(vk:transpose(-2, -1)) end)
        assert.are.equal(1, n, what .. ' q @ k^T: dispatches')
        local want = q:matmul(k:transpose(-2, -1))
        check(what .. ' q @ k^T', att, want, hd)
        local y, m = counted(function() return att:matmul(vv) end)
        assert.are.equal(1, m, what .. ' att @ v: dispatches')
        check(what .. ' att @ v', y, att:to('cpu'):matmul(v), T)
      end
    end
  end)

  it('runs bmm, baddbmm and 4-D products over transposed and broadcast batch dims as one dispatch', function()
    for _, dt in ipairs({ 'float32', 'float16', 'bfloat16', 'int32' }) do
      local a = data(dt, { 9, 4, 7 })
      local b = data(dt, { 1, 7, 11 })
      local c = data(dt, { 9, 11 })
      local ta, eb = a:transpose(1, 2), b:expand(4, 7, 11)    -- batch strides 7 and 0
      local vta, veb = on(a):transpose(1, 2), on(b):expand(4, 7, 11)
      local r, n = counted(function() return vta:bmm(veb) end)
      assert.are.equal(1, n, dt .. ' bmm: dispatches')
      check(dt .. ' bmm', r, ta:bmm(eb), 7)
      local o = { beta = 0.5, alpha = 2 }
      if dt == 'int32' then o = { beta = 2, alpha = -3 } end
      r, n = counted(function() return ember.baddbmm(on(c), vta, veb, o) end)
      -- floating products read c in the kernel (the gemm_add slot); integers first copy c
      -- (broadcast) into the result, one kernel, and the product is one more
      assert.are.equal(dt == 'int32' and 2 or 1, n, dt .. ' baddbmm: dispatches')
      check(dt .. ' baddbmm', r, ember.baddbmm(c, ta, eb, o), 7)
      -- 4-D: a with transposed batch dims, b shared along the outer dim (stride 0)
      local a4, b4 = data(dt, { 4, 3, 65, 8 }), data(dt, { 1, 4, 8, 70 })
      local f = function(x, y) return x:transpose(1, 2):matmul(y:expand(3, 4, 8, 70)) end
      r, n = counted(function() return f(on(a4), on(b4)) end)
      assert.are.equal(1, n, dt .. ' 4-D: dispatches')
      check(dt .. ' 4-D', r, f(a4, b4), 8)
      -- a shared along the inner dim, b with transposed matrices, across the 128-wide tile
      with_env('EMBER_VK_MATMUL_TILE', 'L', function()
        local a5, b5 = data(dt, { 2, 1, 130, 12 }), data(dt, { 2, 3, 129, 12 })
        local g = function(x, y) return x:expand(2, 3, 130, 12):matmul(y:transpose(3, 4)) end
        r, n = counted(function() return g(on(a5), on(b5)) end)
        assert.are.equal(1, n, dt .. ' 4-D L: dispatches')
        check(dt .. ' 4-D L', r, g(a5, b5), 12)
      end)
    end
  end)

  it('adds c with its own strides in the product kernel: addmm, baddbmm, Linear', function()
    for _, dt in ipairs({ 'float32', 'float16', 'bfloat16' }) do
      local a, b = data(dt, { 70, 33 }), data(dt, { 33, 130 })
      local cs = {
        bias = data(dt, { 130 }),                           -- a row broadcast over rows
        column = data(dt, { 70, 1 }),                       -- a column broadcast over columns
        full = data(dt, { 70, 130 }),
        transposed = data(dt, { 130, 70 }):t(),
        one = data(dt, { 1 }),
      }
      for name, c in pairs(cs) do
        for _, o in ipairs({ { beta = 1, alpha = 1 }, { beta = -0.5, alpha = 2 } }) do
          local r, n = counted(function() return ember.addmm(on(c), on(a), on(b), o) end)
          local what = ('%s addmm %s beta=%g'):format(dt, name, o.beta)
          assert.are.equal(1, n, what .. ': dispatches')
          check(what, r, ember.addmm(c, a, b, o), 33)
        end
      end
      -- baddbmm: c per batch member (transposed matrices) and c shared by the batch
      local ba, bb = data(dt, { 3, 20, 9 }), data(dt, { 3, 9, 17 })
      local c3 = data(dt, { 3, 17, 20 }):transpose(2, 3)
      local c2 = data(dt, { 20, 17 })
      for name, c in pairs({ member = c3, shared = c2 }) do
        local r, n = counted(function() return ember.baddbmm(on(c), on(ba), on(bb), { beta = 0.25 }) end)
        assert.are.equal(1, n, dt .. ' baddbmm ' .. name .. ': dispatches')
        check(dt .. ' baddbmm ' .. name, r, ember.baddbmm(c, ba, bb, { beta = 0.25 }), 9)
      end
      -- nn.Linear with a bias: one kernel for the forward
      local lin = ember.nn.Linear(33, 40):to(dt)
      local vlin = ember.nn.Linear(33, 40):to(dt)
      ember.no_grad(function()
        vlin.weight:copy_(lin.weight)
        vlin.bias:copy_(lin.bias)
      end)
      vlin = vlin:to(V)
      local x = data(dt, { 70, 33 })
      local y, n = counted(function() return ember.no_grad(function() return vlin(on(x)) end) end)
      assert.are.equal(1, n, dt .. ' Linear: dispatches')
      check(dt .. ' Linear', y, ember.no_grad(function() return lin(x) end), 33)
    end
    -- float64 (no room in its push constants for c) still copies c first: two kernels
    if VK.has_f64 then
      local a, b, c = data('float64', { 5, 6 }), data('float64', { 6, 7 }), data('float64', { 7 })
      local r, n = counted(function() return ember.addmm(on(c), on(a), on(b)) end)
      assert.are.equal(2, n, 'float64 addmm: dispatches')
      check('float64 addmm', r, ember.addmm(c, a, b), 6)
    end
  end)

  it('walks only a third batch dim (5-D), and handles zero-size batches', function()
    local a = data('float32', { 4, 2, 3, 6, 5 })
    local b = data('float32', { 3, 1, 4, 5, 7 })
    local f = function(x, y) -- [2,3,4,6,5] @ [2,3,4,5,7]: no two batch dims merge
      return x:permute(2, 3, 1, 4, 5):matmul(y:permute(2, 1, 3, 4, 5):expand(2, 3, 4, 5, 7))
    end
    local r, n = counted(function() return f(on(a), on(b)) end)
    assert.are.equal(2, n, '5-D: one dispatch per index of the outermost dim')
    check('5-D', r, f(a, b), 5)
    local z, m = counted(function() return on(ember.zeros(2, 0, 4, 5)):matmul(on(ember.ones(5, 3))) end)
    assert.are.equal(0, m, 'zero-size batch: nothing to dispatch')
    assert.are.same({ 2, 0, 4, 3 }, { unpack(z:size()) })
  end)

  it('splits a 4-D grid beyond the device limit (flat batch index past 65535)', function()
    local a = data('float32', { 250, 300, 1, 2 })
    local b = data('float32', { 300, 1, 2, 3 })
    local f = function(x, y) return x:transpose(1, 2):matmul(y:expand(300, 250, 2, 3)) end
    check('[300, 250] batches', f(on(a), on(b)), f(a, b), 2)
  end)

  it("gives the CPU's gradients through attention's products on the views", function()
    for _, dt in ipairs({ 'float32', 'bfloat16' }) do
      local B, T, Hn, hd = 2, 17, 3, 8
      local x0, g0 = data(dt, { B, T, 3 * Hn * hd }), data(dt, { B, Hn, T, hd })
      local function grad(dev)
        local x = x0:to(dev):detach():requires_grad_()
        local w = x:view(B, T, 3, Hn, hd)
        local function part(i) return w:select(3, i):transpose(2, 3) end
        local att = part(1):matmul(part(2):transpose(-2, -1))
        att:matmul(part(3)):backward(g0:to(dev))
        return x.grad
      end
      local want = grad('cpu')
      local t = tol(dt, T * hd)
      VK.agree(grad(V), want, dt .. ' attention x.grad', { t[1] * 2, t[2] * 9 })
    end
  end)

  it('splits grids beyond the device limit (batches, columns)', function()
    local B = 70000 -- above lavapipe's 65535 workgroups per dimension
    local a, b = data('float32', { B, 1, 2 }), data('float32', { B, 2, 1 })
    check('bmm with 70000 batches', on(a):bmm(on(b)), a:bmm(b), 2)
    local N = 65536 * 64 + 100 -- 65538 column tiles of 64
    local r, c = ember.randn(1, 1), ember.randn(1, N)
    check('1 x 1 @ 1 x 4194404', on(r):matmul(on(c)), r:matmul(c), 1)
  end)

  it('applies alpha and beta (addmm, baddbmm), ignoring NaN in c when beta = 0', function()
    for _, dt in ipairs(dtypes) do
      local c, a, b = data(dt, { 70, 33 }), data(dt, { 70, 40 }), data(dt, { 40, 33 })
      for _, o in ipairs({ { beta = 1, alpha = 1 }, { beta = 0.5, alpha = -2 },
        { beta = 0, alpha = 3 } }) do
        check(('%s addmm beta=%g alpha=%g'):format(dt, o.beta, o.alpha),
          ember.addmm(on(c), on(a), on(b), o), ember.addmm(c, a, b, o), 40)
      end
      -- c broadcast from a row (a bias), and an odd N: 16-bit words shared between rows
      local bias = data(dt, { 33 })
      check(dt .. ' addmm bias', ember.addmm(on(bias), on(a), on(b)), ember.addmm(bias, a, b), 40)
      local nan = ember.full({ 70, 33 }, 0 / 0, { dtype = dt })
      local got = ember.addmm(on(nan), on(a), on(b), { beta = 0 })
      check(dt .. ' addmm beta=0 NaN', got, ember.matmul(a, b), 40)
      local c3, a3, b3 = data(dt, { 2, 9, 11 }), data(dt, { 2, 9, 4 }), data(dt, { 2, 4, 11 })
      check(dt .. ' baddbmm', ember.baddbmm(on(c3), on(a3), on(b3), { beta = 2, alpha = 0.5 }),
        ember.baddbmm(c3, a3, b3, { beta = 2, alpha = 0.5 }), 4)
    end
  end)

  it('splits a long K over workgroups (float32, few output tiles), in a fixed order', function()
    -- vk_matmul.c's split_k: fewer than 256 workgroups' worth of tiles and K >= 512; the
    -- splits' partial products are added by conv_sum.comp with alpha and beta
    for _, s in ipairs({ { 70, 33, 1000 }, { 8, 8, 16384 }, { 64, 130, 1001 }, { 3, 5, 777 } }) do
      local M, N, K = s[1], s[2], s[3]
      for _, la in ipairs({ 'contiguous', 'transposed', 'sliced' }) do
        local a, va = layouts[la]('float32', M, K)
        local b, vb = layouts.transposed('float32', K, N)
        local what = ('split K %dx%dx%d a %s'):format(M, N, K, la)
        local got = va:matmul(vb)
        check(what, got, a:matmul(b), K)
        assert.are.same(got:totable(), va:matmul(vb):totable(), what .. ': not deterministic')
        local c = data('float32', { M, N })
        check(what .. ' addmm', ember.addmm(on(c), va, vb, { beta = 0.5, alpha = -2 }),
          ember.addmm(c, a, b, { beta = 0.5, alpha = -2 }), K)
        local nan = ember.full({ M, N }, 0 / 0)
        check(what .. ' beta=0 NaN', ember.addmm(on(nan), va, vb, { beta = 0 }), a:matmul(b), K)
      end
    end
  end)

  it('computes the vector products built on gemm (mv, dot, outer)', function()
    for _, dt in ipairs(dtypes) do
      local m, v, w = data(dt, { 37, 300 }), data(dt, { 300 }), data(dt, { 41 })
      check(dt .. ' mv', on(m):mv(on(v)), m:mv(v), 300)
      check(dt .. ' mv transposed', on(m):t():mv(on(m)[{ {}, 1 }]), m:t():mv(m[{ {}, 1 }]), 37)
      check(dt .. ' dot', ember.dot(on(v), on(v)), ember.dot(v, v), 300)
      check(dt .. ' outer', ember.outer(on(v), on(w)), ember.outer(v, w), 1)
      check(dt .. ' vector @ matrix', on(v):matmul(on(m):t()), v:matmul(m:t()), 300)
    end
  end)

  it('gives the CPU gradients for matmul and linear (x @ w:t())', function()
    for _, dt in ipairs({ 'float32', 'float16' }) do
      local x0, w0 = data(dt, { 33, 70 }), data(dt, { 20, 70 })
      local gy0 = data(dt, { 33, 20 })
      local function grads(dev)
        local x = x0:to(dev):detach():requires_grad_()
        local w = w0:to(dev):detach():requires_grad_()
        x:matmul(w:t()):backward(gy0:to(dev))
        return x.grad, w.grad
      end
      local gx, gw = grads('cpu')
      local vgx, vgw = grads(V)
      check(dt .. ' linear x.grad', vgx, gx, 20)
      check(dt .. ' linear w.grad', vgw, gw, 33)
      -- matmul of a transposed operand and a bmm
      local a0, b0, g0 = data(dt, { 2, 40, 9 }), data(dt, { 2, 40, 7 }), data(dt, { 2, 9, 7 })
      local function grads2(dev)
        local a = a0:to(dev):detach():requires_grad_()
        local b = b0:to(dev):detach():requires_grad_()
        a:transpose(2, 3):matmul(b):backward(g0:to(dev))
        return a.grad, b.grad
      end
      local ga, gb = grads2('cpu')
      local vga, vgb = grads2(V)
      check(dt .. ' bmm a.grad', vga, ga, 7)
      check(dt .. ' bmm b.grad', vgb, gb, 9)
    end
  end)

  it('multiplies every integer dtype exactly, wrapping on overflow like the CPU', function()
    for _, dt in ipairs({ 'int8', 'uint8', 'int16', 'int32', 'int64' }) do
      local lo, hi = dt == 'uint8' and 0 or -100, 100 -- int8 and uint8 products overflow
      for _, s in ipairs({ { 7, 9, 5 }, { 70, 33, 21 } }) do -- odd N: bytes of other rows
        local a = VK.data(dt, { s[1], s[3] }, lo, hi)
        local b = VK.data(dt, { s[2], s[3] }, lo, hi):t()
        VK.agree(on(a):matmul(on(b)), a:matmul(b), dt .. ' ' .. table.concat(s, 'x'))
      end
      local c, a, b = VK.data(dt, { 4, 6, 7 }, lo, hi), VK.data(dt, { 4, 6, 3 }, lo, hi),
        VK.data(dt, { 3, 7 }, lo, hi)
      VK.agree(ember.baddbmm(on(c), on(a), on(b):expand(4, 3, 7), { beta = 2, alpha = -3 }),
        ember.baddbmm(c, a, b:expand(4, 3, 7), { beta = 2, alpha = -3 }), dt .. ' baddbmm')
    end
    local big = ember.tensor({ { 2 ^ 40, 3 } }, { dtype = 'int64' })
    local col = ember.tensor({ { 2 ^ 30 }, { 5 } }, { dtype = 'int64' })
    VK.agree(on(big):matmul(on(col)), big:matmul(col), 'int64 beyond 2^64 wraps')
  end)
end)
