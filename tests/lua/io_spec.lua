-- io_spec: the data file readers (IDX, NPY, CSV) and the NPY writer.
--
-- Test files are written here byte by byte (IDX and NPY headers encoded in Lua, independently of
-- the C readers), by NumPy (/usr/bin/python3) for interop, and compressed with the gzip program.
-- Values are compared with the tables the files were made from. The real Fashion-MNIST files
-- are checked against figures computed once with NumPy (label counts, pixel sums).
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local data = ember.data

-- ---- files ------------------------------------------------------------------------------------
local write_file, read_file = H.write_file, H.read_file
local made = {}
local function tmp(suffix)
  local p = os.tmpname()
  os.remove(p)
  p = p .. (suffix or '')
  made[#made + 1] = p
  return p
end



local function gzip(path)
  assert(os.execute('gzip -kf ' .. path) == 0, 'gzip failed')
  made[#made + 1] = path .. '.gz'
  return path .. '.gz'
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function python_ok(code)
  return os.execute('/usr/bin/python3 -c ' .. sh_quote(code) .. ' >/dev/null 2>&1') == 0
end
local have_numpy = python_ok('import numpy')

-- Runs python code with arguments; returns its output, failing the test if python failed.
local function python(code, ...)
  local args = {}
  for i, a in ipairs({ ... }) do args[i] = sh_quote(a) end
  local p = io.popen('/usr/bin/python3 -c ' .. sh_quote(code) .. ' ' .. table.concat(args, ' ') ..
    ' 2>&1; echo "rc=$?"')
  local out = p:read('*a')
  p:close()
  local body, rc = out:match('^(.-)rc=(%d+)%s*$')
  assert(rc == '0', 'python failed: ' .. out)
  return body
end

-- ---- byte encodings (the host is little-endian; the tests say so) ------------------------------
assert(ffi.abi('le'), 'these tests encode little-endian hosts')

local function be_int(v, nbytes)
  if v < 0 then v = v + 2 ^ (8 * nbytes) end
  local b = {}
  for i = nbytes, 1, -1 do
    b[i] = string.char(v % 256)
    v = math.floor(v / 256)
  end
  return table.concat(b)
end

local function le_int(v, nbytes) return be_int(v, nbytes):reverse() end

local function float_bytes(v, ctype) -- little-endian
  return ffi.string(ffi.new(ctype .. '[1]', v), ffi.sizeof(ctype))
end

local function f32(v) return tonumber(ffi.new('float', v)) end

-- ---- IDX --------------------------------------------------------------------------------------
local idx_types = {
  { code = 0x08, dtype = 'uint8', enc = function(v) return be_int(v, 1) end,
    values = { 0, 1, 127, 128, 200, 255 } },
  { code = 0x09, dtype = 'int8', enc = function(v) return be_int(v, 1) end,
    values = { -128, -1, 0, 1, 100, 127 } },
  { code = 0x0B, dtype = 'int16', enc = function(v) return be_int(v, 2) end,
    values = { -32768, -300, -1, 0, 258, 32767 } },
  { code = 0x0C, dtype = 'int32', enc = function(v) return be_int(v, 4) end,
    values = { -2147483648, -70000, -1, 0, 16909060, 2147483647 } },
  { code = 0x0D, dtype = 'float32', enc = function(v) return float_bytes(v, 'float'):reverse() end,
    values = { -1.5, 0, 0.1, 3.25e10, -7e-20, 1 / 3 }, round = f32 },
  { code = 0x0E, dtype = 'float64', enc = function(v) return float_bytes(v, 'double'):reverse() end,
    values = { -1.5, 0, 0.1, 1e300, -5e-300, 1 / 3 } },
}

local function idx_bytes(code, sizes, elems)
  local parts = { string.char(0, 0, code, #sizes) }
  for _, s in ipairs(sizes) do parts[#parts + 1] = be_int(s, 4) end
  for _, e in ipairs(elems) do parts[#parts + 1] = e end
  return table.concat(parts)
end

-- An IDX file of the given type and shape filled with the type's values in turn; returns the
-- path and the expected nested table.
local function make_idx(ty, sizes, suffix)
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  local elems, flat = {}, {}
  for i = 1, n do
    local v = ty.values[(i - 1) % #ty.values + 1]
    elems[i] = ty.enc(v)
    flat[i] = ty.round and ty.round(v) or v
  end
  local path = write_file(tmp(suffix or '.idx'), idx_bytes(ty.code, sizes, elems))
  local expected
  if #sizes == 0 then expected = flat[1] else expected = H.nested(sizes, function(i) return flat[i] end) end
  return path, expected
end

describe('read_idx', function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  for _, ty in ipairs(idx_types) do
    it('reads ' .. ty.dtype .. ' files of several shapes, plain and gzip-compressed', function()
      for _, sizes in ipairs({ { 6 }, { 2, 3 }, { 2, 3, 4 }, { 1, 1, 2, 1, 3 } }) do
        local path, expected = make_idx(ty, sizes)
        local x = data.read_idx(path)
        assert.are.equal(ty.dtype, x:dtype())
        assert.are.same(sizes, x:size())
        assert.is_true(x:is_contiguous())
        H.assert_close(x, expected, 0, 0, ty.dtype)
        H.assert_close(data.read_idx(gzip(path)), expected, 0, 0, ty.dtype .. ' gz')
      end
    end)
  end

  it('reads zero-size dimensions', function()
    local path = make_idx(idx_types[1], { 0, 28, 28 })
    local x = data.read_idx(path)
    assert.are.same({ 0, 28, 28 }, x:size())
    assert.are.same({ 0, 28, 28 }, data.read_idx(gzip(path)):size())
  end)

  it('reads the Fashion-MNIST training set', function()
    local dir = '/usr/share/datasets/fashion-mnist/'
    local labels = data.read_idx(dir .. 'train-labels-idx1-ubyte.gz')
    assert.are.equal('uint8', labels:dtype())
    assert.are.same({ 60000 }, labels:size())
    H.assert_close(labels:narrow(1, 1, 10), { 9, 0, 0, 3, 0, 2, 7, 2, 5, 5 }, 0, 0)
    local counts = {}
    local lt = labels:totable()
    for _, l in ipairs(lt) do counts[l] = (counts[l] or 0) + 1 end
    for c = 0, 9 do assert.are.equal(6000, counts[c], 'class ' .. c) end
    local images = data.read_idx(dir .. 'train-images-idx3-ubyte.gz')
    assert.are.equal('uint8', images:dtype())
    assert.are.same({ 60000, 28, 28 }, images:size())
    local wide = images:long()
    assert.are.equal(0, wide:min():item())
    assert.are.equal(255, wide:max():item())
    -- pixel sums computed with NumPy from the same files
    assert.are.equal(76247, wide[1]:sum():item())
    assert.are.equal(16684, wide[60000]:sum():item())
    assert.are.equal(3431114169, wide:sum():item())
  end)

  it('reads the Fashion-MNIST test set', function()
    local dir = '/usr/share/datasets/fashion-mnist/'
    local labels = data.read_idx(dir .. 't10k-labels-idx1-ubyte.gz')
    assert.are.same({ 10000 }, labels:size())
    H.assert_close(labels:narrow(1, 1, 10), { 9, 2, 1, 1, 6, 1, 4, 6, 5, 7 }, 0, 0)
    local counts = {}
    for _, l in ipairs(labels:totable()) do counts[l] = (counts[l] or 0) + 1 end
    for c = 0, 9 do assert.are.equal(1000, counts[c], 'class ' .. c) end
    local images = data.read_idx(dir .. 't10k-images-idx3-ubyte.gz')
    assert.are.same({ 10000, 28, 28 }, images:size())
    assert.are.equal(573469082, images:long():sum():item())
  end)

  describe('bad files', function()
    local function idx_err(bytes, pattern)
      local path = write_file(tmp('.idx'), bytes)
      H.assert_error(function() data.read_idx(path) end, pattern)
      return path
    end

    it('reports a wrong magic number', function()
      idx_err(string.char(0, 0, 0x07, 1) .. be_int(1, 4) .. 'x', 'is not an IDX file: magic 0x00000701')
      idx_err(string.char(1, 0, 0x08, 1) .. be_int(1, 4) .. 'x', 'is not an IDX file: magic 0x01000801')
      idx_err('P5\n28 28\n255\n', 'is not an IDX file')
    end)

    it('reports headers that are too short or declare no dimensions', function()
      idx_err('', 'is too short (0 bytes) for an IDX header')
      idx_err(string.char(0, 0, 8), 'is too short (3 bytes)')
      idx_err(string.char(0, 0, 8, 0), 'declares 0 dimensions; expected 1 to 8')
      idx_err(string.char(0, 0, 8, 9), 'declares 9 dimensions; expected 1 to 8')
      idx_err(string.char(0, 0, 8, 3) .. be_int(2, 4) .. be_int(2, 2),
        'is truncated: expected 16 bytes of data, got 10')
    end)

    it('reports truncated data with the byte counts', function()
      local header = string.char(0, 0, 8, 3) .. be_int(60000, 4) .. be_int(28, 4) .. be_int(28, 4)
      local path = idx_err(header .. string.rep('\0', 1000),
        'is truncated: expected 47040016 bytes of data, got 1016')
      assert.is_truthy(select(2, pcall(data.read_idx, path)):find(path, 1, true))
      -- compressed: the declared size passes the deflate bound of a tiny file
      local gz = gzip(path)
      H.assert_error(function() data.read_idx(gz) end,
        'declares dimensions [60000,28,28] of uint8, more data than a file of')
      -- a truncated gzip stream of a file that would fit
      local path2 = make_idx(idx_types[3], { 300, 40 })
      local whole = read_file(gzip(path2))
      local cut = write_file(tmp('.idx.gz'), whole:sub(1, math.floor(#whole / 2)))
      H.assert_error(function() data.read_idx(cut) end, 'is truncated: expected 24012 bytes of data, got')
    end)

    it('reports extra data after the declared elements', function()
      local path = make_idx(idx_types[1], { 2, 2 })
      write_file(path, read_file(path) .. 'zz')
      H.assert_error(function() data.read_idx(path) end,
        'has more data than its dimensions [2,2] declare (16 bytes expected)')
      H.assert_error(function() data.read_idx(gzip(path)) end, 'has more data than its dimensions')
    end)

    it('reports absurd dimensions without allocating them', function()
      local big = be_int(4294967295, 4)
      idx_err(string.char(0, 0, 0x0E, 3) .. big .. big .. big,
        'declares dimensions [4294967295,4294967295,4294967295] of float64, more data than a file of 16 bytes')
      idx_err(string.char(0, 0, 0x08, 2) .. big .. big,
        'declares dimensions [4294967295,4294967295] of uint8, more data than a file of 12 bytes')
      -- sizes that fit but pass the file's size: truncation, with the counts
      idx_err(string.char(0, 0, 0x0C, 2) .. big .. be_int(2, 4), 'is truncated: expected 34359738372 bytes of data, got 12')
    end)

    it('reports corrupt gzip data', function()
      idx_err('\31\139\8\0\0\0\0\0\0\3' .. string.rep('\255', 40), 'is not valid gzip data')
    end)

    it('reports missing files, directories and bad arguments', function()
      H.assert_error(function() data.read_idx('/nonexistent/x.idx') end,
        'idx: cannot open /nonexistent/x.idx: No such file or directory')
      H.assert_error(function() data.read_idx('/tmp') end, 'idx: cannot open /tmp: it is a directory')
      H.assert_error(function() data.read_idx('/dev/zero') end, 'idx: cannot open /dev/zero: it is not a regular file')
      H.assert_error(function() data.read_csv('/dev/zero') end, 'csv: cannot open /dev/zero: it is not a regular file')
      H.assert_error(function() data.read_idx(42) end, 'read_idx: expected a file path, got number')
    end)
  end)
end)

-- ---- NPY --------------------------------------------------------------------------------------
-- A file with the given header text (padded to 64 bytes as NumPy does) and raw data.
local function npy_bytes(header, raw, version)
  version = version or 1
  local prefix = version == 1 and 10 or 12
  local total = prefix + #header + 1
  local pad = (64 - total % 64) % 64
  local h = header .. string.rep(' ', pad) .. '\n'
  local len = version == 1 and le_int(#h, 2) or le_int(#h, 4)
  return '\147NUMPY' .. string.char(version, 0) .. len .. h .. (raw or '')
end

-- Values for every dtype: the pattern (i - 11) * 3 over arange(24), fitted to the type.
local npy_dtypes = {
  { 'float32', '<f4', function(i) return (i - 11) * 3 + 0.5 end },
  { 'float64', '<f8', function(i) return (i - 11) * 3 + 0.25 end },
  { 'float16', '<f2', function(i) return (i - 11) * 3 + 0.5 end },
  { 'int8', '|i1', function(i) return (i - 11) * 3 end },
  { 'uint8', '|u1', function(i) return i * 10 end },
  { 'int16', '<i2', function(i) return (i - 11) * 1000 end },
  { 'int32', '<i4', function(i) return (i - 11) * 100000 end },
  { 'int64', '<i8', function(i) return (i - 11) * 1e12 end },
  { 'bool', '|b1', function(i) return i % 3 == 0 end },
}

local function pattern_table(f, sizes)
  return H.nested(sizes, function(k) return f(k - 1) end)
end

describe('read_npy / write_npy', function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  for _, d in ipairs(npy_dtypes) do
    it('round-trips ' .. d[1] .. ' on several shapes, strided inputs included', function()
      for _, sizes in ipairs({ { 24 }, { 2, 3, 4 }, { 4, 6 }, { 0, 3 }, { 3, 0, 2 } }) do
        local expected = pattern_table(d[3], sizes)
        local x = ember.tensor(#sizes > 0 and sizes[1] > 0 and expected or {}, { dtype = d[1] })
        if x:numel() == 0 then x = ember.zeros(sizes, { dtype = d[1] }); expected = nil end
        local path = tmp('.npy')
        data.write_npy(path, x)
        local y = data.read_npy(path)
        assert.are.equal(d[1], y:dtype())
        assert.are.same(sizes, y:size())
        if expected then H.assert_close(y, expected, 0, 0, d[1]) end
        if #sizes == 2 and sizes[1] > 0 then
          -- a transposed view is written in its logical order
          local path2 = tmp('.npy')
          data.write_npy(path2, x:t())
          local z = data.read_npy(path2)
          assert.are.same({ sizes[2], sizes[1] }, z:size())
          H.assert_close(z, x:t():totable(), 0, 0, 'transposed')
        end
      end
      -- 0-dim
      local path = tmp('.npy')
      local s = ember.tensor(d[3](5), { dtype = d[1] })
      data.write_npy(path, s)
      local y = data.read_npy(path)
      assert.are.equal(0, y:dim())
      assert.are.equal(s:item(), y:item())
    end)
  end

  it('writes the header NumPy writes (v1.0, 64-byte aligned data)', function()
    local path = tmp('.npy')
    data.write_npy(path, ember.zeros(2, 3))
    local s = read_file(path)
    assert.are.equal('\147NUMPY\1\0', s:sub(1, 8))
    local hlen = s:byte(9) + 256 * s:byte(10)
    assert.are.equal(0, (10 + hlen) % 64)
    assert.are.equal("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
      s:sub(11, 10 + hlen):match('^(.-)%s*$'))
    assert.are.equal(10 + hlen + 24, #s)
    data.write_npy(path, ember.zeros(5, { dtype = 'uint8' }))
    assert.is_truthy(read_file(path):find("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", 1, true))
    data.write_npy(path, ember.tensor(1.5))
    assert.is_truthy(read_file(path):find("'shape': (), }", 1, true))
  end)

  it('reads hand-written headers: byte orders, double quotes, Fortran order, versions 2 and 3', function()
    local raw = {}
    for i = 0, 5 do raw[#raw + 1] = float_bytes(i + 0.5, 'float'):reverse() end
    local path = write_file(tmp('.npy'), npy_bytes(
      "{\"descr\": \">f4\", \"fortran_order\": False, \"shape\": (2, 3)}", table.concat(raw)))
    H.assert_close(data.read_npy(path), { { 0.5, 1.5, 2.5 }, { 3.5, 4.5, 5.5 } }, 0, 0)
    raw = {}
    for i = 0, 5 do raw[#raw + 1] = le_int(i, 2) end
    -- Fortran order: the data is column-major
    path = write_file(tmp('.npy'), npy_bytes(
      "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }", table.concat(raw)))
    local x = data.read_npy(path)
    H.assert_close(x, { { 0, 2, 4 }, { 1, 3, 5 } }, 0, 0)
    assert.is_true(x:is_contiguous())
    for _, v in ipairs({ 2, 3 }) do
      path = write_file(tmp('.npy'), npy_bytes(
        "{'descr': '<i2', 'fortran_order': False, 'shape': (6L,), }", table.concat(raw), v))
      H.assert_close(data.read_npy(path), { 0, 1, 2, 3, 4, 5 }, 0, 0, 'version ' .. v)
    end
    H.assert_close(data.read_npy(gzip(path)), { 0, 1, 2, 3, 4, 5 }, 0, 0, 'gzip')
  end)

  describe('bad files', function()
    local function npy_err(bytes, pattern)
      local path = write_file(tmp('.npy'), bytes)
      H.assert_error(function() data.read_npy(path) end, pattern)
    end
    local hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"

    it('reports a wrong magic or version', function()
      npy_err('PK\3\4 not an npy', 'is not an NPY file: it does not start with \\x93NUMPY')
      npy_err('', 'is not an NPY file')
      npy_err('\147NUMPY\4\0\10\0{}', 'has format version 4.0; supported: 1.0, 2.0, 3.0')
    end)

    it('reports truncation of the header and the data', function()
      local full = npy_bytes(hdr, string.rep('\0', 24))
      assert.are.equal(152, #full)
      npy_err(full:sub(1, 40), 'is truncated: expected 128 bytes of data, got 40')
      npy_err(full:sub(1, 140), 'is truncated: expected 152 bytes of data, got 140')
      npy_err(full .. 'x', 'has more data than its shape [2,3] declares')
      npy_err('\147NUMPY\2\0\255\255\255\127', 'declares a header of 2147483647 bytes; the limit is 16777216')
    end)

    it('reports malformed headers', function()
      npy_err(npy_bytes("{'descr': '<f4', 'shape': (2, 3), }", ''), "has a header without 'fortran_order'")
      npy_err(npy_bytes("{'descr': '<f4' 'fortran_order': False}", ''), "malformed header: expected ',' or '}'")
      npy_err(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': ()}", ''), 'expected True or False')
      npy_err(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", ''),
        'expected a non-negative integer in the shape')
      npy_err(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", ''),
        'has more than 8 dimensions')
      npy_err(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", ''),
        'unexpected key')
      npy_err(npy_bytes("[1, 2]", ''), "malformed header: expected '{'")
    end)

    it('reports dtypes Ember does not have', function()
      local function with(descr) return npy_bytes(("{'descr': %s, 'fortran_order': False, 'shape': (1,), }"):format(descr), '') end
      npy_err(with("'<u4'"), "has dtype '<u4' (uint32), which Ember does not have")
      npy_err(with("'<c8'"), "has dtype '<c8', which Ember does not support")
      npy_err(with("'<U5'"), "has dtype '<U5', which Ember does not support")
      npy_err(with("'f4'"), "has dtype 'f4', which has no byte order mark")
      npy_err(with("[('a', '<i4')]"), 'holds a structured array')
    end)

    it('reports absurd shapes without allocating them', function()
      npy_err(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ''),
        'declares shape [4294967296,4294967296] of float64, more data than a file of 128 bytes can hold')
      npy_err(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999, 2), }", ''),
        'shape entry too large')
    end)

    it('refuses to write bfloat16 and bad arguments', function()
      local path = tmp('.npy')
      H.assert_error(function() data.write_npy(path, ember.zeros(2, { dtype = 'bfloat16' })) end,
        'write_npy: bfloat16 has no NumPy dtype')
      assert.is_nil(io.open(path, 'rb'))
      H.assert_error(function() data.write_npy(path, { 1, 2 }) end, 'write_npy: expected a tensor, got table')
      H.assert_error(function() data.write_npy('/nonexistent/dir/x.npy', ember.zeros(2)) end,
        'write_npy: cannot write /nonexistent/dir/x.npy: No such file or directory')
    end)
  end)

  describe('with NumPy', function()
    it('reads what np.save writes, every dtype and byte order, Fortran order, versions 2 and 3', function()
      if not have_numpy then pending('/usr/bin/python3 with numpy is not available') return end
      local dir = tmp('')
      assert(os.execute('mkdir -p ' .. dir) == 0)
      python([==[
import sys, numpy as np
d = sys.argv[1]
a = np.arange(24).reshape(2, 3, 4)
vals = {'f4': (a - 11) * 3 + 0.5, 'f8': (a - 11) * 3 + 0.25, 'f2': (a - 11) * 3 + 0.5,
        'i1': (a - 11) * 3, 'u1': a * 10, 'i2': (a - 11) * 1000, 'i4': (a - 11) * 100000,
        'i8': (a - 11) * 10**12, 'b1': a % 3 == 0}
for code, v in vals.items():
    for order in '<>':
        np.save('%s/%s%s.npy' % (d, 'le' if order == '<' else 'be', code), v.astype(order + code))
np.save(d + '/fortran.npy', np.asfortranarray(vals['f8']))
for ver in (2, 3):
    with open('%s/v%d.npy' % (d, ver), 'wb') as f:
        np.lib.format.write_array(f, vals['i4'].astype('<i4'), version=(ver, 0))
np.save(d + '/scalar.npy', np.float64(3.25))
np.save(d + '/empty.npy', np.zeros((0, 5), np.float32))
]==], dir)
      local codes = { f4 = 1, f8 = 2, f2 = 3, i1 = 4, u1 = 5, i2 = 6, i4 = 7, i8 = 8, b1 = 9 }
      for code, k in pairs(codes) do
        local d = npy_dtypes[k]
        local expected = pattern_table(d[3], { 2, 3, 4 })
        for _, order in ipairs({ 'le', 'be' }) do
          local x = data.read_npy(dir .. '/' .. order .. code .. '.npy')
          assert.are.equal(d[1], x:dtype())
          H.assert_close(x, expected, 0, 0, order .. code)
        end
      end
      local f = data.read_npy(dir .. '/fortran.npy')
      assert.is_true(f:is_contiguous())
      H.assert_close(f, pattern_table(npy_dtypes[2][3], { 2, 3, 4 }), 0, 0, 'fortran')
      for _, v in ipairs({ 2, 3 }) do
        H.assert_close(data.read_npy(dir .. '/v' .. v .. '.npy'), pattern_table(npy_dtypes[7][3], { 2, 3, 4 }), 0, 0)
      end
      local s = data.read_npy(dir .. '/scalar.npy')
      assert.are.equal(0, s:dim())
      assert.are.equal(3.25, s:item())
      assert.are.same({ 0, 5 }, data.read_npy(dir .. '/empty.npy'):size())
      os.execute('rm -rf ' .. dir)
    end)

    it('writes files np.load reads back exactly', function()
      if not have_numpy then pending('/usr/bin/python3 with numpy is not available') return end
      local dir = tmp('')
      assert(os.execute('mkdir -p ' .. dir) == 0)
      for _, d in ipairs(npy_dtypes) do
        local x = ember.tensor(pattern_table(d[3], { 2, 3, 4 }), { dtype = d[1] })
        data.write_npy(dir .. '/' .. d[1] .. '.npy', x)
        data.write_npy(dir .. '/' .. d[1] .. '_t.npy', x:transpose(1, 3))
      end
      local out = python([==[
import sys, numpy as np
d = sys.argv[1]
a = np.arange(24).reshape(2, 3, 4)
vals = {'float32': (a - 11) * 3 + 0.5, 'float64': (a - 11) * 3 + 0.25, 'float16': (a - 11) * 3 + 0.5,
        'int8': (a - 11) * 3, 'uint8': a * 10, 'int16': (a - 11) * 1000, 'int32': (a - 11) * 100000,
        'int64': (a - 11) * 10**12, 'bool': a % 3 == 0}
for name, v in vals.items():
    x = np.load('%s/%s.npy' % (d, name))
    assert x.dtype == np.dtype(name), (name, x.dtype)
    assert x.shape == (2, 3, 4) and (x == v).all(), name
    t = np.load('%s/%s_t.npy' % (d, name))
    assert t.shape == (4, 3, 2) and (t == v.transpose(2, 1, 0)).all(), name
print('checked', len(vals))
]==], dir)
      assert.are.equal('checked 9\n', out)
      os.execute('rm -rf ' .. dir)
    end)
  end)
end)

-- ---- CSV --------------------------------------------------------------------------------------
describe('read_csv', function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  local function csv(text) return write_file(tmp('.csv'), text) end

  it('reads a header, negative numbers and scientific notation', function()
    local path = csv('x,y,z\n1,-2.5,3e2\n-4.25e-1,5E+1,  6  \n')
    local x = data.read_csv(path, { header = true })
    assert.are.equal('float32', x:dtype())
    H.assert_close(x, { { 1, -2.5, 300 }, { f32(-0.425), 50, 6 } }, 0, 0, 'values')
    local d = data.read_csv(path, { header = true, dtype = 'float64' })
    assert.are.equal('float64', d:dtype())
    assert.are.equal(-0.425, d[2][1])
  end)

  it('accepts CRLF, blank lines, a BOM, quoted fields, nan and inf', function()
    local x = data.read_csv(csv('\239\187\191"a";"b"\r\n\r\n"1.5";2\r\n  \r\n3;"-4"\r\nnan;inf\r\n'),
      { header = true, delimiter = ';', dtype = 'float64' })
    local t = x:totable()
    assert.are.same({ 1.5, 2 }, t[1])
    assert.are.same({ 3, -4 }, t[2])
    assert.is_true(t[3][1] ~= t[3][1])
    assert.are.equal(math.huge, t[3][2])
  end)

  it('splits on tabs, and on runs of blanks with the delimiter " "', function()
    H.assert_close(data.read_csv(csv('1\t2\t3\n4\t5\t6\n'), { delimiter = '\t' }), { { 1, 2, 3 }, { 4, 5, 6 } }, 0, 0)
    H.assert_close(data.read_csv(csv('  1   2 \t 3\n4 5    6   \n'), { delimiter = ' ' }),
      { { 1, 2, 3 }, { 4, 5, 6 } }, 0, 0)
  end)

  it('reads integer dtypes exactly', function()
    local x = data.read_csv(csv('9007199254740993,-9223372036854775808\n1,2\n'), { dtype = 'int64' })
    assert.are.equal('int64', x:dtype())
    assert.are.equal(9007199254740993LL, x[1][1] and x:select(1, 1):select(1, 1):item_int64())
    assert.are.equal(-9223372036854775807LL - 1, x:select(1, 1):select(1, 2):item_int64())
    H.assert_close(data.read_csv(csv('-128,127\n0,5\n'), { dtype = 'int8' }), { { -128, 127 }, { 0, 5 } }, 0, 0)
  end)

  it('handles empty files and header-only files', function()
    assert.are.same({ 0, 0 }, data.read_csv(csv('')):size())
    assert.are.same({ 0, 0 }, data.read_csv(csv('\n\n')):size())
    assert.are.same({ 0, 3 }, data.read_csv(csv('a,b,c\n'), { header = true }):size())
  end)

  it('parses large files on several threads with the same result', function()
    H.seed(99)
    local rows, cols = 3000, 17
    local lines, expected = {}, {}
    for r = 1, rows do
      local row, fields = {}, {}
      for c = 1, cols do
        local v = math.floor(H.uniform(-1e6, 1e6)) / 64
        row[c] = v
        fields[c] = ('%.17g'):format(v)
      end
      expected[r] = row
      lines[r] = table.concat(fields, ',')
    end
    local path = csv(table.concat(lines, '\n'))
    local x = data.read_csv(path, { dtype = 'float64' })
    H.assert_close(x, expected, 0, 0)
    H.assert_close(data.read_csv(gzip(path), { dtype = 'float64' }), expected, 0, 0, 'gzip')
    -- the reported error is the first bad line, whatever thread found it
    lines[2500] = lines[2500]:gsub('^[^,]+', 'oops')
    lines[1200] = lines[1200]:gsub(',[^,]+$', ',bad')
    local bad = csv(table.concat(lines, '\n'))
    H.assert_error(function() data.read_csv(bad) end, 'line 1200, column 17: expected a number, got \'bad\'')
  end)

  describe('bad fields and options', function()
    it('names the line and column of a non-numeric field', function()
      local path = csv('1,2,3\n4,abc,6\n')
      H.assert_error(function() data.read_csv(path) end,
        'csv: ' .. path .. ' line 2, column 2: expected a number, got \'abc\'')
      H.assert_error(function() data.read_csv(csv('1,2\n3,4x\n')) end, "line 2, column 2: expected a number, got '4x'")
      H.assert_error(function() data.read_csv(csv('1,"2"x\n')) end, "line 1, column 2: expected a number, got '\"2\"x'")
    end)

    it('suggests header=true when the first line is not numeric', function()
      H.assert_error(function() data.read_csv(csv('a,b\n1,2\n')) end,
        "line 1, column 1: expected a number, got 'a' (a header line? skip it with header=true")
    end)

    it('reports empty fields and ragged rows', function()
      H.assert_error(function() data.read_csv(csv('1,2,3\n4,,6\n')) end, 'line 2, column 2: empty field')
      H.assert_error(function() data.read_csv(csv('1,2,3\n4,5,\n')) end, 'line 2, column 3: empty field')
      H.assert_error(function() data.read_csv(csv('1,2,3\n\n4,5\n')) end, 'line 3 has 2 fields, expected 3')
      H.assert_error(function() data.read_csv(csv('a,b\n1,2,3\n'), { header = true }) end,
        'line 2 has 3 fields, expected 2')
    end)

    it('checks integers against the dtype', function()
      H.assert_error(function() data.read_csv(csv('1,2.5\n'), { dtype = 'int32' }) end,
        "line 1, column 2: expected an integer, got '2.5'")
      H.assert_error(function() data.read_csv(csv('1,300\n'), { dtype = 'uint8' }) end,
        "line 1, column 2: integer out of range for uint8, got '300'")
      H.assert_error(function() data.read_csv(csv('99999999999999999999\n'), { dtype = 'int64' }) end,
        'integer out of range for int64')
    end)

    it('rejects bad options', function()
      local path = csv('1\n')
      H.assert_error(function() data.read_csv(path, { delimiter = ',,' }) end,
        'read_csv: expected a one-character delimiter, got ,,')
      H.assert_error(function() data.read_csv(path, { delimiter = '.' }) end, "csv: delimiter '.' (code 46) cannot separate numbers")
      H.assert_error(function() data.read_csv(path, { delimiter = 'e' }) end, 'cannot separate numbers')
      H.assert_error(function() data.read_csv(path, { dtype = 'bool' }) end, 'csv: expected a numeric dtype, got bool')
      H.assert_error(function() data.read_csv(path, { dtype = 'complex' }) end, 'read_csv')
      H.assert_error(function() data.read_csv(path, { header = 1 }) end, 'read_csv: expected header to be a boolean')
      H.assert_error(function() data.read_csv(path, { sep = ',' }) end, 'read_csv: unknown option sep')
      H.assert_error(function() data.read_csv('/nonexistent.csv') end, 'csv: cannot open /nonexistent.csv')
    end)
  end)
end)
