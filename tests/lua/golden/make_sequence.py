#!/usr/bin/python3
# Writes tests/lua/golden/sequence.safetensors: PyTorch's RNN, LSTM, GRU and their cells (PyTorch
# 1.13, Debian's python3-torch), in float64, on small random inputs; and Hugging Face's LLaMA
# rotary embedding (its formulas, written here in torch, in float32 as it computes them).
# For each recurrent case: the state_dict
# under "<case>.sd.<PyTorch key>", the input "<case>.x", the initial states ("<case>.h0",
# "<case>.c0") when given, the outputs ("<case>.y", "<case>.hn", "<case>.cn"), the weights of
# the scalar loss ("<case>.ry", "<case>.rh", "<case>.rc": loss = sum(y * ry) + sum(hn * rh) +
# sum(cn * rc)) and its gradients ("<case>.grad.x", "<case>.grad.h0", "<case>.grad.<param>").
# tests/lua/rnn_spec.lua loads the state_dicts by PyTorch's key names and compares; the rotary
# case ("rope.*") is read by tests/lua/nn_rotary_spec.lua.
# The safetensors file is written by hand (a JSON header, then raw little-endian float64), as
# torch 1.13 has no safetensors module.
#
#   /usr/bin/python3 tests/lua/golden/make_sequence.py
import json
import os
import struct

import torch

import golden_io
import torch.nn as nn

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
out = {}


def put(name, t):
    out[name] = t.detach().to(torch.float64).contiguous()


def case(name, m, x, h0=None, c0=None, cell=False):
    x = x.clone().requires_grad_(True)
    states = [s.clone().requires_grad_(True) if s is not None else None for s in (h0, c0)]
    for k, v in m.state_dict().items():
        put(f'{name}.sd.{k}', v)
    put(f'{name}.x', x)
    if states[0] is not None:
        put(f'{name}.h0', states[0])
    if states[1] is not None:
        put(f'{name}.c0', states[1])
    lstm = isinstance(m, (nn.LSTM, nn.LSTMCell))
    hx = (states[0], states[1]) if lstm and states[0] is not None else states[0]
    if cell:
        r = m(x, hx)
        y, hn, cn = (r[0], r[0], r[1]) if lstm else (r, r, None)
    else:
        y, h = m(x, hx)
        hn, cn = (h[0], h[1]) if lstm else (h, None)
    put(f'{name}.y', y)
    put(f'{name}.hn', hn)
    ry, rh = torch.randn_like(y), torch.randn_like(hn)
    loss = (y * ry).sum() + (hn * rh).sum()
    put(f'{name}.ry', ry)
    put(f'{name}.rh', rh)
    if cn is not None:
        put(f'{name}.cn', cn)
        rc = torch.randn_like(cn)
        put(f'{name}.rc', rc)
        loss = loss + (cn * rc).sum()
    wrt = [('x', x)] + [(n, s) for n, s in zip(('h0', 'c0'), states) if s is not None]
    wrt += list(m.named_parameters())
    grads = torch.autograd.grad(loss, [t for _, t in wrt])
    for (n, _), g in zip(wrt, grads):
        put(f'{name}.grad.{n}', g)


# the layers: sequence-first and batch-first, 2 layers, bidirectional, with and without bias and
# initial states, unbatched
case('rnn', nn.RNN(3, 4, num_layers=2, bidirectional=True), torch.randn(5, 2, 3), torch.randn(4, 2, 4))
case('rnn_relu', nn.RNN(3, 4, nonlinearity='relu', batch_first=True, bias=False), torch.randn(2, 5, 3))
case('lstm', nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True), torch.randn(2, 5, 3),
     torch.randn(4, 2, 4), torch.randn(4, 2, 4))
case('lstm_unbatched', nn.LSTM(3, 4, num_layers=2), torch.randn(6, 3))
case('gru', nn.GRU(3, 4, num_layers=2, bidirectional=True), torch.randn(5, 2, 3), torch.randn(4, 2, 4))
case('gru_bf', nn.GRU(3, 5, batch_first=True, bias=False), torch.randn(3, 4, 3), torch.randn(1, 3, 5))
# the cells
case('rnn_cell', nn.RNNCell(3, 4), torch.randn(2, 3), torch.randn(2, 4), cell=True)
case('rnn_cell_relu', nn.RNNCell(3, 4, nonlinearity='relu'), torch.randn(2, 3), cell=True)
case('lstm_cell', nn.LSTMCell(3, 4), torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 4), cell=True)
case('gru_cell', nn.GRUCell(3, 4), torch.randn(2, 3), torch.randn(2, 4), cell=True)
case('gru_cell_unbatched', nn.GRUCell(3, 4, bias=False), torch.randn(3), torch.randn(4), cell=True)



# Hugging Face's LlamaRotaryEmbedding and apply_rotary_pos_emb (transformers 4.40), float32:
# q [B, H, T, D] at positions offset .. offset + T - 1 (0-based, as position_ids).
def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


dim, base, max_len, offset = 8, 10000, 16, 5
inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
t = torch.arange(max_len, dtype=torch.int64).float()
freqs = torch.outer(t, inv_freq)
emb = torch.cat((freqs, freqs), dim=-1)
cos, sin = emb.cos(), emb.sin()
q = torch.randn(2, 3, 4, dim, dtype=torch.float32)
position_ids = torch.arange(offset, offset + 4).unsqueeze(0).expand(2, 4)
q_embed = q * cos[position_ids].unsqueeze(1) + rotate_half(q) * sin[position_ids].unsqueeze(1)
put('rope.cos', cos)
put('rope.sin', sin)
put('rope.q', q)
put('rope.q_embed', q_embed)
# RMSNorm is PyTorch 2.4's (not in 1.13): checked against a float64 formula in its spec.

golden_io.write(out, 'sequence.safetensors', 'tests/lua/golden/make_sequence.py', 'F64')
