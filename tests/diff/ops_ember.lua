-- The Ember side of the differential test: each op name of tests/diff/cases/*.json mapped to an
-- Ember call, the counterpart of tests/diff/ops_torch.py. `a` is the list of input views,
-- `k` the case's kwargs as PyTorch writes them: dims 0-based (D converts them; negative dims
-- count from the end in both), class and index values 0-based (the runner already added 1 to
-- inputs drawn as indices; kwargs that are indices are converted here). A function returns
-- the op's outputs (several for sort, max_dim, ...; a table of tensors for split and chunk).
-- Add an op here and in ops_torch.py under the same name (docs/testing.md).
local ember = require 'ember'
local F = ember.nn.functional

local function D(d)
  if d == nil then return nil end
  if type(d) == 'table' then
    local r = {}
    for i, x in ipairs(d) do r[i] = D(x) end
    return r
  end
  return d >= 0 and d + 1 or d
end

local function num(v) -- JSON has no infinities: 'inf' and '-inf' stand for them
  if v == 'inf' then return math.huge elseif v == '-inf' then return -math.huge end
  return v
end

local function unary(name) return function(a) return a[1][name](a[1]) end end
local function binary(name) return function(a) return a[1][name](a[1], a[2]) end end

-- A reduction with an optional dim and keepdim.
local function red(name)
  return function(a, k)
    if k.dim == nil then return a[1][name](a[1]) end
    return a[1][name](a[1], D(k.dim), k.keepdim or false)
  end
end

-- normalized_shape: the weight's shape, or the last dimension ("last").
local function norm_shape(a, k)
  if k.shape ~= 'last' then return k.shape end
  if a[2] then
    local s = {}
    for d = 1, a[2]:dim() do s[d] = a[2]:size(d) end
    return s
  end
  return { a[1]:size(a[1]:dim()) }
end

local function reduction(k) return k.reduction or 'mean' end

local OPS = {}

-- The stored tensor each input view was made from (set by the runner): in-place cases return
-- it, to show where their writes landed.
local BASES = setmetatable({}, { __mode = 'k' })
OPS.BASES = BASES

for _, n in ipairs { 'neg', 'abs', 'sign', 'exp', 'expm1', 'log', 'log1p', 'sqrt', 'rsqrt', 'sin',
  'cos', 'tan', 'tanh', 'sigmoid', 'relu', 'floor', 'ceil', 'round', 'trunc', 'reciprocal',
  'square', 'erf', 'isnan', 'isinf', 'isfinite', 'logical_not', 'bitwise_not', 'silu' } do
  OPS[n] = unary(n)
end
OPS.gelu = function(a, k) return a[1]:gelu(k.approximate) end
OPS.softplus = function(a, k)
  if k.beta == nil and k.threshold == nil then return a[1]:softplus() end
  return a[1]:softplus(k.beta or 1, k.threshold or 20)
end
OPS.leaky_relu = function(a, k) return F.leaky_relu(a[1], k.slope) end
OPS.elu = function(a, k) return F.elu(a[1], k.alpha) end

for _, n in ipairs { 'mul', 'floor_divide', 'remainder', 'fmod', 'pow', 'maximum', 'minimum',
  'atan2', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'logical_and', 'logical_or', 'logical_xor',
  'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift', 'bitwise_right_shift' } do
  OPS[n] = binary(n)
end
OPS.add = function(a, k) return a[1]:add(a[2], k.alpha) end
OPS.sub = function(a, k) return a[1]:sub(a[2], k.alpha) end
OPS.div = function(a, k) return a[1]:div(a[2], k.rounding_mode) end
OPS.add_scalar = function(a, k) return a[1] + k.s end
OPS.mul_scalar = function(a, k) return a[1] * k.s end
OPS.div_scalar = function(a, k) return a[1] / k.s end
OPS.pow_scalar = function(a, k) return a[1] ^ k.s end
OPS.rpow_scalar = function(a, k) return k.s ^ a[1] end
OPS.clamp = function(a, k) return a[1]:clamp(k.min, k.max) end
OPS.masked_fill = function(a, k) return a[1]:masked_fill(a[2], k.value) end
OPS.lerp = function(a, k) return a[1]:lerp(a[2], a[3] or k.weight) end
OPS.addcmul = function(a, k) return a[1]:addcmul(a[2], a[3], k.value) end
OPS.addcdiv = function(a, k) return a[1]:addcdiv(a[2], a[3], k.value) end
OPS.where = function(a) return ember.where(a[1], a[2], a[3]) end

for _, n in ipairs { 'sum', 'mean', 'prod', 'amax', 'amin', 'logsumexp', 'nansum', 'nanmean',
  'all', 'any', 'argmax', 'argmin' } do
  OPS[n] = red(n)
end
local function var_std(name)
  return function(a, k)
    local o = { correction = k.correction or 1, keepdim = k.keepdim or false }
    if k.dim == nil then return a[1][name](a[1], o) end
    return a[1][name](a[1], D(k.dim), o)
  end
end
OPS.var, OPS.std = var_std('var'), var_std('std')
OPS.norm = function(a, k) return a[1]:norm(num(k.p or 2), D(k.dim), k.keepdim or false) end
OPS.count_nonzero = function(a, k) return a[1]:count_nonzero(D(k.dim)) end
OPS.dist = function(a, k) return a[1]:dist(a[2], k.p) end
OPS.max_all = function(a) return a[1]:max() end
OPS.min_all = function(a) return a[1]:min() end
OPS.max_dim = function(a, k) return a[1]:max(D(k.dim), k.keepdim or false) end
OPS.min_dim = function(a, k) return a[1]:min(D(k.dim), k.keepdim or false) end
OPS.cumsum = function(a, k) return a[1]:cumsum(D(k.dim)) end
OPS.cumprod = function(a, k) return a[1]:cumprod(D(k.dim)) end
OPS.softmax = function(a, k) return a[1]:softmax(D(k.dim)) end
OPS.log_softmax = function(a, k) return a[1]:log_softmax(D(k.dim)) end

OPS.sort = function(a, k) return a[1]:sort(D(k.dim or -1), k.descending or false) end
OPS.argsort = function(a, k) return a[1]:argsort(D(k.dim or -1), k.descending or false) end
OPS.topk = function(a, k)
  return a[1]:topk(k.k, D(k.dim or -1), k.largest == nil and true or k.largest)
end

OPS.index_select = function(a, k) return a[1]:index_select(D(k.dim), a[2]) end
OPS.gather = function(a, k) return a[1]:gather(D(k.dim), a[2]) end
OPS.scatter = function(a, k) return a[1]:scatter(D(k.dim), a[2], a[3]) end
OPS.scatter_add = function(a, k) return a[1]:scatter_add(D(k.dim), a[2], a[3]) end
OPS.index_add = function(a, k) return a[1]:index_add(D(k.dim), a[2], a[3], k.alpha) end
OPS.index_copy = function(a, k) return a[1]:index_copy(D(k.dim), a[2], a[3]) end
OPS.index_fill = function(a, k) return a[1]:index_fill(D(k.dim), a[2], k.value) end
OPS.masked_select = function(a) return a[1]:masked_select(a[2]) end
OPS.nonzero = function(a) return a[1]:nonzero() end
OPS.cat = function(a, k) return ember.cat(a, D(k.dim or 0)) end
OPS.stack = function(a, k) return ember.stack(a, D(k.dim or 0)) end
OPS.split = function(a, k) return a[1]:split(k.size, D(k.dim or 0)) end
OPS.chunk = function(a, k) return a[1]:chunk(k.n, D(k.dim or 0)) end
OPS.flip = function(a, k) return a[1]:flip(D(k.dims)) end
OPS.roll = function(a, k) return a[1]:roll(k.shifts, D(k.dims)) end
OPS['repeat'] = function(a, k) return a[1]['repeat'](a[1], k.reps) end
OPS.tril = function(a, k) return a[1]:tril(k.k or 0) end
OPS.triu = function(a, k) return a[1]:triu(k.k or 0) end
OPS.unique = function(a) return a[1]:unique { return_inverse = true, return_counts = true } end

OPS.reshape = function(a, k) return a[1]:reshape(k.shape) end
OPS.transpose = function(a, k) return a[1]:transpose(D(k.d0), D(k.d1)) end
OPS.permute = function(a, k) return a[1]:permute(D(k.dims)) end
OPS.expand = function(a, k) return a[1]:expand(k.shape) end
OPS.squeeze = function(a, k)
  if k.dim == nil then return a[1]:squeeze() end
  return a[1]:squeeze(D(k.dim))
end
OPS.unsqueeze = function(a, k) return a[1]:unsqueeze(D(k.dim)) end
OPS.narrow = function(a, k) return a[1]:narrow(D(k.dim), k.start + 1, k.length) end
OPS.select = function(a, k) return a[1]:select(D(k.dim), D(k.index)) end
OPS.unfold = function(a, k) return a[1]:unfold(D(k.dim), k.size, k.step) end
OPS.flatten = function(a) return a[1]:flatten() end
OPS.contiguous = function(a) return a[1]:contiguous() end
OPS.to = function(a, k) return a[1]:to(k.dtype) end

-- In place on the view a[1]: the whole stored input (where the writes landed) and the view.
local function inplace(name)
  return function(a, k)
    local base = BASES[a[1]] or a[1]
    local args = { unpack(a, 2) }
    if k.s ~= nil then args[#args + 1] = k.s end
    local r = a[1][name .. '_'](a[1], unpack(args))
    return base:clone(), r:clone()
  end
end
for _, n in ipairs { 'add', 'sub', 'mul', 'div', 'clamp_min', 'exp', 'neg', 'copy', 'fill',
  'zero', 'masked_fill', 'sigmoid' } do
  OPS[n .. '_'] = inplace(n)
end

for _, n in ipairs { 'matmul', 'mm', 'mv', 'bmm', 'dot', 'outer' } do OPS[n] = binary(n) end
OPS.addmm = function(a, k) return ember.addmm(a[1], a[2], a[3], { beta = k.beta, alpha = k.alpha }) end
OPS.baddbmm = function(a, k)
  return ember.baddbmm(a[1], a[2], a[3], { beta = k.beta, alpha = k.alpha })
end
OPS.linear = function(a) return F.linear(a[1], a[2], a[3]) end

local function conv(name)
  return function(a, k) return F[name](a[1], a[2], a[3], k) end
end
for _, n in ipairs { 'conv1d', 'conv2d', 'conv_transpose1d', 'conv_transpose2d' } do
  OPS[n] = conv(n)
end
local function pool(name, extra)
  return function(a, k)
    local o = {}
    for key, v in pairs(k) do if key ~= 'kernel_size' then o[key] = v end end
    for key, v in pairs(extra or {}) do o[key] = v end
    return F[name](a[1], k.kernel_size, o)
  end
end
OPS.max_pool1d, OPS.max_pool2d = pool('max_pool1d'), pool('max_pool2d')
OPS.max_pool2d_indices = pool('max_pool2d', { return_indices = true })
OPS.avg_pool1d, OPS.avg_pool2d = pool('avg_pool1d'), pool('avg_pool2d')
OPS.adaptive_avg_pool2d = function(a, k) return F.adaptive_avg_pool2d(a[1], k.size) end
OPS.adaptive_avg_pool1d = function(a, k) return F.adaptive_avg_pool1d(a[1], k.size) end
OPS.adaptive_max_pool2d = function(a, k) return F.adaptive_max_pool2d(a[1], k.size) end
OPS.max_unpool2d = function(a, k) return F.max_unpool2d(a[1], a[2], k.kernel_size) end
OPS.batch_norm = function(a, k)
  return F.batch_norm(a[1], a[2], a[3], a[4], a[5], k.training or false, 0.1, k.eps or 1e-5)
end
OPS.batch_norm_train = function(a, k)
  return F.batch_norm(a[1], nil, nil, a[2], a[3], true, 0.1, k.eps or 1e-5)
end
OPS.layer_norm = function(a, k) return F.layer_norm(a[1], norm_shape(a, k), a[2], a[3], k.eps) end
OPS.rms_norm = function(a, k) return F.rms_norm(a[1], norm_shape(a, k), a[2], k.eps or 1e-6) end
OPS.group_norm = function(a, k) return F.group_norm(a[1], k.groups, a[2], a[3], k.eps) end
OPS.instance_norm = function(a) return F.instance_norm(a[1], nil, nil, a[2], a[3]) end
OPS.rotate_half = function(a) return F.rotate_half(a[1]) end
OPS.apply_rotary = function(a) return F.apply_rotary(a[1], a[2], a[3]) end
OPS.embedding = function(a, k)
  return F.embedding(a[1], a[2], { padding_idx = D(k.padding_idx) })
end
OPS.one_hot = function(a, k) return F.one_hot(a[1], k.n or -1) end
OPS.sdpa = function(a, k)
  return F.scaled_dot_product_attention(a[1], a[2], a[3], { attn_mask = a[4], is_causal = k.causal })
end
local function ce(name)
  return function(a, k)
    return F[name](a[1], a[2], { weight = a[3], reduction = k.reduction,
      ignore_index = k.ignore_index and D(k.ignore_index), label_smoothing = k.label_smoothing })
  end
end
OPS.cross_entropy, OPS.nll_loss = ce('cross_entropy'), ce('nll_loss')
OPS.mse_loss = function(a, k) return F.mse_loss(a[1], a[2], reduction(k)) end
OPS.l1_loss = function(a, k) return F.l1_loss(a[1], a[2], reduction(k)) end
OPS.smooth_l1_loss = function(a, k) return F.smooth_l1_loss(a[1], a[2], reduction(k)) end
OPS.binary_cross_entropy = function(a, k)
  return F.binary_cross_entropy(a[1], a[2], a[3], reduction(k))
end
OPS.bce_with_logits = function(a, k)
  return F.binary_cross_entropy_with_logits(a[1], a[2], { reduction = reduction(k) })
end
OPS.kl_div = function(a, k) return F.kl_div(a[1], a[2], reduction(k), k.log_target or false) end

-- ---- ops added with issue 11's API (math, statistics, search, indexing, shaping, linalg, nn) --

local function bool0(v) -- a Lua boolean result (allclose, equal) as PyTorch's 0-d bool tensor
  return ember.tensor(v and 1 or 0):to('bool')
end
local function method(name, ...) -- x:name(extra...) with the kwargs picked by `keys`
  local keys = { ... }
  return function(a, k)
    local args = {}
    for i, key in ipairs(keys) do args[i] = k[key] end
    return a[1][name](a[1], unpack(args, 1, #keys))
  end
end

for _, n in ipairs { 'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'log2',
  'log10', 'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma', 'frac' } do
  OPS[n] = unary(n)
end
for _, n in ipairs { 'hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin', 'heaviside',
  'gcd', 'lcm', 'kron' } do
  OPS[n] = binary(n)
end
OPS.logit = method('logit', 'eps')
OPS.nan_to_num = function(a, k)
  return a[1]:nan_to_num(k.nan or 0, num(k.posinf), num(k.neginf))
end
OPS.isclose = function(a, k)
  return a[1]:isclose(a[2], k.rtol or 1e-5, k.atol or 1e-8, k.equal_nan or false)
end
OPS.allclose = function(a, k)
  return bool0(a[1]:allclose(a[2], k.rtol or 1e-5, k.atol or 1e-8, k.equal_nan or false))
end
OPS.equal = function(a) return bool0(a[1]:equal(a[2])) end
OPS.isin = function(a, k) return ember.isin(a[1], a[2], { invert = k.invert or false }) end

OPS.searchsorted = function(a, k) return a[1]:searchsorted(a[2], { right = k.right or false }) end
OPS.bucketize = function(a, k) return a[1]:bucketize(a[2], { right = k.right or false }) end
OPS.bincount = function(a, k) return a[1]:bincount(a[2], k.minlength or 0) end
OPS.histc = function(a, k) return a[1]:histc(k.bins or 100, k.min or 0, k.max or 0) end
OPS.unique_consecutive = function(a)
  return a[1]:unique_consecutive { return_inverse = true, return_counts = true }
end

OPS.median = function(a) return a[1]:median() end
OPS.median_dim = function(a, k) return a[1]:median(D(k.dim), k.keepdim or false) end
OPS.kthvalue = function(a, k) return a[1]:kthvalue(k.k, D(k.dim or -1), k.keepdim or false) end
OPS.mode = function(a, k) return a[1]:mode(D(k.dim or -1), k.keepdim or false) end
OPS.quantile = function(a, k)
  return a[1]:quantile(a[2] or k.q, { dim = D(k.dim), keepdim = k.keepdim or false,
    interpolation = k.interpolation })
end
OPS.aminmax = function(a, k) return a[1]:aminmax { dim = D(k.dim), keepdim = k.keepdim or false } end
local function with_mean(name)
  return function(a, k)
    local o = { correction = k.correction or 1, keepdim = k.keepdim or false }
    if k.dim == nil then return a[1][name](a[1], o) end
    return a[1][name](a[1], D(k.dim), o)
  end
end
OPS.var_mean, OPS.std_mean = with_mean('var_mean'), with_mean('std_mean')
OPS.cummax = function(a, k) return a[1]:cummax(D(k.dim)) end
OPS.cummin = function(a, k) return a[1]:cummin(D(k.dim)) end
OPS.logcumsumexp = function(a, k) return a[1]:logcumsumexp(D(k.dim)) end
OPS.diff = function(a, k) return a[1]:diff(k.n or 1, D(k.dim or -1), a[2], a[3]) end

OPS.take = function(a) return a[1]:take(a[2]) end
OPS.take_along_dim = function(a, k) return a[1]:take_along_dim(a[2], D(k.dim)) end
OPS.index_put = function(a, k)
  return a[1]:index_put({ unpack(a, 3) }, a[2], k.accumulate or false)
end
OPS.scatter_reduce = function(a, k)
  return a[1]:scatter_reduce(D(k.dim), a[2], a[3], k.reduce,
    { include_self = k.include_self == nil and true or k.include_self })
end
OPS.masked_scatter = function(a) return a[1]:masked_scatter(a[2], a[3]) end

OPS.diagonal = function(a, k)
  return a[1]:diagonal(k.offset or 0, D(k.dim1 or 0), D(k.dim2 or 1))
end
OPS.diag = function(a, k) return a[1]:diag(k.k or 0) end
OPS.diag_embed = function(a, k)
  return a[1]:diag_embed(k.offset or 0, D(k.dim1 or -2), D(k.dim2 or -1))
end
OPS.trace = function(a) return a[1]:trace() end
OPS.tril_indices = function(_, k) return ember.tril_indices(k.rows, k.cols, k.offset or 0) end
OPS.triu_indices = function(_, k) return ember.triu_indices(k.rows, k.cols, k.offset or 0) end
OPS.movedim = function(a, k) return a[1]:movedim(D(k.src), D(k.dst)) end
OPS.unbind = function(a, k) return a[1]:unbind(D(k.dim or 0)) end
OPS.unflatten = function(a, k) return a[1]:unflatten(D(k.dim), k.sizes) end
OPS.tensor_split = function(a, k) return a[1]:tensor_split(k.s, D(k.dim or 0)) end
OPS.hstack = function(a) return ember.hstack(a) end
OPS.vstack = function(a) return ember.vstack(a) end
OPS.dstack = function(a) return ember.dstack(a) end
OPS.tile = function(a, k) return a[1]:tile(unpack(k.reps)) end
OPS.repeat_interleave = function(a, k) return a[1]:repeat_interleave(a[2] or k.repeats, D(k.dim)) end
OPS.rot90 = function(a, k) return a[1]:rot90(k.k or 1, D(k.dims or { 0, 1 })) end
OPS.broadcast_to = function(a, k) return a[1]:broadcast_to(k.shape) end
OPS.meshgrid = function(a, k)
  local args = { unpack(a) }
  args[#args + 1] = { indexing = k.indexing or 'ij' }
  return ember.meshgrid(unpack(args))
end
OPS.as_strided = function(a, k) return a[1]:as_strided(k.size, k.stride, k.offset or 0) end
OPS.logspace = function(_, k) return ember.logspace(k.start, k['end'], k.steps, k.base or 10) end

OPS.einsum = function(a, k) return ember.einsum(k.eq, a) end
OPS.tensordot = function(a, k)
  local dims = k.dims
  if type(dims) == 'table' then dims = { D(dims[1]), D(dims[2]) } end
  return ember.tensordot(a[1], a[2], dims)
end
OPS.cross = function(a, k) return ember.linalg.cross(a[1], a[2], D(k.dim or -1)) end
OPS.cdist = function(a, k) return ember.cdist(a[1], a[2], k.p or 2) end
OPS.addmv = function(a, k) return a[1]:addmv(a[2], a[3], { beta = k.beta, alpha = k.alpha }) end
OPS.addr = function(a, k) return a[1]:addr(a[2], a[3], { beta = k.beta, alpha = k.alpha }) end
OPS.matrix_power = function(a, k) return ember.linalg.matrix_power(a[1], k.n) end
for _, n in ipairs { 'inv', 'det', 'slogdet', 'cholesky', 'svdvals', 'eigvalsh' } do
  OPS[n] = function(a) return ember.linalg[n](a[1]) end
end
OPS.solve = function(a) return ember.linalg.solve(a[1], a[2]) end
OPS.lstsq = function(a) return (ember.linalg.lstsq(a[1], a[2])) end
OPS.vector_norm = function(a, k)
  return ember.linalg.vector_norm(a[1], num(k.ord or 2), D(k.dim), k.keepdim or false)
end
OPS.matrix_norm = function(a, k) return ember.linalg.matrix_norm(a[1], num(k.ord or 'fro')) end

-- nn.functional with PyTorch's names: kwargs pass as the options table (dims converted).
local function F_named(name, ninputs)
  return function(a, k)
    local o = {}
    for key, v in pairs(k) do o[key] = (key == 'dim') and D(v) or v end
    local args = { unpack(a, 1, ninputs or 1) }
    if next(o) ~= nil then args[#args + 1] = o end
    return F[name](unpack(args))
  end
end
for _, n in ipairs { 'logsigmoid', 'hardtanh', 'relu6', 'hardswish', 'hardsigmoid', 'selu', 'celu',
  'mish', 'softsign', 'normalize', 'interpolate' } do
  OPS[n] = F_named(n)
end
OPS.glu = function(a, k) return F.glu(a[1], D(k.dim or -1)) end
OPS.softmin = function(a, k) return F.softmin(a[1], D(k.dim)) end
OPS.adaptive_max_pool1d = function(a, k) return F.adaptive_max_pool1d(a[1], k.output_size) end
-- The first of `keys` go by position, the other kwargs in the options table.
local function F_pos(name, ...)
  local keys = { ... }
  return function(a, k)
    local o, args = {}, { a[1] }
    for key, v in pairs(k) do o[key] = v end
    for _, key in ipairs(keys) do args[#args + 1] = k[key]; o[key] = nil end
    if next(o) ~= nil then args[#args + 1] = o end
    return F[name](unpack(args, 1, #keys + 2))
  end
end
OPS.F_unfold = F_pos('unfold', 'kernel_size')
OPS.fold = F_pos('fold', 'output_size', 'kernel_size')
OPS.max_pool3d = F_pos('max_pool3d', 'kernel_size')
OPS.avg_pool3d = F_pos('avg_pool3d', 'kernel_size')
OPS.pad = F_pos('pad', 'pad')
OPS.pixel_shuffle = function(a, k) return F.pixel_shuffle(a[1], k.upscale_factor) end
OPS.pixel_unshuffle = function(a, k) return F.pixel_unshuffle(a[1], k.downscale_factor) end
OPS.threshold = function(a, k) return F.threshold(a[1], k.threshold, k.value) end
OPS.prelu = function(a) return F.prelu(a[1], a[2]) end
OPS.F_softplus = F_named('softplus')
OPS.conv3d = function(a, k)
  local o = {}
  for key, v in pairs(k) do o[key] = v end
  if a[3] then return F.conv3d(a[1], a[2], a[3], o) end
  return F.conv3d(a[1], a[2], nil, o)
end
OPS.huber_loss = F_named('huber_loss', 2)
OPS.margin_ranking_loss = F_named('margin_ranking_loss', 3)
OPS.triplet_margin_loss = F_named('triplet_margin_loss', 3)
OPS.cosine_embedding_loss = F_named('cosine_embedding_loss', 3)
OPS.poisson_nll_loss = F_named('poisson_nll_loss', 2)
OPS.gaussian_nll_loss = F_named('gaussian_nll_loss', 3)
OPS.cosine_similarity = F_named('cosine_similarity', 2)
OPS.pairwise_distance = F_named('pairwise_distance', 2)
OPS.embedding_bag = function(a, k)
  local o = { offsets = a[3] }
  for key, v in pairs(k) do o[key] = (key == 'padding_idx') and D(v) or v end
  return F.embedding_bag(a[1], a[2], o)
end
OPS.ctc_loss = function(a, k)
  return F.ctc_loss(a[1]:log_softmax(-1), a[2], k.input_lengths, k.target_lengths, 1,
    k.reduction or 'mean')
end

return OPS
