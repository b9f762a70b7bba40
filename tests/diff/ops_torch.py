# The PyTorch side of the differential test: each op name of tests/diff/cases/*.json mapped to
# a PyTorch call. `a` is the list of input views, `k` the case's kwargs (dims 0-based, as
# PyTorch counts; the Lua side, tests/diff/ops_ember.lua, adds 1). Add an op here and in
# ops_ember.lua under the same name (docs/testing.md).
import torch
import torch.nn.functional as F


def dim_args(k):
    """(dim, keepdim) positional tail for reductions taking an optional dim."""
    if k.get('dim') is None:
        return ()
    return (k['dim'], k.get('keepdim', False))


def red(name):
    def f(a, k):
        if name in ('logsumexp', 'amax', 'amin') and k.get('dim') is None:
            return getattr(torch, name)(a[0], tuple(range(a[0].dim())))
        return getattr(torch, name)(a[0], *dim_args(k))
    return f


def rms_norm(x, shape, w, eps):
    dims = tuple(range(-len(shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * w if w is not None else y


def sdpa(q, kk, v, causal, mask):
    s = q @ kk.transpose(-1, -2) / (q.shape[-1] ** 0.5)
    if causal:
        L, S = q.shape[-2], kk.shape[-2]
        s = s.masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float('-inf'))
    if mask is not None:
        s = s.masked_fill(~mask, float('-inf')) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


def norm_shape(a, k):
    """normalized_shape: the weight's shape, or the last dimension ("last")."""
    if k['shape'] != 'last':
        return k['shape']
    return list(a[1].shape) if len(a) > 1 else [a[0].shape[-1]]


def num(v):
    """JSON has no infinities: 'inf' and '-inf' stand for them."""
    return float(v) if v in ('inf', '-inf') else v


def log1p(x):
    """PyTorch 1.13's vectorized log1p gives inf for x above ~1e38 (float32) and ~1e307
    (float64); log(x) is log1p(x) exactly there."""
    return torch.where(x > 1e30, torch.log(x.clamp(min=1e30)), torch.log1p(x))


def topk(x, k, dim, largest):
    """topk with ties in input order (Ember's documented rule; PyTorch leaves the order of
    ties unspecified): the first k of a stable sort, the same values as torch.topk."""
    v, i = torch.sort(x, stable=True, dim=dim, descending=largest)
    return v.narrow(dim, 0, k), i.narrow(dim, 0, k)


def inplace(name):
    """x.<name>_(...) on the view a[0]; the result is the view's whole storage (its base,
    made contiguous: where the writes landed) and the view."""
    def f(a, k):
        base = a[0]._base if a[0]._base is not None else a[0]
        args = a[1:] + ([k['s']] if 's' in k else [])
        r = getattr(a[0], name + '_')(*args)
        return base.clone(), r.clone()
    return f


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def lstsq(a, b):
    """The least-squares solution of a full-rank a, from the normal equations in float64:
    torch.linalg.lstsq's last bits vary from run to run (with the buffers' alignment), which
    would make the golden files differ on every regeneration."""
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    at = a64.transpose(-1, -2)
    return torch.linalg.solve(at @ a64, at @ b64).to(a.dtype)


def opt(a, i):
    return a[i] if len(a) > i else None


OPS = {
    # pointwise unary
    **{n: (lambda n: lambda a, k: getattr(torch, n)(a[0]))(n) for n in [
        'neg', 'abs', 'sign', 'exp', 'expm1', 'log', 'sqrt', 'rsqrt', 'sin', 'cos',
        'tan', 'tanh', 'sigmoid', 'relu', 'floor', 'ceil', 'round', 'trunc', 'reciprocal',
        'square', 'erf', 'isnan', 'isinf', 'isfinite', 'logical_not', 'bitwise_not']},
    'log1p': lambda a, k: log1p(a[0]),
    'gelu': lambda a, k: F.gelu(a[0], approximate=k.get('approximate', 'none')),
    'silu': lambda a, k: F.silu(a[0]),
    'softplus': lambda a, k: F.softplus(a[0], k.get('beta', 1), k.get('threshold', 20)),
    'leaky_relu': lambda a, k: F.leaky_relu(a[0], k.get('slope', 0.01)),
    'elu': lambda a, k: F.elu(a[0], k.get('alpha', 1.0)),
    # pointwise binary (tensor, tensor)
    **{n: (lambda n: lambda a, k: getattr(torch, n)(a[0], a[1]))(n) for n in [
        'mul', 'floor_divide', 'remainder', 'fmod', 'pow', 'maximum', 'minimum', 'atan2', 'eq',
        'ne', 'lt', 'le', 'gt', 'ge', 'logical_and', 'logical_or', 'logical_xor',
        'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift',
        'bitwise_right_shift']},
    'add': lambda a, k: torch.add(a[0], a[1], alpha=k.get('alpha', 1)),
    'sub': lambda a, k: torch.sub(a[0], a[1], alpha=k.get('alpha', 1)),
    'div': lambda a, k: torch.div(a[0], a[1], rounding_mode=k.get('rounding_mode')),
    # a tensor and a Python number
    'add_scalar': lambda a, k: a[0] + k['s'],
    'mul_scalar': lambda a, k: a[0] * k['s'],
    'div_scalar': lambda a, k: a[0] / k['s'],
    'pow_scalar': lambda a, k: a[0] ** k['s'],
    'rpow_scalar': lambda a, k: k['s'] ** a[0],
    'clamp': lambda a, k: torch.clamp(a[0], k.get('min'), k.get('max')),
    'masked_fill': lambda a, k: a[0].masked_fill(a[1], k['value']),
    'lerp': lambda a, k: torch.lerp(a[0], a[1], a[2] if len(a) > 2 else k['weight']),
    'addcmul': lambda a, k: torch.addcmul(a[0], a[1], a[2], value=k.get('value', 1)),
    'addcdiv': lambda a, k: torch.addcdiv(a[0], a[1], a[2], value=k.get('value', 1)),
    'where': lambda a, k: torch.where(a[0], a[1], a[2]),
    # reductions
    **{n: red(n) for n in ['sum', 'mean', 'amax', 'amin', 'logsumexp', 'nansum', 'nanmean']},
    'prod': lambda a, k: torch.prod(a[0]) if k.get('dim') is None else
        torch.prod(a[0], k['dim'], k.get('keepdim', False)),
    'all': lambda a, k: torch.all(a[0]) if k.get('dim') is None else
        torch.all(a[0], k['dim'], k.get('keepdim', False)),
    'any': lambda a, k: torch.any(a[0]) if k.get('dim') is None else
        torch.any(a[0], k['dim'], k.get('keepdim', False)),
    'var': lambda a, k: torch.var(a[0], k.get('dim'), correction=k.get('correction', 1),
                                  keepdim=k.get('keepdim', False)),
    'std': lambda a, k: torch.std(a[0], k.get('dim'), correction=k.get('correction', 1),
                                  keepdim=k.get('keepdim', False)),
    'norm': lambda a, k: torch.linalg.vector_norm(a[0], num(k.get('p', 2)), k.get('dim'),
                                                  k.get('keepdim', False)),
    'count_nonzero': lambda a, k: torch.count_nonzero(a[0], k.get('dim')),
    'dist': lambda a, k: torch.dist(a[0], a[1], k.get('p', 2)),
    'max_all': lambda a, k: torch.max(a[0]),
    'min_all': lambda a, k: torch.min(a[0]),
    'max_dim': lambda a, k: tuple(torch.max(a[0], k['dim'], k.get('keepdim', False))),
    'min_dim': lambda a, k: tuple(torch.min(a[0], k['dim'], k.get('keepdim', False))),
    'argmax': lambda a, k: torch.argmax(a[0], k.get('dim'), k.get('keepdim', False)),
    'argmin': lambda a, k: torch.argmin(a[0], k.get('dim'), k.get('keepdim', False)),
    'cumsum': lambda a, k: torch.cumsum(a[0], k['dim']),
    'cumprod': lambda a, k: torch.cumprod(a[0], k['dim']),
    'softmax': lambda a, k: torch.softmax(a[0], k['dim']),
    'log_softmax': lambda a, k: torch.log_softmax(a[0], k['dim']),
    # sorting
    'sort': lambda a, k: tuple(torch.sort(a[0], stable=True, dim=k.get('dim', -1),
                                          descending=k.get('descending', False))),
    'argsort': lambda a, k: torch.sort(a[0], stable=True, dim=k.get('dim', -1),
                                       descending=k.get('descending', False))[1],
    'topk': lambda a, k: topk(a[0], k['k'], k.get('dim', -1), k.get('largest', True)),
    # indexing and joining
    'index_select': lambda a, k: torch.index_select(a[0], k['dim'], a[1]),
    'gather': lambda a, k: torch.gather(a[0], k['dim'], a[1]),
    'scatter': lambda a, k: torch.scatter(a[0], k['dim'], a[1], a[2]),
    'scatter_add': lambda a, k: torch.scatter_add(a[0], k['dim'], a[1], a[2]),
    'index_add': lambda a, k: torch.index_add(a[0], k['dim'], a[1], a[2],
                                              alpha=k.get('alpha', 1)),
    'index_copy': lambda a, k: torch.index_copy(a[0], k['dim'], a[1], a[2]),
    'index_fill': lambda a, k: torch.index_fill(a[0], k['dim'], a[1], k['value']),
    # PyTorch 1.13's masked_select backward scatters the gradient in the wrong order when the
    # input is not contiguous (a transposed input): the reference selects from a contiguous copy.
    'masked_select': lambda a, k: torch.masked_select(a[0].contiguous(), a[1]),
    'nonzero': lambda a, k: torch.nonzero(a[0]),
    'cat': lambda a, k: torch.cat(a, k.get('dim', 0)),
    'stack': lambda a, k: torch.stack(a, k.get('dim', 0)),
    'split': lambda a, k: tuple(torch.split(a[0], k['size'], k.get('dim', 0))),
    'chunk': lambda a, k: tuple(torch.chunk(a[0], k['n'], k.get('dim', 0))),
    'flip': lambda a, k: torch.flip(a[0], k['dims']),
    'roll': lambda a, k: torch.roll(a[0], k['shifts'], k['dims']),
    'repeat': lambda a, k: a[0].repeat(*k['reps']),
    'tril': lambda a, k: torch.tril(a[0], k.get('k', 0)),
    'triu': lambda a, k: torch.triu(a[0], k.get('k', 0)),
    'unique': lambda a, k: tuple(torch.unique(a[0], sorted=True, return_inverse=True,
                                              return_counts=True)),
    # shaping
    'reshape': lambda a, k: a[0].reshape(k['shape']),
    'transpose': lambda a, k: a[0].transpose(k['d0'], k['d1']),
    'permute': lambda a, k: a[0].permute(k['dims']),
    'expand': lambda a, k: a[0].expand(k['shape']),
    'squeeze': lambda a, k: a[0].squeeze(k['dim']) if 'dim' in k else a[0].squeeze(),
    'unsqueeze': lambda a, k: a[0].unsqueeze(k['dim']),
    'narrow': lambda a, k: a[0].narrow(k['dim'], k['start'], k['length']),
    'select': lambda a, k: a[0].select(k['dim'], k['index']),
    'unfold': lambda a, k: a[0].unfold(k['dim'], k['size'], k['step']),
    'flatten': lambda a, k: a[0].flatten(),
    'contiguous': lambda a, k: a[0].contiguous(),
    'to': lambda a, k: a[0].to(getattr(torch, k['dtype'])),
    # in place, on a view of the stored input (expanded views must be refused)
    **{n + '_': inplace(n) for n in ['add', 'sub', 'mul', 'div', 'clamp_min', 'exp', 'neg',
                                     'copy', 'fill', 'zero', 'masked_fill', 'sigmoid']},
    # linear algebra
    'matmul': lambda a, k: torch.matmul(a[0], a[1]),
    'mm': lambda a, k: torch.mm(a[0], a[1]),
    'mv': lambda a, k: torch.mv(a[0], a[1]),
    'bmm': lambda a, k: torch.bmm(a[0], a[1]),
    'dot': lambda a, k: torch.dot(a[0], a[1]),
    'outer': lambda a, k: torch.outer(a[0], a[1]),
    'addmm': lambda a, k: torch.addmm(a[0], a[1], a[2], beta=k.get('beta', 1),
                                      alpha=k.get('alpha', 1)),
    'baddbmm': lambda a, k: torch.baddbmm(a[0], a[1], a[2], beta=k.get('beta', 1),
                                          alpha=k.get('alpha', 1)),
    'linear': lambda a, k: F.linear(a[0], a[1], opt(a, 2)),
    # nn
    'conv1d': lambda a, k: F.conv1d(a[0], a[1], opt(a, 2), **k),
    'conv2d': lambda a, k: F.conv2d(a[0], a[1], opt(a, 2), **k),
    'conv_transpose1d': lambda a, k: F.conv_transpose1d(a[0], a[1], opt(a, 2), **k),
    'conv_transpose2d': lambda a, k: F.conv_transpose2d(a[0], a[1], opt(a, 2), **k),
    'max_pool1d': lambda a, k: F.max_pool1d(a[0], **k),
    'max_pool2d': lambda a, k: F.max_pool2d(a[0], **k),
    'max_pool2d_indices': lambda a, k: tuple(F.max_pool2d(a[0], return_indices=True, **k)),
    'avg_pool1d': lambda a, k: F.avg_pool1d(a[0], **k),
    'avg_pool2d': lambda a, k: F.avg_pool2d(a[0], **k),
    'adaptive_avg_pool2d': lambda a, k: F.adaptive_avg_pool2d(a[0], k['size']),
    'adaptive_avg_pool1d': lambda a, k: F.adaptive_avg_pool1d(a[0], k['size']),
    'adaptive_max_pool2d': lambda a, k: F.adaptive_max_pool2d(a[0], k['size']),
    'max_unpool2d': lambda a, k: F.max_unpool2d(a[0], a[1], **k),
    'batch_norm': lambda a, k: F.batch_norm(a[0], a[1], a[2], opt(a, 3), opt(a, 4),
                                            training=k.get('training', False),
                                            eps=k.get('eps', 1e-5)),
    'batch_norm_train': lambda a, k: F.batch_norm(a[0], None, None, opt(a, 1), opt(a, 2),
                                                  training=True, eps=k.get('eps', 1e-5)),
    'layer_norm': lambda a, k: F.layer_norm(a[0], norm_shape(a, k), opt(a, 1), opt(a, 2),
                                            eps=k.get('eps', 1e-5)),
    'rms_norm': lambda a, k: rms_norm(a[0], norm_shape(a, k), opt(a, 1), k.get('eps', 1e-6)),
    'group_norm': lambda a, k: F.group_norm(a[0], k['groups'], opt(a, 1), opt(a, 2),
                                            eps=k.get('eps', 1e-5)),
    'instance_norm': lambda a, k: F.instance_norm(a[0], weight=opt(a, 1), bias=opt(a, 2)),
    'rotate_half': lambda a, k: rotate_half(a[0]),
    'apply_rotary': lambda a, k: a[0] * a[1] + rotate_half(a[0]) * a[2],
    'embedding': lambda a, k: F.embedding(a[0], a[1], padding_idx=k.get('padding_idx')),
    'one_hot': lambda a, k: F.one_hot(a[0], k.get('n', -1)),
    'sdpa': lambda a, k: sdpa(a[0], a[1], a[2], k.get('causal', False), opt(a, 3)),
    'cross_entropy': lambda a, k: F.cross_entropy(a[0], a[1], weight=opt(a, 2), **k),
    'nll_loss': lambda a, k: F.nll_loss(a[0], a[1], weight=opt(a, 2), **k),
    'mse_loss': lambda a, k: F.mse_loss(a[0], a[1], **k),
    'l1_loss': lambda a, k: F.l1_loss(a[0], a[1], **k),
    'smooth_l1_loss': lambda a, k: F.smooth_l1_loss(a[0], a[1], **k),
    'binary_cross_entropy': lambda a, k: F.binary_cross_entropy(a[0], a[1], weight=opt(a, 2),
                                                                **k),
    'bce_with_logits': lambda a, k: F.binary_cross_entropy_with_logits(a[0], a[1], **k),
    'kl_div': lambda a, k: F.kl_div(a[0], a[1], **k),
}


# ---- ops added with issue 11's API (math, statistics, search, indexing, shaping, linalg, nn) --

def scalar(v):
    """A Python bool or number result as a 0-d tensor (allclose, equal)."""
    return torch.tensor(v)


OPS.update({
    **{n: (lambda n: lambda a, k: getattr(torch, n)(a[0]))(n) for n in [
        'asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'log2', 'log10',
        'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma', 'frac']},
    **{n: (lambda n: lambda a, k: getattr(torch, n)(a[0], a[1]))(n) for n in [
        'hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin', 'heaviside', 'gcd', 'lcm',
        'kron']},
    'logit': lambda a, k: torch.logit(a[0], k.get('eps')),
    'nan_to_num': lambda a, k: torch.nan_to_num(a[0], k.get('nan', 0.0), num(k.get('posinf')),
                                                num(k.get('neginf'))),
    'isclose': lambda a, k: torch.isclose(a[0], a[1], k.get('rtol', 1e-5), k.get('atol', 1e-8),
                                          k.get('equal_nan', False)),
    'allclose': lambda a, k: scalar(torch.allclose(a[0], a[1], k.get('rtol', 1e-5),
                                                   k.get('atol', 1e-8), k.get('equal_nan', False))),
    'equal': lambda a, k: scalar(torch.equal(a[0], a[1])),
    'isin': lambda a, k: torch.isin(a[0], a[1], invert=k.get('invert', False)),
    # search and counting
    'searchsorted': lambda a, k: torch.searchsorted(a[0], a[1], right=k.get('right', False)),
    'bucketize': lambda a, k: torch.bucketize(a[0], a[1], right=k.get('right', False)),
    'bincount': lambda a, k: torch.bincount(a[0], opt(a, 1), k.get('minlength', 0)),
    # PyTorch 1.13's histc counts NaN in a bin (its float-to-int conversion of NaN): NaN is left
    # out of the reference, as documented for both.
    'histc': lambda a, k: torch.histc(a[0][~torch.isnan(a[0])], k.get('bins', 100),
                                      k.get('min', 0), k.get('max', 0)),
    'unique_consecutive': lambda a, k: tuple(torch.unique_consecutive(
        a[0], return_inverse=True, return_counts=True)),
    # order statistics, paired reductions, scans
    'median': lambda a, k: torch.median(a[0]),
    'median_dim': lambda a, k: tuple(torch.median(a[0], k['dim'], k.get('keepdim', False))),
    'kthvalue': lambda a, k: tuple(torch.kthvalue(a[0], k['k'], k.get('dim', -1),
                                                  k.get('keepdim', False))),
    'mode': lambda a, k: tuple(torch.mode(a[0], k.get('dim', -1), k.get('keepdim', False))),
    'quantile': lambda a, k: torch.quantile(a[0], a[1] if len(a) > 1 else k['q'], k.get('dim'),
                                            k.get('keepdim', False),
                                            interpolation=k.get('interpolation', 'linear')),
    'aminmax': lambda a, k: tuple(torch.aminmax(a[0], dim=k.get('dim'),
                                                keepdim=k.get('keepdim', False))),
    'var_mean': lambda a, k: tuple(torch.var_mean(a[0], k.get('dim'), correction=k.get(
        'correction', 1), keepdim=k.get('keepdim', False))),
    'std_mean': lambda a, k: tuple(torch.std_mean(a[0], k.get('dim'), correction=k.get(
        'correction', 1), keepdim=k.get('keepdim', False))),
    'cummax': lambda a, k: tuple(torch.cummax(a[0], k['dim'])),
    'cummin': lambda a, k: tuple(torch.cummin(a[0], k['dim'])),
    'logcumsumexp': lambda a, k: torch.logcumsumexp(a[0], k['dim']),
    'diff': lambda a, k: torch.diff(a[0], k.get('n', 1), k.get('dim', -1), opt(a, 1), opt(a, 2)),
    # indexing
    'take': lambda a, k: torch.take(a[0], a[1]),
    'take_along_dim': lambda a, k: torch.take_along_dim(a[0], a[1], k.get('dim')),
    'index_put': lambda a, k: a[0].index_put(tuple(a[2:]), a[1], k.get('accumulate', False)),
    'scatter_reduce': lambda a, k: torch.scatter_reduce(a[0], k['dim'], a[1], a[2], k['reduce'],
                                                        include_self=k.get('include_self', True)),
    'masked_scatter': lambda a, k: a[0].masked_scatter(a[1], a[2]),
    # shaping
    'diagonal': lambda a, k: torch.diagonal(a[0], k.get('offset', 0), k.get('dim1', 0),
                                            k.get('dim2', 1)),
    'diag': lambda a, k: torch.diag(a[0], k.get('k', 0)),
    'diag_embed': lambda a, k: torch.diag_embed(a[0], k.get('offset', 0), k.get('dim1', -2),
                                                k.get('dim2', -1)),
    'trace': lambda a, k: torch.trace(a[0]),
    'tril_indices': lambda a, k: torch.tril_indices(k['rows'], k['cols'], k.get('offset', 0)),
    'triu_indices': lambda a, k: torch.triu_indices(k['rows'], k['cols'], k.get('offset', 0)),
    'movedim': lambda a, k: torch.movedim(a[0], k['src'], k['dst']),
    'unbind': lambda a, k: torch.unbind(a[0], k.get('dim', 0)),
    'unflatten': lambda a, k: a[0].unflatten(k['dim'], k['sizes']),
    'tensor_split': lambda a, k: torch.tensor_split(a[0], k['s'], k.get('dim', 0)),
    'hstack': lambda a, k: torch.hstack(a),
    'vstack': lambda a, k: torch.vstack(a),
    'dstack': lambda a, k: torch.dstack(a),
    'tile': lambda a, k: torch.tile(a[0], k['reps']),
    'repeat_interleave': lambda a, k: torch.repeat_interleave(
        a[0], a[1] if len(a) > 1 else k['repeats'], k.get('dim')),
    'rot90': lambda a, k: torch.rot90(a[0], k.get('k', 1), k.get('dims', [0, 1])),
    'broadcast_to': lambda a, k: torch.broadcast_to(a[0], k['shape']),
    'meshgrid': lambda a, k: torch.meshgrid(*a, indexing=k.get('indexing', 'ij')),
    'as_strided': lambda a, k: torch.as_strided(a[0], k['size'], k['stride'], k.get('offset', 0)),
    'logspace': lambda a, k: torch.logspace(k['start'], k['end'], k['steps'], k.get('base', 10)),
    # linear algebra
    'einsum': lambda a, k: torch.einsum(k['eq'], *a),
    'tensordot': lambda a, k: torch.tensordot(a[0], a[1], k.get('dims', 2)),
    'cross': lambda a, k: torch.linalg.cross(a[0], a[1], dim=k.get('dim', -1)),
    'cdist': lambda a, k: torch.cdist(a[0], a[1], k.get('p', 2.0)),
    'addmv': lambda a, k: torch.addmv(a[0], a[1], a[2], beta=k.get('beta', 1),
                                      alpha=k.get('alpha', 1)),
    'addr': lambda a, k: torch.addr(a[0], a[1], a[2], beta=k.get('beta', 1),
                                    alpha=k.get('alpha', 1)),
    'matrix_power': lambda a, k: torch.linalg.matrix_power(a[0], k['n']),
    'inv': lambda a, k: torch.linalg.inv(a[0]),
    'det': lambda a, k: torch.linalg.det(a[0]),
    'slogdet': lambda a, k: tuple(torch.linalg.slogdet(a[0])),
    'solve': lambda a, k: torch.linalg.solve(a[0], a[1]),
    'cholesky': lambda a, k: torch.linalg.cholesky(a[0]),
    'svdvals': lambda a, k: torch.linalg.svdvals(a[0]),
    'eigvalsh': lambda a, k: torch.linalg.eigvalsh(a[0]),
    'lstsq': lambda a, k: lstsq(a[0], a[1]),
    'vector_norm': lambda a, k: torch.linalg.vector_norm(a[0], num(k.get('ord', 2)), k.get('dim'),
                                                         k.get('keepdim', False)),
    'matrix_norm': lambda a, k: torch.linalg.matrix_norm(a[0], num(k.get('ord', 'fro'))),
    # nn.functional
    **{n: (lambda n: lambda a, k: getattr(F, n)(a[0], **k))(n) for n in [
        'logsigmoid', 'hardtanh', 'relu6', 'hardswish', 'hardsigmoid', 'selu', 'celu', 'mish',
        'softsign', 'glu', 'softmin', 'normalize', 'pixel_shuffle', 'pixel_unshuffle',
        'adaptive_max_pool1d', 'max_pool3d', 'avg_pool3d', 'fold', 'pad', 'interpolate']},
    'F_unfold': lambda a, k: F.unfold(a[0], **k),
    'threshold': lambda a, k: F.threshold(a[0], k['threshold'], k['value']),
    'prelu': lambda a, k: F.prelu(a[0], a[1]),
    'F_softplus': lambda a, k: F.softplus(a[0], **k),
    'conv3d': lambda a, k: F.conv3d(a[0], a[1], opt(a, 2), **k),
    **{n: (lambda n: lambda a, k: getattr(F, n)(*a, **k))(n) for n in [
        'huber_loss', 'margin_ranking_loss', 'triplet_margin_loss', 'cosine_embedding_loss',
        'poisson_nll_loss', 'gaussian_nll_loss', 'cosine_similarity', 'pairwise_distance']},
    'embedding_bag': lambda a, k: F.embedding_bag(a[0], a[1], opt(a, 2), **k),
    # PyTorch's CTC backward returns softmax - posterior, the gradient through a log_softmax
    # rather than the one of log_probs itself: both sides take logits and apply log_softmax.
    'ctc_loss': lambda a, k: F.ctc_loss(torch.log_softmax(a[0], -1), a[1], k['input_lengths'],
                                        k['target_lengths'], reduction=k.get('reduction', 'mean')),
})
