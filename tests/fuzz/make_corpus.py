#!/usr/bin/python3
"""Writes the fuzz targets' seed and regression corpus, tests/fuzz/corpus/<target>/.

Small valid files of every kind the readers take (plain and gzip), near misses, and the inputs
that reproduced past bugs (named bug_*). Run from the repository root with Debian's python3
(numpy): /usr/bin/python3 tests/fuzz/make_corpus.py. Ember's own checkpoints are added by
tests/fuzz/make_checkpoints.lua (run with build/ember, after this script). The files are committed; regenerate
only to change the seeds."""
import gzip, io, json, os, struct, shutil
import numpy as np

root = 'tests/fuzz/corpus'


def put(target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), 'wb') as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


# ---- CSV: byte 0 = delimiter index (| 8 to skip a header), byte 1 = dtype index ----------------
# delimiters , ; \t ' ' | : ; dtypes f32 f64 f16 bf16 i64 i32 i16 i8 u8 bool
def csv(name, delim_i, dtype_i, text, header=False, compress=False):
    body = gz(text) if compress else text
    put('csv', name, bytes([delim_i | (8 if header else 0), dtype_i]) + body)

csv('plain', 0, 0, b'1,2,3\n4,5,6\n')
csv('header', 0, 0, b'a,b\n1.5,2\n3,4e-3\n', header=True)
csv('crlf_bom', 0, 1, b'\xef\xbb\xbf1,2\r\n3,4\r\n')
csv('blanks', 3, 0, b'  1   2\t3\n4 5 6  \n\n')
csv('tabs', 2, 4, b'1\t-2\t3\n')
csv('quoted', 0, 0, b'"1", " 2 " ,3\n')
csv('semicolon_int8', 1, 7, b'1;-128;127\n')
csv('uint8_range', 0, 8, b'0,255,256\n')
csv('nan_inf_hex', 0, 0, b'nan,inf,-inf,0x1p3\n')
csv('empty_field', 0, 0, b'1,,3\n')
csv('ragged', 0, 0, b'1,2,3\n4,5\n')
csv('float16', 0, 2, b'65504,1e-8,70000\n')
csv('bfloat16', 0, 3, b'1.5,3e38\n')
csv('gzip', 0, 0, b'1,2\n3,4\n', compress=True)
csv('pipe_bool', 4, 9, b'1|0\n')
csv('empty', 0, 0, b'')
csv('only_blank_lines', 0, 0, b'\n \n\t\n')
csv('trailing_quote', 0, 0, b'"1"x,2\n')
csv('unterminated_quote', 0, 0, b'"1,2\n')
csv('int64_overflow', 0, 4, b'9223372036854775808\n')
# The first line's field count times the row count was allocated before any row was checked:
# a ~500-byte .gz asked for 16 GiB (2^16 fields x 2^16 rows of float32).
csv('bug_wide_first_line', 0, 0, gz(b','.join([b'0'] * 65536) + b'\n' + b'0\n' * 65535),
    compress=False)

# ---- NPY ---------------------------------------------------------------------------------------
def npy_bytes(a, fortran=False):
    b = io.BytesIO()
    np.save(b, np.asfortranarray(a) if fortran else a)
    return b.getvalue()

def npy_raw(header, data=b'', version=1):
    h = header.encode()
    pad = (64 - (10 + len(h) + 1) % 64) % 64
    h = h + b' ' * pad + b'\n'
    if version == 1:
        return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h + data
    return b'\x93NUMPY' + bytes([version, 0]) + struct.pack('<I', len(h)) + h + data

put('npy', 'f4', npy_bytes(np.arange(6, dtype='<f4').reshape(2, 3)))
put('npy', 'f8_be', npy_bytes(np.arange(4, dtype='>f8')))
put('npy', 'f2', npy_bytes(np.array([1.5, -2], dtype='<f2')))
put('npy', 'i1', npy_bytes(np.array([-1, 2], dtype='i1')))
put('npy', 'i2_be', npy_bytes(np.array([1, 2, 3], dtype='>i2')))
put('npy', 'i4', npy_bytes(np.array([[1], [2]], dtype='<i4')))
put('npy', 'i8', npy_bytes(np.array(7, dtype='<i8')))
put('npy', 'u1', npy_bytes(np.arange(5, dtype='u1')))
put('npy', 'b1', npy_bytes(np.array([True, False])))
put('npy', 'fortran', npy_bytes(np.arange(6, dtype='<f4').reshape(2, 3), fortran=True))
put('npy', 'zero_size', npy_bytes(np.zeros((0, 3), dtype='<f4')))
put('npy', 'gzip', gz(npy_bytes(np.arange(8, dtype='<f4'))))
put('npy', 'v2', npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                         struct.pack('<2f', 1, 2), version=2))
put('npy', 'v3', npy_raw("{'descr': '<i2', 'fortran_order': False, 'shape': (1,), }",
                         b'\x01\x00', version=3))
put('npy', 'u2_refused', npy_bytes(np.array([1], dtype='<u2')))
put('npy', 'structured', npy_raw("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", b'\0' * 4))
put('npy', 'truncated_data', npy_bytes(np.arange(6, dtype='<f4'))[:-5])
put('npy', 'extra_data', npy_bytes(np.arange(2, dtype='<f4')) + b'\0')
put('npy', 'python2_long', npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (2L,), }", b'\0' * 8))
put('npy', 'huge_shape', npy_raw("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"))
put('npy', 'zero_huge_shape', npy_raw("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4), }"))
put('npy', 'bad_header', npy_raw("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (), }"))
put('npy', 'not_npy', b'\x93NUMPX\x01\x00')
# A header length of 16 MiB - 1 in a tiny file was allocated before it was checked against
# the file's size (plain and compressed).
put('npy', 'bug_header_length', b'\x93NUMPY\x02\x00' + struct.pack('<I', (1 << 24) - 1) + b'{')
put('npy', 'bug_header_length_gz', gz(b'\x93NUMPY\x02\x00' + struct.pack('<I', (1 << 24) - 1) + b'{'))

# ---- IDX ---------------------------------------------------------------------------------------
def idx(code, dims, data):
    return bytes([0, 0, code, len(dims)]) + b''.join(struct.pack('>I', d) for d in dims) + data

put('idx', 'ubyte', idx(0x08, [2, 3], bytes(range(6))))
put('idx', 'byte', idx(0x09, [2], b'\xff\x01'))
put('idx', 'short', idx(0x0B, [2], struct.pack('>2h', -1, 300)))
put('idx', 'int', idx(0x0C, [1, 1], struct.pack('>i', -5)))
put('idx', 'float', idx(0x0D, [2], struct.pack('>2f', 1.5, -2)))
put('idx', 'double', idx(0x0E, [1], struct.pack('>d', 3.25)))
put('idx', 'gzip', gz(idx(0x08, [3, 2, 2], bytes(range(12)))))
put('idx', 'zero_dim', idx(0x08, [0, 28, 28], b''))
put('idx', 'truncated', idx(0x08, [10], b'\0' * 3))
put('idx', 'extra', idx(0x08, [1], b'\0\0'))
put('idx', 'bad_type', bytes([0, 0, 0x0A, 1, 0, 0, 0, 1, 0]))
put('idx', 'too_many_dims', bytes([0, 0, 8, 200]))
put('idx', 'huge', idx(0x0E, [0xFFFFFFFF] * 4, b''))
put('idx', 'huge_gz', gz(idx(0x08, [0xFFFF, 0xFFFF], b'')))
put('idx', 'short_header', b'\0\0\x08')

# ---- JSON (safetensors headers) ----------------------------------------------------------------
for name, text in [
    ('object', '{"a": [1, 2.5, -3e2, true, false, null], "b": {"c": "d"}}'),
    ('escapes', r'"\" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00"'),
    ('int64_min', '-9223372036854775808'),
    ('int64_over', '9223372036854775808'),
    ('deep', '[' * 64 + ']' * 64),
    ('too_deep', '[' * 70 + ']' * 70),
    ('lone_surrogate', r'"\udc00"'),
    ('bad_escape', r'"\x"'),
    ('leading_zero', '012'),
    ('trailing', '{} x'),
    ('control_char', '"a\x01"'),
    ('nul_key', '{"a\\u0000b": 1}'),
    ('header', json.dumps({'__metadata__': {'format': 'pt'},
                           'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}})),
    # A number longer than 63 characters lost its exponent: read as 1, not 1e5.
    ('bug_long_number', '1.' + '0' * 70 + 'e5'),
    ('bug_long_number_neg', '-0.' + '0' * 80 + '1E+90'),
]:
    put('json', name, text.encode())

# ---- safetensors -------------------------------------------------------------------------------
def st(header, data, pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b' ' * ((8 - len(h) % 8) % 8)
    return struct.pack('<Q', len(h)) + h + data

put('safetensors', 'two', st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},
                              'b': {'dtype': 'I64', 'shape': [], 'data_offsets': [8, 16]}},
                             struct.pack('<2f', 1, 2) + struct.pack('<q', 7)))
put('safetensors', 'dtypes', st({
    'f16': {'dtype': 'F16', 'shape': [1], 'data_offsets': [0, 2]},
    'bf16': {'dtype': 'BF16', 'shape': [1], 'data_offsets': [2, 4]},
    'u8': {'dtype': 'U8', 'shape': [2], 'data_offsets': [4, 6]},
    'b': {'dtype': 'BOOL', 'shape': [2], 'data_offsets': [6, 8]},
    'i8': {'dtype': 'I8', 'shape': [1], 'data_offsets': [8, 9]},
    'i16': {'dtype': 'I16', 'shape': [1], 'data_offsets': [9, 11]},
    'i32': {'dtype': 'I32', 'shape': [1], 'data_offsets': [11, 15]},
    'f64': {'dtype': 'F64', 'shape': [1], 'data_offsets': [15, 23]}}, bytes(range(23))))
put('safetensors', 'metadata', st({'__metadata__': {'format': 'pt', 'k': 'v'},
                                   'x': {'dtype': 'F32', 'shape': [0, 3], 'data_offsets': [0, 0]}}, b''))
put('safetensors', 'empty', st({}, b''))
put('safetensors', 'gap', st({'a': {'dtype': 'F32', 'shape': [1], 'data_offsets': [4, 8]}}, b'\0' * 8))
put('safetensors', 'overlap', st({'a': {'dtype': 'U8', 'shape': [2], 'data_offsets': [0, 2]},
                                  'b': {'dtype': 'U8', 'shape': [2], 'data_offsets': [1, 3]}}, b'\0' * 3))
put('safetensors', 'wrong_size', st({'a': {'dtype': 'F32', 'shape': [3], 'data_offsets': [0, 8]}}, b'\0' * 8))
put('safetensors', 'unsupported', st({'a': {'dtype': 'U16', 'shape': [1], 'data_offsets': [0, 2]}}, b'\0' * 2))
put('safetensors', 'truncated', st({'a': {'dtype': 'F64', 'shape': [4], 'data_offsets': [0, 32]}}, b'\0' * 8))
put('safetensors', 'huge_shape', st({'a': {'dtype': 'F32', 'shape': [4294967296, 4294967296], 'data_offsets': [0, 0]}}, b''))
put('safetensors', 'metadata_not_string', st({'__metadata__': {'k': 1}}, b''))
put('safetensors', 'header_too_long', struct.pack('<Q', 1 << 40) + b'{}')
put('safetensors', 'short', b'\x02\0\0')
put('safetensors', 'not_json', struct.pack('<Q', 4) + b'{,}]')

# ---- gzip reader: byte 0 = read mode and piece size, byte 1 = gzip limit / 16 (0: 64 MiB) ----
def gzr(name, mode, limit, body):
    put('gzip', name, bytes([mode, limit]) + body)

gzr('plain_slurp', 0, 0, b'hello, world\n')
gzr('plain_pieces', 7, 0, b'x' * 300)
gzr('gzip_slurp', 0, 0, gz(b'abc' * 100))
gzr('gzip_pieces', 31, 0, gz(bytes(range(256)) * 4))
gzr('gzip_at_limit', 0, 4, gz(b'y' * 64))
gzr('gzip_over_limit', 0, 4, gz(b'y' * 65))
gzr('gzip_bomb', 1, 255, gz(b'\0' * (1 << 20)))
gzr('truncated_gzip', 0, 0, gz(b'z' * 1000)[:-12])
gzr('corrupt_gzip', 0, 0, b'\x1f\x8b\x08\0\0\0\0\0\0\x03' + b'\xff' * 40)
gzr('two_members', 0, 0, gz(b'first ') + gz(b'second'))
gzr('gzip_trailing_garbage', 1, 0, gz(b'abc') + b'garbage')
gzr('empty', 0, 0, b'')

# ---- checkpoints as ember.load reads them: every safetensors seed, and metadata that only the
# Lua side interprets (__ember_types__, typed leaves, dotted keys) ------------------------------
shutil.rmtree(os.path.join(root, 'checkpoint'), ignore_errors=True)
shutil.copytree(os.path.join(root, 'safetensors'), os.path.join(root, 'checkpoint'))

def ck(name, meta, tensors=None):
    header, data = {'__metadata__': meta}, b''
    for k, n in (tensors or {}).items():
        header[k] = {'dtype': 'F32', 'shape': [n], 'data_offsets': [len(data), len(data) + 4 * n]}
        data += b'\0' * (4 * n)
    put('checkpoint', name, st(header, data))

T = '__ember_types__'
ck('types', {T: json.dumps({'a.lr': 'number', 'a.on': 'boolean', 'a.n': 'int64', 'a.u': 'uint64',
                            'e': 'table', 'f': 'flat'}),
             'a.lr': '0.5', 'a.on': 'true', 'a.n': '-12', 'a.u': '7', 'f.x.y': 'v'}, {'w.0': 1})
ck('types_bad_json', {T: '{"a": number}', 'a': '1'})
ck('types_not_object', {T: '["a"]'})
ck('types_unknown', {T: '{"a": "complex"}', 'a': '1'})
ck('types_bad_number', {T: '{"a": "number"}', 'a': '1.2.3'})
ck('types_bad_int64', {T: '{"a": "int64"}', 'a': '99999999999999999999'})
ck('types_bad_bool', {T: '{"a": "boolean"}', 'a': 'yes'})
ck('types_table_with_value', {T: '{"a": "table"}', 'a': 'x'})
ck('types_escapes', {T: '{"a\\u00e9\\ud83d\\ude00": "number"}', 'a\u00e9\U0001F600': '1'})
ck('conflict_value_table', {'a': 'x', 'a.b': 'y'})
ck('conflict_tensor', {'w': 'text'}, {'w': 1})
ck('dotted_keys', {'.': 'x', 'a..b': 'y', '1.2.3': 'z', '0': 'zero', '012': 'lead'})
