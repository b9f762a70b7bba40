-- Shapes whose element count or strides overflow int64 are refused by one check
-- (runtime/src/layout_check.c), whichever function makes the shape: creation, expand,
-- broadcasting, and the IDX, NPY and safetensors readers (whose messages name the loader and
-- the file). The reference is plain arithmetic: 2^62 * 4 = 2^64 does not fit int64, and the
-- strides of [0, 2^62, 2^62] would be 2^124.
local H = require 'tests.lua.helpers'
local ember = H.ember
local data = ember.data

local function tmp(suffix)
  return os.tmpname() .. (suffix or '')
end

local function be32(v)
  return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256,
    math.floor(v / 2 ^ 8) % 256, v % 256)
end

local function le64(v)
  local b = {}
  for i = 1, 8 do b[i] = string.char(v % 256); v = math.floor(v / 256) end
  return table.concat(b)
end

describe('shape overflow', function()
  it('expand to a shape whose element count overflows is refused', function()
    H.assert_error(function() ember.ones(1, 1):expand(2 ^ 62, 4) end, 'expand: shape is too large')
    H.assert_error(function() ember.ones(1, 1):expand(2 ^ 40, 2 ^ 40) end, 'expand: shape is too large')
    -- a large view whose count fits int64 is still a view (it allocates nothing), with the
    -- exact count; materializing it is refused by the allocation's own limit
    local big = ember.ones(1, 1):expand(2 ^ 31, 2 ^ 31)
    assert.are.equal(2 ^ 62, big:numel())
    H.assert_error(function() big:contiguous() end, 'shape is too large')
  end)

  it('zero-size shapes whose strides would overflow are refused', function()
    H.assert_error(function() ember.zeros(0, 2 ^ 62, 2 ^ 62) end,
      'zeros: shape is too large ([0,4611686018427387904,4611686018427387904]')
    H.assert_error(function() ember.empty(2 ^ 40, 2 ^ 40, 0) end, 'empty: shape is too large')
    H.assert_error(function() ember.ones(0, 1, 1):expand(0, 2 ^ 62, 2 ^ 62) end,
      'expand: shape is too large ([0,4611686018427387904,4611686018427387904]')
    -- zero-size shapes that fit stay ordinary
    assert.are.same({ 0, 2 ^ 30, 2 ^ 20 }, ember.zeros(0, 2 ^ 30, 2 ^ 20):size())
  end)

  it('an IDX header declaring such a zero-size shape is refused, naming the file', function()
    local path = tmp('.idx')
    H.write_file(path, string.char(0, 0, 8, 4) .. be32(0) .. be32(2 ^ 32 - 1) .. be32(2 ^ 32 - 1)
      .. be32(2 ^ 32 - 1))
    H.assert_error(function() data.read_idx(path) end,
      'idx: file ' .. path .. ' declares shape [0,4294967295,4294967295,4294967295], too large')
    os.remove(path)
  end)

  it('an NPY header declaring such a zero-size shape is refused, naming the file', function()
    local header = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }"
    local pad = (64 - (10 + #header + 1) % 64) % 64
    local h = header .. string.rep(' ', pad) .. '\n'
    local path = tmp('.npy')
    H.write_file(path, '\147NUMPY' .. string.char(1, 0, #h % 256, math.floor(#h / 256)) .. h)
    H.assert_error(function() data.read_npy(path) end,
      'npy: file ' .. path .. ' declares shape [0,4611686018427387904,4611686018427387904], too large')
    os.remove(path)
  end)

  it('a safetensors header declaring such a zero-size shape is refused, naming the file', function()
    local header = '{"x":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],'
      .. '"data_offsets":[0,0]}}'
    local path = tmp('.safetensors')
    H.write_file(path, le64(#header) .. header)
    H.assert_error(function() ember.load(path) end,
      "load: tensor 'x' in " .. path .. ' has an absurd shape [0,4611686018427387904,4611686018427387904]')
    os.remove(path)
  end)
end)
