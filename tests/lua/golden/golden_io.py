"""The safetensors writer the golden-value generators (make_*.py) share: every tensor of `out`
(a dict name -> torch tensor) stored little-endian as F64 or F32 in name order, the header
padded to 8 bytes, the generator and torch version in the metadata; written through a
temporary file so that an interrupted run leaves the old file whole."""
import json
import os
import struct

import torch

FORMATS = {'F64': '<f8', 'F32': '<f4'}


def write(out, filename, generator, dtype='F64'):
    header, blobs, pos = {}, [], 0
    for name in sorted(out):
        t = out[name]
        data = t.numpy().astype(FORMATS[dtype]).tobytes()
        header[name] = {'dtype': dtype, 'shape': list(t.shape), 'data_offsets': [pos, pos + len(data)]}
        blobs.append(data)
        pos += len(data)
    header['__metadata__'] = {'generator': generator, 'torch': torch.__version__}
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    with open(path + '.tmp', 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + '.tmp', path)
    print(f'{path}: {len(out)} tensors, {pos} bytes of data')
