"""PyTorch reference for tests/bench/gpt_ops.lua: the same ops at a GPT step's shapes.

usage: torch_gpt_ops.py THREADS [FILTER]
Prints "torch VERSION", then "NAME fwd<TAB>SECONDS" and "NAME f+b<TAB>SECONDS" per case.
"""
import statistics
import sys
import time

import os

import torch
import torch.nn.functional as F

# EMBER_BENCH_CLOCK=cpu: process CPU time instead of the wall clock (see gpt_ops.lua).
clock = time.process_time if os.environ.get("EMBER_BENCH_CLOCK") == "cpu" else time.perf_counter


def timeit(f):
    f()
    t0 = clock()
    f()
    per = max(clock() - t0, 1e-7)
    inner = max(1, int(0.1 / per))
    samples = []
    for _ in range(5):
        t0 = clock()
        for _ in range(inner):
            f()
        samples.append((clock() - t0) / inner)
    return statistics.median(samples)


def leaf(*s):
    return torch.randn(*s, requires_grad=True)


def main():
    threads = int(sys.argv[1])
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    B, T, D, V = 8, 128, 256, 65
    N = B * T
    cases = []

    def case(name):
        def reg(make):
            cases.append((name, make))
            return make
        return reg

    @case("add residual [8,128,256]")
    def _():
        a, b = leaf(B, T, D), leaf(B, T, D)
        return (lambda: a + b), torch.randn(B, T, D)

    @case("layer_norm [1024,256]")
    def _():
        x, w, b = leaf(N, D), leaf(D), leaf(D)
        return (lambda: F.layer_norm(x, (D,), w, b)), torch.randn(N, D)

    @case("gelu [8,128,1024]")
    def _():
        x = leaf(B, T, 4 * D)
        return (lambda: F.gelu(x)), torch.randn(B, T, 4 * D)

    @case("softmax [1024,65]")
    def _():
        x = leaf(N, V)
        return (lambda: x.softmax(-1)), torch.randn(N, V)

    @case("log_softmax [1024,65]")
    def _():
        x = leaf(N, V)
        return (lambda: x.log_softmax(-1)), torch.randn(N, V)

    @case("cross_entropy [1024,65]")
    def _():
        x = leaf(N, V)
        y = torch.randint(0, V, (N,))
        return (lambda: F.cross_entropy(x, y)), torch.ones(())

    def linear_case(name, din, dout):
        @case(name)
        def _():
            lin = torch.nn.Linear(din, dout)
            x = leaf(B, T, din)
            return (lambda: lin(x)), torch.randn(B, T, dout)

    linear_case("linear qkv 256->768", D, 3 * D)
    linear_case("linear proj 256->256", D, D)
    linear_case("linear fc 256->1024", D, 4 * D)
    linear_case("linear fc2 1024->256", 4 * D, D)
    linear_case("linear head 256->65", D, V)

    @case("embedding [65,256][8,128]")
    def _():
        w = leaf(V, D)
        idx = torch.randint(0, V, (B, T))
        return (lambda: F.embedding(idx, w)), torch.randn(B, T, D)

    @case("dropout 0.1 [8,128,256]")
    def _():
        x = leaf(B, T, D)
        return (lambda: F.dropout(x, 0.1, True)), torch.randn(B, T, D)

    @case("adamw step (GPT params)")
    def _():
        shapes = [(V, D), (T, D)]
        for _ in range(4):
            shapes += [(D,), (D,), (3 * D, D), (3 * D,), (D, D), (D,), (D,), (D,),
                       (4 * D, D), (4 * D,), (D, 4 * D), (D,)]
        shapes += [(D,), (D,), (V, D)]
        params = [leaf(*s) for s in shapes]
        for p in params:
            p.grad = torch.randn(*p.shape)
        # PyTorch 1.13's default for CPU tensors is the for-loop implementation; foreach is
        # its faster multi-tensor form: take the better of the two.
        opts = [torch.optim.AdamW(params, lr=1e-3, foreach=f) for f in (False, True)]
        return [o.step for o in opts], None

    print("torch", torch.__version__)
    for name, make in cases:
        if filt not in name:
            continue
        fwd, g = make()
        fwds = fwd if isinstance(fwd, list) else [fwd]
        print(f"{name} fwd\t{min(timeit(f) for f in fwds)}")
        if g is not None:
            print(f"{name} f+b\t{timeit(lambda: fwd().backward(g))}")
        sys.stdout.flush()


main()
