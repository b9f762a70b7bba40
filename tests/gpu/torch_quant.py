"""PyTorch CUDA reference for tests/gpu/quant.lua: the dense float16 product of the same shapes
as Ember's quantized Linear, x [m, K] @ W^T with W [N, K], at m = 1 (in GB/s of the fp16
weight read, as an upper bound a dense weight reaches) and m = batch (TFLOP/s), and a 1 GiB
copy's bandwidth (read plus write). Median of timed runs after warm-up; at m = 1 the products
cycle through distinct weights (256 MB in all) so that they read memory, not the L2 cache.
Usage: python3 torch_quant.py N K batch."""
import statistics
import sys
import time

import torch

N, K, B = (int(a) for a in sys.argv[1:4])
print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name()))


def timed(f, reps):
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < 0.25:
        f()
        torch.cuda.synchronize()
    s = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        s.append(time.perf_counter() - t0)
    return statistics.median(s)


n = 256 * 1024 * 1024
a = torch.rand(n, device="cuda")
b = torch.empty_like(a)
s = timed(lambda: b.copy_(a), 9)
print("torch copy %.1f GB/s (read plus write)" % (2 * n * 4 / s / 1e9))
del a, b

copies = max(2, -(-256_000_000 // (N * K * 2)))
ws = [(torch.rand(N, K, device="cuda", dtype=torch.float16) - 0.5) for _ in range(copies)]
x1 = torch.rand(1, K, device="cuda", dtype=torch.float16) - 0.5
s = timed(lambda: [torch.nn.functional.linear(x1, w) for w in ws], 7) / copies
print("torch matvec float16 m=1 %.1f us %.1f GB/s weight read" % (s * 1e6, N * K * 2 / s / 1e9))
xb = torch.rand(B, K, device="cuda", dtype=torch.float16) - 0.5
s = timed(lambda: [torch.nn.functional.linear(xb, w) for w in ws], 5) / copies
print("torch matmul float16 m=%d %.3f ms %.2f TFLOP/s" % (B, s * 1e3, 2 * B * N * K / s / 1e12))
