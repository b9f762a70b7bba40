"""PyTorch reference timings for Ember's benchmarks (Debian's python3-torch, CPU).

usage: torch_ref.py WHAT THREADS [ARGS]
  tiny_add            seconds per `a + b` on one-element float32 tensors
  add N / mul N       seconds per `a + b` / `a * b` on N-element float32 tensors
Prints "torch VERSION SECONDS" with the median over repeats.
"""
import statistics
import sys
import time

import torch


def median_time(f, inner, reps=7):
    for _ in range(max(1, inner // 4)):
        f()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            f()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def main():
    what, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    if what == "tiny_add":
        a, b = torch.ones(1), torch.ones(1)
        secs = median_time(lambda: a + b, 20000)
    elif what in ("add", "mul"):
        n = int(sys.argv[3])
        a, b = torch.rand(n) + 0.5, torch.rand(n) + 0.5
        op = (lambda: a + b) if what == "add" else (lambda: a * b)
        secs = median_time(op, max(1, int(2e8 // (n * 12))))
    else:
        raise SystemExit("unknown benchmark " + what)
    print("torch", torch.__version__, secs)


main()
