"""PyTorch CUDA reference for tests/gpu/transfer.lua: 256 MiB float32 host-to-device copies."""
import statistics
import time

import torch

n = 64 * 1024 * 1024
x = torch.rand(n)
p = x.pin_memory()
d = torch.empty(n, device="cuda")
for name, src in (("pageable", x), ("pinned", p)):
    w0 = time.perf_counter()
    while time.perf_counter() - w0 < 0.25:
        d.copy_(src)
        torch.cuda.synchronize()
    s = []
    for _ in range(9):
        t0 = time.perf_counter()
        d.copy_(src)
        torch.cuda.synchronize()
        s.append(time.perf_counter() - t0)
    m = statistics.median(s)
    print("torch h2d %-9s %8.2f ms %8.1f GB/s" % (name, m * 1e3, n * 4 / m / 1e9))
