#!/usr/bin/python3
# Writes tests/lua/golden/transformer.safetensors: PyTorch's MultiheadAttention and Transformer
# layers (PyTorch 1.13, Debian's python3-torch) on small random inputs: each case's state_dict
# under "<case>.sd.<PyTorch key>", its inputs, outputs and the gradients of a weighted sum of
# the output. tests/lua/transformer_spec.lua loads the state_dicts by PyTorch's key names and
# compares. The safetensors file is written here by hand (a JSON header and raw little-endian
# float32), so no Python package beyond torch is needed.
#
#   /usr/bin/python3 tests/lua/golden/make_transformer.py
import json
import os
import struct

import torch

import golden_io
import torch.nn as nn

torch.manual_seed(0)
out = {}


def put(name, t):
    out[name] = t.detach().to(torch.float32).contiguous()


def put_sd(case, m):
    for k, v in m.state_dict().items():
        put(f'{case}.sd.{k}', v)


def grads(case, y, wrt):
    r = torch.randn_like(y)
    put(f'{case}.r', r)
    g = torch.autograd.grad((y * r).sum(), [t for _, t in wrt])
    for (name, _), gi in zip(wrt, g):
        put(f'{case}.grad.{name}', gi)


def bool_mask(*shape, p=0.3):
    m = torch.rand(*shape) < p
    return m


# --- MultiheadAttention, sequence-first, cross-attention, both masks, weights averaged --------
m = nn.MultiheadAttention(8, 2)
q, k, v = torch.randn(5, 3, 8, requires_grad=True), torch.randn(6, 3, 8), torch.randn(6, 3, 8)
kpm = bool_mask(3, 6)
kpm[:, 0] = False  # every query keeps one key
am = torch.randn(5, 6)
y, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am)
put_sd('mha', m)
for n, t in [('q', q), ('k', k), ('v', v), ('kpm', kpm), ('am', am), ('y', y), ('w', w)]:
    put(f'mha.{n}', t)
grads('mha', y, [('q', q), ('in_proj_weight', m.in_proj_weight)])
y2, _ = m(q, k, v, key_padding_mask=kpm, attn_mask=am, need_weights=False)
put('mha.y_fused', y2)
y3, w3 = m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
put('mha.w_heads', w3)

# --- self-attention, batch_first, causal bool mask, fused -----------------------------------
m = nn.MultiheadAttention(12, 3, batch_first=True)
x = torch.randn(2, 7, 12, requires_grad=True)
causal = torch.ones(7, 7, dtype=torch.bool).triu(1)
y, _ = m(x, x, x, attn_mask=causal, need_weights=False)
put_sd('self', m)
put('self.x', x)
put('self.y', y)
grads('self', y, [('x', x), ('in_proj_weight', m.in_proj_weight), ('out_proj.weight', m.out_proj.weight)])

# --- kdim/vdim, add_bias_kv, add_zero_attn, unbatched ----------------------------------------
m = nn.MultiheadAttention(8, 4, kdim=5, vdim=3, add_bias_kv=True, add_zero_attn=True)
q, k, v = torch.randn(4, 8), torch.randn(6, 5), torch.randn(6, 3)
y, w = m(q, k, v)
put_sd('kv', m)
for n, t in [('q', q), ('k', k), ('v', v), ('y', y), ('w', w)]:
    put(f'kv.{n}', t)

# --- TransformerEncoderLayer: post-norm relu; pre-norm gelu batch_first -------------------------
torch.manual_seed(1)
m = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0)
x = torch.randn(6, 2, 16, requires_grad=True)
kpm = bool_mask(2, 6)
kpm[:, 0] = False
mask = nn.Transformer.generate_square_subsequent_mask(6)
y = m(x, src_mask=mask, src_key_padding_mask=kpm)
put_sd('enc', m)
for n, t in [('x', x), ('kpm', kpm), ('mask', mask), ('y', y)]:
    put(f'enc.{n}', t)
grads('enc', y, [('x', x), ('linear1.weight', m.linear1.weight), ('self_attn.in_proj_weight', m.self_attn.in_proj_weight)])

m = nn.TransformerEncoderLayer(16, 2, dim_feedforward=24, dropout=0.0, activation='gelu',
                               norm_first=True, batch_first=True)
x = torch.randn(3, 5, 16, requires_grad=True)
y = m(x)
put_sd('encpre', m)
put('encpre.x', x)
put('encpre.y', y)
grads('encpre', y, [('x', x), ('norm1.weight', m.norm1.weight)])

# --- TransformerDecoderLayer ------------------------------------------------------------------
m = nn.TransformerDecoderLayer(16, 4, dim_feedforward=32, dropout=0.0)
t = torch.randn(5, 2, 16, requires_grad=True)
mem = torch.randn(7, 2, 16, requires_grad=True)
tmask = nn.Transformer.generate_square_subsequent_mask(5)
mkpm = bool_mask(2, 7)
mkpm[:, 0] = False
y = m(t, mem, tgt_mask=tmask, memory_key_padding_mask=mkpm)
put_sd('dec', m)
for n, tt in [('t', t), ('mem', mem), ('tmask', tmask), ('mkpm', mkpm), ('y', y)]:
    put(f'dec.{n}', tt)
grads('dec', y, [('t', t), ('mem', mem), ('multihead_attn.in_proj_weight', m.multihead_attn.in_proj_weight)])

# --- a whole encoder-decoder Transformer: layers.0..., encoder.norm ---------------------------
m = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                   dim_feedforward=16, dropout=0.0, batch_first=True)
src = torch.randn(2, 6, 8, requires_grad=True)
tgt = torch.randn(2, 4, 8)
y = m(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))
put_sd('tr', m)
for n, tt in [('src', src), ('tgt', tgt), ('y', y)]:
    put(f'tr.{n}', tt)
grads('tr', y, [('src', src)])

golden_io.write(out, 'transformer.safetensors', 'tests/lua/golden/make_transformer.py', 'F32')
