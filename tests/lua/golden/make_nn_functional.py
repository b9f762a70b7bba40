#!/usr/bin/python3
# Writes tests/lua/golden/nn_functional.safetensors: PyTorch's (1.13, Debian's python3-torch)
# outputs of the nn.functional activations, losses, padding, interpolation, distances, pixel
# shuffle, unfold/fold, embedding_bag, conv3d, 3-D pooling, adaptive max pooling and CTC on
# small random inputs. Each case stores its inputs "<case>.in.<name>", its output
# "<case>.out" (and "<case>.idx" for pooling indices, 0-based as PyTorch's), a random weight
# "<case>.r" and the gradients "<case>.grad.<name>" of sum(out * r) for the float inputs.
# tests/lua/nn_functional_ext_spec.lua, loss_ext_spec.lua and conv3d_spec.lua run the same
# calls in Ember (1-based indices) and compare. Everything is stored as float32 (integer
# inputs too: small values, exact), the file written by hand as in make_transformer.py.
#
#   /usr/bin/python3 tests/lua/golden/make_nn_functional.py
import json
import warnings
import os
import struct

import torch

import golden_io
import torch.nn.functional as F

torch.manual_seed(0)
warnings.filterwarnings('ignore', message='Using padding=.same.')
out = {}


def put(name, t):
    out[name] = t.detach().to(torch.float32).contiguous()


def case(name, fn, inputs, idx=False):
    """inputs: name -> tensor; float tensors get gradients."""
    leaves = {}
    for k, v in inputs.items():
        if v.is_floating_point():  # the values the float32 file holds, so both sides agree
            v = v.to(torch.float32).to(torch.float64)
        put(f'{name}.in.{k}', v)
        if v.is_floating_point():
            leaves[k] = v.detach().clone().double().requires_grad_()
        else:
            leaves[k] = v
    res = fn(**leaves)
    y, ind = (res if idx else (res, None))
    put(f'{name}.out', y)
    if ind is not None:
        put(f'{name}.idx', ind)
    wrt = [(k, t) for k, t in leaves.items() if t.is_floating_point()]
    if y.requires_grad and wrt:
        r = torch.randn(y.shape, dtype=torch.float64)
        put(f'{name}.r', r)
        g = torch.autograd.grad((y * r).sum(), [t for _, t in wrt], allow_unused=True)
        for (k, t), gi in zip(wrt, g):
            put(f'{name}.grad.{k}', gi if gi is not None else torch.zeros_like(t))


def rn(*shape, scale=1.0):
    return torch.randn(*shape, dtype=torch.float64) * scale


# --- activations ------------------------------------------------------------------------------
x = rn(3, 4, 5, scale=3)
case('logsigmoid', lambda x: F.logsigmoid(x), {'x': x})
case('hardtanh', lambda x: F.hardtanh(x, -1.5, 2.0), {'x': x})
case('relu6', lambda x: F.relu6(x), {'x': x * 3})
case('hardswish', lambda x: F.hardswish(x), {'x': x})
case('hardsigmoid', lambda x: F.hardsigmoid(x), {'x': x})
case('selu', lambda x: F.selu(x), {'x': x})
case('celu', lambda x: F.celu(x, alpha=1.5), {'x': x})
case('mish', lambda x: F.mish(x), {'x': x})
case('softsign', lambda x: F.softsign(x), {'x': x})
case('glu_last', lambda x: F.glu(x), {'x': rn(3, 4, 6)})
case('glu_dim1', lambda x: F.glu(x, dim=1), {'x': rn(3, 4, 5)})
case('threshold', lambda x: F.threshold(x, 0.2, -3.0), {'x': x})
case('prelu', lambda x, w: F.prelu(x, w), {'x': x, 'w': torch.tensor([0.1, -0.2, 0.3, 0.5], dtype=torch.float64)})
case('prelu1', lambda x, w: F.prelu(x, w), {'x': x, 'w': torch.tensor([0.25], dtype=torch.float64)})
case('softmin', lambda x: F.softmin(x, dim=1), {'x': x})
case('softplus', lambda x: F.softplus(x, beta=2, threshold=5), {'x': x})

# --- losses -----------------------------------------------------------------------------------
a, b = rn(6, 5), rn(6, 5)
for red in ['mean', 'sum', 'none']:
    case(f'huber_{red}', lambda a, b: F.huber_loss(a, b, reduction=red, delta=0.7), {'a': a, 'b': b})
x1, x2, y = rn(8), rn(8), torch.tensor([1., -1, 1, 1, -1, -1, 1, -1], dtype=torch.float64)
case('margin_ranking', lambda x1, x2, y: F.margin_ranking_loss(x1, x2, y, margin=0.3), {'x1': x1, 'x2': x2, 'y': y})
case('margin_ranking_none', lambda x1, x2, y: F.margin_ranking_loss(x1, x2, y, reduction='none'), {'x1': x1, 'x2': x2, 'y': y})
an, po, ne = rn(5, 4), rn(5, 4), rn(5, 4)
case('triplet', lambda an, po, ne: F.triplet_margin_loss(an, po, ne, margin=0.5), {'an': an, 'po': po, 'ne': ne})
case('triplet_swap_p1', lambda an, po, ne: F.triplet_margin_loss(an, po, ne, margin=1.5, p=1, swap=True, reduction='none'),
     {'an': an, 'po': po, 'ne': ne})
ce_y = torch.tensor([1., -1, 1, -1, 1], dtype=torch.float64)
case('cosine_embedding', lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.2), {'a': an, 'b': po, 'y': ce_y})
case('cosine_embedding_none', lambda a, b, y: F.cosine_embedding_loss(a, b, y, reduction='none'), {'a': an, 'b': po, 'y': ce_y})
tgt = torch.poisson(torch.rand(6, 5, dtype=torch.float64) * 4)
case('poisson_log', lambda a, t: F.poisson_nll_loss(a, t), {'a': a, 't': tgt})
case('poisson_full', lambda a, t: F.poisson_nll_loss(a, t, log_input=False, full=True, reduction='sum'),
     {'a': a.abs() + 0.1, 't': tgt})
var = torch.rand(6, 5, dtype=torch.float64) + 0.05
case('gaussian', lambda a, b, v: F.gaussian_nll_loss(a, b, v), {'a': a, 'b': b, 'v': var})
case('gaussian_col_full', lambda a, b, v: F.gaussian_nll_loss(a, b, v, full=True, reduction='none'),
     {'a': a, 'b': b, 'v': var[:, :1]})
case('gaussian_eps', lambda a, b, v: F.gaussian_nll_loss(a, b, v, eps=0.1, reduction='sum'), {'a': a, 'b': b, 'v': var})

# CTC: T = 7, N = 3, C = 5 (blank 0); repeated labels need a blank between them.
logits = rn(7, 3, 5)
il = torch.tensor([7, 6, 7])
tl = torch.tensor([3, 2, 0])
tg = torch.tensor([[1, 2, 2], [3, 1, 0], [0, 0, 0]])
for red in ['mean', 'sum', 'none']:
    case(f'ctc_{red}', lambda z, t, il, tl: F.ctc_loss(z.log_softmax(2), t, il, tl, reduction=red),
         {'z': logits, 't': tg, 'il': il, 'tl': tl})
case('ctc_concat_blank', lambda z, t, il, tl: F.ctc_loss(z.log_softmax(2), t, il, tl, blank=4, reduction='none'),
     {'z': logits, 't': torch.tensor([1, 2, 2, 3, 1]), 'il': il, 'tl': torch.tensor([3, 2, 0])})
# impossible: 3 labels with a repeat need 4 frames; zero_infinity zeroes it
case('ctc_zero_inf', lambda z, t, il, tl: F.ctc_loss(z.log_softmax(2), t, il, tl, reduction='none', zero_infinity=True),
     {'z': logits, 't': tg, 'il': torch.tensor([3, 6, 7]), 'tl': tl})

# --- linear -----------------------------------------------------------------------------------
case('linear', lambda x, w, b: F.linear(x, w, b), {'x': rn(2, 3, 4), 'w': rn(5, 4), 'b': rn(5)})
case('linear_1d', lambda x, w: F.linear(x, w), {'x': rn(4), 'w': rn(5, 4)})

# --- pad --------------------------------------------------------------------------------------
p = rn(2, 3, 4, 5)
case('pad_constant', lambda x: F.pad(x, (1, 2, 0, 1, 2, 0), value=0.5), {'x': p})
case('pad_negative', lambda x: F.pad(x, (-1, 2, 1, -2)), {'x': p})
case('pad_reflect', lambda x: F.pad(x, (2, 1, 3, 1), mode='reflect'), {'x': p})
case('pad_replicate', lambda x: F.pad(x, (1, 2, 2, 0, 1, 1), mode='replicate'), {'x': rn(1, 2, 3, 4, 5)})
case('pad_circular', lambda x: F.pad(x, (2, 3), mode='circular'), {'x': rn(2, 3, 4)})
case('pad_reflect1d', lambda x: F.pad(x, (3, 2), mode='reflect'), {'x': rn(2, 3, 5)})

# --- interpolate ------------------------------------------------------------------------------
im = rn(2, 3, 4, 5)
case('interp_nearest_sf', lambda x: F.interpolate(x, scale_factor=2), {'x': im})
case('interp_nearest_size', lambda x: F.interpolate(x, size=(7, 3)), {'x': im})
# two channels: PyTorch 1.13's general path (its single-channel 2-D path special-cases 1x, 2x)
case('interp_nearest_sf21', lambda x: F.interpolate(x, scale_factor=2.1), {'x': rn(1, 2, 5, 3)})
case('interp_nearest_sf11', lambda x: F.interpolate(x, scale_factor=1.1), {'x': rn(1, 2, 5, 4)})
case('interp_nearest_3', lambda x: F.interpolate(x, size=(12, 7)), {'x': rn(1, 1, 5, 3)})
case('interp_nearest_exact', lambda x: F.interpolate(x, size=(7, 8), mode='nearest-exact'), {'x': im})
case('interp_bilinear', lambda x: F.interpolate(x, size=(7, 9), mode='bilinear'), {'x': im})
case('interp_bilinear_ac', lambda x: F.interpolate(x, size=(7, 9), mode='bilinear', align_corners=True), {'x': im})
case('interp_bilinear_sf', lambda x: F.interpolate(x, scale_factor=1.5, mode='bilinear'), {'x': im})
case('interp_bilinear_down', lambda x: F.interpolate(x, size=(3, 2), mode='bilinear'), {'x': im})
case('interp_linear', lambda x: F.interpolate(x, size=9, mode='linear', align_corners=True), {'x': rn(2, 3, 5)})
case('interp_trilinear', lambda x: F.interpolate(x, scale_factor=(2, 1.5, 1), mode='trilinear'), {'x': rn(1, 2, 3, 4, 3)})
case('interp_area', lambda x: F.interpolate(x, size=(3, 2), mode='area'), {'x': im})

# --- distances --------------------------------------------------------------------------------
case('normalize', lambda x: F.normalize(x), {'x': p})
case('normalize_p1', lambda x: F.normalize(x, p=1, dim=-1), {'x': p})
case('cosine_similarity', lambda a, b: F.cosine_similarity(a, b), {'a': rn(4, 6, 3), 'b': rn(4, 6, 3)})
case('cosine_similarity_bcast', lambda a, b: F.cosine_similarity(a, b, dim=-1), {'a': rn(4, 6), 'b': rn(1, 6)})
case('pairwise_distance', lambda a, b: F.pairwise_distance(a, b), {'a': rn(5, 4), 'b': rn(5, 4)})
case('pairwise_distance_p3', lambda a, b: F.pairwise_distance(a, b, p=3, keepdim=True), {'a': rn(5, 4), 'b': rn(5, 4)})

# --- pixel shuffle, unfold / fold -------------------------------------------------------------
case('pixel_shuffle', lambda x: F.pixel_shuffle(x, 2), {'x': rn(2, 8, 3, 2)})
case('pixel_unshuffle', lambda x: F.pixel_unshuffle(x, 2), {'x': rn(2, 3, 4, 6)})
case('unfold', lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), {'x': rn(2, 3, 5, 6)})
case('unfold_plain', lambda x: F.unfold(x, 2), {'x': rn(1, 2, 3, 4)})
cols = rn(2, 3 * 6, 12)  # output (5, 6), kernel (2, 3), dilation (1, 2), padding 1, stride (2, 1): 3 x 4 blocks
case('fold', lambda x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), {'x': cols})
case('fold_overlap', lambda x: F.fold(x, (4, 4), 3), {'x': rn(1, 2 * 9, 4)})

# --- embedding_bag ----------------------------------------------------------------------------
w = rn(10, 3)
ids = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 7])
offs = torch.tensor([0, 3, 3, 7])  # bag 2 empty
for mode in ['sum', 'mean', 'max']:
    case(f'bag_{mode}', lambda w, i, o: F.embedding_bag(i, w, o, mode=mode), {'w': w, 'i': ids, 'o': offs})
case('bag_psw', lambda w, i, o, s: F.embedding_bag(i, w, o, mode='sum', per_sample_weights=s),
     {'w': w, 'i': ids, 'o': offs, 's': rn(10)})
case('bag_pad_last', lambda w, i, o: F.embedding_bag(i, w, o, mode='mean', padding_idx=4, include_last_offset=True),
     {'w': w, 'i': ids, 'o': torch.tensor([0, 3, 7, 10])})
case('bag_2d_max', lambda w, i: F.embedding_bag(i, w, mode='max'), {'w': w, 'i': torch.tensor([[1, 2, 3], [9, 0, 9]])})

# --- conv3d, 3-D pooling, adaptive max pooling ------------------------------------------------
v = rn(2, 2, 5, 6, 5)
case('conv3d', lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1)),
     {'x': v, 'w': rn(3, 2, 2, 3, 2), 'b': rn(3)})
case('conv3d_groups', lambda x, w: F.conv3d(x, w, None, stride=2, groups=2), {'x': v, 'w': rn(4, 1, 3, 2, 2)})
case('conv3d_same', lambda x, w: F.conv3d(x, w, padding='same'), {'x': v[:1], 'w': rn(2, 2, 2, 3, 4)})
case('conv3d_unbatched', lambda x, w, b: F.conv3d(x, w, b, padding=1), {'x': v[0], 'w': rn(2, 2, 3, 3, 3), 'b': rn(2)})
case('max_pool3d', lambda x: F.max_pool3d(x, 2, return_indices=True), {'x': v}, idx=True)
case('max_pool3d_full', lambda x: F.max_pool3d(x, (3, 2, 2), stride=(2, 1, 2), padding=(1, 1, 0), dilation=(1, 2, 1),
                                               ceil_mode=True, return_indices=True), {'x': v}, idx=True)
case('avg_pool3d', lambda x: F.avg_pool3d(x, 2), {'x': v})
case('avg_pool3d_pad', lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, ceil_mode=True), {'x': v})
case('avg_pool3d_excl', lambda x: F.avg_pool3d(x, (3, 2, 3), stride=(2, 2, 1), padding=(1, 1, 1),
                                               count_include_pad=False), {'x': v})
case('avg_pool3d_div', lambda x: F.avg_pool3d(x, 2, stride=1, divisor_override=3), {'x': v})
case('adaptive_max1d', lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), {'x': rn(2, 3, 9)}, idx=True)
case('adaptive_max2d', lambda x: F.adaptive_max_pool2d(x, (3, 2), return_indices=True), {'x': rn(2, 3, 7, 5)}, idx=True)

golden_io.write(out, 'nn_functional.safetensors', 'tests/lua/golden/make_nn_functional.py', 'F32')
