"""PyTorch reference for tests/bench/gpt_step.lua: the median time of one GPT training step on
the CPU (zero_grad, forward, cross-entropy loss, backward, AdamW step) for the same model as
Ember's (examples/gpt_torch.py's GPT, nanoGPT's model), on random token ids.

usage: torch_gpt_step.py CONFIG THREADS [--profile]
  CONFIG: small (batch 8, block 128, 4 layers, 4 heads, width 256, vocabulary 65)
          tiny  (batch 4, block 64, 2 layers, 4 heads, width 128, vocabulary 65)
  --profile: also print torch.autograd.profiler's table of the ops' self CPU time
Prints "torch VERSION SECONDS_PER_STEP CPU_SECONDS_PER_STEP" (the median wall time, and the
process's CPU time per step over the timed runs: steadier on a shared machine).
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from gpt_torch import GPT, optimizer  # noqa: E402

CONFIGS = {
    "small": dict(batch=8, block_size=128, n_layer=4, n_head=4, n_embd=256),
    "tiny": dict(batch=4, block_size=64, n_layer=2, n_head=4, n_embd=128),
}


def main():
    name, threads = sys.argv[1], int(sys.argv[2])
    cfg = CONFIGS[name]
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    B, T = cfg["batch"], cfg["block_size"]
    model = GPT(dict(vocab_size=65, block_size=T, n_layer=cfg["n_layer"], n_head=cfg["n_head"],
                     n_embd=cfg["n_embd"], dropout=0.0))
    opt = optimizer(model, 1e-3, 0.1)
    x = torch.randint(0, 65, (B, T))
    y = torch.randint(0, 65, (B, T))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()

    t0 = time.perf_counter()
    for _ in range(3):
        step()
    per = (time.perf_counter() - t0) / 3
    inner = max(1, int(0.3 / max(per, 1e-7)))
    samples = []
    c0 = time.process_time()
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(inner):
            step()
        samples.append((time.perf_counter() - t0) / inner)
    cpu = (time.process_time() - c0) / (7 * inner)
    print("torch %s %.6f %.6f" % (torch.__version__, statistics.median(samples), cpu))
    if "--profile" in sys.argv:
        with torch.autograd.profiler.profile() as prof:
            for _ in range(5):
                step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
