"""PyTorch CUDA reference for tests/gpu/attention.lua: causal scaled_dot_product_attention
(PyTorch's best backend: flash or memory-efficient, as it picks), head dim 64: the nanoGPT
shape (batch 64, 6 heads, T = 256) and batch 8, 16 heads, T = 1024 and 4096, float16 /
bfloat16 / float32, forward and forward+backward, median of timed runs after a warm-up. FLOP
convention as attention.lua: causal forward 4 B H T^2 D / 2, forward+backward 3.5 times that.
Lines: "torch attention <dtype> T=<T> fwd|fwdbwd <ms> ms <TFLOP/s> TFLOP/s"."""
import statistics
import time

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))
D = 64
SHAPES = ((64, 6, 256), (8, 16, 1024), (8, 16, 4096))  # (B, H, T)


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
    for B, H, T in SHAPES:
        q, k, v, g = (torch.rand(B, H, T, D, device="cuda", dtype=dtype) * 2 - 1 for _ in range(4))
        flops = 4 * B * H * T * T * D * 0.5
        reps = 5 if T >= 4096 else 10
        tf = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), reps)
        lq, lk, lv = (x.detach().requires_grad_() for x in (q, k, v))

        def fb():
            lq.grad = lk.grad = lv.grad = None
            F.scaled_dot_product_attention(lq, lk, lv, is_causal=True).backward(g)

        tb = timed(fb, reps)
        name = str(dtype).replace("torch.", "")
        print("torch attention %s T=%d fwd %.3f ms %.2f TFLOP/s" % (name, T, tf * 1e3, flops / tf / 1e12))
        print("torch attention %s T=%d fwdbwd %.3f ms %.2f TFLOP/s" % (name, T, tb * 1e3, 3.5 * flops / tb / 1e12))
        del q, k, v, g, lq, lk, lv
