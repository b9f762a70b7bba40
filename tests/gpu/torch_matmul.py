"""PyTorch CUDA reference for tests/gpu/matmul.lua: square matmul at n = 1024, 4096, 8192
("quick": no 8192), median of several timed runs after warm-up, as TFLOP/s (2 n^3 / time).
float32 with TF32 off (plain FP32 FMA, what Ember's tiled kernel does), float16 and bfloat16
(tensor cores). As matmul.lua, several products between synchronizations at small n (20 at
n = 1024, 3 at 4096), so that the host's round trip does not count.
Lines: "torch matmul <dtype> n=<n> <ms> ms <TFLOP/s> TFLOP/s"."""
import statistics
import sys
import time

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
quick = len(sys.argv) > 1 and sys.argv[1] == "quick"
print("torch %s on %s, allow_tf32=%s" % (torch.__version__, torch.cuda.get_device_name(),
                                         torch.backends.cuda.matmul.allow_tf32))
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for n in (1024, 4096) if quick else (1024, 4096, 8192):
        a = torch.rand(n, n, device="cuda", dtype=dtype) - 0.5
        b = torch.rand(n, n, device="cuda", dtype=dtype) - 0.5
        reps = 20 if n <= 1024 else 10 if n <= 4096 else 5
        inner = 20 if n <= 1024 else 3 if n <= 4096 else 1
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < 0.25:  # as matmul.lua: let the clocks rise
            torch.matmul(a, b)
            torch.cuda.synchronize()
        s = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                torch.matmul(a, b)
            torch.cuda.synchronize()
            s.append((time.perf_counter() - t0) / inner)
        m = statistics.median(s)
        name = str(dtype).replace("torch.", "")
        print("torch matmul %s n=%d %.3f ms %.2f TFLOP/s" % (name, n, m * 1e3, 2 * n**3 / m / 1e12))
        del a, b
