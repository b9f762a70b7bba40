-- plot_spec: ember.plot.lines / figure and the Canvas, read back from the PNG files by an
-- independent decoder (tests/lua/png_decode.py).
--
-- The charts map data linearly (logarithmically with logy) onto the plot area that lines()
-- reports; the expected pixel of a data point is computed here from that area and the limits,
-- and must hold the series' color, while pixels away from every line hold none.
local H = require 'tests.lua.helpers'
local P = require 'tests.lua.png_helpers'
local ember = H.ember
local plot = ember.plot

local BLUE, ORANGE = { 0x1f, 0x77, 0xb4 }, { 0xff, 0x7f, 0x0e }

local function same(a, b) return a[1] == b[1] and a[2] == b[2] and a[3] == b[3] end

-- The pixel (column, row) holding the continuous point (px, py).
local function at(d, px, py) return P.pixel(d, math.floor(px), math.floor(py)) end

local function mapper(info)
  local x0, x1, y0, y1 = info.xlim[1], info.xlim[2], info.ylim[1], info.ylim[2]
  local function X(v) return info.left + (v - x0) / (x1 - x0) * (info.right - info.left) end
  local function Y(v)
    if info.logy then
      v, y0, y1 = math.log10(v), math.log10(info.ylim[1]), math.log10(info.ylim[2])
    end
    return info.bottom - (v - y0) / (y1 - y0) * (info.bottom - info.top)
  end
  return X, Y
end

-- Rows of the plot area holding color in column i.
local function rows_with(d, info, i, color)
  local rows = {}
  for j = info.top, info.bottom - 1 do
    if same(P.pixel(d, i, j), color) then rows[#rows + 1] = j end
  end
  return rows
end

local function draw(series, opts)
  local path = P.tmp()
  local info = plot.lines(path, series, opts)
  return P.decode(path), info
end

describe('ember.plot.lines', function()
  after_each(P.cleanup)

  it('draws each series where its data lie, in its color, and nothing elsewhere', function()
    local d, info = draw({ { x = { 0, 10 }, y = { 1, 1 } }, { x = { 0, 5, 10 }, y = { 3, 3, 3 } } },
      { width = 320, height = 200, xlim = { 0, 10 }, ylim = { 0, 4 }, line_width = 3, legend = false })
    assert.are.same({ 320, 200, 3 }, { d.width, d.height, d.channels })
    assert.are.same({ BLUE, ORANGE }, info.colors)
    local X, Y = mapper(info)
    -- the frame lies just outside the plot area
    assert.are.same({ 90, 90, 90 }, P.pixel(d, info.left - 1, math.floor((info.top + info.bottom) / 2)))
    assert.are.same({ 90, 90, 90 }, P.pixel(d, math.floor((info.left + info.right) / 2), info.bottom))
    for _, x in ipairs({ 0.5, 2.5, 5, 7.7, 9.5 }) do
      local i = math.floor(X(x))
      assert.are.same(BLUE, at(d, X(x), Y(1)))
      assert.are.same(ORANGE, at(d, X(x), Y(3)))
      -- every pixel of each color in this column is within the line's half width of it
      for _, j in ipairs(rows_with(d, info, i, BLUE)) do assert.is_true(math.abs(j + 0.5 - Y(1)) <= 2) end
      for _, j in ipairs(rows_with(d, info, i, ORANGE)) do assert.is_true(math.abs(j + 0.5 - Y(3)) <= 2) end
      -- between the lines: background (white or a grid line)
      local p = at(d, X(x), Y(2.2))
      assert.is_true(p[1] >= 220 and p[1] == p[2] and p[2] == p[3])
    end
  end)

  it('draws a diagonal and a logarithmic axis', function()
    local d, info = draw({ { x = { 0, 10 }, y = { 0, 10 } } },
      { width = 320, height = 200, xlim = { 0, 10 }, ylim = { 0, 10 }, line_width = 3 })
    local X, Y = mapper(info)
    for _, v in ipairs({ 1, 3.3, 5, 8 }) do assert.are.same(BLUE, at(d, X(v), Y(v))) end
    local p = at(d, X(2.3), Y(7.1)) -- away from the line: background (white or a grid line)
    assert.is_true(p[1] >= 220 and p[1] == p[2] and p[2] == p[3])
    -- y = 10^x is straight on a log axis; y <= 0 is left out
    local xs, ys = {}, {}
    for k = 0, 30 do xs[#xs + 1], ys[#ys + 1] = k / 10, 10 ^ (k / 10) end
    xs[#xs + 1], ys[#ys + 1] = 3.1, 0
    d, info = draw({ { x = xs, y = ys } }, { width = 320, height = 200, logy = true,
      xlim = { 0, 3 }, ylim = { 1, 1000 }, line_width = 3 })
    assert.is_true(info.logy)
    assert.are.same({ 1, 10, 100, 1000 }, info.yticks)
    X, Y = mapper(info)
    for _, v in ipairs({ 0.5, 1.5, 2.5 }) do
      assert.are.same(BLUE, at(d, X(v), Y(10 ^ v)))
      -- the same point on a straight line across the area
      local fy = info.bottom - v / 3 * (info.bottom - info.top)
      assert.are.same(BLUE, at(d, X(v), fy))
    end
  end)

  it('breaks the line at NaN and infinite points', function()
    local y = { 1, 1, 1, 1, 0 / 0, 1, 1, 1, 1 }
    local d, info = draw({ { y = y } }, { width = 320, height = 200, xlim = { 1, 9 }, ylim = { 0, 2 },
      line_width = 3 })
    local X, Y = mapper(info)
    assert.are.same(BLUE, at(d, X(3), Y(1)))
    assert.are.same(BLUE, at(d, X(7), Y(1)))
    assert.are.same(0, #rows_with(d, info, math.floor(X(5)), BLUE))
  end)

  it('draws a legend with each named series\' color, and a title', function()
    local path = P.tmp()
    local info = plot.lines(path, { { name = 'train loss', y = { 3, 2, 1 } }, { name = 'val', y = { 3, 2.5, 2 } },
      { y = { 1, 1, 1 }, color = '#00ff00' } }, { title = 'Loss', xlabel = 'step', ylabel = 'loss' })
    local d = P.decode(path)
    assert.are.same({ 800, 500 }, { d.width, d.height })
    assert.are.equal(2, #info.legend.entries) -- the unnamed series has no entry
    local l = info.legend
    for _, e in ipairs(l.entries) do
      local sx, sy, len = e.swatch[1], e.swatch[2], e.swatch[3]
      assert.is_true(sx > l.x and sx + len < l.x + l.width)
      assert.are.same(e.color, P.pixel(d, sx + math.floor(len / 2), sy))
    end
    assert.are.same({ 0, 255, 0 }, info.colors[3])
    -- the title's ink lies in the band above the plot area, centered
    local ink = 0
    for j = 0, info.top - 2 do
      for i = 0, d.width - 1 do if same(P.pixel(d, i, j), { 40, 40, 40 }) then ink = ink + 1 end end
    end
    assert.is_true(ink > 20)
    -- the legend goes where it hides least of the lines: not over a rising line's end
    local _, up = draw({ { name = 'rising', y = { 1, 2, 3, 4, 5, 6, 7, 8 } } }, { width = 320, height = 200 })
    assert.are.equal('upper left', up.legend.corner)
    local _, down = draw({ { name = 'falling', y = { 8, 7, 6, 5, 4, 3, 2, 1 } } }, { width = 320, height = 200 })
    assert.are.equal('upper right', down.legend.corner)
    -- legend = false: no swatches
    d, info = draw({ { name = 'a', y = { 1, 2 } } }, { width = 320, height = 200, legend = false })
    assert.is_nil(info.legend)
  end)

  it('takes tensors (any device) and lists alike', function()
    local y = ember.tensor({ 0.5, 0.25, 0.125, 0.2 })
    local a = P.tmp()
    local b = P.tmp()
    plot.lines(a, { y }, { width = 200, height = 150 })
    plot.lines(b, { { y = { 0.5, 0.25, 0.125, 0.2 }, x = ember.tensor({ 1, 2, 3, 4 }) } }, { width = 200, height = 150 })
    assert.is_true(P.decode(a).bytes == P.decode(b).bytes)
    local VK = require 'vk_helpers'
    if VK.V then
      local c = P.tmp()
      plot.lines(c, { VK.on(y) }, { width = 200, height = 150 })
      assert.is_true(P.decode(a).bytes == P.decode(c).bytes)
    end
  end)

  it('draws only exact colors without anti-aliasing', function()
    local d, info = draw({ { y = { 1, 3, 2, 5 } }, { y = { 2, 2, 4, 1 } } },
      { width = 240, height = 160, antialias = false, legend = false })
    local seen = {}
    for j = info.top, info.bottom - 1 do
      for i = info.left, info.right - 1 do
        local p = P.pixel(d, i, j)
        local key = table.concat(p, ',')
        seen[key] = true
      end
    end
    local allowed = { ['255,255,255'] = true, ['228,228,228'] = true, ['31,119,180'] = true,
      ['255,127,14'] = true }
    for k in pairs(seen) do assert.is_true(allowed[k], 'unexpected color ' .. k) end
    assert.is_true(seen['31,119,180'] and seen['255,127,14'])
  end)

  it('says what is wrong', function()
    local function err(...)
      local ok, e = pcall(plot.lines, ...)
      assert.is_false(ok)
      return tostring(e)
    end
    local p = P.tmp()
    assert.matches('unknown option titel', err(p, { { y = { 1 } } }, { titel = 'x' }))
    assert.matches('series 1 has 2 x values and 3 y values', err(p, { { x = { 1, 2 }, y = { 1, 2, 3 } } }))
    assert.matches("expected a color", err(p, { { y = { 1 }, color = 'red' } }))
    assert.matches("expected legend to be", err(p, { { y = { 1 } } }, { legend = 'top' }))
    assert.matches("unknown option nmae", err(p, { { nmae = 'a', y = { 1 } } }))
    assert.matches("expected ylim to be {lo, hi} with lo < hi and lo > 0", err(p, { { y = { 1 } } }, { logy = true, ylim = { 0, 1 } }))
    assert.matches("expected series 1 to be a 1%-D tensor", err(p, { ember.zeros(2, 2) }))
    assert.matches("lines: expected a file path", err(nil, { { y = { 1 } } }))
    -- at the caller's line, once
    assert.matches('^[^:]*plot_spec.lua:%d+: lines: unknown', err(p, { { y = { 1 } } }, { titel = 'x' }))
    assert.matches('^[^:]*plot_spec.lua:%d+: lines: expected a color', err(p, { { y = { 1 }, color = 'red' } }))
  end)
end)

describe('ember.plot.figure and Canvas', function()
  after_each(P.cleanup)

  it('puts charts side by side', function()
    local path = P.tmp()
    local infos = plot.figure(path, { { series = { { y = { 1, 2 } } }, title = 'a' },
      { series = { { y = { 2, 1 } } }, title = 'b' } }, { width = 400, height = 150 })
    local d = P.decode(path)
    assert.are.same({ 400, 150 }, { d.width, d.height })
    assert.is_true(infos[1].right < 200 and infos[2].left > 200)
  end)

  it('draws text, rectangles and images', function()
    local c = plot.Canvas(40, 20, { background = '#000000' })
    c:fill_rect(1, 2, 3, 4, { 10, 20, 30 })
    c:text(10, 5, 'I', { 255, 0, 0 })
    c:image(30, 10, ember.tensor({ { 0, 1 }, { 1, 0 } }), { scale = 2 })
    local path = P.tmp()
    c:save(path)
    local d = P.decode(path)
    assert.are.same({ 10, 20, 30 }, P.pixel(d, 1, 2))
    assert.are.same({ 10, 20, 30 }, P.pixel(d, 3, 5))
    assert.are.same({ 0, 0, 0 }, P.pixel(d, 4, 2))
    -- 'I': a bar of 3 on the first row, the stem in the middle column
    assert.are.same({ 255, 0, 0 }, P.pixel(d, 11, 5))
    assert.are.same({ 0, 0, 0 }, P.pixel(d, 10, 5))
    assert.are.same({ 255, 0, 0 }, P.pixel(d, 12, 8))
    assert.are.same({ 0, 0, 0 }, P.pixel(d, 11, 8))
    -- the image's pixels, twice as large
    assert.are.same({ 0, 0, 0 }, P.pixel(d, 31, 11))
    assert.are.same({ 255, 255, 255 }, P.pixel(d, 32, 11))
    assert.are.same({ 255, 255, 255 }, P.pixel(d, 31, 12))
    assert.are.same(plot.text_size('abc', 2), 34)
  end)

  it('labels ticks compactly', function()
    local ticks = require 'ember.plot.ticks'
    assert.are.equal('0.5', ticks.label(0.5, 0.5))
    assert.are.equal('0.0', ticks.label(-1e-17, 0.5))
    assert.are.equal('0', ticks.label(-0.0, 1))
    assert.are.equal('0.25', ticks.label(0.25, 0.25))
    assert.are.equal('1500', ticks.label(1500, 500))
    assert.are.equal('1e-5', ticks.label(1e-5))
    assert.are.equal('1e6', ticks.label(1e6))
    assert.are.same({ 0, 0.5, 1, 1.5, 2 }, (ticks.linear(-0.1, 2.2, 5)))
  end)
end)
