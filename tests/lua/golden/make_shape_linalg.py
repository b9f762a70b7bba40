#!/usr/bin/python3
# Writes tests/lua/golden/shape_linalg.safetensors: PyTorch's (1.13, Debian's python3-torch)
# results and gradients for the shaping, indexing and linear algebra functions of
# tests/lua/shape_ext_spec.lua, index_ext_spec.lua and linalg_ext_spec.lua, in float64.
# For each case: its inputs "<case>.in1", "<case>.in2", ... (index tensors as PyTorch's
# 0-based values: the specs add 1), its outputs "<case>.out1", ..., the weights "<case>.r1", ...
# of the scalar loss sum(out_j * r_j), and the gradients "<case>.grad1", ... of the loss with
# respect to each floating-point input (absent for integer inputs).
# The safetensors file is written by hand (a JSON header, then raw little-endian float64), as
# torch 1.13 has no safetensors module.
#
#   /usr/bin/python3 tests/lua/golden/make_shape_linalg.py
import json
import os
import struct

import torch

import golden_io

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = {}


def put(name, t):
    out[name] = t.detach().to(torch.float64).contiguous()


def case(name, f, *inputs, grad=True):
    ins = [t.clone().requires_grad_(True) if t.is_floating_point() else t for t in inputs]
    for i, t in enumerate(ins):
        put(f'{name}.in{i + 1}', t)
    res = f(*ins)
    if not isinstance(res, (tuple, list)):
        res = (res,)
    loss = 0
    for j, o in enumerate(res):
        put(f'{name}.out{j + 1}', o)
        if o.is_floating_point() and o.requires_grad:
            r = torch.randn(o.shape)
            put(f'{name}.r{j + 1}', r)
            loss = loss + (o * r).sum()
    if grad and torch.is_tensor(loss):
        floats = [t for t in ins if t.is_floating_point()]
        grads = torch.autograd.grad(loss, floats, allow_unused=True)
        k = 0
        for i, t in enumerate(ins):
            if t.is_floating_point():
                g = grads[k]
                k += 1
                put(f'{name}.grad{i + 1}', g if g is not None else torch.zeros_like(t))


def randn(*s):
    return torch.randn(*s)


def spd(b, n):
    m = torch.randn(b, n, n)
    return m @ m.transpose(-1, -2) + n * torch.eye(n)


def well(b, n):
    return torch.randn(b, n, n) + n * torch.eye(n)


# ---- shaping
case('diag1', lambda x: torch.diag(x, 1), randn(4))
case('diag2', lambda x: torch.diag(x, -1), randn(3, 4))
case('diagonal', lambda x: torch.diagonal(x, 1, 0, 2), randn(2, 3, 4))
case('diagonal_neg', lambda x: torch.diagonal(x, -2, 2, 1), randn(2, 5, 4))
case('diag_embed', lambda x: torch.diag_embed(x, -1, 0, 2), randn(2, 3))
case('trace', lambda x: torch.trace(x), randn(3, 4))
case('movedim', lambda x: torch.movedim(x, (0, 1), (2, 0)), randn(2, 3, 4))
case('tile', lambda x: torch.tile(x, (2, 1, 2)), randn(2, 3))
case('repeat_interleave', lambda x: torch.repeat_interleave(x, torch.tensor([1, 0, 2]), 1),
     randn(2, 3))
case('rot90', lambda x: torch.rot90(x, 3, (1, 2)), randn(2, 3, 4))
case('unflatten', lambda x: x.unflatten(1, (2, -1)), randn(3, 6))
case('logspace', lambda: torch.logspace(-1, 2, 5, base=3))
# ---- products
case('kron', torch.kron, randn(2, 3), randn(3, 2))
case('cross', lambda a, b: torch.cross(a, b, 1), randn(4, 3), randn(4, 3))
case('cdist2', lambda a, b: torch.cdist(a, b, 2), randn(2, 3, 4), randn(2, 5, 4))
case('cdist1', lambda a, b: torch.cdist(a, b, 1), randn(3, 4), randn(2, 4))
case('cdist3', lambda a, b: torch.cdist(a, b, 3.0), randn(3, 4), randn(2, 4))
case('einsum_bmm', lambda a, b: torch.einsum('bij,bjk->bik', a, b), randn(2, 3, 4), randn(2, 4, 5))
case('einsum_diag', lambda a: torch.einsum('ii->i', a), randn(3, 3))
case('einsum_outer', lambda a, b: torch.einsum('i,j', a, b), randn(3), randn(4))
case('einsum_ellipsis', lambda a, b: torch.einsum('...ij,...jk', a, b), randn(2, 1, 3, 4),
     randn(3, 4, 2))
case('einsum_sum', lambda a: torch.einsum('ijk->kj', a), randn(2, 3, 4))
case('einsum_bilinear', lambda a, b, c: torch.einsum('bn,anm,bm->ba', a, b, c), randn(3, 4),
     randn(5, 4, 6), randn(3, 6))
case('einsum_trace', lambda a, b: torch.einsum('ij,ji', a, b), randn(3, 4), randn(4, 3))
case('tensordot', lambda a, b: torch.tensordot(a, b, ([1, 2], [1, 0])), randn(2, 3, 4),
     randn(4, 3, 5))
case('tensordot_n', lambda a, b: torch.tensordot(a, b, 1), randn(2, 3), randn(3, 4))
case('addmv', lambda c, a, v: torch.addmv(c, a, v, beta=0.5, alpha=2), randn(3), randn(3, 4),
     randn(4))
case('addr', lambda c, u, v: torch.addr(c, u, v, beta=0.5, alpha=2), randn(3, 4), randn(3),
     randn(4))
case('matrix_power3', lambda a: torch.linalg.matrix_power(a, 3), randn(2, 3, 3))
case('matrix_power_neg', lambda a: torch.linalg.matrix_power(a, -2), well(2, 3))
# ---- indexing
case('take', lambda x, i: torch.take(x, i), randn(3, 4), torch.tensor([[0, 5], [11, -1]]))
case('take_along_dim', lambda x, i: torch.take_along_dim(x, i, 1), randn(3, 4),
     torch.tensor([[0, 3], [1, 1], [2, 0]]))
case('take_along_bcast', lambda x, i: torch.take_along_dim(x, i, 0), randn(3, 4),
     torch.tensor([[2], [0]]))
case('index_put', lambda x, i, v: x.index_put((i,), v), randn(4, 3), torch.tensor([0, 2]),
     randn(2, 3))
case('index_put_acc', lambda x, i, v: x.index_put((i,), v, accumulate=True), randn(4, 3),
     torch.tensor([0, 2, 0]), randn(3, 3))
case('index_put2', lambda x, i, j, v: x.index_put((i, j), v, accumulate=True), randn(4, 3),
     torch.tensor([0, 1, 3, 0]), torch.tensor([2, 0, 1, 2]), randn(4))
idx = torch.tensor([[0, 2, 2, 4], [1, 1, 0, 0], [3, 4, 3, 3]])
for red in ['sum', 'prod', 'mean', 'amax', 'amin']:
    for inc in [True, False]:
        case(f'scatter_{red}_{int(inc)}',
             lambda x, i, s, red=red, inc=inc: x.scatter_reduce(1, i, s, red, include_self=inc),
             randn(3, 5), idx, randn(3, 4))
case('scatter_amax_part', lambda x, i, s: x.scatter_reduce(0, i, s, 'amax', include_self=False),
     randn(4, 3), torch.tensor([[1, 3], [1, 0]]), randn(2, 2))
case('masked_scatter', lambda x, m, s: x.masked_scatter(m, s), randn(3, 4),
     torch.rand(3, 4) > 0.5, randn(12))
case('masked_scatter_bcast', lambda x, m, s: x.masked_scatter(m, s), randn(3, 4),
     torch.tensor([True, False, False, True]), randn(7))
# ---- ember.linalg
case('inv', torch.linalg.inv, well(2, 3))
case('det', torch.linalg.det, well(2, 3))
case('slogdet', lambda a: torch.linalg.slogdet(a), torch.randn(2, 4, 4))
case('solve', torch.linalg.solve, well(2, 3), randn(2, 3, 2))
case('solve_vec', torch.linalg.solve, well(2, 3), randn(3))
case('solve_bcast', torch.linalg.solve, well(1, 3), randn(2, 3, 2))
case('cholesky', lambda a: torch.linalg.cholesky(a), spd(2, 3))
case('cholesky_upper', lambda a: torch.linalg.cholesky(a, upper=True), spd(1, 4))
case('qr', lambda a: torch.linalg.qr(a), randn(4, 3))
case('qr_complete', lambda a: torch.linalg.qr(a, 'complete'), randn(4, 3), grad=False)
case('qr_wide', lambda a: torch.linalg.qr(a), randn(2, 3, 5))
case('svdvals', torch.linalg.svdvals, randn(2, 4, 3))
# Singular vectors are unique up to sign: the losses read them through sign-free products.
reduced = lambda a: torch.linalg.svd(a, full_matrices=False)
case('svd_uv', lambda a: (lambda u, s, vh: (u @ vh, s))(*reduced(a)), randn(2, 4, 3))
case('svd_uv_wide', lambda a: (lambda u, s, vh: (u @ vh, s))(*reduced(a)), randn(3, 5))
case('svd_full_sq', lambda a: (lambda u, s, vh: (u[..., :3] ** 2, vh ** 2))(*torch.linalg.svd(a)),
     randn(4, 3))
case('eigvalsh', torch.linalg.eigvalsh, spd(2, 4))
case('eigh_vec', lambda a: torch.linalg.eigh(a)[1].abs(), spd(1, 4))
case('lstsq', lambda a, b: torch.linalg.lstsq(a, b).solution, randn(5, 3), randn(5, 2))
case('lstsq_batch', lambda a, b: torch.linalg.lstsq(a, b).solution, randn(2, 4, 2), randn(2, 4, 3))
for ordname, o in [('2', 2), ('1', 1), ('inf', float('inf')), ('ninf', float('-inf')),
                   ('0', 0), ('3p5', 3.5)]:
    case(f'vector_norm_{ordname}', lambda x, o=o: torch.linalg.vector_norm(x, o, dim=1),
         randn(3, 4))
case('vector_norm_all', lambda x: torch.linalg.vector_norm(x), randn(3, 4))
for ordname, o in [('fro', 'fro'), ('nuc', 'nuc'), ('1', 1), ('n1', -1), ('inf', float('inf')),
                   ('ninf', float('-inf')), ('2', 2), ('n2', -2)]:
    case(f'matrix_norm_{ordname}', lambda x, o=o: torch.linalg.matrix_norm(x, o), randn(2, 3, 4))
case('matrix_norm_dims', lambda x: torch.linalg.matrix_norm(x, 1, dim=(2, 0), keepdim=True),
     randn(3, 2, 4))

golden_io.write(out, 'shape_linalg.safetensors', 'tests/lua/golden/make_shape_linalg.py', 'F64')
