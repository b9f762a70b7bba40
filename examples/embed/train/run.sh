#!/bin/sh
# How tests/install/run.sh runs this example: run.sh <program>, in an empty folder. Trains,
# saves spiral.safetensors, and checks the file's header with an independent reader (Python's
# json) where Debian's python3 is there. Then a checkpoint that cannot be written must make
# the program fail, naming the call and giving the runtime's message.
set -eu
"$1" spiral.safetensors
if "$1" no-such-folder/spiral.safetensors >/dev/null 2>err.txt; then
  echo "train: saving into a missing folder succeeded" >&2
  exit 1
fi
grep -q '^train: safetensors_save: save: cannot write no-such-folder/spiral.safetensors' err.txt || {
  echo "train: unexpected error report:" >&2
  cat err.txt >&2
  exit 1
}
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
