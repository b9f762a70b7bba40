-- image_spec: ember.image.save_png and ember.image.grid.
--
-- Every file is read back by an independent decoder (tests/lua/png_decode.py: Python's zlib,
-- CRCs checked, all five scanline filters undone) and compared pixel for pixel with values
-- computed here by plain loops: uint8 as is, floats clamped to [0, 1], times 255, rounded half
-- up in float32 arithmetic (emulated through FFI floats), grids laid out as make_grid does.
local H = require 'tests.lua.helpers'
local P = require 'tests.lua.png_helpers'
local ember = H.ember
local ffi = require 'ffi'
local image = ember.image

-- A uint8 tensor of the shape and its values (a flat list, row-major), pseudo-random.
local function random_bytes(shape, seed)
  H.seed(seed)
  local flat = {}
  local t = H.nested(shape, function(i)
    flat[i] = math.floor(H.random() * 256)
    return flat[i]
  end)
  return ember.tensor(t, { dtype = 'uint8' }), flat
end

-- [C, H, W] values (flat list) -> the [H, W, C] interleaved order a PNG holds.
local function interleave(flat, c, h, w)
  local out = {}
  for y = 0, h - 1 do
    for x = 0, w - 1 do
      for k = 0, c - 1 do out[#out + 1] = flat[k * h * w + y * w + x + 1] end
    end
  end
  return out
end

-- float32 v -> the byte save_png gives: floor(clamp(v, 0, 1) * 255 + 0.5) in float32.
local f32 = ffi.new('float[1]')
local function expected_byte(v)
  if v ~= v then return 0 end
  v = math.min(math.max(v, 0), 1)
  f32[0] = v * 255
  f32[0] = f32[0] + 0.5
  return math.floor(f32[0])
end

local function roundtrip(x, opts)
  local path = P.tmp()
  image.save_png(path, x, opts)
  return P.decode(path)
end

describe('ember.image.save_png', function()
  after_each(P.cleanup)

  it('writes a gray [H, W] uint8 image pixel for pixel', function()
    local x, flat = random_bytes({ 5, 7 }, 1)
    local d = roundtrip(x)
    assert.are.same({ 7, 5, 1 }, { d.width, d.height, d.channels })
    assert.are.same({ 'IHDR', 'IDAT', 'IEND' }, d.chunks)
    assert.are.same(flat, P.list(d))
  end)

  for _, c in ipairs({ 1, 2, 3, 4 }) do
    it(('writes a [%d, H, W] image as %d interleaved channels'):format(c, c), function()
      local x, flat = random_bytes({ c, 6, 9 }, 10 + c)
      local d = roundtrip(x)
      assert.are.same({ 9, 6, c }, { d.width, d.height, d.channels })
      assert.are.same(interleave(flat, c, 6, 9), P.list(d))
    end)
  end

  it('takes non-contiguous views (a transpose, a slice)', function()
    local x, flat = random_bytes({ 3, 8, 6 }, 3)
    local t = x:transpose(2, 3) -- [3, 6, 8]
    local want = {}
    for k = 0, 2 do
      for y = 0, 5 do for xx = 0, 7 do want[#want + 1] = flat[k * 48 + xx * 6 + y + 1] end end
    end
    assert.are.same(interleave(want, 3, 6, 8), P.list(roundtrip(t)))
    local s = x:narrow(2, 3, 4):select(1, 2) -- gray [4, 6]
    local want_s = {}
    for y = 2, 5 do for xx = 0, 5 do want_s[#want_s + 1] = flat[48 + y * 6 + xx + 1] end end
    assert.are.same(want_s, P.list(roundtrip(s)))
  end)

  it('maps floats from [0, 1] (clamped, rounded half up; NaN is 0)', function()
    local vals = { 0, 1 / 255, 0.5, 1, -3, 7, 0 / 0, 1 / 0, -1 / 0, 0.2, 0.7, 0.999 }
    H.seed(4)
    for _ = 1, 36 do vals[#vals + 1] = H.uniform(-0.2, 1.2) end
    for _, dt in ipairs({ 'float32', 'float64' }) do
      local x = ember.tensor(vals, { dtype = dt }):view(4, 12)
      local want = {}
      -- the values as stored (float64 goes through float32)
      for i, v in ipairs(x:float():view(-1):totable()) do want[i] = expected_byte(v) end
      assert.are.same(want, P.list(roundtrip(x)))
    end
  end)

  it('maps float16 and bfloat16 the same way', function()
    local x = ember.tensor({ { 0, 0.25, 0.5 }, { 0.75, 1, 2 } })
    for _, dt in ipairs({ 'float16', 'bfloat16' }) do
      assert.are.same({ 0, 64, 128, 191, 255, 255 }, P.list(roundtrip(x:to(dt))))
    end
  end)

  it('maps value_range = {lo, hi} and normalize = true to [0, 1] first', function()
    local x = ember.tensor({ { -10, 0, 10 }, { 5, -5, 20 } })
    -- (v + 10) / 20
    assert.are.same({ 0, 128, 255, 191, 64, 255 }, P.list(roundtrip(x, { value_range = { -10, 10 } })))
    -- (v + 10) / 30
    local want = {}
    for i, v in ipairs({ -10, 0, 10, 5, -5, 20 }) do
      f32[0] = v + 10
      f32[0] = f32[0] / 30
      want[i] = expected_byte(f32[0])
    end
    assert.are.same(want, P.list(roundtrip(x, { normalize = true })))
    -- a constant image normalizes to 0
    assert.are.same({ 0, 0 }, P.list(roundtrip(ember.full({ 1, 2 }, 3.5), { normalize = true })))
  end)

  it('clamps other integers to [0, 255] and writes bool as 0 and 255', function()
    local x = ember.tensor({ { -5, 0, 17 }, { 255, 256, 100000 } }, { dtype = 'int32' })
    assert.are.same({ 0, 0, 17, 255, 255, 255 }, P.list(roundtrip(x)))
    assert.are.same({ 0, 0, 17, 255, 255, 255 }, P.list(roundtrip(x:long())))
    local b = ember.tensor({ { true, false }, { false, true } })
    assert.are.same({ 255, 0, 0, 255 }, P.list(roundtrip(b)))
  end)

  it('uses every scanline filter, each decoding to the exact pixels', function()
    -- smooth gradients favor Paeth, noise Average or None, flat areas Sub and Up
    ember.manual_seed(3)
    local ramp = ember.arange(0, 60):float():div(59)
    local images = {
      ember.stack({ ramp:view(1, 60):expand(40, 60), ramp:narrow(1, 1, 40):view(40, 1):expand(40, 60),
        ember.full({ 40, 60 }, 0.5) }, 1),
      ember.randn(3, 40, 40),
      ember.randint(0, 256, { 30, 30 }, { dtype = 'uint8' }),
      ember.cat({ ember.zeros(1, 10, 30), ember.ones(1, 10, 30), (ember.arange(0, 300):view(1, 10, 30) % 7):float() / 7 }, 2),
    }
    local used = { 0, 0, 0, 0, 0 }
    for _, x in ipairs(images) do
      local d = roundtrip(x, { normalize = true })
      local want = ember.image.pixels(x, { normalize = true }) -- the bytes the encoder got
      assert.is_true(ffi.string(want:data_ptr(), want:numel()) == d.bytes)
      for k = 1, 5 do used[k] = used[k] + d.filters[k] end
    end
    for k = 1, 5 do assert.is_true(used[k] > 0, 'filter ' .. (k - 1) .. ' never used') end
  end)

  it('splits large images into several IDAT chunks', function()
    -- 1000 x 1100 incompressible bytes: more than one 1 MiB chunk of zlib data
    local x = ember.randint(0, 256, { 1000, 1100 }, { dtype = 'uint8' })
    local d = roundtrip(x)
    local idat = 0
    for _, c in ipairs(d.chunks) do if c == 'IDAT' then idat = idat + 1 end end
    assert.is_true(idat >= 2)
    local bytes = ffi.string(x:contiguous():data_ptr(), 1000 * 1100)
    assert.is_true(bytes == d.bytes)
  end)

  it('replaces a file atomically and says what is wrong', function()
    local path = P.tmp()
    image.save_png(path, ember.zeros(2, 2))
    image.save_png(path, ember.ones(3, 2))
    assert.are.same({ 2, 3 }, { P.decode(path).width, P.decode(path).height })
    local function err(f) local ok, e = pcall(f); assert.is_false(ok); return tostring(e) end
    assert.matches('unknown option nrows', err(function() image.save_png(path, ember.zeros(2, 2), { nrows = 2 }) end))
    assert.matches('expected an image %[H, W%] or %[C, H, W%], got %[4%]', err(function() image.save_png(path, ember.zeros(4)) end))
    assert.matches('channels first', err(function() image.save_png(path, ember.zeros(5, 4, 4)) end))
    assert.matches('nrow applies to a batch', err(function() image.save_png(path, ember.zeros(4, 4), { nrow = 2 }) end))
    assert.matches('value_range to be {lo, hi}', err(function() image.save_png(path, ember.zeros(4, 4), { value_range = { 1, 0 } }) end))
    assert.matches('save_png: expected a file path', err(function() image.save_png(nil, ember.zeros(2, 2)) end))
    assert.matches('write_png: cannot write', err(function() image.save_png('/nonexistent/dir/x.png', ember.zeros(2, 2)) end))
    assert.matches('write_png: expected a non%-empty image', err(function() image.save_png(path, ember.zeros(0, 3)) end))
    -- the C function itself checks dtype and layout
    local C = ember.C
    assert.are.equal(-1, C.em_write_png(path, ember.zeros(2, 2).ptr))
    assert.matches('write_png: expected a uint8 tensor, got float32', ffi.string(C.em_last_error()))
    assert.are.equal(-1, C.em_write_png(path, ember.zeros(2, 2, 5, { dtype = 'uint8' }).ptr))
    assert.matches('got 5', ffi.string(C.em_last_error()))
    -- the failures left the file as it was
    assert.are.same({ 2, 3 }, { P.decode(path).width, P.decode(path).height })
  end)
end)

-- make_grid's layout, by plain loops: images [N][C][H][W] (flat list), -> [C, H', W'] flat.
local function grid_ref(flat, n, c, h, w, nrow, padding, pad)
  local cols = math.min(nrow, n)
  local rows = math.ceil(n / cols)
  local gh, gw = rows * (h + padding) + padding, cols * (w + padding) + padding
  local out = {}
  for i = 1, c * gh * gw do out[i] = pad end
  for k = 0, n - 1 do
    local gy, gx = math.floor(k / cols), k % cols
    for ch = 0, c - 1 do
      for y = 0, h - 1 do
        for x = 0, w - 1 do
          local oy, ox = gy * (h + padding) + padding + y, gx * (w + padding) + padding + x
          out[ch * gh * gw + oy * gw + ox + 1] = flat[((k * c + ch) * h + y) * w + x + 1]
        end
      end
    end
  end
  return out, gh, gw
end

describe('ember.image.grid', function()
  after_each(P.cleanup)

  it('tiles [N, C, H, W] as make_grid (nrow, padding, pad_value)', function()
    local x, flat = random_bytes({ 5, 3, 4, 6 }, 7)
    for _, o in ipairs({ { nrow = 2, padding = 1, pad_value = 9 }, { nrow = 8, padding = 2, pad_value = 0 },
      { nrow = 3, padding = 0, pad_value = 200 }, {} }) do
      local want, gh, gw = grid_ref(flat, 5, 3, 4, 6, o.nrow or 8, o.padding or 2, o.pad_value or 0)
      local g = image.grid(x, next(o) and o or nil)
      assert.are.same({ 3, gh, gw }, { g:size(1), g:size(2), g:size(3) })
      assert.are.equal('uint8', g:dtype())
      assert.are.same(want, g:view(-1):totable())
      -- save_png of the batch writes the same grid
      local d = roundtrip(x, next(o) and o or nil)
      assert.are.same(interleave(want, 3, gh, gw), P.list(d))
    end
  end)

  it('takes [N, H, W] and lists of images, and stays one channel', function()
    local x, flat = random_bytes({ 3, 5, 2 }, 8)
    local want, gh, gw = grid_ref(flat, 3, 1, 5, 2, 2, 1, 255)
    local g = image.grid(x, { nrow = 2, padding = 1, pad_value = 255 })
    assert.are.same({ 1, gh, gw }, { g:size(1), g:size(2), g:size(3) })
    assert.are.same(want, g:view(-1):totable())
    local list = { x:narrow(1, 1, 1), x:narrow(1, 2, 1), x:narrow(1, 3, 1) } -- each [1, 5, 2]
    assert.are.same(want, image.grid(list, { nrow = 2, padding = 1, pad_value = 255 }):view(-1):totable())
  end)

  it('normalizes the whole batch, or each image (scale_each)', function()
    local x = ember.tensor({ { { 0, 2 } }, { { 4, 8 } } }) -- [2, 1, 2]: two 1x2 gray images
    local g = image.grid(x, { normalize = true, padding = 0 })
    assert.are.same({ { { 0, 0.25, 0.5, 1 } } }, g:totable())
    g = image.grid(x, { normalize = true, scale_each = true, padding = 0 })
    assert.are.same({ { { 0, 1, 0, 1 } } }, g:totable())
    g = image.grid(x, { value_range = { 0, 4 }, padding = 0 })
    assert.are.same({ { { 0, 0.5, 1, 1 } } }, g:totable())
    local ok, e = pcall(image.grid, x, { scale_each = true })
    assert.is_false(ok)
    assert.matches('scale_each applies with normalize', e)
    ok, e = pcall(image.grid, ember.zeros(2, 3, 4, 5, 6))
    assert.matches('expected a batch %[N, C, H, W%] or %[N, H, W%], got %[2, 3, 4, 5, 6%]', e)
  end)
end)

local VK = require('vk_helpers').open('ember.image on Vulkan')
if not VK then return end

describe('ember.image on Vulkan (' .. VK.V .. ')', function()
  after_each(P.cleanup)

  it('writes device tensors as the CPU ones', function()
    local x = random_bytes({ 3, 7, 5 }, 21)
    local cpu = P.list(roundtrip(x))
    assert.are.same(cpu, P.list(roundtrip(VK.on(x))))
    local f = ember.rand(4, 6, 6)
    assert.are.same(P.list(roundtrip(f)), P.list(roundtrip(VK.on(f))))
    assert.are.same(P.list(roundtrip(f, { normalize = true })), P.list(roundtrip(VK.on(f), { normalize = true })))
  end)

  it('builds grids on the device', function()
    local x, flat = random_bytes({ 5, 3, 4, 6 }, 22)
    local want = grid_ref(flat, 5, 3, 4, 6, 2, 1, 7)
    local g = image.grid(VK.on(x), { nrow = 2, padding = 1, pad_value = 7 })
    assert.are.equal(VK.V, g:device())
    assert.are.same(want, g:cpu():view(-1):totable())
    assert.are.same(P.list(roundtrip(x, { nrow = 2 })), P.list(roundtrip(VK.on(x), { nrow = 2 })))
  end)
end)
