"""PyTorch reference for Ember's second main job (examples/gpt.lua): the same character-level
GPT (nanoGPT's model) trained on the same text of Debian's `fortunes` package, with the same
split, vocabulary, initialization, optimizer, learning-rate schedule, gradient clipping and
validation windows, and training batches drawn the same way (random offsets, seeded; the random
numbers themselves are PyTorch's). It prints the validation loss at the same steps, so the two
final losses compare (docs/performance.md records both).

Runs with Debian's python3-torch (1.13, which has no scaled_dot_product_attention: attention is
written from matmul, masked_fill and softmax here):

    /usr/bin/python3 examples/gpt_torch.py [--steps N] [--threads N] ...   (--help lists them)

The model and the data functions are imported by the benchmarks (tests/bench/torch_gpt_step.py,
tests/gpu/torch_gpt.py), which pass attention="sdpa" on PyTorch 2 for the fused kernel.
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---- the model (nanoGPT's model.py, bias=True) ------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_head, self.n_embd, self.dropout = c["n_head"], c["n_embd"], c["dropout"]
        self.c_attn = nn.Linear(c["n_embd"], 3 * c["n_embd"])
        self.c_proj = nn.Linear(c["n_embd"], c["n_embd"])
        self.attn_dropout = nn.Dropout(c["dropout"])
        self.resid_dropout = nn.Dropout(c["dropout"])
        self.attention = c.get("attention", "manual")
        T = c["block_size"]
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x, cache=None):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        H, D = self.n_head, C // self.n_head
        q = q.view(B, T, H, D).transpose(1, 2)
        k = k.view(B, T, H, D).transpose(1, 2)
        v = v.view(B, T, H, D).transpose(1, 2)
        if cache is not None:
            k, v = cache.append(k, v)
        p = self.dropout if self.training else 0.0
        Tk = k.size(2)
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=(T == Tk and T > 1))
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(self.mask[Tk - T:Tk, :Tk], float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = nn.Linear(c["n_embd"], 4 * c["n_embd"])
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * c["n_embd"], c["n_embd"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln_1 = nn.LayerNorm(c["n_embd"])
        self.attn = CausalSelfAttention(c)
        self.ln_2 = nn.LayerNorm(c["n_embd"])
        self.mlp = MLP(c)

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(c["vocab_size"], c["n_embd"]),
            wpe=nn.Embedding(c["block_size"], c["n_embd"]),
            drop=nn.Dropout(c["dropout"]),
            h=nn.ModuleList([Block(c) for _ in range(c["n_layer"])]),
            ln_f=nn.LayerNorm(c["n_embd"]),
        ))
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * c["n_layer"]))

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                torch.nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            torch.nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def num_params(self):
        return sum(p.numel() for p in self.parameters()) - self.transformer.wpe.weight.numel()

    def forward(self, idx, targets=None, caches=None):
        B, T = idx.shape
        past = caches[0].length() if caches else 0
        pos = torch.arange(past, past + T, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for i, block in enumerate(self.transformer.h):
            x = block(x, caches[i] if caches else None)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class KVCache:
    """One layer's keys and values, [B, H, capacity, D], filled in place (no copy per step)."""

    def __init__(self, B, H, capacity, D, device, dtype):
        self.k = torch.empty(B, H, capacity, D, device=device, dtype=dtype)
        self.v = torch.empty(B, H, capacity, D, device=device, dtype=dtype)
        self.n = 0

    def length(self):
        return self.n

    def append(self, k, v):
        T = k.size(2)
        self.k[:, :, self.n:self.n + T] = k
        self.v[:, :, self.n:self.n + T] = v
        self.n += T
        return self.k[:, :, :self.n], self.v[:, :, :self.n]


def optimizer(model, lr, weight_decay, betas=(0.9, 0.99), eps=1e-8):
    """AdamW, weight decay on the 2-D weights only (nanoGPT's configure_optimizers)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)


def lr_at(step, lr, min_lr, warmup, steps):
    """Linear warm-up then cosine decay; step counts from 1 (examples/gpt.lua's G.lr_at)."""
    it = step - 1
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it >= steps:
        return min_lr
    ratio = (it - warmup) / max(steps - warmup, 1)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


# ---- data ---------------------------------------------------------------------------------------
def read_corpus(path):
    """The fortune files (regular files without '.' in their names) in sorted order, or one file."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read(), [path]
    names = sorted(n for n in os.listdir(path)
                   if "." not in n and os.path.isfile(os.path.join(path, n))
                   and not os.path.islink(os.path.join(path, n)))
    return b"".join(open(os.path.join(path, n), "rb").read() for n in names), names


def dataset(path):
    """(train ids, validation ids, vocabulary bytes): 0-based ids, first 90% / last 10%."""
    text, names = read_corpus(path)
    chars = sorted(set(text))
    lut = torch.zeros(256, dtype=torch.long)
    lut[torch.tensor(chars)] = torch.arange(len(chars))
    data = lut[torch.frombuffer(bytearray(text), dtype=torch.uint8).long()]
    n_train = int(0.9 * len(data))
    return data[:n_train], data[n_train:], chars, names


def val_starts(n_val, T, batches, B):
    """Evenly spaced window offsets over the validation text (examples/gpt.lua's)."""
    count, span = batches * B, n_val - T - 1
    return [[(j * span // (count - 1)) if count > 1 else 0 for j in range(b * B, b * B + B)]
            for b in range(batches)]


def windows(data, starts, T):
    s = torch.as_tensor(starts, dtype=torch.long).view(-1, 1) + torch.arange(T).view(1, -1)
    return data[s], data[s + 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    for name, default in [("n-layer", 4), ("n-head", 4), ("n-embd", 128), ("block-size", 128),
                          ("batch-size", 16), ("steps", 2000), ("warmup", 100),
                          ("eval-interval", 250), ("eval-batches", 8), ("threads", 0),
                          ("seed", 1337)]:
        ap.add_argument("--" + name, type=int, default=default)
    for name, default in [("dropout", 0.0), ("lr", 2e-3), ("min-lr", 0.0), ("weight-decay", 0.1),
                          ("grad-clip", 1.0)]:
        ap.add_argument("--" + name, type=float, default=default)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    min_lr = a.min_lr or a.lr / 10
    train, val, chars, names = dataset(a.data)
    print("fortunes: %d files, %d characters (%d train, %d validation), vocabulary %d"
          % (len(names), len(train) + len(val), len(train), len(val), len(chars)))
    T, B = a.block_size, a.batch_size
    c = dict(vocab_size=len(chars), block_size=T, n_layer=a.n_layer, n_head=a.n_head,
             n_embd=a.n_embd, dropout=a.dropout)
    torch.manual_seed(a.seed)
    model = GPT(c)
    opt = optimizer(model, a.lr, a.weight_decay)
    print("GPT: %d layers, %d heads, width %d, context %d, %.2fM parameters; batch %d, %d steps, "
          "torch %s, %d threads" % (a.n_layer, a.n_head, a.n_embd, T, model.num_params() / 1e6, B,
                                    a.steps, torch.__version__, torch.get_num_threads()))
    val_batches = [windows(val, s, T) for s in val_starts(len(val), T, a.eval_batches, B)]

    def evaluate():
        model.eval()
        with torch.no_grad():
            loss = sum(model(x, y).item() for x, y in val_batches) / len(val_batches)
        model.train()
        return loss

    t_start = t0 = time.perf_counter()
    loss_sum, n = 0.0, 0
    for step in range(1, a.steps + 1):
        lr = lr_at(step, a.lr, min_lr, a.warmup, a.steps)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = windows(train, torch.randint(0, len(train) - T, (B,)).tolist(), T)
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        loss_sum, n = loss_sum + loss.item(), n + 1
        if step % a.eval_interval == 0 or step == a.steps:
            rate = n * B * T / (time.perf_counter() - t0)
            v = evaluate()
            print("step %d/%d: train loss %.4f, val loss %.4f, lr %.2e, %.0f tokens/s, %.0f s"
                  % (step, a.steps, loss_sum / n, v, lr, rate, time.perf_counter() - t_start),
                  flush=True)
            loss_sum, n, t0 = 0.0, 0, time.perf_counter()
    print("final validation loss: %.4f" % v)


if __name__ == "__main__":
    main()
