#!/usr/bin/python3
# The differential test's golden files: runs every case of tests/diff/cases/*.json through
# PyTorch (Debian's python3-torch 1.13) and writes
#   tests/diff/golden/golden.safetensors  the inputs, the outputs, the upstream gradients and the
#                                         input gradients, each in its own dtype;
#   tests/diff/golden/cases.lua           the expanded case list (one Lua table per case) that
#                                         tests/lua/diff_spec.lua reads, so Lua never parses JSON.
# The inputs are drawn here (numpy-free, from torch's generator with a fixed seed) and stored, so
# the Lua side only rebuilds the same views (transposed, stepped, expanded, offset) from them.
#
#   /usr/bin/python3 tests/diff/make_golden.py          (or `make golden`)
#
# Case file format: docs/testing.md. Each JSON entry expands to the product of its `shapes`,
# `dtypes`, `layouts`, `values` and `kwargs` lists. Lines starting with // are comments.
#
# float16 and bfloat16: the reference is the float32 computation on the same (exactly
# representable) inputs, rounded once to the 16-bit type, which is Ember's rule "compute in
# float32, round once"; the output dtype is still the one PyTorch gives for the 16-bit inputs.
import glob
import json
import math
import os
import struct
import sys
import zlib

# One thread everywhere (torch and its BLAS/LAPACK): the same summation order on every run,
# so regenerating without changes gives the same bytes.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch  # noqa: E402

torch.set_num_threads(1)

import ops_torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, 'golden')

DTYPES = {
    'float32': torch.float32, 'float64': torch.float64, 'float16': torch.float16,
    'bfloat16': torch.bfloat16, 'int8': torch.int8, 'uint8': torch.uint8, 'int16': torch.int16,
    'int32': torch.int32, 'int64': torch.int64, 'bool': torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}
ST = {'float32': 'F32', 'float64': 'F64', 'float16': 'F16', 'bfloat16': 'BF16', 'int8': 'I8',
      'uint8': 'U8', 'int16': 'I16', 'int32': 'I32', 'int64': 'I64', 'bool': 'BOOL'}
HALF = (torch.float16, torch.bfloat16)


def is_float(dt):
    return dt.is_floating_point


# ---- inputs ----------------------------------------------------------------------------------

def specials(dt, n):
    """n values cycling through the special values of dtype dt."""
    if dt == torch.bool:
        vals = [True, False]
    elif is_float(dt):
        fi = torch.finfo(dt)
        vals = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5,
                fi.max / 2, -fi.max / 2, fi.tiny, -fi.tiny, fi.tiny / 4, 3.0, 1e-3]
    else:
        ii = torch.iinfo(dt)
        vals = [0, 1, -1, 2, -3, 7, ii.max, ii.min, ii.max - 1, ii.min + 1, 5, -8]
        vals = [v for v in vals if ii.min <= v <= ii.max]
    return [vals[i % len(vals)] for i in range(n)]


def draw(kind, shape, dt, gen):
    """A tensor of `shape` and dtype dt drawn per `kind` (see docs/testing.md)."""
    n = math.prod(shape)
    kind = kind.lstrip('+')  # '+' marks values the Lua side shifts by 1 (see index kinds)
    name, _, arg = kind.partition(':')
    if name == 'special':
        if n == 0:
            return torch.zeros(shape, dtype=dt)
        return torch.tensor(specials(dt, n), dtype=torch.float64 if dt != torch.bool else torch.bool
                            ).to(dt).reshape(shape)
    if name in ('index', 'class'):
        return torch.randint(0, int(arg), shape, generator=gen).to(dt)
    if name == 'mask' or dt == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if name == 'distinct':
        v = torch.randperm(max(n, 1), generator=gen)[:n].to(torch.float64) - n // 2
        if is_float(dt):
            v = v * 0.75
        return v.reshape(shape).to(dt)
    if name == 'perm':  # distinct within each plane of the last two dims
        p = math.prod(shape[-2:])
        planes = [torch.randperm(int(arg), generator=gen)[:p] for _ in range(n // max(p, 1))]
        return (torch.cat(planes) if planes else torch.zeros(0)).reshape(shape).to(dt)
    if name == 'int' and is_float(dt):
        lo, hi = [int(s) for s in arg.split(',')]
        return torch.randint(lo, hi, shape, generator=gen).to(dt)
    if name == 'list':  # the listed values, cycled
        vals = [float(v) for v in arg.split(',')]
        return torch.tensor([vals[i % len(vals)] for i in range(n)], dtype=torch.float64
                            ).reshape(shape).to(dt)
    if name == 'const':
        return torch.full(shape, float(arg), dtype=dt)
    if not is_float(dt):
        lo, hi = (0, 12) if dt == torch.uint8 else (-6, 7)
        if name == 'pos':
            lo = 1
        if name in ('int', 'uniform'):
            lo, hi = [int(float(s)) for s in arg.split(',')]
        return torch.randint(lo, hi, shape, generator=gen).to(dt)
    if name == 'randn':
        v = torch.randn(shape, generator=gen, dtype=torch.float64)
    elif name == 'pos':
        v = torch.rand(shape, generator=gen, dtype=torch.float64) * 2.8 + 0.2
    elif name == 'unit':
        v = torch.rand(shape, generator=gen, dtype=torch.float64) * 1.9 - 0.95
    elif name == 'prob':
        v = torch.rand(shape, generator=gen, dtype=torch.float64) * 0.9 + 0.05
    elif name == 'wellcond':  # square matrices far from singular
        v = torch.randn(shape, generator=gen, dtype=torch.float64) * 0.3
        if len(shape) >= 2 and shape[-1] == shape[-2]:
            v = v + 2 * torch.eye(shape[-1], dtype=torch.float64)
    elif name == 'spd':  # symmetric positive definite
        b = torch.randn(shape, generator=gen, dtype=torch.float64)
        v = b @ b.transpose(-1, -2) + shape[-1] * torch.eye(shape[-1], dtype=torch.float64)
    elif name == 'logsoftmax':  # log-probabilities along the last dim
        v = torch.log_softmax(torch.randn(shape, generator=gen, dtype=torch.float64), -1)
    elif name == 'uniform':
        lo, hi = [float(s) for s in arg.split(',')]
        v = torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    else:
        raise ValueError(f'unknown value kind {kind!r}')
    return v.to(dt)


def base_shape(shape, layout):
    """The stored tensor's shape for a view of `shape` in `layout`."""
    s = list(shape)
    if layout == 't' and len(s) >= 2:
        s[-1], s[-2] = s[-2], s[-1]
    elif layout == 's' and len(s) >= 1:
        s[-1] = 2 * s[-1]
    elif layout == 'e' and len(s) >= 1:
        s[0] = 1
    elif layout == 'o' and len(s) >= 1:
        s[0] = s[0] + 1
    return s


def make_view(base, shape, layout):
    """The view the op sees; tests/lua/diff_spec.lua's view() builds the same one."""
    if layout == 't' and base.dim() >= 2:
        return base.transpose(-1, -2)
    if layout == 's' and base.dim() >= 1:
        return base[..., ::2]
    if layout == 'e' and base.dim() >= 1:
        return base.expand(shape)
    if layout == 'o' and base.dim() >= 1:
        return base[1:]
    return base


# ---- running a case --------------------------------------------------------------------------

def as_tuple(r):
    return tuple(r) if isinstance(r, (tuple, list)) else (r,)


def run_case(op, views, kw):
    return as_tuple(ops_torch.OPS[op](views, kw))


def reference(case, bases, gen):
    """Outputs, upstream gradients and input gradients of one case (see the header)."""
    op, kw = case['op'], case['kwargs']
    half = any(b.dtype in HALF for b in bases)
    native = None
    if half:
        try:
            native = run_case(op, [make_view(b, i['shape'], i['layout'])
                                   for b, i in zip(bases, case['inputs'])], kw)
        except RuntimeError:
            native = None
    leaves = []
    for b, i in zip(bases, case['inputs']):
        x = b.to(torch.float32) if b.dtype in HALF else b.clone()
        if i['grad']:
            x.requires_grad_(True)
        leaves.append(x)
    views = [make_view(x, i['shape'], i['layout']) for x, i in zip(leaves, case['inputs'])]
    outs = run_case(op, views, kw)
    out_dtypes = []
    for k, o in enumerate(outs):
        dt = o.dtype
        if native is not None:
            dt = native[k].dtype
        elif half and dt == torch.float32:
            dt = next(b.dtype for b in bases if b.dtype in HALF)
        out_dtypes.append(dt)
    result = [o.detach().to(dt) for o, dt in zip(outs, out_dtypes)]
    if case['native16'] and native is not None:  # the op's meaning depends on the 16-bit dtype
        result = [o.detach() for o in native]
    grads, ups = None, None
    if any(i['grad'] for i in case['inputs']):
        ups, pairs = [], []
        for k, (o, dt) in enumerate(zip(outs, out_dtypes)):
            if is_float(dt) and o.requires_grad and k in case.get('grad_outs', [k]):
                g = torch.randn(o.shape, generator=gen, dtype=torch.float64).to(dt)
                ups.append(g)
                pairs.append((o, g.to(o.dtype)))
            else:
                ups.append(None)
        if pairs:
            torch.autograd.backward([p[0] for p in pairs], [p[1] for p in pairs])
        grads = []
        for x, b, i in zip(leaves, bases, case['inputs']):
            if not i['grad']:
                grads.append(None)
            elif x.grad is None:
                grads.append(torch.zeros_like(b))
            else:
                grads.append(x.grad.to(b.dtype))
    return result, ups, grads


# ---- expanding the case files ----------------------------------------------------------------

def listify(v, default):
    if v is None:
        return [default]
    return v if isinstance(v, list) else [v]


def per_input(v, n):
    """A per-input setting given once for all inputs or as a list."""
    if isinstance(v, list):  # longer lists serve the entry's shapes with fewer inputs too
        assert len(v) >= n, f'{v} does not give one entry per input ({n})'
        return v[:n]
    return [v] * n


def default_dtype(kind):
    name = kind.lstrip('+').partition(':')[0]
    return 'int64' if name in ('index', 'class', 'perm') else 'bool' if name == 'mask' else \
        'float32'


def expand(entry):
    op = entry['op']
    assert op in ops_torch.OPS, f'no torch mapping for op {op!r} (tests/diff/ops_torch.py)'
    for shapes in entry['shapes']:
        n = len(shapes)
        for dtypes in listify(entry.get('dtypes'), None):
            for layouts in listify(entry.get('layouts'), 'c'):
                for values in listify(entry.get('values'), 'randn'):
                    for kw in listify(entry.get('kwargs'), {}):
                        dts = per_input(dtypes, n)
                        vals = per_input(values, n)
                        # without dtypes: int64 for indices, bool for masks, else float32
                        if dtypes is None:
                            dts = [default_dtype(v) for v in vals]
                        # one letter for every input, or one letter per input
                        lays = list(layouts * n if len(layouts) == 1 else
                                    (layouts + 'c' * n)[:n])
                        grad = entry.get('grad', False)
                        gflags = per_input(grad, n)
                        inputs = []
                        for k in range(n):
                            dt = DTYPES[dts[k]]
                            inputs.append({'shape': list(shapes[k]), 'dtype': dts[k],
                                           'layout': lays[k], 'kind': vals[k],
                                           'grad': bool(gflags[k]) and is_float(dt)})
                        yield {'op': op, 'kwargs': kw, 'inputs': inputs,
                               'index_out': entry.get('index_out', []),
                               'tol': entry.get('tol', 1), 'vulkan': entry.get('vulkan', True),
                               'error': entry.get('error', False),
                               'native16': entry.get('native16', False),
                               'grad_outs': entry.get('grad_outs', list(range(99)))}


def read_cases():
    cases = []
    for path in sorted(glob.glob(os.path.join(HERE, 'cases', '*.json'))):
        with open(path) as f:
            text = ''.join(l for l in f if not l.lstrip().startswith('//'))
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as e:
            sys.exit(f'{path}: {e}')
        for e in entries:
            for c in expand(e):
                c['file'] = os.path.basename(path)
                cases.append(c)
    return cases + derived(cases)


INDEX_KINDS = ('index', 'class', 'perm', 'mask', '+')


def is_data(i):
    """A floating input holding data (not positions, masks or classes)."""
    return DTYPES[i['dtype']].is_floating_point and not i['kind'].startswith(INDEX_KINDS)


def derived(cases):
    """Variants of each op's first float32 case that its entries lack, so every op meets
    strided, zero-size and special inputs: every input stepped (and transposed where 2-d);
    dim 0 emptied where the inputs agree on it; special values in the data inputs (forward
    only). A variant PyTorch refuses is dropped (make_golden prints how many)."""
    first, seen = {}, {}
    for c in cases:
        if c['error']:
            continue
        s = seen.setdefault(c['op'], set())
        for i in c['inputs']:
            s.add('layout' if i['layout'] != 'c' else None)
            s.add('special' if i['kind'] == 'special' else None)
            s.add('zero' if 0 in i['shape'] else None)
        if c['op'] not in first and all(i['dtype'] in ('float32', 'int64', 'bool')
                                        for i in c['inputs']):
            first[c['op']] = c
    out = []
    for op, c in first.items():
        if not c['inputs']:
            continue
        s = seen[op]

        def variant(**change):
            v = json.loads(json.dumps(c))
            v['derived'] = True
            for i, new in zip(v['inputs'], change['inputs']):
                i.update(new)
            if change.get('forward'):
                for i in v['inputs']:
                    i['grad'] = False
            out.append(v)
        if 'layout' not in s:
            variant(inputs=[{'layout': 't' if len(i['shape']) >= 2 else 's'} for i in c['inputs']])
        if 'zero' not in s:
            d0 = c['inputs'][0]['shape'][:1]
            variant(inputs=[{'shape': [0] + i['shape'][1:]} if i['shape'][:1] == d0 and d0 else {}
                            for i in c['inputs']])
        if 'special' not in s and any(is_data(i) for i in c['inputs']):
            variant(inputs=[{'kind': 'special'} if is_data(i) else {} for i in c['inputs']],
                    forward=True)
    return out


# ---- writing ---------------------------------------------------------------------------------

def tensor_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.numpy().tobytes() if t.numel() else b''


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors:
        b = tensor_bytes(t)
        header[name] = {'dtype': ST[NAMES[t.dtype]], 'shape': list(t.shape),
                        'data_offsets': [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path + '.tmp', 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + '.tmp', path)


LUA_KEYWORDS = {'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function', 'goto',
                'if', 'in', 'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true',
                'until', 'while'}


def lua(v):
    """v as a Lua literal (JSON-like values only)."""
    if v is None:
        return 'nil'
    if isinstance(v, bool):
        return 'true' if v else 'false'
    if isinstance(v, (int, float)):
        if isinstance(v, float) and math.isinf(v):
            return '(1/0)' if v > 0 else '(-1/0)'
        if isinstance(v, float) and math.isnan(v):
            return '(0/0)'
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return '{' + ', '.join(lua(x) for x in v) + '}'
    if isinstance(v, dict):
        if not v:
            return '{}'
        return '{' + ', '.join(f'{k} = {lua(x)}' if k.isidentifier() and k not in LUA_KEYWORDS
                               else f'[{json.dumps(k)}] = {lua(x)}'
                               for k, x in sorted(v.items())) + '}'
    raise TypeError(type(v))


class Pools:
    """One flat tensor per dtype holding every stored tensor of that dtype back to back, so the
    safetensors header stays small; a tensor is then named by "dtype@offset:shape"."""

    def __init__(self):
        self.parts = {}
        self.sizes = {}

    def put(self, t):
        name = NAMES[t.dtype]
        off = self.sizes.get(name, 0)
        self.parts.setdefault(name, []).append(t.detach().contiguous().reshape(-1))
        self.sizes[name] = off + t.numel()
        return f'{name}@{off}:' + 'x'.join(str(d) for d in t.shape)

    def tensors(self):
        return [(name, torch.cat(parts)) for name, parts in sorted(self.parts.items())]


def main():
    cases = read_cases()
    torch.manual_seed(0)
    pools, lines, seen, dropped = Pools(), [], {}, 0
    for n, c in enumerate(cases, 1):
        # The seed comes from the case itself (and its repeat count), not its position, so
        # adding cases leaves the others' inputs as they were.
        key = json.dumps([c['op'], c['inputs'], c['kwargs']], sort_keys=True)
        seen[key] = seen.get(key, 0) + 1
        gen = torch.Generator().manual_seed(zlib.crc32(f'{key} {seen[key]}'.encode()))
        what = f'case {n} ({c["file"]}: {c["op"]} {c["inputs"]} {c["kwargs"]})'
        try:
            bases = [draw(i['kind'], base_shape(i['shape'], i['layout']), DTYPES[i['dtype']],
                          gen) for i in c['inputs']]
            outs, ups, grads = reference(c, bases, gen)
        except Exception as e:
            if c.get('derived'):
                dropped += 1
                continue
            if not c['error']:
                sys.exit(f'{what}: torch raised {e}')
            outs, ups, grads = None, None, None
        else:
            if c['error']:
                sys.exit(f'{what}: expected an error, torch gave none')
        # inputs: {dtype, view shape, layout, kind, grad, stored tensor}
        # inputs: "stored-tensor layout kind g|-" and, for an expanded view, its shape (the
        # other layouts' view shapes follow from the stored shape)
        ins = [' '.join([pools.put(b), i['layout'], i['kind'], 'g' if i['grad'] else '-'] +
                        (['x'.join(str(d) for d in i['shape'])] if i['layout'] == 'e' else []))
               for i, b in zip(c['inputs'], bases)]
        rec = {'op': c['op'], 'kw': c['kwargs'], 'inputs': ins}  # its id is its position
        if outs is not None:
            rec['outs'] = [pools.put(o) for o in outs]
        if ups is not None:
            rec['ups'] = [pools.put(u) if u is not None else False for u in ups]
        if grads is not None:
            rec['grads'] = [pools.put(g) if g is not None else False for g in grads]
        if c['index_out']:
            rec['index_out'] = [k + 1 for k in c['index_out']]
        if c['tol'] != 1:
            rec['tol'] = c['tol']
        if not c['vulkan']:
            rec['vulkan'] = False
        if c['error']:
            rec['error'] = True
        lines.append(lua(rec) + ',')
    os.makedirs(OUT_DIR, exist_ok=True)
    write_safetensors(os.path.join(OUT_DIR, 'golden.safetensors'), pools.tensors())
    with open(os.path.join(OUT_DIR, 'cases.lua'), 'w') as f:
        f.write('-- Generated by tests/diff/make_golden.py from tests/diff/cases/*.json: do not edit.\n')
        f.write(f'-- PyTorch {torch.__version__}, {len(lines)} cases.\n')
        f.write('return {\n' + '\n'.join(lines) + '\n}\n')
    size = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print(f'{len(lines)} cases ({dropped} derived variants PyTorch refuses left out), '
          f'{size / 1e6:.2f} MB')


if __name__ == '__main__':
    main()
