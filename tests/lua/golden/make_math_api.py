#!/usr/bin/python3
# Writes tests/lua/golden/math_api.safetensors: PyTorch's results (PyTorch 1.13, Debian's
# python3-torch) for the elementwise math, comparisons, order statistics, scans, searching and
# counting functions, in float64, on small random inputs and on special values (inf, NaN,
# signed zeros, arguments outside the domains). Index results are stored 1-based (PyTorch's
# + 1), as Ember's Lua API gives them; searchsorted/bucketize positions likewise. Read by
# tests/lua/math_ext_spec.lua, reduce_ext_spec.lua and search_spec.lua.
# The safetensors file is written by hand (a JSON header, then raw little-endian float64), as
# torch 1.13 has no safetensors module.
#
#   /usr/bin/python3 tests/lua/golden/make_math_api.py
import json
import math
import os
import struct

import torch

import golden_io

torch.manual_seed(0)
f64 = torch.float64
out = {}


def put(name, t):
    if isinstance(t, (bool, int, float)):
        t = torch.tensor(float(t), dtype=f64)
    out[name] = t.detach().to(f64).contiguous()


inf, nan = math.inf, math.nan
special = torch.tensor([-inf, -10, -2.5, -1, -0.75, -0.5, -1e-3, -0.0, 0.0, 1e-3, 0.25, 0.5,
                        0.9, 1, 1.5, 2, 3.7, 10, 30, inf, nan], dtype=f64)
put('special', special)
rnd = torch.randn(4, 5, dtype=f64)
put('rnd', rnd)

# ---- unary ---------------------------------------------------------------------------------
for name in ['asin', 'acos', 'atan', 'sinh', 'cosh', 'asinh', 'acosh', 'atanh', 'log2', 'log10',
             'exp2', 'erfc', 'erfinv', 'lgamma', 'digamma', 'frac']:
    put(f'{name}.special', getattr(torch, name)(special))
    put(f'{name}.rnd', getattr(torch, name)(rnd))
put('logit.special', torch.logit(special))
put('logit.eps', torch.logit(special, eps=0.1))
put('nan_to_num.special', torch.nan_to_num(special))
put('nan_to_num.args', torch.nan_to_num(special, nan=7.0, posinf=100.0, neginf=-100.0))

# ---- gradients: d(sum(f(x) * w))/dx on inputs inside each domain ------------------------------
domains = {'asin': (-0.9, 0.9), 'acos': (-0.9, 0.9), 'atan': (-3, 3), 'sinh': (-3, 3),
           'cosh': (-3, 3), 'asinh': (-3, 3), 'acosh': (1.2, 4), 'atanh': (-0.9, 0.9),
           'log2': (0.2, 5), 'log10': (0.2, 5), 'exp2': (-3, 3), 'erfc': (-2, 2),
           'erfinv': (-0.95, 0.95), 'lgamma': (-3.5, 6), 'digamma': (-3.5, 6), 'frac': (-3, 3),
           'logit': (0.05, 0.95)}
gw = torch.randn(4, 5, dtype=f64)
put('grad.w', gw)
for name, (lo, hi) in domains.items():
    gx = (lo + (hi - lo) * torch.rand(4, 5, dtype=f64)).requires_grad_(True)
    (getattr(torch, name)(gx) * gw).sum().backward()
    put(f'grad.{name}.x', gx)
    put(f'grad.{name}', gx.grad)
gy = torch.randn(4, 5, dtype=f64)
put('grad.y', gy)
for name in ['hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin']:
    ga = (0.1 + torch.rand(4, 5, dtype=f64)).requires_grad_(True)
    gb = gy.clone().requires_grad_(True)
    (getattr(torch, name)(ga, gb) * gw).sum().backward()
    put(f'grad.{name}.a', ga)
    put(f'grad.{name}.da', ga.grad)
    if gb.grad is not None:
        put(f'grad.{name}.db', gb.grad)

# ---- binary on every pair of special values ------------------------------------------------
a, b = special.view(-1, 1), special.view(1, -1)
for name in ['hypot', 'copysign', 'logaddexp', 'xlogy', 'fmax', 'fmin']:
    put(f'{name}.pairs', getattr(torch, name)(a, b))
put('heaviside.pairs', torch.heaviside(a, b))
A, B = a.expand(21, 21), b.expand(21, 21)
put('isclose.pairs', torch.isclose(A, B))
put('isclose.nan', torch.isclose(A, B, rtol=0.1, atol=0.01, equal_nan=True))
ia = torch.tensor([12, 18, -7, 0, 0, 48, -36, 1, 1071, 2**40], dtype=torch.int64)
ib = torch.tensor([8, 27, 21, 5, 0, -18, -24, 1, 462, 6 * 2**20], dtype=torch.int64)
put('gcd.a', ia)
put('gcd.b', ib)
put('gcd', torch.gcd(ia, ib))
put('lcm', torch.lcm(ia[:-1], ib[:-1]))
el = torch.tensor([[1., 2., 3.], [4., nan, 6.], [-0.0, inf, 2.5]], dtype=f64)
te = torch.tensor([2., 0.0, inf, 6., 9., nan], dtype=f64)
put('isin.el', el)
put('isin.te', te)
put('isin', torch.isin(el, te))

# ---- order statistics and scans --------------------------------------------------------------
x = torch.randn(5, 6, dtype=f64)
put('x', x)
for d in (1, 2):
    v, i = torch.median(x, d - 1)
    put(f'median.{d}.v', v)
    put(f'median.{d}.i', i + 1)
    v, i = torch.kthvalue(x, 3, d - 1)
    put(f'kthvalue.{d}.v', v)
    put(f'kthvalue.{d}.i', i + 1)
    for name in ['cummax', 'cummin']:
        v, i = getattr(torch, name)(x, d - 1)
        put(f'{name}.{d}.v', v)
        put(f'{name}.{d}.i', i + 1)
    put(f'logcumsumexp.{d}', torch.logcumsumexp(x, d - 1))
    put(f'diff.{d}', torch.diff(x, dim=d - 1))
    put(f'diff2.{d}', torch.diff(x, n=2, dim=d - 1, prepend=x.narrow(d - 1, 0, 1),
                                 append=x.narrow(d - 1, 0, 2)))
    v, m = torch.var_mean(x, d - 1)
    put(f'var_mean.{d}.v', v)
    put(f'var_mean.{d}.m', m)
    v, m = torch.std_mean(x, d - 1, unbiased=False, keepdim=True)
    put(f'std_mean.{d}.v', v)
    put(f'std_mean.{d}.m', m)
put('median.all', torch.median(x))
xn = x.clone()
xn[1, 2] = nan
xn[3, 0] = nan
xn[3, 4] = nan
put('xn', xn)
v, i = torch.median(xn, 1)
put('median.nan.v', v)
put('median.nan.i', i + 1)
v, i = torch.cummax(xn, 1)
put('cummax.nan.v', v)
put('cummax.nan.i', i + 1)
put('logcumsumexp.inf', torch.logcumsumexp(torch.tensor([-inf, -inf, 0.0, inf, 1.0, -inf], dtype=f64), 0))
put('logcumsumexp.big', torch.logcumsumexp(torch.tensor([-1000.0, 0.0, 1000.0, 999.0], dtype=f64), 0))
ints = torch.randint(0, 4, (4, 9))
put('ints', ints)
v, i = torch.mode(ints, 1)
put('mode.v', v)
put('mode.i', i + 1)
q = torch.tensor([0.0, 0.1, 0.5, 0.77, 1.0], dtype=f64)
put('q', q)
for interp in ['linear', 'lower', 'higher', 'midpoint', 'nearest']:
    put(f'quantile.{interp}', torch.quantile(x, q, dim=1, interpolation=interp))
put('quantile.all', torch.quantile(x, 0.3))
put('quantile.keep', torch.quantile(x, q, dim=0, keepdim=True))
put('quantile.nan', torch.quantile(xn, 0.5, dim=1))

# ---- searching and counting ------------------------------------------------------------------
seq = torch.sort(torch.randn(7, dtype=f64)).values
put('seq', seq)
vals = torch.cat([torch.randn(3, 4, dtype=f64).view(-1), seq[:3], torch.tensor([-inf, inf, nan], dtype=f64)])
put('vals', vals)
put('searchsorted.left', torch.searchsorted(seq, vals) + 1)
put('searchsorted.right', torch.searchsorted(seq, vals, right=True) + 1)
seq2 = torch.sort(torch.randn(3, 6, dtype=f64), dim=1).values
vals2 = torch.randn(3, 4, dtype=f64)
vals2[0, 1] = seq2[0, 2]
put('seq2', seq2)
put('vals2', vals2)
put('searchsorted.batch', torch.searchsorted(seq2, vals2) + 1)
put('searchsorted.batch_right', torch.searchsorted(seq2, vals2, side='right') + 1)
bounds = torch.tensor([-1.0, 0.0, 0.5, 2.0], dtype=f64)
put('bounds', bounds)
put('bucketize', torch.bucketize(special, bounds) + 1)
put('bucketize.right', torch.bucketize(special, bounds, right=True) + 1)
bins_in = torch.randint(0, 8, (30,))
w = torch.randn(30, dtype=f64)
put('bincount.in', bins_in)
put('bincount.w', w)
put('bincount', torch.bincount(bins_in))
put('bincount.weights', torch.bincount(bins_in, w))
put('bincount.min', torch.bincount(bins_in, minlength=12))
hx = torch.randn(50, dtype=f64)
put('histc.in', hx)
put('histc', torch.histc(hx, bins=7, min=-1.5, max=1.5))
put('histc.auto', torch.histc(hx, bins=5))
uc = torch.tensor([1, 1, 2, 2, 3, 1, 1, 2, 2, 2], dtype=f64)
put('uc.in', uc)
v, inv, cnt = torch.unique_consecutive(uc, return_inverse=True, return_counts=True)
put('uc.v', v)
put('uc.inv', inv + 1)
put('uc.cnt', cnt)
ucm = torch.tensor([[1, 1, 2, 2, 2], [3, 3, 1, 1, 4], [0, 0, 0, 0, 0]], dtype=f64)
put('ucm.in', ucm)
v, inv, cnt = torch.unique_consecutive(ucm, return_inverse=True, return_counts=True, dim=1)
put('ucm.v', v)
put('ucm.inv', inv + 1)
put('ucm.cnt', cnt)
v, inv, cnt = torch.unique_consecutive(ucm[[0, 0, 1, 2, 2]], return_inverse=True, return_counts=True, dim=0)
put('ucm0.v', v)
put('ucm0.inv', inv + 1)
put('ucm0.cnt', cnt)

golden_io.write(out, 'math_api.safetensors', 'tests/lua/golden/make_math_api.py', 'F64')
