"""PyTorch CUDA reference for `ember bench --model cnn`: the same Fashion-MNIST CNN (ember.models),
random data, Adam, cross entropy; 3 warm-up steps, then the median of 5 runs of 20 steps with one
synchronization at the end of each run (as ember bench does). Eager mode, fp32, TF32 off."""
import statistics
import sys
import time

import torch
import torch.nn as nn

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.manual_seed(1)


def model():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10)).cuda()


for batch in [int(b) for b in (sys.argv[1:] or ["64", "256"])]:
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    crit = nn.CrossEntropyLoss()
    x = torch.randn(batch, 1, 28, 28, device="cuda")
    y = torch.randint(0, 10, (batch,), device="cuda")

    def step():
        opt.zero_grad()
        loss = crit(m(x), y)
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
    s = statistics.median(runs)
    print("torch cnn batch %d: %.3f ms/step %.0f samples/s" % (batch, s * 1e3, batch / s))
