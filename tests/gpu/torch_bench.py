"""PyTorch CUDA reference for tests/gpu/bench.lua: 1 GiB float32 x*2 and x+y, median of 9."""
import statistics
import time

import torch

n = 256 * 1024 * 1024
x = torch.rand(n, device="cuda")
y = torch.rand(n, device="cuda")
for name, f, nbytes in (("mul2", lambda: x * 2, 2 * n * 4), ("add", lambda: x + y, 3 * n * 4)):
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < 0.25:  # as bench.lua: let the clocks rise
        f()
        torch.cuda.synchronize()
    s = []
    for _ in range(9):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        s.append(time.perf_counter() - t0)
    m = statistics.median(s)
    print("torch %-5s %8.2f ms %8.1f GB/s" % (name, m * 1e3, nbytes / m / 1e9))
