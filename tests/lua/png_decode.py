#!/usr/bin/python3
"""png_decode.py: an independent PNG decoder for the image and plot specs (Python's zlib only).

    png_decode.py FILE [RAW_OUT]

Parses the chunks, checks the signature and every chunk's CRC-32, inflates the joined IDAT
data and undoes the five scanline filters (8-bit gray, gray+alpha, RGB, RGBA, no interlacing).
Prints {"width", "height", "channels", "chunks", "filters" (rows per filter type)} as JSON; writes the pixels, row-major and
interleaved, to RAW_OUT when given (else adds them to the JSON as "pixels")."""
import json, struct, sys, zlib

data = open(sys.argv[1], 'rb').read()
assert data[:8] == b'\x89PNG\r\n\x1a\n', 'bad signature'
pos, chunks, idat = 8, [], b''
while pos < len(data):
    n, kind = struct.unpack('>I4s', data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    crc, = struct.unpack('>I', data[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(kind + body) == crc, 'bad CRC in ' + kind.decode()
    chunks.append(kind.decode())
    if kind == b'IHDR':
        w, h, depth, ctype, comp, filt, interlace = struct.unpack('>IIBBBBB', body)
        assert (depth, comp, filt, interlace) == (8, 0, 0, 0), 'unsupported IHDR'
    elif kind == b'IDAT':
        idat += body
    pos += 12 + n
assert chunks[0] == 'IHDR' and chunks[-1] == 'IEND', chunks
bpp = {0: 1, 4: 2, 2: 3, 6: 4}[ctype]
raw, stride = zlib.decompress(idat), w * bpp
assert len(raw) == h * (stride + 1), 'wrong decompressed size'
out, prev, filters = bytearray(), bytearray(stride), [0] * 5
for y in range(h):
    f, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    if f == 2:
        row = bytearray((r + b) & 255 for r, b in zip(row, prev))
    for i in range(stride if f in (1, 3, 4) else 0):
        a = row[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        if f == 1: row[i] = (row[i] + a) & 255
        elif f == 3: row[i] = (row[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    assert f <= 4, 'bad filter %d' % f
    filters[f] += 1
    out += row
    prev = row
info = {'width': w, 'height': h, 'channels': bpp, 'chunks': chunks, 'filters': filters}
if len(sys.argv) > 2:
    open(sys.argv[2], 'wb').write(bytes(out))
else:
    info['pixels'] = list(out)
print(json.dumps(info))
