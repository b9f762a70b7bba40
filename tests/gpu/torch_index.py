"""PyTorch CUDA reference for tests/gpu/index.lua: the same cases, median of 9 (ms)."""
import statistics
import time

import torch

dev = "cuda"


def bench(name, f):
    f()
    torch.cuda.synchronize()
    s = []
    for _ in range(9):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        s.append(time.perf_counter() - t0)
    print("torch %-36s %9.3f ms" % (name, statistics.median(s) * 1e3))


N = 16000000
a1 = torch.randn(N // 16, device=dev)
bench("sort_1M", lambda: torch.sort(a1, stable=True))
a16 = torch.randn(N, device=dev)
bench("sort_16M", lambda: torch.sort(a16, stable=True))
a2 = torch.randn(4096, 1000, device=dev)
bench("argsort_4096x1000", lambda: torch.argsort(a2, dim=1, stable=True))
a3 = torch.randn(100000, 16, device=dev)
bench("argsort_100000x16", lambda: torch.argsort(a3, dim=1, stable=True))
a4 = torch.randn(64, 50257, device=dev)
bench("topk50_64x50257", lambda: torch.topk(a4, 50, dim=1))
W = torch.randn(50257, 768, device=dev)
iv = torch.randint(0, 50257, (16384,), device=dev)
bench("index_select_50257x768_16384", lambda: torch.index_select(W, 0, iv))
G, Z = torch.randn(16384, 768, device=dev), torch.zeros(50257, 768, device=dev)
bench("index_add_50257x768_16384", lambda: Z.index_add_(0, iv, G))
big = torch.rand(N, device=dev) < 0.5
bench("nonzero_16M", lambda: torch.nonzero(big))
s1 = torch.randn(N // 16, device=dev)
i1 = torch.randint(0, N // 16, (N // 16,), device=dev)
Z1 = torch.zeros(N // 16, device=dev)
bench("index_copy_1M", lambda: Z1.index_copy_(0, i1, s1))
