"""PyTorch reference for Ember's training benchmarks (Debian's python3-torch, CPU).

usage: torch_train_ref.py MODEL BATCH THREADS [PRECISION]
  MODEL: mlp (784-256-10), cnn (the Fashion-MNIST benchmark network), tiny (Linear(10,10))
  PRECISION: fp32 (default) or bf16 (the forward under torch.autocast('cpu', torch.bfloat16),
  float32 parameters: PyTorch's CPU mixed-precision recipe)
Prints "torch VERSION SAMPLES_PER_SECOND SECONDS_PER_STEP" (medians over repeats) for a
training step: zero_grad, forward, cross-entropy loss, backward, SGD step.
"""
import statistics
import sys
import time

import torch
import torch.nn as nn


def build(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)), (784,)
    if kind == "tiny":
        return nn.Sequential(nn.Linear(10, 10)), (10,)
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4),
            nn.Linear(1024, 10)), (1, 28, 28)
    raise SystemExit("unknown model " + kind)


def main():
    kind, batch, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    if precision not in ("fp32", "bf16"):
        raise SystemExit("precision: expected fp32 or bf16, got " + precision)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, shape = build(kind)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    classes = 10
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    # about 0.3 s per sample of steps
    t0 = time.perf_counter()
    for _ in range(3):
        step()
    per = (time.perf_counter() - t0) / 3
    inner = max(1, int(0.3 / max(per, 1e-7)))
    samples = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(inner):
            step()
        samples.append((time.perf_counter() - t0) / inner)
    s = statistics.median(samples)
    print("torch", torch.__version__, batch / s, s)


main()
