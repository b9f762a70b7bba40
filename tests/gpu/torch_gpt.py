"""PyTorch CUDA reference for tests/gpu/gpt.lua: nanoGPT's char config (batch 64, block 256,
6 layers, 6 heads, width 384, vocabulary 65, dropout 0, AdamW) on random token ids, the model of
examples/gpt_torch.py with F.scaled_dot_product_attention. Eager mode, TF32 off.

  training step (zero_grad, forward, loss, backward, AdamW step): 3 warm-up steps, then the
  median of 5 runs of 10 steps, one synchronization at the end of each run;
    fp32-sdpa  float32
    bf16-sdpa  the forward under torch.autocast('cuda', torch.bfloat16), float32 parameters
               (PyTorch's usual recipe)
  generation at batch 1 with a key/value cache: a one-character prompt, then N tokens, each
  sampled (temperature 0.8, top-k 40) and read back to the host; tokens per second, median of 3.

usage: torch_gpt.py [--tokens N] [--small]   (--small: a tiny config, to try the script)
Prints "torch gpt step <precision> <ms> ms" and "torch gpt generate <n> tokens <tok/s> tokens/s".
"""
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
from gpt_torch import GPT, KVCache, optimizer  # noqa: E402

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def config(small):
    if small:
        return dict(batch=4, block_size=32, n_layer=2, n_head=2, n_embd=32)
    return dict(batch=64, block_size=256, n_layer=6, n_head=6, n_embd=384)


def model_of(c, dev):
    torch.manual_seed(1)
    return GPT(dict(vocab_size=65, block_size=c["block_size"], n_layer=c["n_layer"],
                    n_head=c["n_head"], n_embd=c["n_embd"], dropout=0.0,
                    attention="sdpa" if hasattr(F, "scaled_dot_product_attention") else "manual")).to(dev)


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def step_time(c, dev, dtype):
    model = model_of(c, dev)
    opt = optimizer(model, 1e-3, 0.1)
    x = torch.randint(0, 65, (c["batch"], c["block_size"]), device=dev)
    y = torch.randint(0, 65, (c["batch"], c["block_size"]), device=dev)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = model(x, y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    sync(dev)
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10):
            step()
        sync(dev)
        runs.append((time.perf_counter() - t0) / 10)
    return statistics.median(runs)


def generate_rate(c, dev, n):
    model = model_of(c, dev).eval()
    n = min(n, c["block_size"] - 1)
    H, D = c["n_head"], c["n_embd"] // c["n_head"]
    rates = []
    with torch.no_grad():
        for r in range(4):
            caches = [KVCache(1, H, c["block_size"], D, dev, torch.float32) for _ in range(c["n_layer"])]
            idx = torch.zeros(1, 1, dtype=torch.long, device=dev)
            sync(dev)
            t0 = time.perf_counter()
            for _ in range(n):
                logits = model(idx, caches=caches)[0, -1] / 0.8
                v, _ = torch.topk(logits, 40)
                logits[logits < v[-1]] = -float("inf")
                nxt = torch.multinomial(F.softmax(logits, dim=-1), 1).item()
                idx = torch.tensor([[nxt]], device=dev)
            if r > 0:  # the first run warms up
                rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates), n


def main():
    small = "--small" in sys.argv
    tokens = int(sys.argv[sys.argv.index("--tokens") + 1]) if "--tokens" in sys.argv else 200
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    c = config(small)
    print("torch %s on %s" % (torch.__version__, torch.cuda.get_device_name() if dev == "cuda" else "cpu"))
    sdpa = hasattr(F, "scaled_dot_product_attention")  # PyTorch 2; 1.13 (a CPU try) lacks it
    for name, dtype in (("fp32-sdpa", None), ("bf16-sdpa", torch.bfloat16)):
        name = name if sdpa else name.replace("sdpa", "manual")
        print("torch gpt step %s %.3f ms" % (name, step_time(c, dev, dtype) * 1e3), flush=True)
    rate, n = generate_rate(c, dev, tokens)
    print("torch gpt generate %d tokens %.1f tokens/s" % (n, rate))


if __name__ == "__main__":
    main()
