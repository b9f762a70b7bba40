"""PyTorch's timings for tests/bench/bench_conv.lua: the Fashion-MNIST CNN's two convolution
layers at batch 64, forward and forward + backward.  usage: torch_conv.py [threads]"""
import sys
import time

import torch
import torch.nn.functional as F

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
torch.set_num_threads(threads)
torch.manual_seed(0)
x = torch.randn(64, 1, 28, 28)
w1 = torch.randn(32, 1, 5, 5, requires_grad=True)
b1 = torch.randn(32, requires_grad=True)
h = torch.randn(64, 32, 14, 14, requires_grad=True)
w2 = torch.randn(64, 32, 5, 5, requires_grad=True)
b2 = torch.randn(64, requires_grad=True)
g1 = torch.ones(64, 32, 28, 28)
g2 = torch.ones(64, 64, 14, 14)
p1 = torch.randn(64, 32, 28, 28, requires_grad=True)
gp = torch.ones(64, 32, 14, 14)


def fwd1():
    with torch.no_grad():
        F.conv2d(x, w1, b1, padding=2)


def step1():
    F.conv2d(x, w1, b1, padding=2).backward(g1)


def fwd2():
    with torch.no_grad():
        F.conv2d(h, w2, b2, padding=2)


def step2():
    F.conv2d(h, w2, b2, padding=2).backward(g2)


def pool():
    F.max_pool2d(p1, 2).backward(gp)


def bench(name, f, reps=20):
    for _ in range(3):
        f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    t.sort()
    print("%d  %-34s best %7.2f ms   median %7.2f ms" % (threads, name, t[0], t[len(t) // 2]))


bench("conv1 fwd", fwd1)
bench("conv1 fwd+bwd (w, b)", step1)
bench("conv2 fwd", fwd2)
bench("conv2 fwd+bwd (x, w, b)", step2)
bench("maxpool2 [64,32,28,28] fwd+bwd", pool)
