-- ember.nn.functional's shaping and distance functions: pad, interpolate, normalize,
-- cosine_similarity, pairwise_distance, pixel_shuffle / pixel_unshuffle, unfold / fold
-- (im2col / col2im) and embedding_bag, with PyTorch's argument names and defaults, and their
-- modules (ZeroPad2d, ReflectionPad2d, Upsample, PixelShuffle, Unfold, Fold, EmbeddingBag, ...).
--
-- Each is composed from existing ops, picked so that it costs about one pass over the data:
-- padding is cat (constant) or one index_select per padded dim (reflect, replicate, circular);
-- interpolation is one or two index_selects per dim; unfold is a strided view (tensor unfold)
-- and one copy; fold is one index_add. Gradients come from those ops, and everything runs on
-- every device that runs them. Dims, indices and offsets are 1-based, as everywhere in Lua.
local unpack = table.unpack or unpack -- LuaJIT: the global
local Module = require 'ember.nn.module'
local tensor = require 'ember.tensor'
local args = require 'ember.nn.args'
local named = require 'ember.nn.named_args'
local field_module = require 'ember.nn.field_module'

local M, F = {}, {}
M.functional = F
local function E() return require 'ember' end

local function need(fn, what, x)
  if not tensor.is_tensor(x) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(x)), 3)
  end
end

local function int(fn, what, v, level)
  if type(v) ~= 'number' or v ~= math.floor(v) then
    error(('%s: expected %s to be an integer, got %s'):format(fn, what, tostring(v)), (level or 3) + 1)
  end
  return v
end

-- A number or a table of n integers, as a table of n.
local function tuple(fn, what, v, n)
  if type(v) == 'number' then
    local t = {}
    for i = 1, n do t[i] = int(fn, what, v) end
    return t
  end
  if type(v) == 'table' and #v == n then
    for i = 1, n do int(fn, what, v[i]) end
    return v
  end
  error(('%s: expected %s as a number or a table of %d numbers, got %s'):format(fn, what, n,
    type(v) == 'table' and ('a table of ' .. #v) or tostring(v)), 3)
end

-- x's shape as a plain table (a copy: callers change it).
local function shape_of(x)
  local t = {}
  for i = 1, x:dim() do t[i] = x:size(i) end
  return t
end

local function like(x, dtype) return { dtype = dtype or x:dtype(), device = x:device() } end

-- x:index_select(d, list); an empty x gives an empty result that still reaches x in autograd
-- (index_select of an empty input records nothing yet: an empty batch must not stop backward).
local function select(x, d, list)
  if x:numel() > 0 then return x:index_select(d, list) end
  local shape = shape_of(x)
  shape[d] = #list
  local y = E().zeros(shape, like(x))
  if x.requires_grad then y = y + x:sum() * 0 end
  return y
end

-- ---- pad -----------------------------------------------------------------------------------

-- The 1-based source index of output position j (0-based, from -l) for a dim of size n.
local index_of = {
  reflect = function(j, n)
    if j < 0 then j = -j end
    if j >= n then j = 2 * (n - 1) - j end
    return j + 1
  end,
  replicate = function(j, n) return math.min(math.max(j, 0), n - 1) + 1 end,
  circular = function(j, n) return j % n + 1 end,
}

local function pad_constant(x, d, l, r, value)
  if l < 0 then x = x:narrow(d, 1 - l, x:size(d) + l); l = 0 end
  if r < 0 then x = x:narrow(d, 1, x:size(d) + r); r = 0 end
  if l == 0 and r == 0 then return x end
  local parts = {}
  local shape = shape_of(x)
  if l > 0 then shape[d] = l; parts[#parts + 1] = E().full(shape, value, like(x)) end
  parts[#parts + 1] = x
  if r > 0 then shape[d] = r; parts[#parts + 1] = E().full(shape, value, like(x)) end
  return E().cat(parts, d)
end

-- pad(input, pad, mode = 'constant', value = 0): pad = {left, right} pairs from the last dim
-- backwards, as PyTorch (negative entries crop). reflect / replicate / circular pad any number
-- of trailing dims but leave the first dim alone (batch or channels).
function F.pad(input, pad, ...)
  local fn = 'pad'
  need(fn, 'input', input)
  local o = named(fn, { 'mode', 'value' }, ...)
  local mode = o.mode or 'constant'
  if type(pad) ~= 'table' or #pad % 2 ~= 0 then
    error(fn .. ': expected pad as a table of an even number of integers', 2)
  end
  local nd = #pad / 2
  for i = 1, #pad do int(fn, 'pad', pad[i], 2) end
  if nd > input:dim() then
    error(('%s: %d padded dims for a %d-D input'):format(fn, nd, input:dim()), 2)
  end
  local y = input
  if mode == 'constant' then
    local value = o.value or 0
    if type(value) ~= 'number' then error(fn .. ': expected value to be a number', 2) end
    for i = 1, nd do
      y = pad_constant(y, input:dim() - i + 1, pad[2 * i - 1], pad[2 * i], value)
    end
    return y
  end
  local idx = index_of[mode]
  if idx == nil then
    error(("%s: mode must be 'constant', 'reflect', 'replicate' or 'circular', got %s")
      :format(fn, tostring(mode)), 2)
  end
  if o.value ~= nil and o.value ~= 0 then
    error(("%s: value is for mode 'constant', got it with '%s'"):format(fn, mode), 2)
  end
  if nd >= input:dim() then
    error(('%s: %s padding of %d dims needs an input with more dims (a batch or channel dim '
      .. 'first), got %d-D'):format(fn, mode, nd, input:dim()), 2)
  end
  for i = 1, nd do
    local d = input:dim() - i + 1
    local n, l, r = y:size(d), pad[2 * i - 1], pad[2 * i]
    local limit = mode == 'reflect' and n - 1 or n
    if (mode ~= 'replicate' and (l > limit or r > limit)) or (mode == 'replicate' and n == 0) then
      error(('%s: %s padding (%d, %d) of dim %d must be at most %d for its size %d'):format(fn,
        mode, l, r, d, limit, n), 2)
    end
    local list = {}
    for j = -l, n + r - 1 do list[#list + 1] = idx(j, n) end
    if #list == 0 then
      y = y:narrow(d, 1, 0)
    else
      y = select(y, d, list)
    end
  end
  return y
end

-- ---- interpolate ---------------------------------------------------------------------------

-- x rounded to float32.
local f32_buf = require('ffi').new('float[1]')
local function f32(x)
  f32_buf[0] = x
  return f32_buf[0]
end

local linear_modes = { linear = 1, bilinear = 2, trilinear = 3 }

-- PyTorch's area_pixel_compute_scale.
local function compute_scale(in_n, out_n, align, sf)
  if align then return out_n > 1 and (in_n - 1) / (out_n - 1) or 0 end
  if sf and sf > 0 then return 1 / sf end
  return in_n / out_n
end

-- Resamples dim d (size in_n) to out_n.
local function resample(x, d, out_n, mode, align, sf)
  local in_n = x:size(d)
  if mode == 'nearest' or mode == 'nearest-exact' then
    -- PyTorch's source index floor(j * scale), in float32 as its kernels compute it (the
    -- rounding decides which source a boundary output takes). PyTorch 1.13's path for a
    -- single-channel 2-D input special-cases outputs of 1x and 2x the input's size (taking
    -- j and j / 2 even when a scale_factor of 1.1 or 2.1 gave them); its general path, which
    -- every other input takes, does not, and neither does this.
    local list = {}
    local scale = f32((sf and sf > 0) and 1 / sf or in_n / out_n)
    for j = 0, out_n - 1 do
      local s
      if mode == 'nearest' then
        s = math.min(math.floor(f32(j * scale)), in_n - 1)
      else
        s = math.min(math.floor(f32(f32(j + 0.5) * scale)), in_n - 1)
      end
      list[j + 1] = s + 1
    end
    return select(x, d, list)
  end
  local scale = compute_scale(in_n, out_n, align, sf)
  local i0, i1, w1 = {}, {}, {}
  for j = 0, out_n - 1 do
    local src = align and scale * j or math.max(scale * (j + 0.5) - 0.5, 0)
    local a = math.floor(src)
    if a > in_n - 1 then a = in_n - 1 end
    local b = a < in_n - 1 and a + 1 or a
    i0[j + 1], i1[j + 1], w1[j + 1] = a + 1, b + 1, src - a
  end
  local shape = {}
  for k = 1, x:dim() do shape[k] = k == d and out_n or 1 end
  local l1 = E().tensor(w1, like(x)):view(shape)
  return select(x, d, i0) * (1 - l1) + select(x, d, i1) * l1
end

-- interpolate(input [N, C, ...], size, scale_factor, mode = 'nearest', align_corners,
-- recompute_scale_factor, antialias = false): modes nearest, nearest-exact, linear (3-D
-- input), bilinear (4-D), trilinear (5-D), area (adaptive average pooling, 3-D or 4-D).
function F.interpolate(input, ...)
  local fn = 'interpolate'
  need(fn, 'input', input)
  local o = named(fn, { 'size', 'scale_factor', 'mode', 'align_corners', 'recompute_scale_factor',
    'antialias' }, ...)
  local mode = o.mode or 'nearest'
  local nsp = input:dim() - 2
  if nsp < 1 or nsp > 3 then
    error(('%s: expected a 3-D, 4-D or 5-D input [N, C, ...], got %d-D'):format(fn, input:dim()), 2)
  end
  if o.antialias then error(fn .. ': antialias is not implemented', 2) end
  local lin = linear_modes[mode]
  if lin == nil and mode ~= 'nearest' and mode ~= 'nearest-exact' and mode ~= 'area' then
    if mode == 'bicubic' then error(fn .. ": mode 'bicubic' is not implemented", 2) end
    error(("%s: mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', 'trilinear' or "
      .. "'area', got %s"):format(fn, tostring(mode)), 2)
  end
  if lin and lin ~= nsp then
    error(("%s: mode '%s' expects a %d-D input, got %d-D"):format(fn, mode, lin + 2, input:dim()), 2)
  end
  if o.align_corners ~= nil and not lin then
    error(fn .. ': align_corners can only be set with the linear modes (linear, bilinear, trilinear)', 2)
  end
  local align = args.boolean(fn, 'align_corners', o.align_corners, false, 2)
  if (o.size == nil) == (o.scale_factor == nil) then
    error(fn .. ': expected exactly one of size and scale_factor', 2)
  end
  local sizes, sfs = {}, {}
  if o.size ~= nil then
    sizes = tuple(fn, 'size', o.size, nsp)
  else
    local sf = o.scale_factor
    if type(sf) == 'number' then
      sf = {}
      for i = 1, nsp do sf[i] = o.scale_factor end
    end
    if type(sf) ~= 'table' or #sf ~= nsp then
      error(('%s: expected scale_factor as a number or a table of %d'):format(fn, nsp), 2)
    end
    for i = 1, nsp do
      if type(sf[i]) ~= 'number' or sf[i] <= 0 then
        error(fn .. ': expected positive scale factors, got ' .. tostring(sf[i]), 2)
      end
      sizes[i] = math.floor(input:size(2 + i) * sf[i])
      sfs[i] = o.recompute_scale_factor ~= true and sf[i] or nil
    end
  end
  for i = 1, nsp do
    if sizes[i] < 1 then error(('%s: output size %d must be positive'):format(fn, sizes[i]), 2) end
  end
  if mode == 'area' then
    local NF = require('ember.nn').functional
    if nsp == 1 then return NF.adaptive_avg_pool1d(input, sizes[1]) end
    if nsp == 2 then return NF.adaptive_avg_pool2d(input, sizes) end
    error(fn .. ": mode 'area' of a 5-D input is not implemented", 2)
  end
  local y = input
  for i = 1, nsp do y = resample(y, 2 + i, sizes[i], mode, align, sfs[i]) end
  return y
end

-- upsample(input, size, scale_factor, mode, align_corners): interpolate's older name.
function F.upsample(input, ...) return F.interpolate(input, ...) end

-- ---- distances -----------------------------------------------------------------------------

-- normalize(input, p = 2, dim = 2, eps = 1e-12): x / max(||x||_p, eps) along dim (PyTorch's
-- default dim=1 is Lua's 2).
function F.normalize(input, ...)
  local fn = 'normalize'
  need(fn, 'input', input)
  local o = named(fn, { 'p', 'dim', 'eps' }, ...)
  local n = input:norm(o.p or 2, o.dim or 2, true):clamp_min(o.eps or 1e-12)
  return input / n
end

-- cosine_similarity(x1, x2, dim = 2, eps = 1e-8): sum(x1 x2) / sqrt(max(|x1|^2 |x2|^2, eps^2))
-- along dim (broadcasting x1 and x2), as PyTorch 1.13.
function F.cosine_similarity(x1, x2, ...)
  local fn = 'cosine_similarity'
  need(fn, 'x1', x1)
  need(fn, 'x2', x2)
  local o = named(fn, { 'dim', 'eps' }, ...)
  local dim, eps = o.dim or 2, o.eps or 1e-8
  x1, x2 = unpack(E().broadcast_tensors(x1, x2))
  local w12 = (x1 * x2):sum(dim)
  local w1, w2 = x1:square():sum(dim), x2:square():sum(dim)
  return w12 / (w1 * w2):clamp_min(eps * eps):sqrt()
end

-- pairwise_distance(x1, x2, p = 2, eps = 1e-6, keepdim = false): ||x1 - x2 + eps||_p over the
-- last dim.
function F.pairwise_distance(x1, x2, ...)
  local fn = 'pairwise_distance'
  need(fn, 'x1', x1)
  need(fn, 'x2', x2)
  local o = named(fn, { 'p', 'eps', 'keepdim' }, ...)
  return (x1 - x2 + (o.eps or 1e-6)):norm(o.p or 2, -1, o.keepdim or false)
end

-- ---- pixel shuffle -------------------------------------------------------------------------

-- pixel_shuffle(input [*, C r^2, H, W], upscale_factor r): [*, C, H r, W r]
function F.pixel_shuffle(input, r)
  local fn = 'pixel_shuffle'
  need(fn, 'input', input)
  r = int(fn, 'upscale_factor', r, 2)
  if r < 1 then error(fn .. ': expected a positive upscale_factor, got ' .. r, 2) end
  local n = input:dim()
  if n < 3 then error(('%s: expected an input of at least 3 dims, got %d-D'):format(fn, n), 2) end
  local s = shape_of(input)
  local c, h, w = s[n - 2], s[n - 1], s[n]
  if c % (r * r) ~= 0 then
    error(('%s: channels %d are not divisible by upscale_factor^2 = %d'):format(fn, c, r * r), 2)
  end
  local lead = {}
  for i = 1, n - 3 do lead[i] = s[i] end
  local b = #lead
  local v = { unpack(lead) }
  for _, k in ipairs({ c / (r * r), r, r, h, w }) do v[#v + 1] = k end
  local perm = {}
  for i = 1, b do perm[i] = i end
  for _, k in ipairs({ 1, 4, 2, 5, 3 }) do perm[#perm + 1] = b + k end
  local out = { unpack(lead) }
  for _, k in ipairs({ c / (r * r), h * r, w * r }) do out[#out + 1] = k end
  return input:reshape(v):permute(perm):reshape(out)
end

-- pixel_unshuffle(input [*, C, H r, W r], downscale_factor r): [*, C r^2, H, W]
function F.pixel_unshuffle(input, r)
  local fn = 'pixel_unshuffle'
  need(fn, 'input', input)
  r = int(fn, 'downscale_factor', r, 2)
  if r < 1 then error(fn .. ': expected a positive downscale_factor, got ' .. r, 2) end
  local n = input:dim()
  if n < 3 then error(('%s: expected an input of at least 3 dims, got %d-D'):format(fn, n), 2) end
  local s = shape_of(input)
  local c, h, w = s[n - 2], s[n - 1], s[n]
  if h % r ~= 0 or w % r ~= 0 then
    error(('%s: height %d and width %d must be divisible by downscale_factor %d'):format(fn, h, w, r), 2)
  end
  local lead = {}
  for i = 1, n - 3 do lead[i] = s[i] end
  local b = #lead
  local v = { unpack(lead) }
  for _, k in ipairs({ c, h / r, r, w / r, r }) do v[#v + 1] = k end
  local perm = {}
  for i = 1, b do perm[i] = i end
  for _, k in ipairs({ 1, 3, 5, 2, 4 }) do perm[#perm + 1] = b + k end
  local out = { unpack(lead) }
  for _, k in ipairs({ c * r * r, h / r, w / r }) do out[#out + 1] = k end
  return input:reshape(v):permute(perm):reshape(out)
end

-- ---- unfold / fold -------------------------------------------------------------------------

local function fold_geometry(fn, o, kernel_size)
  local k = tuple(fn, 'kernel_size', kernel_size, 2)
  local d = tuple(fn, 'dilation', o.dilation or 1, 2)
  local p = tuple(fn, 'padding', o.padding or 0, 2)
  local s = tuple(fn, 'stride', o.stride or 1, 2)
  for i = 1, 2 do
    if k[i] < 1 or d[i] < 1 or s[i] < 1 or p[i] < 0 then
      error(('%s: expected positive kernel_size, dilation and stride and a non-negative padding')
        :format(fn), 3)
    end
  end
  return k, d, p, s
end

-- blocks along one dim: floor((n + 2p - d (k - 1) - 1) / s) + 1
local function blocks(n, k, d, p, s) return math.floor((n + 2 * p - d * (k - 1) - 1) / s) + 1 end

-- unfold(input [N, C, H, W], kernel_size, dilation = 1, padding = 0, stride = 1):
-- [N, C kh kw, L], the sliding blocks as columns (im2col).
function F.unfold(input, kernel_size, ...)
  local fn = 'unfold'
  need(fn, 'input', input)
  local o = named(fn, { 'dilation', 'padding', 'stride' }, ...)
  local k, d, p, s = fold_geometry(fn, o, kernel_size)
  local batched = input:dim() == 4
  if not batched and input:dim() ~= 3 then
    error(('%s: expected a 3-D or 4-D input, got %d-D'):format(fn, input:dim()), 2)
  end
  local x = batched and input or input:unsqueeze(1)
  local N, Cc, H, W = x:size(1), x:size(2), x:size(3), x:size(4)
  local lh, lw = blocks(H, k[1], d[1], p[1], s[1]), blocks(W, k[2], d[2], p[2], s[2])
  if lh < 1 or lw < 1 then
    error(('%s: the kernel %dx%d (dilation %dx%d) does not fit the padded input %dx%d'):format(fn,
      k[1], k[2], d[1], d[2], H + 2 * p[1], W + 2 * p[2]), 2)
  end
  if p[1] > 0 or p[2] > 0 then x = F.pad(x, { p[2], p[2], p[1], p[1] }) end
  local eh, ew = d[1] * (k[1] - 1) + 1, d[2] * (k[2] - 1) + 1
  -- [N, C, lh, lw, eh, ew] windows; the dilation keeps every d-th tap
  local win = x:unfold(3, eh, s[1]):unfold(4, ew, s[2])
  if d[1] > 1 then win = win:slice(5, 1, eh, d[1]) end
  if d[2] > 1 then win = win:slice(6, 1, ew, d[2]) end
  local y = win:permute({ 1, 2, 5, 6, 3, 4 }):reshape({ N, Cc * k[1] * k[2], lh * lw })
  return batched and y or y:squeeze(1)
end

-- fold(input [N, C kh kw, L], output_size, kernel_size, dilation = 1, padding = 0,
-- stride = 1): [N, C, H, W], each column added back at its block (col2im; the adjoint of unfold).
function F.fold(input, output_size, kernel_size, ...)
  local fn = 'fold'
  need(fn, 'input', input)
  local o = named(fn, { 'dilation', 'padding', 'stride' }, ...)
  local k, d, p, s = fold_geometry(fn, o, kernel_size)
  local size = tuple(fn, 'output_size', output_size, 2)
  local batched = input:dim() == 3
  if not batched and input:dim() ~= 2 then
    error(('%s: expected a 2-D or 3-D input, got %d-D'):format(fn, input:dim()), 2)
  end
  local x = batched and input or input:unsqueeze(1)
  local kk = k[1] * k[2]
  local N, CK, L = x:size(1), x:size(2), x:size(3)
  if CK % kk ~= 0 then
    error(('%s: input dim 2 (%d) must be divisible by the kernel size %d'):format(fn, CK, kk), 2)
  end
  local lh, lw = blocks(size[1], k[1], d[1], p[1], s[1]), blocks(size[2], k[2], d[2], p[2], s[2])
  if lh < 1 or lw < 1 or lh * lw ~= L then
    error(('%s: expected %d blocks (%d x %d) for output_size %dx%d, got %d'):format(fn,
      math.max(lh, 0) * math.max(lw, 0), lh, lw, size[1], size[2], L), 2)
  end
  local Cc = CK / kk
  local Hp, Wp = size[1] + 2 * p[1], size[2] + 2 * p[2]
  local list = {}
  for ki = 0, k[1] - 1 do
    for kj = 0, k[2] - 1 do
      for bh = 0, lh - 1 do
        local row = (bh * s[1] + ki * d[1]) * Wp
        for bw = 0, lw - 1 do list[#list + 1] = row + bw * s[2] + kj * d[2] + 1 end
      end
    end
  end
  local zero = E().zeros({ N, Cc, Hp * Wp }, like(x))
  local y = zero:index_add(3, list, x:reshape({ N, Cc, kk * L })):view({ N, Cc, Hp, Wp })
  if p[1] > 0 then y = y:narrow(3, p[1] + 1, size[1]) end
  if p[2] > 0 then y = y:narrow(4, p[2] + 1, size[2]) end
  return batched and y or y:squeeze(1)
end

-- ---- embedding_bag -------------------------------------------------------------------------

local function host_ints(fn, what, t)
  if t:is_floating_point() or t:dtype() == 'bool' then
    error(('%s: expected integer %s, got %s'):format(fn, what, t:dtype()), 4)
  end
  return t:to('cpu'):long():reshape(-1):totable()
end

-- embedding_bag(input, weight [V, D], offsets, max_norm, norm_type, scale_grad_by_freq,
-- mode = 'mean', sparse, per_sample_weights, include_last_offset = false, padding_idx):
-- the sum, mean or max of each bag's rows. input [B, L] (fixed-size bags) or 1-D with offsets
-- (1-based starts of the bags). per_sample_weights scale the rows (mode 'sum'); padding_idx
-- entries are left out. An empty bag gives zeros.
function F.embedding_bag(input, weight, ...)
  local fn = 'embedding_bag'
  need(fn, 'input', input)
  need(fn, 'weight', weight)
  local o = named(fn, { 'offsets', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode',
    'sparse', 'per_sample_weights', 'include_last_offset', 'padding_idx' }, ...)
  if o.max_norm ~= nil then error(fn .. ': max_norm is not implemented', 2) end
  if o.scale_grad_by_freq then error(fn .. ': scale_grad_by_freq is not implemented', 2) end
  if o.sparse then error(fn .. ': sparse gradients are not implemented', 2) end
  local mode = o.mode or 'mean'
  if mode ~= 'sum' and mode ~= 'mean' and mode ~= 'max' then
    error(("%s: mode must be 'sum', 'mean' or 'max', got %s"):format(fn, tostring(mode)), 2)
  end
  if weight:dim() ~= 2 then error(fn .. ': expected weight [V, D]', 2) end
  local V, D = weight:size(1), weight:size(2)
  local psw = o.per_sample_weights
  if psw ~= nil then
    need(fn, 'per_sample_weights', psw)
    if mode ~= 'sum' then
      error(("%s: per_sample_weights are only supported with mode 'sum', got '%s'"):format(fn, mode), 2)
    end
    if tostring(psw:size()) ~= tostring(input:size()) then
      error(('%s: per_sample_weights %s must have the shape of input %s'):format(fn,
        tostring(psw:size()), tostring(input:size())), 2)
    end
  end
  local idx = host_ints(fn, 'indices', input)
  local n = #idx
  local starts = {}
  if input:dim() == 2 then
    if o.offsets ~= nil then error(fn .. ': offsets must be nil for a 2-D input', 2) end
    for b = 1, input:size(1) do starts[b] = (b - 1) * input:size(2) + 1 end
    starts[#starts + 1] = n + 1
  elseif input:dim() == 1 then
    if o.offsets == nil then error(fn .. ': expected offsets with a 1-D input', 2) end
    local off = tensor.is_tensor(o.offsets) and host_ints(fn, 'offsets', o.offsets) or o.offsets
    if type(off) ~= 'table' or #off == 0 then error(fn .. ': expected a non-empty offsets', 2) end
    for i, v in ipairs(off) do starts[i] = int(fn, 'offsets', v, 2) end
    if starts[1] ~= 1 then error(fn .. ': the first offset must be 1, got ' .. starts[1], 2) end
    if not o.include_last_offset then starts[#starts + 1] = n + 1 end
    for i = 2, #starts do
      if starts[i] < starts[i - 1] or starts[i] > n + 1 then
        error(('%s: offsets must be non-decreasing and within [1, %d], got %d'):format(fn, n + 1,
          starts[i]), 2)
      end
    end
  else
    error(('%s: expected a 1-D or 2-D input, got %d-D'):format(fn, input:dim()), 2)
  end
  local pad = o.padding_idx
  if pad ~= nil then
    int(fn, 'padding_idx', pad, 2)
    if pad < 0 then pad = V + pad + 1 end
    if pad < 1 or pad > V then error(('%s: padding_idx %d is out of range for %d rows'):format(fn, o.padding_idx, V), 2) end
  end
  local B = #starts - 1
  -- the kept entries: their rows, bags and positions in input
  local rows, bag, pos, count, maxlen = {}, {}, {}, {}, 0
  for b = 1, B do
    count[b] = 0
    for i = starts[b], starts[b + 1] - 1 do
      local v = idx[i]
      if v < 1 or v > V then
        error(('%s: index %d is out of range for %d rows'):format(fn, v, V), 2)
      end
      if v ~= pad then
        rows[#rows + 1], bag[#bag + 1], pos[#pos + 1] = v, b, i
        count[b] = count[b] + 1
      end
    end
    maxlen = math.max(maxlen, count[b])
  end
  local opts = like(weight)
  if #rows == 0 then return weight:narrow(1, 1, 0):sum(1):unsqueeze(1):expand(B, D) * 0 end
  if mode == 'max' then
    -- bags padded to maxlen: slot -> kept entry, or a masked filler
    local sel, mask, k = {}, {}, 1
    for b = 1, B do
      for j = 1, maxlen do
        if j <= count[b] then sel[#sel + 1], mask[#mask + 1] = rows[k], true; k = k + 1
        else sel[#sel + 1], mask[#mask + 1] = 1, false end
      end
    end
    local m = E().tensor(mask, { dtype = 'bool', device = weight:device() }):view(B, maxlen, 1)
    local g = weight:index_select(1, sel):view(B, maxlen, D)
    local best = g:masked_fill(m:logical_not(), -math.huge):max(2)
    local empty = {}
    for b = 1, B do empty[b] = count[b] == 0 end
    return best:masked_fill(E().tensor(empty, { dtype = 'bool', device = weight:device() }):view(B, 1), 0)
  end
  local g = weight:index_select(1, rows)
  if psw ~= nil then g = g * psw:reshape(-1):index_select(1, pos):unsqueeze(2) end
  local y = E().zeros({ B, D }, opts):index_add(1, bag, g)
  if mode == 'mean' then
    local c = {}
    for b = 1, B do c[b] = math.max(count[b], 1) end
    y = y / E().tensor(c, opts):view(B, 1)
  end
  return y
end

-- ---- modules -------------------------------------------------------------------------------

local function module(name, fields, defaults, call, init)
  local cls = field_module(name, fields, defaults, call, { init = init })
  M[name] = cls
  return cls
end

-- Padding modules: padding is a number (every side) or PyTorch's table of 2n.
local function pad_module(name, mode, n)
  module(name, mode == 'constant' and { 'padding', 'value' } or { 'padding' }, { nil, 0 },
    function(s, x) return F.pad(x, s.padding, mode, s.value) end,
    function(s)
      if type(s.padding) == 'number' then
        local t = {}
        for i = 1, 2 * n do t[i] = s.padding end
        s.padding = t
      end
      if type(s.padding) ~= 'table' or #s.padding ~= 2 * n then
        error(('%s: expected padding as a number or a table of %d'):format(name, 2 * n), 4)
      end
    end)
end
for n = 1, 3 do
  pad_module('ConstantPad' .. n .. 'd', 'constant', n)
  pad_module('ZeroPad' .. n .. 'd', 'constant', n)
  pad_module('ReflectionPad' .. n .. 'd', 'reflect', n)
  pad_module('ReplicationPad' .. n .. 'd', 'replicate', n)
  pad_module('CircularPad' .. n .. 'd', 'circular', n)
end

module('Upsample', { 'size', 'scale_factor', 'mode', 'align_corners', 'recompute_scale_factor' },
  { nil, nil, 'nearest' }, function(s, x)
    return F.interpolate(x, { size = s.size, scale_factor = s.scale_factor, mode = s.mode,
      align_corners = s.align_corners, recompute_scale_factor = s.recompute_scale_factor })
  end)
module('UpsamplingNearest2d', { 'size', 'scale_factor' }, {},
  function(s, x) return F.interpolate(x, { size = s.size, scale_factor = s.scale_factor }) end)
module('UpsamplingBilinear2d', { 'size', 'scale_factor' }, {}, function(s, x)
  return F.interpolate(x, { size = s.size, scale_factor = s.scale_factor, mode = 'bilinear',
    align_corners = true })
end)
module('CosineSimilarity', { 'dim', 'eps' }, { 2, 1e-8 },
  function(s, a, b) return F.cosine_similarity(a, b, s.dim, s.eps) end)
module('PairwiseDistance', { 'p', 'eps', 'keepdim' }, { 2, 1e-6, false },
  function(s, a, b) return F.pairwise_distance(a, b, s.p, s.eps, s.keepdim) end)
module('PixelShuffle', { 'upscale_factor' }, {},
  function(s, x) return F.pixel_shuffle(x, s.upscale_factor) end)
module('PixelUnshuffle', { 'downscale_factor' }, {},
  function(s, x) return F.pixel_unshuffle(x, s.downscale_factor) end)
module('Unfold', { 'kernel_size', 'dilation', 'padding', 'stride' }, { nil, 1, 0, 1 },
  function(s, x) return F.unfold(x, s.kernel_size, s.dilation, s.padding, s.stride) end)
module('Fold', { 'output_size', 'kernel_size', 'dilation', 'padding', 'stride' }, { nil, nil, 1, 0, 1 },
  function(s, x) return F.fold(x, s.output_size, s.kernel_size, s.dilation, s.padding, s.stride) end)

-- EmbeddingBag(num_embeddings, embedding_dim [, opts]): opts mode ('mean'),
-- include_last_offset, padding_idx, dtype, device; weight ~ N(0, 1) as PyTorch.
local EmbeddingBag = Module:extend('EmbeddingBag')
function EmbeddingBag:__init(num_embeddings, embedding_dim, opts)
  local fn = 'EmbeddingBag'
  opts = args.options(fn, opts, args.set({ 'mode', 'include_last_offset', 'padding_idx', 'dtype',
    'device', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse' }), 2)
  self.num_embeddings = args.positive_int(fn, 'num_embeddings', num_embeddings, 2)
  self.embedding_dim = args.positive_int(fn, 'embedding_dim', embedding_dim, 2)
  self.mode = opts.mode or 'mean'
  self.include_last_offset = opts.include_last_offset or false
  self.padding_idx = opts.padding_idx
  self.max_norm, self.scale_grad_by_freq, self.sparse = opts.max_norm, opts.scale_grad_by_freq, opts.sparse
  local w = E().randn({ num_embeddings, embedding_dim }, { dtype = opts.dtype, device = opts.device })
  if self.padding_idx then
    local p = self.padding_idx < 0 and num_embeddings + self.padding_idx + 1 or self.padding_idx
    w:narrow(1, p, 1):zero_()
  end
  self:register_parameter('weight', w)
end
function EmbeddingBag:forward(input, offsets, per_sample_weights)
  return F.embedding_bag(input, self.weight, { offsets = offsets, mode = self.mode,
    per_sample_weights = per_sample_weights, include_last_offset = self.include_last_offset,
    padding_idx = self.padding_idx, max_norm = self.max_norm,
    scale_grad_by_freq = self.scale_grad_by_freq, sparse = self.sparse })
end
function EmbeddingBag:extra_repr()
  return ("%d, %d, mode='%s'"):format(self.num_embeddings, self.embedding_dim, self.mode)
end
M.EmbeddingBag = EmbeddingBag

return M
