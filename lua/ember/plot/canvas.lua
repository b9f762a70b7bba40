-- ember.plot.Canvas: a small RGB rasterizer over a byte buffer, which ember.plot draws charts
-- with and scripts may draw on (image captions in examples/predict.lua). It saves through
-- em_write_png, so plots need nothing outside Ember (docs/design.md, "Plots").
--
-- Coordinates are pixels from the top-left corner, continuous: pixel (i, j) covers
-- [i, i + 1) x [j, j + 1), its center is (i + 0.5, j + 0.5). Colors are {r, g, b} lists of
-- 0..255 or '#rrggbb' strings.
--
--   c = Canvas(width, height [, {background = color}])
--   c:fill_rect(x, y, w, h, color)            whole pixels x <= i < x + w, y <= j < y + h
--   c:polyline(xs, ys, color [, {width =, antialias =, clip = {x0, y0, x1, y1}}])
--   c:text(x, y, s, color [, {scale =, vertical =}])   (x, y): the text's top-left corner
--   c:image(x, y, img [, {scale =}])          a tensor image (ember.image.pixels rules)
--   c:get(i, j) -> r, g, b;  c:tensor() -> uint8 [H, W, 3];  c:save(path)
local ffi = require 'ffi'
local font = require 'ember.plot.font'

local floor, ceil, min, max, sqrt = math.floor, math.ceil, math.min, math.max, math.sqrt
local M = {}

local Canvas = {}
Canvas.__index = Canvas

-- {r, g, b} from a color: a list of three 0..255 numbers or '#rrggbb'.
function M.color(c, fn)
  if type(c) == 'string' then
    local r, g, b = c:match('^#(%x%x)(%x%x)(%x%x)$')
    if r then return { tonumber(r, 16), tonumber(g, 16), tonumber(b, 16) } end
  elseif type(c) == 'table' and #c == 3 then
    local ok = true
    for k = 1, 3 do
      local v = c[k]
      if type(v) ~= 'number' or v < 0 or v > 255 or v ~= floor(v) then ok = false end
    end
    if ok then return { c[1], c[2], c[3] } end
  end
  error(('%s: expected a color {r, g, b} (0..255) or \'#rrggbb\', got %s'):format(fn or 'Canvas',
    type(c) == 'table' and '{' .. table.concat(c, ', ') .. '}' or tostring(c)), 3)
end

function M.new(width, height, opts)
  for _, v in ipairs({ width, height }) do
    if type(v) ~= 'number' or v < 1 or v ~= floor(v) or v > 32768 then
      error('Canvas: expected a width and height in whole pixels (1..32768), got ' ..
        tostring(width) .. ' x ' .. tostring(height), 2)
    end
  end
  if width * height > 2 ^ 26 then
    error(('Canvas: expected at most %d pixels, got %d x %d'):format(2 ^ 26, width, height), 2)
  end
  opts = require('ember.util.names').check_options('Canvas', opts, { 'background' }, 2)
  local self = setmetatable({ width = width, height = height }, Canvas)
  self.buf = ffi.new('uint8_t[?]', width * height * 3)
  local bg = M.color(opts.background or { 255, 255, 255 }, 'Canvas')
  self:fill_rect(0, 0, width, height, bg)
  return self
end

-- ---- pixels ---------------------------------------------------------------------------------
function Canvas:get(i, j)
  local p = (j * self.width + i) * 3
  return self.buf[p], self.buf[p + 1], self.buf[p + 2]
end

-- Mixes color into pixel (i, j) with opacity a (0..1); outside the canvas nothing happens.
function Canvas:blend(i, j, color, a)
  if i < 0 or j < 0 or i >= self.width or j >= self.height or a <= 0 then return end
  local buf, p = self.buf, (j * self.width + i) * 3
  if a >= 1 then
    buf[p], buf[p + 1], buf[p + 2] = color[1], color[2], color[3]
  else
    for k = 0, 2 do buf[p + k] = floor(buf[p + k] * (1 - a) + color[k + 1] * a + 0.5) end
  end
end

function Canvas:fill_rect(x, y, w, h, color)
  local i0, j0 = max(0, floor(x)), max(0, floor(y))
  local i1, j1 = min(self.width, floor(x + w)), min(self.height, floor(y + h))
  local buf, r, g, b = self.buf, color[1], color[2], color[3]
  for j = j0, j1 - 1 do
    local p = (j * self.width + i0) * 3
    for _ = i0, i1 - 1 do
      buf[p], buf[p + 1], buf[p + 2] = r, g, b
      p = p + 3
    end
  end
end

-- ---- lines ----------------------------------------------------------------------------------
-- The per-pixel coverage of the polyline being drawn: the maximum over its segments, so that
-- joints where segments overlap are not drawn twice (darker) with anti-aliasing.
local function coverage_buffer(self)
  if not self.cov then self.cov = ffi.new('float[?]', self.width * self.height) end
  return self.cov
end

-- Adds one segment's coverage to cov within the clip box [ci0, ci1) x [cj0, cj1); returns the
-- pixel box it touched (or nil).
local function cover_segment(self, cov, x0, y0, x1, y1, hw, aa, ci0, cj0, ci1, cj1)
  local reach = hw + 1
  local i0 = max(ci0, floor(min(x0, x1) - reach))
  local i1 = min(ci1 - 1, ceil(max(x0, x1) + reach))
  local j0 = max(cj0, floor(min(y0, y1) - reach))
  local j1 = min(cj1 - 1, ceil(max(y0, y1) + reach))
  if i0 > i1 or j0 > j1 then return nil end
  local dx, dy = x1 - x0, y1 - y0
  local len2 = dx * dx + dy * dy
  local w = self.width
  for j = j0, j1 do
    local py = j + 0.5
    for i = i0, i1 do
      local px = i + 0.5
      -- the distance from the pixel's center to the segment
      local t = len2 > 0 and ((px - x0) * dx + (py - y0) * dy) / len2 or 0
      if t < 0 then t = 0 elseif t > 1 then t = 1 end
      local ex, ey = x0 + t * dx - px, y0 + t * dy - py
      local d = sqrt(ex * ex + ey * ey)
      local c
      if aa then
        c = hw + 0.5 - d
        if c > 1 then c = 1 end
      else
        c = d <= hw and 1 or 0
      end
      if c > 0 then
        local k = j * w + i
        if c > cov[k] then cov[k] = c end
      end
    end
  end
  return i0, j0, i1, j1
end

-- polyline(xs, ys, color [, {width = 1, antialias = true, clip = {x0, y0, x1, y1}}]): the line
-- through the points (xs[k], ys[k]) (Lua lists), drawn only inside clip (default: the canvas).
-- One point draws a dot.
function Canvas:polyline(xs, ys, color, opts)
  opts = opts or {}
  local hw = (opts.width or 1) / 2
  local aa = opts.antialias ~= false
  local clip = opts.clip or { 0, 0, self.width, self.height }
  local ci0, cj0 = max(0, floor(clip[1])), max(0, floor(clip[2]))
  local ci1, cj1 = min(self.width, ceil(clip[3])), min(self.height, ceil(clip[4]))
  local cov = coverage_buffer(self)
  local bi0, bj0, bi1, bj1 = math.huge, math.huge, -1, -1
  local n = #xs
  if n == 0 then return end
  for k = 1, max(1, n - 1) do
    local k1 = min(k + 1, n)
    local i0, j0, i1, j1 = cover_segment(self, cov, xs[k], ys[k], xs[k1], ys[k1], hw, aa,
      ci0, cj0, ci1, cj1)
    if i0 then
      bi0, bj0, bi1, bj1 = min(bi0, i0), min(bj0, j0), max(bi1, i1), max(bj1, j1)
    end
  end
  if bi1 < 0 then return end
  -- composite, and clear the coverage for the next line
  for j = bj0, bj1 do
    for i = bi0, bi1 do
      local k = j * self.width + i
      local c = cov[k]
      if c > 0 then
        self:blend(i, j, color, c)
        cov[k] = 0
      end
    end
  end
end

-- ---- text -----------------------------------------------------------------------------------
local ADVANCE = font.width + 1

-- The size of s drawn at scale: width, height (the descender row not counted).
function M.text_size(s, scale)
  scale = scale or 1
  if #s == 0 then return 0, font.height * scale end
  return (#s * ADVANCE - 1) * scale, font.height * scale
end

-- text(x, y, s, color [, {scale = 1, vertical = false}]): s in the bitmap font, its top-left
-- corner at (x, y). vertical = true turns it a quarter counter-clockwise (reading upwards, as
-- a y axis label); (x, y) is then the top-left corner of the turned text's box.
function Canvas:text(x, y, s, color, opts)
  local scale = opts and opts.scale or 1
  local vertical = opts and opts.vertical
  s = tostring(s)
  x, y = floor(x), floor(y)
  local total_w = M.text_size(s, scale)
  for n = 1, #s do
    local rows = font.glyph(s:byte(n))
    local gx = (n - 1) * ADVANCE
    for r = 1, 8 do
      local bits = rows[r]
      if bits ~= 0 then
        for c = 0, font.width - 1 do
          if bit.band(bits, bit.lshift(1, font.width - 1 - c)) ~= 0 then
            local u, v = gx + c, r - 1 -- along the text, down the glyph
            if vertical then
              self:fill_rect(x + v * scale, y + total_w - (u + 1) * scale, scale, scale, color)
            else
              self:fill_rect(x + u * scale, y + v * scale, scale, scale, color)
            end
          end
        end
      end
    end
  end
end

-- ---- images and output ----------------------------------------------------------------------
-- image(x, y, img [, {scale = 1}]): the tensor image img ([H, W] or [C, H, W], converted as
-- ember.image.save_png converts) with its top-left corner at pixel (x, y), each pixel drawn
-- as scale x scale; gray spreads to RGB, alpha blends over the canvas.
function Canvas:image(x, y, img, opts)
  opts = require('ember.util.names').check_options('Canvas:image', opts, { 'scale' }, 2)
  local scale = opts.scale or 1
  local px = require('ember.image').pixels(img):contiguous()
  local h, w, c = px:size(1), px:size(2), px:size(3)
  local src = ffi.cast('const uint8_t *', px:data_ptr())
  local color = { 0, 0, 0 }
  for j = 0, h - 1 do
    for i = 0, w - 1 do
      local p = (j * w + i) * c
      local a = 1
      if c <= 2 then color[1], color[2], color[3] = src[p], src[p], src[p]
      else color[1], color[2], color[3] = src[p], src[p + 1], src[p + 2] end
      if c == 2 or c == 4 then a = src[p + c - 1] / 255 end
      for v = 0, scale - 1 do
        for u = 0, scale - 1 do self:blend(x + i * scale + u, y + j * scale + v, color, a) end
      end
    end
  end
end

-- The canvas as a uint8 tensor [H, W, 3] (a copy).
function Canvas:tensor()
  local ember = require 'ember'
  local t = ember.empty({ self.height, self.width, 3 }, { dtype = 'uint8' })
  ffi.copy(t:data_ptr(), self.buf, self.width * self.height * 3)
  return t
end

function Canvas:save(path)
  if type(path) ~= 'string' then error('Canvas:save: expected a file path, got ' .. type(path), 2) end
  local core = require 'ember.core'
  core.check(core.C.em_write_png(path, self:tensor().ptr))
end

return M
