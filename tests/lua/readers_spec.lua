-- readers_spec: the data readers' limits on hostile files, and the gzip limit (ember.data).
--
-- Files are written here byte by byte and compressed with the gzip program. A file whose
-- first line declares a huge row must be refused with the row at fault before anything is
-- allocated; a compressed NPY header length is checked against what the file can hold; the
-- gzip limit is settable globally and per call, and is enforced with a message naming it.
local H = require 'tests.lua.helpers'
local ember = H.ember
local data = ember.data

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
local function le32(v)
  return string.char(v % 256, math.floor(v / 256) % 256, math.floor(v / 65536) % 256,
    math.floor(v / 16777216) % 256)
end

describe('readers on hostile files', function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  it('CSV: a first line of 65536 fields over short rows is refused at the row at fault', function()
    -- rows x fields = 2^32 float32 elements: 16 GiB, from a .gz of a few hundred bytes.
    local path = tmp('.csv')
    H.write_file(path, ('0,'):rep(65535) .. '0\n' .. ('1\n'):rep(65535))
    local gz = gzip(path)
    H.assert_error(function() data.read_csv(gz) end, 'line 2 has 1 fields, expected 65536')
    H.assert_error(function() data.read_csv(path) end, 'line 2 has 1 fields, expected 65536')
  end)

  it('CSV: an empty field in a file too small for its rows is reported as such', function()
    local path = tmp('.csv')
    H.write_file(path, '1,2,3\n4,,6\n')
    H.assert_error(function() data.read_csv(path) end, 'line 2, column 2: empty field')
  end)

  it('CSV: files whose rows fill the text exactly still read', function()
    local path = tmp('.csv')
    H.write_file(path, '1,2\n3,4\n5,6\n')
    H.assert_close(data.read_csv(path), { { 1, 2 }, { 3, 4 }, { 5, 6 } }, 0, 0)
    H.write_file(path, '7\n8\n')
    H.assert_close(data.read_csv(path), { { 7 }, { 8 } }, 0, 0)
  end)

  it('NPY: a compressed header length is checked against what the file can hold', function()
    local path = tmp('.npy')
    H.write_file(path, '\147NUMPY\2\0' .. le32(2 ^ 24 - 1) .. '{')
    H.assert_error(function() data.read_npy(gzip(path)) end,
      'declares a header of 16777215 bytes, more than a compressed file of')
    H.assert_error(function() data.read_npy(path) end, 'is truncated')
  end)
end)

describe('the gzip limit', function()
  teardown(function() for _, p in ipairs(made) do os.remove(p) end end)

  local function rows_gz(n)
    local path = tmp('.csv')
    H.write_file(path, ('1,2,3\n'):rep(n))
    return gzip(path)
  end

  it('defaults to 4 GiB and is settable', function()
    assert.are.equal(4 * 2 ^ 30, data.gzip_limit())
    data.set_gzip_limit(1000)
    assert.are.equal(1000, data.gzip_limit())
    data.set_gzip_limit(4 * 2 ^ 30)
    H.assert_error(function() data.set_gzip_limit(0) end, 'expected gzip_limit to be a whole number')
    H.assert_error(function() data.set_gzip_limit(1.5) end, 'got 1.5')
    H.assert_error(function() data.set_gzip_limit('big') end, 'got big')
  end)

  it('is enforced on CSV, NPY and IDX, and naming it in the error', function()
    local gz = rows_gz(100) -- 600 bytes decompressed
    assert.are.same({ 100, 3 }, data.read_csv(gz, { gzip_limit = 600 }):size())
    H.assert_error(function() data.read_csv(gz, { gzip_limit = 599 }) end,
      'decompresses to more than the gzip limit of 599 bytes')
    -- the option applies to one call: the global limit is back afterwards
    assert.are.equal(4 * 2 ^ 30, data.gzip_limit())
    data.set_gzip_limit(100)
    H.assert_error(function() data.read_csv(gz) end, 'gzip limit of 100 bytes')
    data.set_gzip_limit(4 * 2 ^ 30)

    local npy = tmp('.npy')
    data.write_npy(npy, ember.zeros(64, { dtype = 'float64' }))
    local npy_gz = gzip(npy)
    assert.are.same({ 64 }, data.read_npy(npy_gz, { gzip_limit = 1000 }):size())
    H.assert_error(function() data.read_npy(npy_gz, { gzip_limit = 300 }) end,
      'decompresses to more than the gzip limit of 300 bytes')

    local idx = tmp('.idx')
    H.write_file(idx, '\0\0\8\1\0\0\1\0' .. ('\7'):rep(256))
    local idx_gz = gzip(idx)
    assert.are.same({ 256 }, data.read_idx(idx_gz, { gzip_limit = 264 }):size())
    H.assert_error(function() data.read_idx(idx_gz, { gzip_limit = 263 }) end,
      'gzip limit of 263 bytes')
    -- plain files are not limited
    assert.are.same({ 256 }, data.read_idx(idx, { gzip_limit = 10 }):size())
  end)

  it('refuses misspelt and bad options', function()
    local gz = rows_gz(1)
    H.assert_error(function() data.read_npy(gz, { gzip_limt = 10 }) end, 'unknown option gzip_limt')
    H.assert_error(function() data.read_idx(gz, { gzip_limit = -1 }) end,
      'read_idx: expected gzip_limit to be a whole number of bytes >= 1, got -1')
    H.assert_error(function() data.read_csv(gz, 5) end, 'expected an options table, got number')
  end)
end)
