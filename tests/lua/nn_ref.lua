-- Independent references for the ember.nn.functional specs: direct loops over Lua tables in
-- double (convolution, pooling, normalization, class losses), and the helpers that build
-- inputs and compare results.
local H = require 'tests.lua.helpers'
local ember = H.ember

local R = {}

-- ---- helpers -----------------------------------------------------------------------------------

-- A tensor of the given shape filled with uniform values in [-1, 1) from the helpers' stream.
function R.rnd(shape, dtype)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local t = {}
  for i = 1, n do t[i] = H.uniform(-1, 1) end
  local x = ember.tensor(n > 0 and t or { 0 }, { dtype = dtype or 'float64' })
  if n == 0 then return ember.zeros(shape, { dtype = dtype or 'float64' }) end
  return x:view(shape)
end

function R.leaf(shape) return R.rnd(shape, 'float64'):requires_grad_() end

function R.flat(x) return x:contiguous():view(-1):totable() end

-- Compares a tensor with a flat reference of the given shape.
function R.check(x, ref, shape, tol, what)
  local s = x:size()
  assert(#s == #shape, ('%s: got %d dims, expected %d'):format(what or '', #s, #shape))
  for i = 1, #shape do
    assert(s[i] == shape[i], ('%s: got shape %s, expected [%s]'):format(what or '', tostring(s),
      table.concat(shape, ', ')))
  end
  local got = x:numel() > 0 and R.flat(x) or {}
  assert(#got == #ref, (what or '') .. ': element count')
  tol = tol or 1e-10
  for i = 1, #ref do
    local a, b = got[i], ref[i]
    if not (a ~= a and b ~= b) and math.abs(a - b) > tol * (1 + math.abs(b)) then
      error(('%s: element %d: got %.10g, expected %.10g'):format(what or '', i, a, b), 2)
    end
  end
end

function R.pair(v) return type(v) == 'table' and v or { v, v } end

-- ---- references ------------------------------------------------------------------------------------

-- Direct convolution: x [N, C, H, W], w [M, C/g, KH, KW].
function R.conv2d_ref(x, w, b, o)
  local xs, ws = x:size(), w:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local M, Cg, KH, KW = ws[1], ws[2], ws[3], ws[4]
  local s, p, d, g = R.pair(o.stride or 1), R.pair(o.padding or 0), R.pair(o.dilation or 1), o.groups or 1
  local OH = math.floor((Hh + 2 * p[1] - d[1] * (KH - 1) - 1) / s[1]) + 1
  local OW = math.floor((W + 2 * p[2] - d[2] * (KW - 1) - 1) / s[2]) + 1
  local xf, wf = x:numel() > 0 and R.flat(x) or {}, R.flat(w)
  local bf = b and R.flat(b)
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
function R.conv_transpose2d_ref(x, w, b, o)
  local xs, ws = x:size(), w:size()
  local N, Cin, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local Coutg, KH, KW = ws[2], ws[3], ws[4]
  local s, p, d, g = R.pair(o.stride or 1), R.pair(o.padding or 0), R.pair(o.dilation or 1), o.groups or 1
  local op = R.pair(o.output_padding or 0)
  local OH = (Hh - 1) * s[1] - 2 * p[1] + d[1] * (KH - 1) + op[1] + 1
  local OW = (W - 1) * s[2] - 2 * p[2] + d[2] * (KW - 1) + op[2] + 1
  local Cout, Cing = Coutg * g, Cin / g
  local xf, wf, bf = R.flat(x), R.flat(w), b and R.flat(b)
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
function R.pool_out(n, k, s, p, d, ceil)
  local span = n + 2 * p - d * (k - 1) - 1
  local o = (ceil and math.ceil(span / s) or math.floor(span / s)) + 1
  if ceil and (o - 1) * s >= n + p then o = o - 1 end
  return o
end

-- Max pooling: values and 1-based flat indices within each plane (NaN wins, first max wins).
function R.max_pool_ref(x, k, o)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  k = R.pair(k)
  local s, p, d = R.pair(o.stride or k), R.pair(o.padding or 0), R.pair(o.dilation or 1)
  local OH, OW = R.pool_out(Hh, k[1], s[1], p[1], d[1], o.ceil_mode), R.pool_out(W, k[2], s[2], p[2], d[2], o.ceil_mode)
  local xf, vals, inds = R.flat(x), {}, {}
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

function R.avg_pool_ref(x, k, o)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  k = R.pair(k)
  local s, p = R.pair(o.stride or k), R.pair(o.padding or 0)
  local cip = o.count_include_pad ~= false
  local OH, OW = R.pool_out(Hh, k[1], s[1], p[1], 1, o.ceil_mode), R.pool_out(W, k[2], s[2], p[2], 1, o.ceil_mode)
  local xf, out = R.flat(x), {}
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

function R.adaptive_ref(x, size, is_max)
  local xs = x:size()
  local N, C, Hh, W = xs[1], xs[2], xs[3], xs[4]
  local OH, OW = R.pair(size)[1], R.pair(size)[2]
  local xf, out = R.flat(x), {}
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

-- ---- normalization ----------------------------------------------------------------------------------

-- Per-channel mean and biased variance of x [N, C, ...] as Lua numbers.
function R.channel_stats(x)
  local N, C = x:size(1), x:size(2)
  local S = x:numel() / (N * C)
  local xf, mean, var = R.flat(x), {}, {}
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

function R.bn_ref(x, mean, var, w, b, eps)
  local N, C = x:size(1), x:size(2)
  local S = x:numel() / (N * C)
  local xf, wf, bf, out = R.flat(x), w and R.flat(w), b and R.flat(b), {}
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

-- ---- class losses --------------------------------------------------------------------------------------

-- Per-row losses of scores x [N, C] (Lua table of rows) with 1-based targets, as PyTorch defines
-- them; returns the rows' losses and the mean's denominator.
function R.ce_ref(rows, targets, o, log_probs)
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

function R.reduce_ref(losses, denom, reduction)
  if reduction == 'none' then return losses end
  local s = 0
  for _, v in ipairs(losses) do s = s + v end
  if reduction == 'sum' then return { s } end
  return { s / denom }
end


return R
