-- float16 and bfloat16 convolutions on Vulkan by the column method (vulkan/vk_conv_cols.c:
-- im2col and col2im in kernels/conv_cols.comp, the products on the matmul slot's kernels, the
-- weight gradient's K split into float32 partial products), against float64 convolutions on
-- the CPU over the same 16-bit inputs. On a GPU with tensor cores the products run there; here
-- (lavapipe) EMBER_VK_CONV_COLS=1 sends 16-bit convolutions down the same path, its products
-- on the tiled 16-bit kernel. Cases: strides, padding, dilation, 1x1, odd sizes (odd column
-- counts), weight gradients whose K splits in two with and without zero padding, grouped
-- convolutions (converted to float32 on the device), conv1d, conv_transpose2d with bias
-- (col2im's bias), and autograd through a 16-bit conv.
local VK = require('vk_helpers').open('vulkan 16-bit conv')
if not VK then return end
local H, ember, V = VK.H, VK.ember, VK.V
local nn = require 'ember.nn'
local F = nn.functional

local eps = { float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }

local function rnd(shape, dtype)
  return ember.rand(shape, { dtype = 'float64' }):mul(2):sub(1):to(dtype)
end

-- got (a 16-bit Vulkan tensor) against want (float64 on the CPU): one rounding of the result,
-- plus `taps` roundings of partial sums of size about sqrt(terms) (col2im adds rounded taps).
local function agree(got, want, dtype, terms, taps, what)
  assert.are.equal(V, got:device(), what)
  assert.are.equal(dtype, got:dtype(), what .. ': dtype')
  local e = eps[dtype]
  H.assert_close(got:to('cpu'):to('float64'), want:totable(), e,
    e * (1 + (taps or 0)) * math.sqrt(terms), what)
end

local function f64(t) return t:to('float64') end
local function on(t) return t:to(V) end

-- { N, C, H, W, M, kh, kw, options }
local cases = {
  { 2, 3, 7, 7, 4, 3, 3, { padding = 1 } },
  { 1, 4, 9, 8, 6, 3, 2, { stride = 2, padding = { 1, 0 }, dilation = { 1, 2 } } },
  { 2, 5, 5, 5, 3, 1, 1, {} },
  { 1, 3, 11, 13, 33, 5, 5, { padding = 2, stride = { 1, 3 } } },
  { 1, 3, 5, 5, 4, 1, 1, { padding = 1 } },
  { 3, 1, 5, 3, 2, 2, 2, {} },                         -- 3 * 4 * 2 = 24 columns; odd below
  { 1, 2, 4, 3, 5, 2, 2, { stride = 1 } },             -- 3 * 2 = 6 ... 1 x 3 x 2: 6
  { 1, 2, 5, 4, 5, 3, 2, {} },                         -- 3 x 3 = 9 columns (odd)
  { 4, 4, 24, 24, 8, 3, 3, { padding = 1 } },          -- K = 2304: two splits, no padding
  { 5, 4, 22, 22, 8, 3, 3, { padding = 1 } },          -- K = 2420: two splits of 1216
  { 3, 4, 25, 25, 8, 3, 3, { padding = 1 } },          -- K = 1875: one split, padded to 1888
  { 3, 4, 6, 6, 6, 3, 3, { padding = 1, groups = 2 } },
  { 2, 4, 5, 5, 4, 3, 3, { padding = 1, groups = 4 } },
}

local function label(c, dtype)
  local o = c[8]
  local function s(v) return type(v) == 'table' and table.concat(v, ',') or tostring(v or '-') end
  return ('%s N%d C%d %dx%d M%d k%dx%d s%s p%s d%s g%s'):format(dtype, c[1], c[2], c[3], c[4],
    c[5], c[6], c[7], s(o.stride), s(o.padding), s(o.dilation), s(o.groups))
end

describe('16-bit conv2d on Vulkan by the column method', function()
  for _, dtype in ipairs({ 'float16', 'bfloat16' }) do
    it(dtype .. ': forward, input and weight gradients against float64 on the CPU', function()
      ember.manual_seed(17)
      VK.with_env('EMBER_VK_CONV_COLS', '1', function()
        for _, c in ipairs(cases) do
          local N, C, Hh, W, M, kh, kw, o = unpack(c)
          local g = o.groups or 1
          local what = label(c, dtype)
          local x, w, b = rnd({ N, C, Hh, W }, dtype), rnd({ M, C / g, kh, kw }, dtype), rnd({ M }, dtype)
          local Kg = C / g * kh * kw
          local want = F.conv2d(f64(x), f64(w), f64(b), o)
          agree(F.conv2d(on(x), on(w), on(b), o), want, dtype, Kg + 1, 0, what .. ' forward')
          want = F.conv2d(f64(x), f64(w), nil, o)
          agree(F.conv2d(on(x), on(w), nil, o), want, dtype, Kg, 0, what .. ' forward, no bias')
          local ys = want:size()
          local gy = rnd(ys, dtype)
          -- input gradient through autograd (the conv's backward), and conv_transpose2d with a
          -- bias (col2im adds it)
          local xv = on(x):requires_grad_()
          local wv = on(w):requires_grad_()
          local y = F.conv2d(xv, wv, nil, o)
          y:backward(on(gy))
          local xr, wr = f64(x):requires_grad_(), f64(w):requires_grad_()
          F.conv2d(xr, wr, nil, o):backward(f64(gy))
          local terms = M / g * kh * kw
          agree(xv.grad, xr.grad, dtype, terms, kh * kw, what .. ' input grad')
          agree(wv.grad, wr.grad, dtype, N * ys[3] * ys[4], 0, what .. ' weight grad')
          if g == 1 and (o.stride == nil or o.stride == 1) and o.dilation == nil then
            local bt = rnd({ C }, dtype)
            local ot = { padding = o.padding }
            local tw = F.conv_transpose2d(f64(gy), f64(w), f64(bt), ot)
            agree(F.conv_transpose2d(on(gy), on(w), on(bt), ot), tw, dtype, terms + 1, kh * kw,
              what .. ' conv_transpose2d')
          end
        end
      end)
    end)
  end

  it('conv1d, and a Conv2d module trained a step under autocast', function()
    ember.manual_seed(3)
    VK.with_env('EMBER_VK_CONV_COLS', '1', function()
      local x, w = rnd({ 2, 3, 17 }, 'float16'), rnd({ 5, 3, 4 }, 'float16')
      agree(F.conv1d(on(x), on(w), nil, { stride = 2, padding = 1 }),
        F.conv1d(f64(x), f64(w), nil, { stride = 2, padding = 1 }), 'float16', 12, 0, 'conv1d')
      local m = nn.Conv2d(3, 8, 3, { padding = 1 }):to(V)
      local inp = on(ember.randn({ 2, 3, 9, 9 }))
      local ref = nn.Conv2d(3, 8, 3, { padding = 1 })
      ember.no_grad(function()
        ref.weight:copy_(m.weight:to('cpu'))
        ref.bias:copy_(m.bias:to('cpu'))
      end)
      local out = ember.autocast({ device = 'vulkan', dtype = 'bfloat16' }, function()
        return m:forward(inp)
      end)
      assert.are.equal('bfloat16', out:dtype())
      out:float():sum():backward()
      ref:forward(inp:to('cpu')):sum():backward()
      assert.are.equal('float32', m.weight.grad:dtype())
      H.assert_close(m.weight.grad:to('cpu'), ref.weight.grad:totable(), 2e-2, 0.5, 'weight grad')
      H.assert_close(m.bias.grad:to('cpu'), ref.bias.grad:totable(), 1e-2, 0.5, 'bias grad')
    end)
  end)

  it('gives zero-size batches and keeps NaN and infinity', function()
    VK.with_env('EMBER_VK_CONV_COLS', '1', function()
      local w = on(ember.ones({ 2, 3, 3, 3 }, { dtype = 'float16' }))
      local y = F.conv2d(on(ember.zeros({ 0, 3, 5, 5 }, { dtype = 'float16' })), w)
      assert.are.same({ 0, 2, 3, 3 }, y:size())
      local x = ember.ones({ 1, 3, 5, 5 }, { dtype = 'float16' })
      x[1][1][1][1] = 0 / 0
      x[1][2][5][5] = 1 / 0
      local v = F.conv2d(on(x), w):to('cpu'):to('float64'):view(-1):totable()
      assert.is_true(v[1] ~= v[1], 'NaN at the corner window')
      assert.are.equal(math.huge, v[9], 'infinity at the last window')
      assert.are.equal(27, v[5], 'a clean window')
    end)
  end)
end)
