"""PyTorch reference for tests/gpu/ddp_scaling.lua: the same weak-scaling steps under
torch.nn.parallel.DistributedDataParallel with NCCL, one process per GPU (torch.multiprocessing),
and the single-GPU step without DDP as the baseline. Eager mode, TF32 off.

  gpt  nanoGPT's char config (examples/gpt_torch.py, SDPA): batch 64 of 256 tokens per GPU,
       6 layers, 6 heads, width 384, AdamW, random tokens
  cnn  the Fashion-MNIST CNN of tests/gpu/torch_cnn.py at batch 256 per GPU, Adam

A step is zero_grad, forward, loss, backward, optimizer step; 10 warm-up steps, then the median
of 5 runs of 20 steps, each ended by torch.cuda.synchronize and a barrier.

usage: torch_ddp.py <gpt|cnn> <N> [--precision fp32|bf16|fp16] [--smoke]
  N = 1 times one process without DDP; --smoke: tiny sizes on the CPU with gloo.
Prints "torch ddp <model> <precision> gpus <N> <samples/s> samples/s <ms> ms/step", or
"torch single <model> <precision> ..." for N = 1.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 1024), nn.ReLU(), nn.Dropout(0.4), nn.Linear(1024, 10))


def job(what, smoke, dev, rank):
    """(batch, model, optimizer, loss function) of one rank."""
    torch.manual_seed(1)
    if what == "gpt":
        from gpt_torch import GPT, optimizer
        import torch.nn.functional as F
        c = (dict(batch=4, block=32, n_layer=2, n_head=2, n_embd=32) if smoke
             else dict(batch=64, block=256, n_layer=6, n_head=6, n_embd=384))
        model = GPT(dict(vocab_size=65, block_size=c["block"], n_layer=c["n_layer"],
                         n_head=c["n_head"], n_embd=c["n_embd"], dropout=0.0,
                         attention="sdpa" if hasattr(F, "scaled_dot_product_attention") else "manual")).to(dev)
        opt = optimizer(model, 1e-3, 0.1)
        torch.manual_seed(100 + rank)
        x = torch.randint(0, 65, (c["batch"], c["block"]), device=dev)
        y = torch.randint(0, 65, (c["batch"], c["block"]), device=dev)
        return c["batch"], model, opt, lambda net: net(x, y)
    batch = 16 if smoke else 256
    model = cnn().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    crit = nn.CrossEntropyLoss()
    torch.manual_seed(100 + rank)
    x = torch.randn(batch, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    return batch, model, opt, lambda net: crit(net(x), y)


def run(rank, world, what, precision, smoke, port):
    cuda = not smoke
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(rank)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    ddp = world > 1
    if ddp:
        dist.init_process_group("nccl" if cuda else "gloo", init_method="tcp://127.0.0.1:%d" % port,
                                rank=rank, world_size=world)
    batch, model, opt, loss_of = job(what, smoke, dev, rank)
    if ddp and not cuda:  # gloo cannot broadcast bool tensors (the attention mask): leave them out
        model._ddp_params_and_buffers_to_ignore = [n for n, b in model.named_buffers() if b.dtype == torch.bool]
    net = nn.parallel.DistributedDataParallel(model, device_ids=[rank] if cuda else None) if ddp else model
    dtype = DTYPES[precision]
    scaler = torch.cuda.amp.GradScaler() if precision == "fp16" and cuda else None

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = loss_of(net)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize()
        if ddp:
            dist.barrier()

    steps, reps = (2, 2) if smoke else (20, 5)
    for _ in range(3 if smoke else 10):
        step()
    sync()
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        runs.append((time.perf_counter() - t0) / steps)
    s = statistics.median(runs)
    if rank == 0:
        if ddp:
            print("torch ddp %s %s gpus %d %.1f samples/s %.3f ms/step"
                  % (what, precision, world, world * batch / s, s * 1e3), flush=True)
        else:
            print("torch single %s %s %.1f samples/s %.3f ms/step" % (what, precision, batch / s, s * 1e3),
                  flush=True)
    if ddp:
        dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["gpt", "cnn"])
    ap.add_argument("n", type=int)
    ap.add_argument("--precision", default="fp32", choices=list(DTYPES))
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    if a.n == 1:
        run(0, 1, a.what, a.precision, a.smoke, a.port)
    else:
        mp.spawn(run, args=(a.n, a.what, a.precision, a.smoke, a.port), nprocs=a.n, join=True)


if __name__ == "__main__":
    main()
