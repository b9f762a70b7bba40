#!/usr/bin/python3
# Writes tests/lua/golden/autocast_dtypes.lua: the dtype of each op's result under
# torch.autocast('cpu', dtype=torch.bfloat16) (PyTorch 1.13, Debian's python3-torch), or
# 'error' when PyTorch refuses the call. tests/lua/autocast_spec.lua runs the same cases in
# Ember (case names match) and lists where Ember deliberately differs.
#
#   /usr/bin/python3 tests/lua/golden/make_autocast.py
#
# Case names are op/operand dtypes: f32, bf16, f64, i64 (w32: a float32 weight).
import os
import torch
import torch.nn.functional as F

torch.manual_seed(0)
f32, bf, f64 = torch.float32, torch.bfloat16, torch.float64

x = torch.randn(4, 6)
xb = x.to(bf)
w = torch.randn(6, 3)
v = torch.randn(6)
vb = v.to(bf)
b3 = torch.randn(2, 4, 6)
w3 = torch.randn(2, 6, 3)
img = torch.randn(2, 3, 5, 5)
imgb = img.to(bf)
sig = torch.randn(2, 3, 7)
cw = torch.randn(4, 3, 3, 3)
cw1 = torch.randn(4, 3, 3)
ctw = torch.randn(3, 4, 3, 3)
ctw1 = torch.randn(3, 4, 3)
cls = torch.tensor([0, 2, 5, 1])
idx = torch.tensor([0, 2])
p = torch.rand(4, 6)

cases = {
    # 16 bits (PyTorch's lower_precision_fp list)
    'matmul/f32': lambda: x @ w,
    'matmul/bf16,f32': lambda: xb @ w,
    'matmul/f64': lambda: x.double() @ w.double(),
    'matmul/i64': lambda: x.long() @ w.long(),
    'mm/f32': lambda: torch.mm(x, w),
    'mv/f32': lambda: torch.mv(x, v),
    'bmm/f32': lambda: torch.bmm(b3, w3),
    'addmm/f32': lambda: torch.addmm(torch.randn(3), x, w),
    'baddbmm/f32': lambda: torch.baddbmm(torch.randn(3), b3, w3),
    'linear/f32': lambda: F.linear(x, w.t(), torch.randn(3)),
    'linear3d/f32': lambda: F.linear(b3, w.t(), torch.randn(3)),
    'conv2d/f32': lambda: F.conv2d(img, cw, torch.randn(4)),
    'conv1d/f32': lambda: F.conv1d(sig, cw1, torch.randn(4)),
    'conv_transpose2d/f32': lambda: F.conv_transpose2d(img, ctw, torch.randn(4)),
    'conv_transpose1d/f32': lambda: F.conv_transpose1d(sig, ctw1, torch.randn(4)),
    'dot/f32': lambda: torch.dot(v, v),
    'dot/bf16': lambda: torch.dot(vb, vb),
    'outer/f32': lambda: torch.outer(v, v),
    # float32 (PyTorch's fp32 and fp32_set_opt_dtype lists for CUDA)
    'exp/bf16': lambda: xb.exp(),
    'log/bf16': lambda: p.to(bf).log(),
    'log1p/bf16': lambda: p.to(bf).log1p(),
    'expm1/bf16': lambda: xb.expm1(),
    'rsqrt/bf16': lambda: p.to(bf).rsqrt(),
    'reciprocal/bf16': lambda: xb.reciprocal(),
    'tan/bf16': lambda: xb.tan(),
    'softplus/bf16': lambda: F.softplus(xb),
    'pow/bf16,scalar': lambda: xb ** 2,
    'pow/bf16,bf16': lambda: p.to(bf) ** xb,
    'softmax/bf16': lambda: xb.softmax(1),
    'softmax/f32': lambda: x.softmax(1),
    'log_softmax/bf16': lambda: xb.log_softmax(1),
    'sum/bf16': lambda: xb.sum(),
    'sum/i64': lambda: x.long().sum(),
    'prod/bf16': lambda: xb.prod(),
    'cumsum/bf16': lambda: xb.cumsum(1),
    'cumprod/bf16': lambda: xb.cumprod(1),
    'logsumexp/bf16': lambda: xb.logsumexp(1),
    'norm/bf16': lambda: xb.norm(),
    'layer_norm/bf16': lambda: F.layer_norm(xb, (6,)),
    'layer_norm/bf16,w32': lambda: F.layer_norm(xb, (6,), torch.ones(6), torch.zeros(6)),
    'group_norm/bf16': lambda: F.group_norm(imgb, 3),
    'cross_entropy/bf16': lambda: F.cross_entropy(xb, cls),
    'nll_loss/bf16': lambda: F.nll_loss(xb.log_softmax(1), cls),
    'mse_loss/bf16,bf16': lambda: F.mse_loss(xb, xb * 2),
    'mse_loss/bf16,f32': lambda: F.mse_loss(xb, x),
    'l1_loss/bf16,bf16': lambda: F.l1_loss(xb, xb * 2),
    'smooth_l1_loss/bf16,bf16': lambda: F.smooth_l1_loss(xb, xb * 2),
    'kl_div/bf16,bf16': lambda: F.kl_div(xb.log_softmax(1), p.to(bf), reduction='sum'),
    'binary_cross_entropy_with_logits/bf16,bf16':
        lambda: F.binary_cross_entropy_with_logits(xb, p.to(bf)),
    'binary_cross_entropy/bf16,bf16': lambda: F.binary_cross_entropy(p.to(bf), p.to(bf)),
    # not listed: the operands' dtype
    'relu/bf16': lambda: xb.relu(),
    'sigmoid/bf16': lambda: xb.sigmoid(),
    'tanh/bf16': lambda: xb.tanh(),
    'gelu/bf16': lambda: F.gelu(xb),
    'silu/bf16': lambda: F.silu(xb),
    'sqrt/bf16': lambda: p.to(bf).sqrt(),
    'abs/bf16': lambda: xb.abs(),
    'mean/bf16': lambda: xb.mean(),
    'var/bf16': lambda: xb.var(),
    'std/bf16': lambda: xb.std(),
    'amax/bf16': lambda: xb.amax(),
    'max_pool2d/bf16': lambda: F.max_pool2d(imgb, 2),
    'avg_pool2d/bf16': lambda: F.avg_pool2d(imgb, 2),
    'adaptive_avg_pool2d/bf16': lambda: F.adaptive_avg_pool2d(imgb, 2),
    'dropout/bf16': lambda: F.dropout(xb, 0.5, True),
    'embedding/w32': lambda: F.embedding(cls, torch.randn(6, 4)),
    'batch_norm/bf16,w32': lambda: F.batch_norm(imgb, torch.zeros(3), torch.ones(3),
                                                torch.ones(3), torch.zeros(3), True),
    'batch_norm/f32': lambda: F.batch_norm(img, torch.zeros(3), torch.ones(3),
                                           torch.ones(3), torch.zeros(3), True),
    # operands of several dtypes
    'add/bf16,f32': lambda: xb + x,
    'add/bf16,scalar': lambda: xb + 1.5,
    'mul/bf16,bf16': lambda: xb * xb,
    'maximum/bf16,f32': lambda: torch.maximum(xb, x),
    'atan2/bf16,f32': lambda: torch.atan2(xb, x),
    'where/bf16,f32': lambda: torch.where(x > 0, xb, x),
    'clamp/bf16': lambda: xb.clamp(-1, 1),
    'lerp/bf16,bf16': lambda: torch.lerp(xb, xb * 2, 0.5),
    'addcmul/f32,bf16,bf16': lambda: torch.addcmul(x, xb, xb),
    'addcdiv/f32,bf16,bf16': lambda: torch.addcdiv(x, xb, xb + 3),
    'cat/bf16,f32': lambda: torch.cat([xb, x]),
    'cat/bf16,bf16': lambda: torch.cat([xb, xb]),
    'stack/bf16,f32': lambda: torch.stack([xb, x]),
    'index_copy/f32,bf16': lambda: x.index_copy(0, idx, xb[:2]),
    'scatter_add/f32,bf16': lambda: x.scatter_add(0, idx.view(2, 1).expand(2, 6), xb[:2]),
}


def result(fn):
    try:
        with torch.autocast('cpu', dtype=torch.bfloat16):
            r = fn()
        return str(r.dtype).replace('torch.', '')
    except RuntimeError:
        return 'error'


here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, 'autocast_dtypes.lua'), 'w') as f:
    f.write('-- Generated by tests/lua/golden/make_autocast.py (PyTorch %s): result dtypes under\n'
            "-- torch.autocast('cpu', dtype=torch.bfloat16), 'error' where PyTorch refuses.\n"
            % torch.__version__.split('+')[0])
    f.write('return {\n')
    for name in sorted(cases):
        f.write("  ['%s'] = '%s',\n" % (name, result(cases[name])))
    f.write('}\n')
