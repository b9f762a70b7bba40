"""PyTorch CUDA reference for tests/gpu/conv.lua: the same convolutions through cuDNN
(cudnn.benchmark on, TF32 off, NCHW as Ember's layout), float16 / bfloat16 / float32, forward
and forward + backward (input and weight gradients), median of timed runs after a warm-up.
Lines: "torch conv <dtype> <shape> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s"."""
import statistics
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))
SHAPES = (
    ("r50-3x3-64", 32, 64, 56, 56, 64, 3, 1, 1),
    ("r50-3x3-128", 32, 128, 28, 28, 128, 3, 1, 1),
    ("r50-3x3-256", 32, 256, 14, 14, 256, 3, 1, 1),
    ("r50-stem", 32, 3, 224, 224, 64, 7, 2, 3),
    ("fmnist-conv2", 256, 32, 14, 14, 64, 5, 1, 2),
)


def timed(f, reps):
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < 0.3:
        f()
        torch.cuda.synchronize()
    s = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        s.append(time.perf_counter() - t0)
    return statistics.median(s)


for dtype in (torch.float16, torch.bfloat16, torch.float32):
    for name, N, C, H, W, M, k, st, p in SHAPES:
        x = torch.rand(N, C, H, W, device="cuda", dtype=dtype) * 2 - 1
        w = torch.rand(M, C, k, k, device="cuda", dtype=dtype) * 0.2 - 0.1
        y = F.conv2d(x, w, None, st, p)
        g = torch.rand_like(y) * 2 - 1
        flops = 2 * N * M * C * k * k * y.shape[2] * y.shape[3]
        tf = timed(lambda: F.conv2d(x, w, None, st, p), 10)
        lx, lw = x.detach().requires_grad_(), w.detach().requires_grad_()

        def fb():
            lx.grad = lw.grad = None
            F.conv2d(lx, lw, None, st, p).backward(g)

        tb = timed(fb, 10)
        dn = str(dtype).replace("torch.", "")
        print("torch conv %s %s fwd %.3f ms %.2f TFLOP/s" % (dn, name, tf * 1e3, flops / tf / 1e12))
        print("torch conv %s %s fwdbwd %.3f ms %.2f TFLOP/s" % (dn, name, tb * 1e3, 3 * flops / tb / 1e12))
