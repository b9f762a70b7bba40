"""PyTorch CUDA reference for `ember bench --model cnn`: the same Fashion-MNIST CNN (ember.models),
random data, Adam, cross entropy; 3 warm-up steps, then the median of 5 runs of 20 steps with one
synchronization at the end of each run (as ember bench does). Eager mode, TF32 off.

usage: torch_cnn.py [BATCH ...] [--precision fp32|bf16|fp16 ...]
fp32 runs in float32; bf16 and fp16 run the forward under torch.autocast('cuda', dtype) with
float32 parameters (PyTorch's recipe), fp16 with a GradScaler, as `ember bench --precision`."""
import statistics
import sys
import time

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True  # PyTorch's best convolution algorithms
torch.manual_seed(1)

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10)).cuda()


def parse(argv):
    batches, precisions, i = [], [], 0
    while i < len(argv):
        if argv[i] == "--precision":
            precisions += argv[i + 1].split(",")
            i += 2
        else:
            batches.append(int(argv[i]))
            i += 1
    for p in precisions:
        if p not in DTYPES:
            raise SystemExit("--precision: expected fp32, bf16 or fp16, got " + p)
    return batches or [64, 256], precisions or ["fp32"]


def time_one(batch, precision):
    dtype = DTYPES[precision]
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    crit = nn.CrossEntropyLoss()
    scaler = torch.cuda.amp.GradScaler() if precision == "fp16" else None
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad()
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = crit(m(x), y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            loss = step()
        loss.item()
        torch.cuda.synchronize()
        runs.append((time.perf_counter() - t0) / 20)
    return statistics.median(runs)


batches, precisions = parse(sys.argv[1:])
for batch in batches:
    for precision in precisions:
        s = time_one(batch, precision)
        label = "" if precision == "fp32" else " " + precision
        print("torch cnn batch %d%s: %.3f ms/step %.0f samples/s" % (batch, label, s * 1e3, batch / s))
