-- bfloat16 convolutions on the CPU (cpu/conv_bf16.c): forward, input gradient
-- (conv_transpose2d) and weight gradient on every EMBER_CPU_BF16 path (the bf16 instructions:
-- AMX or AVX-512 BF16; "0": the portable float32 route), against float64 loops over the same
-- bf16-rounded inputs. Allowed: one rounding of the result (2^-8 relative) on top of float32
-- accumulation over the terms of each output. On a CPU without the instructions every path is
-- the portable one. Then: the gradients of a small conv net under autocast against float32.
local H = require 'tests.lua.helpers'
local R = require 'tests.lua.nn_ref'
local ember = H.ember
local ffi = require 'ffi'
local nn = ember.nn
local F = nn.functional

pcall(ffi.cdef, 'int setenv(const char *, const char *, int); int unsetenv(const char *);')
local function with_env(name, value, f)
  ffi.C.setenv(name, value, 1)
  local ok, err = pcall(f)
  ffi.C.unsetenv(name)
  if not ok then error(err, 0) end
end

local function bf(shape) return R.rnd(shape, 'bfloat16') end
local function f64(t) return t:to('float64') end

-- got (bfloat16) against a float64 reference whose outputs sum `terms` products of values in
-- [-1, 1]
local function agree(got, ref, shape, terms, what)
  assert.are.equal('bfloat16', got:dtype(), what)
  local s = got:size()
  for i = 1, #shape do assert.are.equal(shape[i], s[i], what .. ': shape') end
  local v = R.flat(got:to('float64'))
  assert.are.equal(#ref, #v, what .. ': element count')
  local acc = 2 * terms * 2 ^ -22
  for i = 1, #ref do
    if math.abs(v[i] - ref[i]) > 2 ^ -8 * math.abs(ref[i]) + acc then
      error(('%s: element %d: got %.8g, expected %.8g'):format(what, i, v[i], ref[i]), 2)
    end
  end
end

-- The weight gradient: gw[m, c, i, j] = sum over n, oh, ow of gy[n, m, oh, ow] *
-- x[n, g*Cg + c, oh*s - p + i*d, ow*s - p + j*d].
local function weight_grad_ref(x, gy, ws, o)
  local xs, ys = x:size(), gy:size()
  local N, C, Hh, W, OH, OW = xs[1], xs[2], xs[3], xs[4], ys[3], ys[4]
  local M, Cg, KH, KW = ws[1], ws[2], ws[3], ws[4]
  local s, p, d, g = R.pair(o.stride or 1), R.pair(o.padding or 0), R.pair(o.dilation or 1), o.groups or 1
  local xf, yf, out, Mg = R.flat(x), R.flat(gy), {}, M / g
  for m = 0, M - 1 do
    local grp = math.floor(m / Mg)
    for c = 0, Cg - 1 do
      for i = 0, KH - 1 do
        for j = 0, KW - 1 do
          local acc = 0
          for n = 0, N - 1 do
            for oh = 0, OH - 1 do
              local ih = oh * s[1] - p[1] + i * d[1]
              if ih >= 0 and ih < Hh then
                for ow = 0, OW - 1 do
                  local iw = ow * s[2] - p[2] + j * d[2]
                  if iw >= 0 and iw < W then
                    acc = acc + yf[((n * M + m) * OH + oh) * OW + ow + 1] *
                        xf[((n * C + grp * Cg + c) * Hh + ih) * W + iw + 1]
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
  return out
end

-- { N, C, H, W, M, kh, kw, options }: strides, padding, dilation, groups (depthwise too), 1x1
-- (no im2col), odd sizes, more than 32 output channels (two row tiles), K across several
-- 32-wide tiles and 256-wide slices (Kg = 300; P = 400 for the weight gradient). Stride 1 takes
-- the shifted-window path, except an input gradient whose padding exceeds dilation*(k-1)
-- (the last case), which takes im2col as other strides do.
local cases = {
  { 2, 3, 7, 7, 4, 3, 3, { padding = 1 } },
  { 1, 4, 9, 8, 6, 3, 2, { stride = 2, padding = { 1, 0 }, dilation = { 1, 2 } } },
  { 3, 4, 6, 6, 6, 3, 3, { padding = 1, groups = 2 } },
  { 2, 4, 5, 5, 4, 3, 3, { padding = 1, groups = 4 } },
  { 2, 5, 5, 5, 3, 1, 1, {} },
  { 1, 3, 11, 13, 33, 5, 5, { padding = 2, stride = { 1, 3 } } },
  { 1, 12, 10, 10, 40, 5, 5, {} },
  { 2, 2, 20, 20, 3, 3, 3, { padding = 1 } },
  { 2, 3, 9, 9, 5, 3, 3, { padding = 2, dilation = 2 } },
  { 1, 3, 5, 5, 4, 1, 1, { padding = 1 } },
  -- large enough (2M multiply-adds, several units) to split units across threads, the
  -- weight gradient summing per-thread buffers: stride 1 (shifted) and stride 2 (im2col)
  { 4, 8, 14, 14, 20, 5, 5, { padding = 2 } },
  { 4, 16, 16, 16, 64, 3, 3, { stride = 2, padding = 1 } },
}

local function describe_case(c)
  local o = c[8]
  return ('N%d C%d %dx%d M%d k%dx%d s%s p%s d%s g%d'):format(c[1], c[2], c[3], c[4], c[5], c[6],
    c[7], table.concat(R.pair(o.stride or 1), ','), table.concat(R.pair(o.padding or 0), ','),
    table.concat(R.pair(o.dilation or 1), ','), o.groups or 1)
end

describe('bfloat16 conv2d on the CPU', function()
  for _, mode in ipairs({ 'auto', 'avx512', '0' }) do
    it('EMBER_CPU_BF16=' .. mode .. ': forward, input and weight gradients against float64', function()
      H.seed(91)
      with_env('EMBER_CPU_BF16', mode, function()
        for _, c in ipairs(cases) do
          local N, C, Hh, W, M, kh, kw, o = c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
          local g = o.groups or 1
          local what = mode .. ' ' .. describe_case(c)
          local x, w, b = bf({ N, C, Hh, W }), bf({ M, C / g, kh, kw }), bf({ M })
          local Kg = C / g * kh * kw
          -- forward, with and without bias
          local ref, shape = R.conv2d_ref(f64(x), f64(w), f64(b), o)
          agree(F.conv2d(x, w, b, o), ref, shape, Kg + 1, what .. ' forward')
          ref = R.conv2d_ref(f64(x), f64(w), nil, o)
          local y = F.conv2d(x, w, nil, o)
          agree(y, ref, shape, Kg, what .. ' forward, no bias')
          -- input gradient: conv_transpose2d of gy with the same weight, back to x's size
          local gy = bf(shape)
          local op = {}
          for i = 1, 2 do
            local s, p, d = R.pair(o.stride or 1)[i], R.pair(o.padding or 0)[i], R.pair(o.dilation or 1)[i]
            local k = i == 1 and kh or kw
            op[i] = ({ Hh, W })[i] - ((shape[2 + i] - 1) * s - 2 * p + d * (k - 1) + 1)
          end
          local ot = { stride = o.stride, padding = o.padding, dilation = o.dilation, groups = g,
            output_padding = op }
          local bx = bf({ C })
          local tref, tshape = R.conv_transpose2d_ref(f64(gy), f64(w), f64(bx), ot)
          assert.are.same({ N, C, Hh, W }, tshape)
          local terms = M / g * kh * kw + 1
          agree(F.conv_transpose2d(gy, w, bx, ot), tref, tshape, terms, what .. ' input grad')
          -- weight gradient
          local ws = { M, C / g, kh, kw }
          local wref = weight_grad_ref(f64(x), f64(gy), ws, o)
          agree(F.conv2d_weight(x, ws, gy, o), wref, ws, N * shape[3] * shape[4],
            what .. ' weight grad')
        end
      end)
    end)
  end

  it('agrees with autograd: the gradients of a bfloat16 conv are the three kernels', function()
    H.seed(5)
    local x = bf({ 2, 3, 6, 6 }):requires_grad_()
    local w, b = bf({ 4, 3, 3, 3 }):requires_grad_(), bf({ 4 }):requires_grad_()
    local y = F.conv2d(x, w, b, { padding = 1 })
    local gy = bf(y:size())
    y:backward(gy)
    assert.are.equal('bfloat16', x.grad:dtype())
    assert.are.same(R.flat(F.conv_transpose2d(gy, w, nil, { padding = 1 })), R.flat(x.grad))
    assert.are.same(R.flat(F.conv2d_weight(x:detach(), { 4, 3, 3, 3 }, gy, { padding = 1 })),
      R.flat(w.grad))
  end)

  it('sums the weight gradient over threads in a fixed order (the same bits every call)', function()
    H.seed(8)
    local x, gy = bf({ 8, 16, 14, 14 }), bf({ 8, 32, 14, 14 })
    for _, o in ipairs({ { padding = 2 }, { padding = 2, stride = 2 } }) do
      local y = F.conv2d(x, bf({ 32, 16, 5, 5 }), nil, o)
      local g = gy[{ {}, {}, { 1, y:size(3) }, { 1, y:size(4) } }]:contiguous()
      local a = F.conv2d_weight(x, { 32, 16, 5, 5 }, g, o)
      for _ = 1, 3 do assert.are.same(R.flat(a), R.flat(F.conv2d_weight(x, { 32, 16, 5, 5 }, g, o))) end
    end
  end)

  it('refuses a misspelt EMBER_CPU_BF16, in the words of the op called', function()
    local x, w = ember.ones(1, 1, 3, 3, { dtype = 'bfloat16' }), ember.ones(1, 1, 2, 2, { dtype = 'bfloat16' })
    with_env('EMBER_CPU_BF16', 'amx2', function()
      H.assert_error(function() F.conv2d(x, w) end,
        "conv2d: EMBER_CPU_BF16: expected 0, 1, auto, amx or avx512, got 'amx2'")
      H.assert_error(function() F.conv_transpose2d(x, w) end,
        "conv_transpose2d: EMBER_CPU_BF16: expected 0, 1, auto, amx or avx512, got 'amx2'")
    end)
  end)

  it('keeps NaN and infinity through the bf16 kernels', function()
    for _, mode in ipairs({ 'auto', '0' }) do
      with_env('EMBER_CPU_BF16', mode, function()
        local x = ember.full({ 1, 1, 3, 3 }, 2, { dtype = 'bfloat16' })
        x[1][1][1][1] = 0 / 0
        local w = ember.full({ 1, 1, 1, 1 }, 3e38, { dtype = 'bfloat16' })
        local y = f64(F.conv2d(x, w)):view(-1):totable()
        assert.is_true(y[1] ~= y[1], mode .. ': NaN')
        assert.are.equal(math.huge, y[2], mode .. ': overflow to infinity')
      end)
    end
  end)
end)

-- Gradients of a small CNN (conv, activation, pool, conv, pool, linear; the benchmark's layers
-- at a smaller size) under bf16 autocast against float32. Tanh and average pooling rather than
-- ReLU and max pooling keep the comparison about rounding rather than about which side of 0 a
-- pre-activation falls or which of two near-equal values a max picks.
describe('bfloat16 autocast on a conv net', function()
  for _, mode in ipairs({ 'auto', '0' }) do
    it('EMBER_CPU_BF16=' .. mode .. ': gradients match float32 within bf16 tolerance', function()
      with_env('EMBER_CPU_BF16', mode, function()
        ember.manual_seed(3)
        local model = nn.Sequential()
          :add(nn.Conv2d(1, 8, 5, { padding = 2 })):add(nn.Tanh()):add(nn.AvgPool2d(2))
          :add(nn.Conv2d(8, 16, 5, { padding = 2 })):add(nn.Tanh()):add(nn.AvgPool2d(2))
          :add(nn.Flatten()):add(nn.Linear(16 * 3 * 3, 10))
        local x, t = ember.randn(6, 1, 12, 12), ember.randint(1, 11, { 6 })
        local function step() return F.cross_entropy(model:forward(x), t) end
        local function grads()
          local out = {}
          for _, p in ipairs(model:parameters()) do
            out[#out + 1] = p.grad
            p.grad = nil
          end
          return out
        end
        step():backward()
        local g32 = grads()
        local loss = ember.autocast({ device = 'cpu', dtype = 'bfloat16' }, step)
        loss:backward()
        local g16 = grads()
        for i = 1, #g32 do
          assert.are.equal('float32', g16[i]:dtype())
          local scale, err = g32[i]:norm():item(), (g16[i] - g32[i]):norm():item()
          assert.is_true(err <= 0.03 * scale + 1e-6,
            ('%s: gradient %d: difference %g in norm for a gradient of norm %g'):format(mode, i,
              err, scale))
        end
      end)
    end)
  end
end)
