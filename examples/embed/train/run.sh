#!/bin/sh
# How tests/install/run.sh runs this example: run.sh <program>, in an empty folder. Trains,
# saves spiral.safetensors, and checks the file's header with an independent reader (Python's
# json) where Debian's python3 is there.
set -eu
"$1" spiral.safetensors
[ -x /usr/bin/python3 ] || exit 0
/usr/bin/python3 - <<'PY'
import json, struct
with open("spiral.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
meta = header.pop("__metadata__")
want = {"w1": [2, 32], "b1": [32], "w2": [32, 3], "b2": [3]}
got = {k: v["shape"] for k, v in header.items()}
assert got == want, got
assert all(v["dtype"] == "F32" for v in header.values()), header
assert meta == {"steps": "400"}, meta
print("spiral.safetensors: header checked by Python's json")
PY
