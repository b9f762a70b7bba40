-- ember.nn.functional (convolution, pooling, normalization, dropout, embedding, class
-- losses) against independent references: direct loops over Lua tables in double, values
-- computed by hand, and finite differences (ember.autograd.gradcheck, float64).
local H = require 'tests.lua.helpers'
local ember = H.ember
local F = require 'ember.nn.functional'

local gradcheck = ember.autograd.gradcheck

-- ---- helpers -----------------------------------------------------------------------------------

-- A tensor of the given shape filled with uniform values in [-1, 1) from the helpers' stream.
local function rnd(shape, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local t = {}
  for i = 1, n do t[i] = H.uniform(-1, 1) end
  local x = ember.tensor(n > 0 and t or { 0 }, { dtype = dtype or 'float64' })
  if n == 0 then return ember.zeros(shape, { dtype = dtype or 'float64' }) end
  return x:view(shape)
end

local function leaf(shape) return rnd(shape, 'float64'):requires_grad_() end

local function flat(x) return x:contiguous():view(-1):totable() end

local function shape_of(x) return x:size() end

-- Compares a tensor with a flat reference of the given shape.
local function check(x, ref, shape, tol, what)
  local s = x:size()
  assert(#s == #shape, ('%s: got %d dims, expected %d'):format(what or '', #s, #shape))
  for i = 1, #shape do
    assert(s[i] == shape[i], ('%s: got shape %s, expected [%s]'):format(what or '', tostring(s),
      table.concat(shape, ', ')))
  end
  local got = x:numel() > 0 and flat(x) or {}
  assert(#got == #ref, (what or '') .. ': element count')
  tol = tol or 1e-10
  for i = 1, #ref do
    local a, b = got[i], ref[i]
    if not (a ~= a and b ~= b) and math.abs(a - b) > tol * (1 + math.abs(b)) then
      error(('%s: element %d: got %.10g, expected %.10g'):format(what or '', i, a, b), 2)
    end
  end
end

local function pair(v) return type(v) == 'table' and v or { v, v } end

-- ---- references ------------------------------------------------------------------------------------

-- Direct convolution: x [N, C, H, W], w [M, C/g, KH, KW].
local function conv2d_ref(x, w, b, o)
  local xs, ws = x:size(), w:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local M, Cg, KH, KW = ws[1], ws[2], ws[3], ws[4]
  local s, p, d, g = pair(o.stride or 1), pair(o.padding or 0), pair(o.dilation or 1), o.groups or 1
  local OH = math.floor((Hh + 2 * p[1] - d[1] * (KH - 1) - 1) / s[1]) + 1
  local OW = math.floor((W + 2 * p[2] - d[2] * (KW - 1) - 1) / s[2]) + 1
  local xf, wf = x:numel() > 0 and flat(x) or {}, flat(w)
  local bf = b and flat(b)
  local out, Mg = {}, M / g
  for n = 0, N - 1 do
    for m = 0, M - 1 do
      local grp = math.floor(m / Mg)
      for oh = 0, OH - 1 do
        for ow = 0, OW - 1 do
          local acc = bf and bf[m + 1] or 0
          for c = 0, Cg - 1 do
            local ci = grp * Cg + c
            for i = 0, KH - 1 do
              local ih = oh * s[1] - p[1] + i * d[1]
              if ih >= 0 and ih < Hh then
                for j = 0, KW - 1 do
                  local iw = ow * s[2] - p[2] + j * d[2]
                  if iw >= 0 and iw < W then
                    acc = acc + xf[((n * C + ci) * Hh + ih) * W + iw + 1] * wf[((m * Cg + c) * KH + i) * KW + j + 1]
                  end
                end
              end
            end
          end
          out[#out + 1] = acc
        end
      end
    end
  end
  return out, { N, M, OH, OW }
end

-- Transposed convolution as a scatter: x [N, Cin, H, W], w [Cin, Cout/g, KH, KW].
local function conv_transpose2d_ref(x, w, b, o)
  local xs, ws = x:size(), w:size()
  local N, Cin, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local Coutg, KH, KW = ws[2], ws[3], ws[4]
  local s, p, d, g = pair(o.stride or 1), pair(o.padding or 0), pair(o.dilation or 1), o.groups or 1
  local op = pair(o.output_padding or 0)
  local OH = (Hh - 1) * s[1] - 2 * p[1] + d[1] * (KH - 1) + op[1] + 1
  local OW = (W - 1) * s[2] - 2 * p[2] + d[2] * (KW - 1) + op[2] + 1
  local Cout, Cing = Coutg * g, Cin / g
  local xf, wf, bf = flat(x), flat(w), b and flat(b)
  local out = {}
  for n = 0, N - 1 do
    for co = 0, Cout - 1 do
      for i = 0, OH * OW - 1 do out[((n * Cout + co) * OH * OW) + i + 1] = bf and bf[co + 1] or 0 end
    end
  end
  for n = 0, N - 1 do
    for ci = 0, Cin - 1 do
      local grp = math.floor(ci / Cing)
      for ih = 0, Hh - 1 do
        for iw = 0, W - 1 do
          local v = xf[((n * Cin + ci) * Hh + ih) * W + iw + 1]
          for cl = 0, Coutg - 1 do
            local co = grp * Coutg + cl
            for ki = 0, KH - 1 do
              local oh = ih * s[1] - p[1] + ki * d[1]
              if oh >= 0 and oh < OH then
                for kj = 0, KW - 1 do
                  local ow = iw * s[2] - p[2] + kj * d[2]
                  if ow >= 0 and ow < OW then
                    local at = ((n * Cout + co) * OH + oh) * OW + ow + 1
                    out[at] = out[at] + v * wf[((ci * Coutg + cl) * KH + ki) * KW + kj + 1]
                  end
                end
              end
            end
          end
        end
      end
    end
  end
  return out, { N, Cout, OH, OW }
end

-- PyTorch's pooling output size.
local function pool_out(n, k, s, p, d, ceil)
  local span = n + 2 * p - d * (k - 1) - 1
  local o = (ceil and math.ceil(span / s) or math.floor(span / s)) + 1
  if ceil and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- Max pooling: values and 1-based flat indices within each plane (NaN wins, first max wins).
local function max_pool_ref(x, k, o)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  k = pair(k)
  local s, p, d = pair(o.stride or k), pair(o.padding or 0), pair(o.dilation or 1)
  local OH, OW = pool_out(Hh, k[1], s[1], p[1], d[1], o.ceil_mode), pool_out(W, k[2], s[2], p[2], d[2], o.ceil_mode)
  local xf, vals, inds = flat(x), {}, {}
  for pl = 0, N * C - 1 do
    for oh = 0, OH - 1 do
      for ow = 0, OW - 1 do
        local best, at = -math.huge, nil
        for i = 0, k[1] - 1 do
          local h = oh * s[1] - p[1] + i * d[1]
          for j = 0, k[2] - 1 do
            local w = ow * s[2] - p[2] + j * d[2]
            if h >= 0 and h < Hh and w >= 0 and w < W then
              local v = xf[pl * Hh * W + h * W + w + 1]
              if at == nil or (best == best and (v > best or v ~= v)) then best, at = v, h * W + w end
            end
          end
        end
        vals[#vals + 1], inds[#inds + 1] = best, at + 1
      end
    end
  end
  return vals, inds, { N, C, OH, OW }
end

local function avg_pool_ref(x, k, o)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  k = pair(k)
  local s, p = pair(o.stride or k), pair(o.padding or 0)
  local cip = o.count_include_pad ~= false
  local OH, OW = pool_out(Hh, k[1], s[1], p[1], 1, o.ceil_mode), pool_out(W, k[2], s[2], p[2], 1, o.ceil_mode)
  local xf, out = flat(x), {}
  for pl = 0, N * C - 1 do
    for oh = 0, OH - 1 do
      for ow = 0, OW - 1 do
        local h0, w0 = oh * s[1] - p[1], ow * s[2] - p[2]
        local h1, w1 = math.min(h0 + k[1], Hh + p[1]), math.min(w0 + k[2], W + p[2])
        local padded = (h1 - h0) * (w1 - w0)
        h0, w0, h1, w1 = math.max(h0, 0), math.max(w0, 0), math.min(h1, Hh), math.min(w1, W)
        local sum = 0
        for h = h0, h1 - 1 do for w = w0, w1 - 1 do sum = sum + xf[pl * Hh * W + h * W + w + 1] end end
        local div = o.divisor_override or (cip and padded or (h1 - h0) * (w1 - w0))
        out[#out + 1] = sum / div
      end
    end
  end
  return out, { N, C, OH, OW }
end

local function adaptive_ref(x, size, is_max)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local OH, OW = pair(size)[1], pair(size)[2]
  local xf, out = flat(x), {}
  for pl = 0, N * C - 1 do
    for oh = 0, OH - 1 do
      local h0, h1 = math.floor(oh * Hh / OH), math.ceil((oh + 1) * Hh / OH)
      for ow = 0, OW - 1 do
        local w0, w1 = math.floor(ow * W / OW), math.ceil((ow + 1) * W / OW)
        local acc = is_max and -math.huge or 0
        for h = h0, h1 - 1 do
          for w = w0, w1 - 1 do
            local v = xf[pl * Hh * W + h * W + w + 1]
            if is_max then acc = math.max(acc, v) else acc = acc + v end
          end
        end
        out[#out + 1] = is_max and acc or acc / ((h1 - h0) * (w1 - w0))
      end
    end
  end
  return out, { N, C, OH, OW }
end

-- ---- convolution -----------------------------------------------------------------------------------

describe('conv2d', function()
  local cases = {
    { 'batch 1, 1 channel', { 1, 1, 5, 5 }, { 1, 1, 3, 3 }, {} },
    { 'stride and padding per axis', { 2, 3, 7, 6 }, { 4, 3, 3, 2 }, { stride = { 2, 1 }, padding = { 1, 0 } } },
    { 'dilation and groups', { 3, 4, 9, 8 }, { 6, 2, 3, 3 }, { dilation = 2, padding = 2, groups = 2 } },
    { 'depthwise', { 2, 4, 6, 7 }, { 4, 1, 3, 3 }, { groups = 4, padding = 1, stride = 2 } },
    { 'depthwise multiplier 2', { 1, 3, 5, 5 }, { 6, 1, 3, 3 }, { groups = 3, padding = 1 } },
    { '1x1 (columns are the input)', { 2, 5, 4, 3 }, { 3, 5, 1, 1 }, {} },
    { '1x1 strided', { 2, 5, 5, 4 }, { 3, 5, 1, 1 }, { stride = 2 } },
    { 'kernel as large as the padded input', { 2, 2, 3, 4 }, { 3, 2, 5, 6 }, { padding = 1 } },
    { 'odd sizes, several K blocks and panels', { 2, 20, 11, 13 }, { 13, 20, 5, 5 }, { padding = 2 } },
    { 'strided and dilated, no bias', { 1, 3, 10, 9 }, { 2, 3, 2, 3 }, { stride = 3, dilation = { 2, 1 } }, true },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(3)
        local x, w = rnd(c[2], dtype), rnd(c[3], dtype)
        local b = not c[5] and rnd({ c[3][1] }, dtype) or nil
        local ref, shape = conv2d_ref(x, w, b, c[4])
        check(F.conv2d(x, w, b, c[4]), ref, shape, dtype == 'float32' and 2e-5 or 1e-12, c[1])
      end)
    end
  end

  it('takes PyTorch positional options', function()
    H.seed(4)
    local x, w, b = rnd({ 1, 2, 6, 6 }), rnd({ 3, 2, 3, 3 }), rnd({ 3 })
    local ref, shape = conv2d_ref(x, w, b, { stride = 2, padding = 1 })
    check(F.conv2d(x, w, b, 2, 1), ref, shape, 1e-12)
  end)

  it('reads strided and transposed inputs', function()
    H.seed(5)
    local base = rnd({ 2, 3, 6, 8 })
    local x = base:transpose(3, 4) -- [2, 3, 8, 6], not contiguous
    local w = rnd({ 4, 3, 3, 3 })
    local ref, shape = conv2d_ref(x:contiguous(), w, nil, { padding = 1 })
    check(F.conv2d(x, w, nil, { padding = 1 }), ref, shape, 1e-12)
    local sliced = rnd({ 2, 6, 5, 5 })[{ {}, { 1, 6, 2 } }]
    local ref2, shape2 = conv2d_ref(sliced:contiguous(), w, nil, {})
    check(F.conv2d(sliced, w), ref2, shape2, 1e-12)
  end)

  it('accepts an unbatched input and an empty batch', function()
    H.seed(6)
    local x, w, b = rnd({ 3, 5, 5 }), rnd({ 2, 3, 3, 3 }), rnd({ 2 })
    local ref = conv2d_ref(x:unsqueeze(1), w, b, { padding = 1 })
    check(F.conv2d(x, w, b, { padding = 1 }), ref, { 2, 5, 5 }, 1e-12)
    local y = F.conv2d(ember.zeros(0, 3, 5, 5, { dtype = 'float64' }), w, b)
    assert.same({ 0, 2, 3, 3 }, { y:size(1), y:size(2), y:size(3), y:size(4) })
  end)

  it("supports padding 'same' (odd and even kernels) and 'valid'", function()
    H.seed(7)
    local x = rnd({ 1, 2, 6, 7 })
    for _, k in ipairs({ { 3, 3 }, { 4, 2 }, { 2, 5 } }) do
      local w = rnd({ 3, 2, k[1], k[2] })
      local y = F.conv2d(x, w, nil, { padding = 'same' })
      -- PyTorch: total padding d*(k-1), left half rounded down, the rest on the right
      local xp = ember.zeros(1, 2, 6 + k[1] - 1, 7 + k[2] - 1, { dtype = 'float64' })
      local top, left = math.floor((k[1] - 1) / 2), math.floor((k[2] - 1) / 2)
      xp[{ {}, {}, { top + 1, top + 6 }, { left + 1, left + 7 } }] = x
      local ref, shape = conv2d_ref(xp, w, nil, {})
      check(y, ref, shape, 1e-12, 'same ' .. k[1] .. 'x' .. k[2])
    end
    local w = rnd({ 3, 2, 3, 3 })
    local ref, shape = conv2d_ref(x, w, nil, {})
    check(F.conv2d(x, w, nil, { padding = 'valid' }), ref, shape, 1e-12)
  end)

  it('handles zero input channels (the output is the bias)', function()
    local b = ember.tensor({ 1, 2, 3 }, { dtype = 'float64' })
    local y = F.conv2d(ember.zeros(2, 0, 4, 4, { dtype = 'float64' }), ember.zeros(3, 0, 3, 3, { dtype = 'float64' }), b)
    local ref = {}
    for n = 1, 2 do for m = 1, 3 do for _ = 1, 4 do ref[#ref + 1] = m end end end
    check(y, ref, { 2, 3, 2, 2 }, 0)
    local y32 = F.conv2d(ember.zeros(1, 0, 3, 3), ember.zeros(2, 0, 1, 1))
    check(y32, { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 }, { 1, 2, 3, 3 }, 0)
  end)

  it('computes float16 and bfloat16 through float32', function()
    H.seed(8)
    local x, w = rnd({ 1, 2, 5, 5 }), rnd({ 2, 2, 3, 3 })
    local ref, shape = conv2d_ref(x, w, nil, {})
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      local y = F.conv2d(x:to(dt), w:to(dt))
      assert.equal(dt, y:dtype())
      check(y:double(), ref, shape, 5e-2, dt)
    end
  end)

  it('has gradients for input, weight and bias', function()
    H.seed(9)
    gradcheck(function(x, w, b) return F.conv2d(x, w, b, { stride = 2, padding = 1 }) end,
      { leaf({ 2, 2, 5, 5 }), leaf({ 3, 2, 3, 3 }), leaf({ 3 }) })
    gradcheck(function(x, w, b) return F.conv2d(x, w, b, { dilation = 2, padding = { 1, 2 }, groups = 2 }) end,
      { leaf({ 1, 4, 5, 6 }), leaf({ 2, 2, 2, 3 }), leaf({ 2 }) })
    gradcheck(function(x, w) return F.conv2d(x, w, nil, { groups = 3 }) end, -- depthwise, 1x1
      { leaf({ 2, 3, 3, 3 }), leaf({ 3, 1, 1, 1 }) })
  end)

  -- float32 runs on the AVX-512 kernels where the CPU has them (direct for stride 1, im2col +
  -- packed GEMM otherwise), float64 on im2col + BLAS, checked above by finite differences.
  local grad_cases = {
    { 'stride 1, padded (direct)', { 3, 6, 9, 11 }, { 10, 6, 5, 5 }, { padding = 2 } },
    { 'wide output channels (full panels)', { 2, 3, 8, 19 }, { 40, 3, 3, 3 }, { padding = 1 } },
    { 'stride 2 (im2col input gradient)', { 2, 4, 9, 10 }, { 33, 4, 3, 3 }, { stride = 2, padding = 1 } },
    { 'stride 3, dilation 2', { 1, 3, 13, 12 }, { 8, 3, 3, 2 }, { stride = 3, dilation = 2 } },
    { 'depthwise', { 2, 8, 7, 7 }, { 8, 1, 3, 3 }, { groups = 8, padding = 1 } },
    { 'groups of 16 channels', { 1, 32, 5, 6 }, { 32, 16, 3, 3 }, { groups = 2, padding = 1 } },
    { '1x1', { 2, 20, 5, 7 }, { 36, 20, 1, 1 }, {} },
    { 'padding wider than the kernel', { 1, 2, 4, 4 }, { 16, 2, 2, 2 }, { padding = 2 } },
  }
  for _, c in ipairs(grad_cases) do
    it('gives float32 gradients that agree with float64: ' .. c[1], function()
      H.seed(10)
      local x64, w64, b64 = leaf(c[2]), leaf(c[3]), leaf({ c[3][1] })
      local y64 = F.conv2d(x64, w64, b64, c[4])
      local g = rnd({ y64:size(1), y64:size(2), y64:size(3), y64:size(4) })
      y64:backward(g)
      local x32 = x64:detach():float():requires_grad_()
      local w32 = w64:detach():float():requires_grad_()
      local b32 = b64:detach():float():requires_grad_()
      local y32 = F.conv2d(x32, w32, b32, c[4])
      check(y32, flat(y64), y64:size(), 1e-4, 'output')
      y32:backward(g:float())
      check(x32.grad, flat(x64.grad), x64:size(), 1e-4, 'input grad')
      check(w32.grad, flat(w64.grad), w64:size(), 1e-4, 'weight grad')
      check(b32.grad, flat(b64.grad), b64:size(), 1e-4, 'bias grad')
    end)
  end

  it('supports double backward', function()
    H.seed(11)
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.conv2d(x, w, nil, { padding = 1, stride = 2 })
        local gx, gw = unpack(ember.autograd.grad((y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 1, 2, 4, 4 }), leaf({ 2, 2, 3, 3 }) })
  end)

  it('reports bad arguments', function()
    local x, w = ember.randn(2, 4, 8, 8), ember.randn(8, 3, 5, 5)
    H.assert_error(function() F.conv2d(x, w) end,
      'conv2d: expected input with 3 channels (weight [8,3,5,5]), got 4')
    H.assert_error(function() F.conv2d(ember.randn(4, 8, 8), ember.randn(8, 2, 5, 5), nil, { groups = 3 }) end,
      "conv2d: expected the weight's 8 output channels to be divisible by groups (3)")
    H.assert_error(function() F.conv2d(ember.randn(1, 6, 8, 8), ember.randn(6, 2, 3, 3), nil, { groups = 2 }) end,
      'conv2d: expected input with 4 channels (weight [6,2,3,3], groups 2), got 6')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 3, 3), w:narrow(2, 1, 3)) end,
      'conv2d: the kernel [5,5] (dilated) is larger than the padded input [3,3]')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 6, 6), ember.randn(2, 3, 3, 3), nil, { dilation = 3 }) end,
      'conv2d: the kernel [7,7] (dilated) is larger than the padded input [6,6]')
    H.assert_error(function() F.conv2d(ember.randn(8, 8), w) end, 'conv2d: expected a 3-D (unbatched) or 4-D input, got 2-D')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(3, 3, 3)) end, 'conv2d: expected a 4-D weight, got 3-D')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), ember.randn(3)) end,
      'conv2d: expected a bias of shape [2], got [3]')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { stride = 0 }) end,
      'conv2d: expected stride >= 1, got 0')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { padding = -1 }) end,
      'conv2d: expected padding >= 0, got -1')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { groups = 0 }) end,
      'conv2d: expected groups >= 1, got 0')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3):double()) end,
      'conv2d: expected a weight of the input\'s dtype float32, got float64')
    H.assert_error(function() F.conv2d(ember.ones(1, 3, 8, 8, { dtype = 'int64' }), ember.ones(2, 3, 3, 3, { dtype = 'int64' })) end,
      'conv2d: expected a floating point input, got int64')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { padding = 'same', stride = 2 }) end,
      "conv2d: padding='same' needs stride 1")
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), ember.randn(2, 3, 3, 3), nil, { stride = { 1, 2, 3 } }) end,
      'conv2d: expected stride as a number or a table of 2 numbers')
    H.assert_error(function() F.conv2d(ember.randn(1, 3, 8, 8), 'w') end, 'conv2d: expected weight to be a tensor')
  end)
end)

describe('conv1d', function()
  -- conv1d is conv2d over a height of 1: checked against conv2d_ref on [N, C, 1, L]
  for _, c in ipairs({
    { { 2, 3, 10 }, { 4, 3, 3 }, { stride = 2, padding = 1 } },
    { { 1, 4, 9 }, { 4, 2, 2 }, { dilation = 3, groups = 2 } },
    { { 3, 7 }, { 2, 3, 7 }, {} }, -- unbatched, kernel as long as the input
  }) do
    it(('input [%s], weight [%s]'):format(table.concat(c[1], ','), table.concat(c[2], ',')), function()
      H.seed(12)
      local x, w, b = rnd(c[1]), rnd(c[2]), rnd({ c[2][1] })
      local x4 = #c[1] == 2 and x:unsqueeze(1):unsqueeze(3) or x:unsqueeze(3)
      local o = c[3]
      local ref, shape = conv2d_ref(x4, w:unsqueeze(3), b, { stride = { 1, o.stride or 1 },
        padding = { 0, o.padding or 0 }, dilation = { 1, o.dilation or 1 }, groups = o.groups })
      local y = F.conv1d(x, w, b, o)
      if #c[1] == 2 then shape = { shape[2], shape[4] } else shape = { shape[1], shape[2], shape[4] } end
      check(y, ref, shape, 1e-12)
    end)
  end

  it('has gradients', function()
    H.seed(13)
    gradcheck(function(x, w, b) return F.conv1d(x, w, b, { stride = 2, padding = 1 }) end,
      { leaf({ 2, 2, 7 }), leaf({ 3, 2, 3 }), leaf({ 3 }) })
  end)

  it('reports bad ranks', function()
    H.assert_error(function() F.conv1d(ember.randn(2, 3, 4, 5), ember.randn(2, 3, 3)) end,
      'conv1d: expected a 2-D (unbatched) or 3-D input, got 4-D')
  end)
end)

describe('conv_transpose2d', function()
  local cases = {
    { 'stride 2, output_padding 1', { 2, 3, 4, 5 }, { 3, 2, 3, 3 }, { stride = 2, padding = 1, output_padding = 1 } },
    { 'groups and dilation', { 1, 4, 3, 3 }, { 4, 3, 2, 3 }, { groups = 2, dilation = 2, stride = { 1, 2 } } },
    { 'output_padding below the dilation', { 1, 2, 3, 3 }, { 2, 2, 3, 3 }, { dilation = 2, output_padding = 1 } },
    { '1x1', { 2, 5, 3, 4 }, { 5, 3, 1, 1 }, {} },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(14)
        local x, w = rnd(c[2], dtype), rnd(c[3], dtype)
        local b = rnd({ c[3][2] * (c[4].groups or 1) }, dtype)
        local ref, shape = conv_transpose2d_ref(x, w, b, c[4])
        check(F.conv_transpose2d(x, w, b, c[4]), ref, shape, dtype == 'float32' and 2e-5 or 1e-12, c[1])
      end)
    end
  end

  it('has gradients for input, weight and bias', function()
    H.seed(15)
    gradcheck(function(x, w, b) return F.conv_transpose2d(x, w, b, { stride = 2, padding = 1, output_padding = 1 }) end,
      { leaf({ 1, 2, 3, 3 }), leaf({ 2, 3, 3, 3 }), leaf({ 3 }) })
    gradcheck(function(x, w) return F.conv_transpose2d(x, w, nil, { dilation = 2, output_padding = 1, groups = 2 }) end,
      { leaf({ 1, 2, 2, 3 }), leaf({ 2, 1, 2, 2 }) })
  end)

  it('conv_transpose1d matches the 2-D form', function()
    H.seed(16)
    local x, w, b = rnd({ 2, 3, 5 }), rnd({ 3, 2, 4 }), rnd({ 2 })
    local ref, shape = conv_transpose2d_ref(x:unsqueeze(3), w:unsqueeze(3), b,
      { stride = { 1, 3 }, padding = { 0, 1 }, output_padding = { 0, 2 } })
    check(F.conv_transpose1d(x, w, b, { stride = 3, padding = 1, output_padding = 2 }), ref,
      { shape[1], shape[2], shape[4] }, 1e-12)
    gradcheck(function(a, c) return F.conv_transpose1d(a, c, nil, { stride = 2 }) end, { leaf({ 1, 2, 3 }), leaf({ 2, 2, 3 }) })
  end)

  it('conv2d_weight is the weight gradient of conv2d', function()
    H.seed(17)
    local x, w = leaf({ 2, 4, 6, 5 }), leaf({ 6, 2, 3, 2 })
    local o = { stride = 2, padding = 1, groups = 2 }
    local y = F.conv2d(x, w, nil, o)
    local g = rnd({ y:size(1), y:size(2), y:size(3), y:size(4) })
    y:backward(g)
    check(F.conv2d_weight(x:detach(), { 6, 2, 3, 2 }, g, o), flat(w.grad), { 6, 2, 3, 2 }, 1e-12)
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 3, 4, 4), ember.randn(2, 3, 3, 3)) end,
      'conv_transpose2d: expected input with 2 channels (weight [2,3,3,3]), got 3')
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 2, 4, 4), ember.randn(2, 3, 3, 3), nil, { stride = 2, output_padding = 2 }) end,
      'conv_transpose2d: expected output_padding (2) to be >= 0 and smaller than the stride (2) or the dilation (1)')
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 3, 4, 4), ember.randn(3, 3, 3, 3), nil, { groups = 2 }) end,
      "conv_transpose2d: expected the weight's 3 input channels to be divisible by groups (2)")
    H.assert_error(function() F.conv_transpose2d(ember.randn(1, 2, 1, 1), ember.randn(2, 3, 1, 1), nil, { padding = 1 }) end,
      'conv_transpose2d: the output size -1 is not positive')
  end)
end)

-- ---- pooling -----------------------------------------------------------------------------------------

describe('max_pool2d', function()
  local cases = {
    { 'kernel 2', { 2, 3, 6, 8 }, 2, {} },
    { 'odd size, kernel 2 (the 2x2 path drops the last row)', { 1, 2, 7, 5 }, 2, {} },
    { 'kernel 3, stride 2, padding 1', { 2, 2, 7, 6 }, 3, { stride = 2, padding = 1 } },
    { 'dilation', { 1, 2, 9, 9 }, { 3, 2 }, { dilation = { 2, 3 }, stride = 1 } },
    { 'ceil_mode', { 1, 1, 7, 6 }, 3, { stride = 2, ceil_mode = true } },
    { 'ceil_mode with padding', { 1, 2, 6, 6 }, 3, { stride = 2, padding = 1, ceil_mode = true } },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(20)
        local x = rnd(c[2], dtype)
        local vals, inds, shape = max_pool_ref(x, c[3], c[4])
        local o = {}
        for k, v in pairs(c[4]) do o[k] = v end
        o.return_indices = true
        local y, idx = F.max_pool2d(x, c[3], o)
        check(y, vals, shape, 1e-12)
        assert.equal('int64', idx:dtype())
        check(idx, inds, shape, 0)
        check(F.max_pool2d(x, c[3], c[4]), vals, shape, 1e-12)
      end)
    end
  end

  it('propagates NaN and keeps the first of equal maxima', function()
    local x = ember.tensor({ { { { 1, 0 / 0, 3, 3 }, { 2, 2, 3, 1 } } } })
    local y, idx = F.max_pool2d(x, 2, { return_indices = true })
    local t = y:totable()[1][1][1]
    assert.is_true(t[1] ~= t[1])
    assert.equal(3, t[2])
    assert.same({ 2, 3 }, idx:totable()[1][1][1])
    local y3 = F.max_pool2d(ember.tensor({ { { 0 / 0, 1, 2 }, { 3, 4, 5 }, { 6, 7, 8 } } }), 3)
    assert.is_true(y3:item() ~= y3:item())
  end)

  it('has gradients (through the saved indices) and double backward', function()
    H.seed(21)
    gradcheck(function(x) return F.max_pool2d(x, 3, { stride = 2, padding = 1 }) end, { leaf({ 2, 2, 5, 5 }) })
    gradcheck(function(x) return F.max_pool2d(x, 2, { dilation = 2, stride = 1 }) end, { leaf({ 1, 2, 4, 5 }) })
    -- overlapping windows pick the same element twice: its gradient is the sum
    local x = ember.tensor({ { { { 0, 0, 0 }, { 0, 5, 0 }, { 0, 0, 0 } } } }):requires_grad_()
    F.max_pool2d(x, 2, { stride = 1 }):sum():backward()
    assert.same({ { 0, 0, 0 }, { 0, 4, 0 }, { 0, 0, 0 } }, x.grad:totable()[1][1])
    gradcheck(function(a)
      return ember.enable_grad(function()
        local y = F.max_pool2d(a, 2)
        local g = ember.autograd.grad((y * y):sum(), a, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 1, 1, 4, 4 }) })
  end)

  it('max_pool1d and max_unpool2d', function()
    H.seed(22)
    local x = rnd({ 2, 3, 9 })
    local vals, inds, shape = max_pool_ref(x:unsqueeze(3), { 1, 3 }, { stride = { 1, 2 }, padding = { 0, 1 } })
    local y, idx = F.max_pool1d(x, 3, { stride = 2, padding = 1, return_indices = true })
    check(y, vals, { shape[1], shape[2], shape[4] }, 1e-12)
    check(idx, inds, { shape[1], shape[2], shape[4] }, 0)
    -- unpooling puts each maximum back where it came from
    local x2 = rnd({ 1, 2, 4, 6 })
    local p, i = F.max_pool2d(x2, 2, { return_indices = true })
    local u = F.max_unpool2d(p, i, 2)
    local xt, ut = flat(x2), flat(u)
    local it_, pt = flat(i), flat(p)
    local expect = {}
    for k = 1, #xt do expect[k] = 0 end
    for k = 1, #it_ do
      local plane = math.floor((k - 1) / 6)
      expect[plane * 24 + it_[k]] = pt[k]
    end
    check(u, expect, { 1, 2, 4, 6 }, 1e-12)
    for k = 1, #ut do assert(ut[k] == 0 or ut[k] == xt[k]) end
    gradcheck(function(a) return F.max_unpool2d(a, i, 2) end, { p:detach():clone():requires_grad_() })
    H.assert_error(function() F.max_unpool2d(p, i + 100, 2) end, 'max_unpool2d: expected indices in [0, 24)')
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.max_pool2d(ember.randn(4, 4), 2) end, 'max_pool2d: expected a 3-D (unbatched) or 4-D input, got 2-D')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 2, { padding = 2 }) end,
      'max_pool2d: expected padding between 0 and half the kernel size (1), got 2')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 2, 2), 3) end, 'max_pool2d: the output size 0x0 is too small')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 0) end, 'max_pool2d: expected kernel size >= 1, got 0')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 1, 4, 4), 2, { stride = 0 }) end, 'max_pool2d: expected stride >= 1, got 0')
    H.assert_error(function() F.max_pool2d(ember.ones(1, 1, 4, 4, { dtype = 'int32' }), 2) end,
      'max_pool2d: expected a floating point input, got int32')
    H.assert_error(function() F.max_pool2d(ember.randn(1, 0, 4, 4), 2) end, 'max_pool2d: expected non-empty channel and spatial dims')
  end)
end)

describe('avg_pool2d', function()
  local cases = {
    { 'kernel 2', { 2, 3, 6, 8 }, 2, {} },
    { 'padding counted', { 1, 2, 5, 5 }, 3, { stride = 2, padding = 1 } },
    { 'padding not counted', { 1, 2, 5, 5 }, 3, { stride = 2, padding = 1, count_include_pad = false } },
    { 'ceil_mode', { 1, 2, 7, 6 }, 3, { stride = 2, ceil_mode = true } },
    { 'ceil_mode, padding, not counted', { 2, 1, 6, 7 }, { 3, 2 }, { stride = 2, padding = 1, ceil_mode = true, count_include_pad = false } },
    { 'divisor_override', { 1, 2, 4, 6 }, 2, { divisor_override = 3 } },
  }
  for _, dtype in ipairs({ 'float64', 'float32' }) do
    for _, c in ipairs(cases) do
      it(('%s (%s)'):format(c[1], dtype), function()
        H.seed(23)
        local x = rnd(c[2], dtype)
        local ref, shape = avg_pool_ref(x, c[3], c[4])
        check(F.avg_pool2d(x, c[3], c[4]), ref, shape, dtype == 'float32' and 1e-6 or 1e-12, c[1])
      end)
    end
  end

  it('has gradients, first and second order', function()
    H.seed(24)
    gradcheck(function(x) return F.avg_pool2d(x, 3, { stride = 2, padding = 1, count_include_pad = false }) end, { leaf({ 1, 2, 5, 5 }) })
    gradcheck(function(x) return F.avg_pool2d(x, 2, { ceil_mode = true, stride = 2 }) end, { leaf({ 1, 1, 5, 3 }) })
    gradcheck(function(x)
      return ember.enable_grad(function()
        local y = F.avg_pool2d(x, 2, { stride = 1 })
        local g = ember.autograd.grad((y * y):sum(), x, { create_graph = true })
        return (g * g):sum()
      end)
    end, { leaf({ 1, 1, 3, 4 }) })
  end)

  it('avg_pool1d', function()
    H.seed(25)
    local x = rnd({ 2, 2, 7 })
    local ref, shape = avg_pool_ref(x:unsqueeze(3), { 1, 3 }, { stride = { 1, 2 }, padding = { 0, 1 } })
    check(F.avg_pool1d(x, 3, { stride = 2, padding = 1 }), ref, { shape[1], shape[2], shape[4] }, 1e-12)
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.avg_pool2d(ember.randn(1, 1, 4, 4), 2, { padding = 2 }) end,
      'avg_pool2d: expected padding between 0 and half the kernel size (1), got 2')
    H.assert_error(function() F.avg_pool2d(ember.randn(1, 1, 4, 4), 2, { divisor_override = 0 }) end,
      'avg_pool2d: expected divisor_override >= 1, got 0')
  end)
end)

describe('adaptive pooling', function()
  for _, c in ipairs({ { { 2, 3, 7, 7 }, 3 }, { { 1, 2, 5, 5 }, 5 }, { { 1, 2, 10, 6 }, { 4, 4 } }, { { 2, 1, 3, 4 }, { 1, 1 } } }) do
    it(('[%s] to %s'):format(table.concat(c[1], ','), type(c[2]) == 'table' and table.concat(c[2], 'x') or c[2]), function()
      H.seed(26)
      local x = rnd(c[1])
      local ref, shape = adaptive_ref(x, c[2], false)
      check(F.adaptive_avg_pool2d(x, c[2]), ref, shape, 1e-12, 'avg')
      local mref = adaptive_ref(x, c[2], true)
      check(F.adaptive_max_pool2d(x, c[2]), mref, shape, 1e-12, 'max')
    end)
  end

  it('keeps a dim given as false, and takes unbatched inputs', function()
    H.seed(27)
    local x = rnd({ 2, 6, 5 })
    local ref = adaptive_ref(x:unsqueeze(1), { 3, 5 }, false)
    check(F.adaptive_avg_pool2d(x, { 3, false }), ref, { 2, 3, 5 }, 1e-12)
  end)

  it('has gradients', function()
    H.seed(28)
    gradcheck(function(x) return F.adaptive_avg_pool2d(x, { 3, 2 }) end, { leaf({ 1, 2, 5, 4 }) })
    gradcheck(function(x) return F.adaptive_max_pool2d(x, 2) end, { leaf({ 1, 2, 5, 3 }) })
    gradcheck(function(x) return F.adaptive_avg_pool1d(x, 3) end, { leaf({ 2, 2, 7 }) })
  end)

  it('reports bad sizes', function()
    H.assert_error(function() F.adaptive_avg_pool2d(ember.randn(1, 1, 4, 4), 0) end,
      'adaptive_avg_pool2d: expected an output size >= 1, got 0x0')
  end)
end)

-- ---- normalization ----------------------------------------------------------------------------------

-- Per-channel mean and biased variance of x [N, C, ...] as Lua numbers.
local function channel_stats(x)
  local N, C = x:size(1), x:size(2)
  local S = x:numel() / (N * C)
  local xf, mean, var = flat(x), {}, {}
  for c = 0, C - 1 do
    local s = 0
    for n = 0, N - 1 do for i = 0, S - 1 do s = s + xf[(n * C + c) * S + i + 1] end end
    mean[c + 1] = s / (N * S)
    local q = 0
    for n = 0, N - 1 do for i = 0, S - 1 do q = q + (xf[(n * C + c) * S + i + 1] - mean[c + 1]) ^ 2 end end
    var[c + 1] = q / (N * S)
  end
  return mean, var, N * S
end

local function bn_ref(x, mean, var, w, b, eps)
  local N, C = x:size(1), x:size(2)
  local S = x:numel() / (N * C)
  local xf, wf, bf, out = flat(x), w and flat(w), b and flat(b), {}
  for n = 0, N - 1 do
    for c = 0, C - 1 do
      for i = 0, S - 1 do
        local v = (xf[(n * C + c) * S + i + 1] - mean[c + 1]) / math.sqrt(var[c + 1] + eps)
        out[#out + 1] = v * (wf and wf[c + 1] or 1) + (bf and bf[c + 1] or 0)
      end
    end
  end
  return out
end

describe('batch_norm', function()
  it('normalizes with batch statistics and updates the running ones (training)', function()
    for _, shape in ipairs({ { 4, 3, 5, 2 }, { 6, 4 }, { 3, 2, 7 } }) do
      H.seed(30)
      local x = rnd(shape)
      local C = shape[2]
      local w, b = rnd({ C }), rnd({ C })
      local rm, rv = rnd({ C }), rnd({ C }):abs() + 0.5
      local rm0, rv0 = flat(rm), flat(rv)
      local y = F.batch_norm(x, rm, rv, w, b, true, 0.3, 1e-3)
      local mean, var, count = channel_stats(x)
      check(y, bn_ref(x, mean, var, w, b, 1e-3), shape, 1e-10, 'output')
      local em, ev = {}, {}
      for c = 1, C do
        em[c] = 0.7 * rm0[c] + 0.3 * mean[c]
        ev[c] = 0.7 * rv0[c] + 0.3 * var[c] * count / (count - 1) -- unbiased, as PyTorch
      end
      check(rm, em, { C }, 1e-12, 'running_mean')
      check(rv, ev, { C }, 1e-12, 'running_var')
    end
  end)

  it('uses the running statistics in evaluation mode, and leaves them alone', function()
    H.seed(31)
    local x, rm, rv = rnd({ 3, 2, 4 }), rnd({ 2 }), rnd({ 2 }):abs() + 0.2
    local w, b = rnd({ 2 }), rnd({ 2 })
    local y = F.batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5)
    check(y, bn_ref(x, flat(rm), flat(rv), w, b, 1e-5), { 3, 2, 4 }, 1e-12)
    local before = flat(rm)
    F.batch_norm(x, rm, rv, nil, nil)
    check(rm, before, { 2 }, 0)
  end)

  it('works without affine parameters or running statistics, and in float32', function()
    H.seed(32)
    local x = rnd({ 5, 3, 2, 2 }, 'float32')
    local mean, var = channel_stats(x)
    check(F.batch_norm(x, nil, nil, nil, nil, true), bn_ref(x, mean, var, nil, nil, 1e-5), { 5, 3, 2, 2 }, 1e-5)
  end)

  it('has gradients in training and evaluation modes, first and second order', function()
    H.seed(33)
    gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end, { leaf({ 3, 2, 2, 2 }), leaf({ 2 }), leaf({ 2 }) })
    gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end, { leaf({ 4, 3 }), leaf({ 3 }), leaf({ 3 }) })
    local rm, rv = rnd({ 2 }), rnd({ 2 }):abs() + 0.5
    gradcheck(function(x, w, b) return F.batch_norm(x, rm, rv, w, b, false) end, { leaf({ 2, 2, 3 }), leaf({ 2 }), leaf({ 2 }) })
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.batch_norm(x, nil, nil, w, nil, true)
        local gx, gw = unpack(ember.autograd.grad((y * y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 3, 2, 2 }), leaf({ 2 }) })
  end)

  it('reports bad arguments', function()
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), nil, nil) end,
      'batch_norm: running_mean and running_var are needed in evaluation mode')
    H.assert_error(function() F.batch_norm(ember.randn(1, 3), nil, nil, nil, nil, true) end,
      'batch_norm: expected more than 1 value per channel when training, got input [1,3]')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), ember.zeros(2), ember.ones(2)) end,
      'batch_norm: expected running_mean of shape [3], got [2]')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), nil, nil, ember.ones(4), nil, true) end,
      'batch_norm: expected a weight of shape [3], got [4]')
    H.assert_error(function() F.batch_norm(ember.randn(4), nil, nil, nil, nil, true) end,
      'batch_norm: expected an input with at least 2 dims, got 1-D')
    H.assert_error(function() F.batch_norm(ember.randn(4, 3), ember.zeros(3), nil, nil, nil, true) end,
      'batch_norm: expected both running_mean and running_var, or neither')
  end)
end)

describe('layer_norm and group_norm', function()
  -- rows of D elements normalized; affine by position in the row (layer) or channel (group)
  local function norm_rows_ref(xf, rows, D, eps, affine_of)
    local out = {}
    for r = 0, rows - 1 do
      local s = 0
      for i = 1, D do s = s + xf[r * D + i] end
      local m = s / D
      local q = 0
      for i = 1, D do q = q + (xf[r * D + i] - m) ^ 2 end
      local rs = 1 / math.sqrt(q / D + eps)
      for i = 1, D do
        local w, b = affine_of(r, i - 1)
        out[r * D + i] = (xf[r * D + i] - m) * rs * w + b
      end
    end
    return out
  end

  it('layer_norm over the last one and two dims', function()
    H.seed(40)
    local x = rnd({ 3, 4, 5 })
    local w, b = rnd({ 5 }), rnd({ 5 })
    local wf, bf = flat(w), flat(b)
    check(F.layer_norm(x, 5, w, b, 1e-5), norm_rows_ref(flat(x), 12, 5, 1e-5, function(_, i) return wf[i + 1], bf[i + 1] end), { 3, 4, 5 }, 1e-12)
    local w2 = rnd({ 4, 5 })
    local w2f = flat(w2)
    check(F.layer_norm(x, { 4, 5 }, w2, nil, 1e-3), norm_rows_ref(flat(x), 3, 20, 1e-3, function(_, i) return w2f[i + 1], 0 end), { 3, 4, 5 }, 1e-12)
    check(F.layer_norm(x:float(), 5), norm_rows_ref(flat(x:float()), 12, 5, 1e-5, function() return 1, 0 end), { 3, 4, 5 }, 1e-5)
  end)

  it('group_norm', function()
    H.seed(41)
    local x = rnd({ 2, 6, 3, 2 })
    local w, b = rnd({ 6 }), rnd({ 6 })
    local wf, bf = flat(w), flat(b)
    -- 3 groups of 2 channels of 6 elements: rows of 12
    local ref = norm_rows_ref(flat(x), 6, 12, 1e-5, function(r, i)
      local c = (r % 3) * 2 + math.floor(i / 6)
      return wf[c + 1], bf[c + 1]
    end)
    check(F.group_norm(x, 3, w, b), ref, { 2, 6, 3, 2 }, 1e-12)
    local x2 = rnd({ 3, 4 }) -- no spatial dims
    check(F.group_norm(x2, 2), norm_rows_ref(flat(x2), 6, 2, 1e-5, function() return 1, 0 end), { 3, 4 }, 1e-12)
  end)

  it('instance_norm is group_norm with a group per channel', function()
    H.seed(42)
    local x = rnd({ 2, 3, 4 })
    check(F.instance_norm(x), norm_rows_ref(flat(x), 6, 4, 1e-5, function() return 1, 0 end), { 2, 3, 4 }, 1e-12)
    H.assert_error(function() F.instance_norm(x, ember.zeros(3), ember.ones(3)) end, 'instance_norm: running statistics are not supported')
  end)

  it('have gradients, first and second order', function()
    H.seed(43)
    gradcheck(function(x, w, b) return F.layer_norm(x, { 2, 3 }, w, b) end, { leaf({ 2, 2, 3 }), leaf({ 2, 3 }), leaf({ 2, 3 }) })
    gradcheck(function(x, w, b) return F.group_norm(x, 2, w, b) end, { leaf({ 2, 4, 3 }), leaf({ 4 }), leaf({ 4 }) })
    gradcheck(function(x) return F.group_norm(x, 1) end, { leaf({ 2, 3, 2 }) })
    gradcheck(function(x, w)
      return ember.enable_grad(function()
        local y = F.layer_norm(x, 3, w)
        local gx, gw = unpack(ember.autograd.grad((y * y * y):sum(), { x, w }, { create_graph = true }))
        return (gx * gx):sum() + (gw * gw):sum()
      end)
    end, { leaf({ 2, 3 }), leaf({ 3 }) })
  end)

  it('report bad arguments', function()
    H.assert_error(function() F.layer_norm(ember.randn(3, 4), 5) end,
      'layer_norm: expected an input whose trailing dims are [5], got [3,4]')
    H.assert_error(function() F.layer_norm(ember.randn(3, 4), 4, ember.ones(3)) end,
      'layer_norm: expected a weight of shape [4], got [3]')
    H.assert_error(function() F.group_norm(ember.randn(2, 6, 4), 4) end,
      'group_norm: expected the 6 channels to be divisible by num_groups (4)')
    H.assert_error(function() F.group_norm(ember.randn(2, 6, 4), 3, ember.ones(3)) end,
      'group_norm: expected a weight of shape [6], got [3]')
  end)
end)

describe('float16 and bfloat16', function()
  it('pool, normalize and take losses through float32, keeping the dtype', function()
    H.seed(70)
    local x = rnd({ 2, 4, 6, 6 })
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      local tol = dt == 'float16' and 5e-3 or 3e-2
      local xh = x:to(dt)
      local xr = xh:double() -- the values the half tensor holds
      local cases = {
        { F.max_pool2d(xh, 2), F.max_pool2d(xr, 2) },
        { F.avg_pool2d(xh, 3, { stride = 2, padding = 1 }), F.avg_pool2d(xr, 3, { stride = 2, padding = 1 }) },
        { F.adaptive_avg_pool2d(xh, 4), F.adaptive_avg_pool2d(xr, 4) },
        { F.batch_norm(xh, nil, nil, nil, nil, true), F.batch_norm(xr, nil, nil, nil, nil, true) },
        { F.group_norm(xh, 2), F.group_norm(xr, 2) },
        { F.layer_norm(xh, 6), F.layer_norm(xr, 6) },
      }
      for i, c in ipairs(cases) do
        assert.equal(dt, c[1]:dtype())
        check(c[1]:double(), flat(c[2]), c[2]:size(), tol, dt .. ' case ' .. i)
      end
      local t = ember.tensor({ 1, 3 }, { dtype = 'int64' })
      local l = F.cross_entropy(xh[{ {}, {}, 1, 1 }], t)
      assert.equal(dt, l:dtype())
      check(l:double(), { F.cross_entropy(xr[{ {}, {}, 1, 1 }], t):item() }, {}, tol)
      -- gradients reach a half leaf
      local leafh = xh:clone():requires_grad_()
      F.max_pool2d(leafh, 2):sum():backward()
      assert.equal(dt, leafh.grad:dtype())
      assert.equal(72, leafh.grad:sum():item())
    end
  end)
end)

-- ---- dropout, embedding ----------------------------------------------------------------------------------

describe('dropout', function()
  it('zeroes about p of the elements and scales the rest by 1 / (1 - p)', function()
    ember.manual_seed(123)
    local n = 20000
    for _, p in ipairs({ 0.1, 0.5, 0.8 }) do
      local x = ember.ones(n) * 2
      local y = F.dropout(x, p, true)
      local zeros = y:eq(0):sum():item()
      local sd = math.sqrt(n * p * (1 - p))
      assert(math.abs(zeros - n * p) < 4 * sd, ('p = %g: %d zeros of %d'):format(p, zeros, n))
      local kept = y:ne(0)
      assert.near(2 / (1 - p), y:masked_select(kept):min():item(), 1e-5)
      assert.near(2 / (1 - p), y:masked_select(kept):max():item(), 1e-5)
    end
  end)

  it('is the identity when not training or p = 0, and zero when p = 1', function()
    local x = ember.randn(5, 4)
    assert.is_true(F.dropout(x, 0.5, false):is_same_storage(x))
    check(F.dropout(x, 0, true), flat(x), { 5, 4 }, 0)
    check(F.dropout(x, 1, true), flat(x * 0), { 5, 4 }, 0)
  end)

  it('follows manual_seed', function()
    ember.manual_seed(7)
    local a = F.dropout(ember.ones(100), 0.5)
    ember.manual_seed(7)
    local b = F.dropout(ember.ones(100), 0.5)
    check(a, flat(b), { 100 }, 0)
    local c = F.dropout(ember.ones(100), 0.5)
    assert.is_true(a:ne(c):any():item())
  end)

  it('backpropagates the same mask, scaled', function()
    ember.manual_seed(9)
    local x = (ember.rand(200):double() + 0.5):requires_grad_()
    local y = F.dropout(x, 0.3)
    y:sum():backward()
    -- y = x * mask / (1 - p), so dy/dx = y / x
    check(x.grad, flat(y:detach() / x:detach()), { 200 }, 1e-12)
  end)

  it('dropout2d drops whole channels', function()
    ember.manual_seed(11)
    local y = F.dropout2d(ember.ones(8, 16, 3, 3), 0.5)
    local t = y:totable()
    for n = 1, 8 do
      for c = 1, 16 do
        local v = t[n][c][1][1]
        assert(v == 0 or v == 2)
        for i = 1, 3 do for j = 1, 3 do assert.equal(v, t[n][c][i][j]) end end
      end
    end
  end)

  it('reports bad p', function()
    H.assert_error(function() F.dropout(ember.ones(3), 1.5) end, 'dropout: expected p between 0 and 1, got 1.5')
    H.assert_error(function() F.dropout(ember.ones(3, { dtype = 'int64' }), 0.5) end, 'dropout: expected a floating point input, got int64')
  end)
end)

describe('embedding', function()
  it('picks rows by 1-based index, in the indices\' shape', function()
    H.seed(50)
    local w = rnd({ 5, 3 })
    local idx = ember.tensor({ { 1, 5 }, { 3, 3 } }, { dtype = 'int64' })
    local wf = flat(w)
    local ref = {}
    for _, i in ipairs({ 1, 5, 3, 3 }) do for j = 1, 3 do ref[#ref + 1] = wf[(i - 1) * 3 + j] end end
    check(F.embedding(idx, w), ref, { 2, 2, 3 }, 0)
    check(F.embedding(ember.tensor({ 2, 4 }, { dtype = 'int32' }), w), { wf[4], wf[5], wf[6], wf[10], wf[11], wf[12] }, { 2, 3 }, 0)
  end)

  it('adds the gradients of repeated indices and skips padding_idx', function()
    H.seed(51)
    local w = leaf({ 4, 2 })
    local idx = ember.tensor({ 2, 4, 2, 1, 2 }, { dtype = 'int64' })
    local g = ember.tensor({ { 1, 2 }, { 3, 4 }, { 5, 6 }, { 7, 8 }, { 9, 10 } }, { dtype = 'float64' })
    F.embedding(idx, w, { padding_idx = 1 }):backward(g)
    check(w.grad, { 0, 0, 15, 18, 0, 0, 3, 4 }, { 4, 2 }, 0)
    w.grad = nil
    F.embedding(idx, w, { padding_idx = -1 }):backward(g) -- the last row
    check(w.grad, { 7, 8, 15, 18, 0, 0, 0, 0 }, { 4, 2 }, 0)
    gradcheck(function(a) return F.embedding(idx, a) end, { leaf({ 4, 2 }) })
  end)

  it('reports bad indices', function()
    local w = ember.randn(4, 2)
    H.assert_error(function() F.embedding(ember.tensor({ 1, 5 }, { dtype = 'int64' }), w) end,
      'embedding: index 5 is out of range for a weight of 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 0, 1 }, { dtype = 'int64' }), w) end,
      'embedding: index 0 is out of range for a weight of 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 1.0 }), w) end, 'embedding: expected integer indices, got float32')
    H.assert_error(function() F.embedding(ember.tensor({ 1 }, { dtype = 'int64' }), w, { padding_idx = 5 }) end,
      'embedding: padding_idx 5 is out of range for 4 rows')
    H.assert_error(function() F.embedding(ember.tensor({ 1 }, { dtype = 'int64' }), ember.randn(4)) end,
      'embedding: expected a 2-D weight, got 1-D')
  end)
end)

-- ---- class losses --------------------------------------------------------------------------------------

-- Per-row losses of scores x [N, C] (Lua table of rows) with 1-based targets, as PyTorch defines
-- them; returns the rows' losses and the mean's denominator.
local function ce_ref(rows, targets, o, log_probs)
  local losses, denom = {}, 0
  local eps = o.label_smoothing or 0
  for r, row in ipairs(rows) do
    local C = #row
    local logp = {}
    if log_probs then
      logp = row
    else
      local m = -math.huge
      for c = 1, C do m = math.max(m, row[c]) end
      local s = 0
      for c = 1, C do s = s + math.exp(row[c] - m) end
      for c = 1, C do logp[c] = row[c] - m - math.log(s) end
    end
    local t = targets[r]
    if t == (o.ignore_index or -100) then
      losses[r] = 0
    else
      local w = o.weight or {}
      local wt = w[t] or 1
      local l = -wt * logp[t]
      if eps > 0 then
        local sm = 0
        for c = 1, C do sm = sm - (w[c] or 1) * logp[c] end
        l = (1 - eps) * l + eps / C * sm
      end
      losses[r], denom = l, denom + wt
    end
  end
  return losses, denom
end

local function reduce_ref(losses, denom, reduction)
  if reduction == 'none' then return losses end
  local s = 0
  for _, v in ipairs(losses) do s = s + v end
  if reduction == 'sum' then return { s } end
  return { s / denom }
end

describe('cross_entropy and nll_loss', function()
  local function rows_of(x) return x:totable() end

  local cases = {
    { 'plain', {} },
    { 'class weights', { weight = { 0.5, 2, 1, 0.25, 3 } } },
    { 'ignore_index', { ignore_index = 3 } },
    { 'label smoothing and weights', { label_smoothing = 0.2, weight = { 1, 2, 3, 4, 5 } } },
    { 'label smoothing and ignore_index', { label_smoothing = 0.1, ignore_index = 2 } },
  }
  for _, c in ipairs(cases) do
    for _, reduction in ipairs({ 'mean', 'sum', 'none' }) do
      it(('%s, reduction %s'):format(c[1], reduction), function()
        H.seed(60)
        local x = rnd({ 6, 5 })
        local targets = { 1, 3, 5, 2, 3, 4 }
        local t = ember.tensor(targets, { dtype = 'int64' })
        local o = { reduction = reduction, ignore_index = c[2].ignore_index, label_smoothing = c[2].label_smoothing }
        if c[2].weight then o.weight = ember.tensor(c[2].weight, { dtype = 'float64' }) end
        local losses, denom = ce_ref(rows_of(x), targets, c[2])
        local ref = reduce_ref(losses, denom, reduction)
        local y = F.cross_entropy(x, t, o)
        check(y, ref, reduction == 'none' and { 6 } or {}, 1e-12, 'cross_entropy')
        if not c[2].label_smoothing then
          local lp = x:log_softmax(2)
          local nl, nd = ce_ref(rows_of(lp), targets, c[2], true)
          check(F.nll_loss(lp, t, o), reduce_ref(nl, nd, reduction), reduction == 'none' and { 6 } or {}, 1e-12, 'nll_loss')
        end
        gradcheck(function(a) return F.cross_entropy(a, t, o) end, { x:clone():requires_grad_() })
      end)
    end
  end

  it('handles spatial targets [N, d1, d2] and unbatched input', function()
    H.seed(61)
    local x = rnd({ 2, 3, 2, 2 })
    local targets = { { { 1, 2 }, { 3, 3 } }, { { 2, 1 }, { 1, 3 } } }
    local t = ember.tensor(targets, { dtype = 'int64' })
    -- the same rows laid out [N * d1 * d2, C]
    local rows, tl = {}, {}
    local xt = x:totable()
    for n = 1, 2 do for i = 1, 2 do for j = 1, 2 do
      rows[#rows + 1] = { xt[n][1][i][j], xt[n][2][i][j], xt[n][3][i][j] }
      tl[#tl + 1] = targets[n][i][j]
    end end end
    local losses, denom = ce_ref(rows, tl, {})
    check(F.cross_entropy(x, t, { reduction = 'none' }), losses, { 2, 2, 2 }, 1e-12)
    check(F.cross_entropy(x, t), reduce_ref(losses, denom, 'mean'), {}, 1e-12)
    gradcheck(function(a) return F.cross_entropy(a, t, { label_smoothing = 0.1 }) end, { x:clone():requires_grad_() })
    local x1 = rnd({ 4 })
    local l1 = ce_ref({ x1:totable() }, { 3 }, {})
    check(F.cross_entropy(x1, ember.tensor(3, { dtype = 'int64' })), l1, {}, 1e-12)
  end)

  it('takes class probabilities as targets', function()
    H.seed(62)
    local x, p = rnd({ 3, 4 }), rnd({ 3, 4 }):abs()
    p = p / p:sum(2, true)
    local xt, pt = x:totable(), p:totable()
    local s = 0
    for r = 1, 3 do
      local m, z = -math.huge, 0
      for c = 1, 4 do m = math.max(m, xt[r][c]) end
      for c = 1, 4 do z = z + math.exp(xt[r][c] - m) end
      for c = 1, 4 do s = s - pt[r][c] * (xt[r][c] - m - math.log(z)) end
    end
    check(F.cross_entropy(x, p), { s / 3 }, {}, 1e-12)
  end)

  it('mean over all-ignored targets is NaN, as in PyTorch; float32 agrees with float64', function()
    H.seed(63)
    local y = F.cross_entropy(rnd({ 2, 3 }), ember.tensor({ 2, 2 }, { dtype = 'int64' }), { ignore_index = 2 })
    assert.is_true(y:item() ~= y:item())
    local x = rnd({ 8, 10 })
    local t = ember.tensor({ 1, 2, 3, 4, 5, 6, 7, 10 }, { dtype = 'int64' })
    local x32 = x:float():requires_grad_()
    local x64 = x:clone():requires_grad_()
    F.cross_entropy(x32, t):backward()
    F.cross_entropy(x64, t):backward()
    check(x32.grad, flat(x64.grad), { 8, 10 }, 1e-5)
  end)

  it('reports bad targets', function()
    local x = ember.randn(3, 5)
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 6, 2 }, { dtype = 'int64' })) end,
      'cross_entropy: class index 6 is out of range for 5 classes')
    H.assert_error(function() F.nll_loss(x, ember.tensor({ 0, 1, 2 }, { dtype = 'int64' })) end,
      'nll_loss: class index 0 is out of range for 5 classes')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2 }, { dtype = 'int64' })) end,
      'cross_entropy: expected a target of shape [3] for input [3,5], got [2]')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 })) end,
      'cross_entropy: expected integer class targets, got float32 (use target:long())')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { reduction = 'avg' }) end,
      "cross_entropy: reduction must be 'mean', 'sum' or 'none', got avg")
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { weight = ember.ones(4) }) end,
      'cross_entropy: expected a class weight of shape [5], got [4]')
    H.assert_error(function() F.cross_entropy(x, ember.tensor({ 1, 2, 3 }, { dtype = 'int64' }), { label_smoothing = 2 }) end,
      'cross_entropy: expected label_smoothing between 0 and 1, got 2')
  end)
end)
