-- ember.plot.chart: lays out and draws one line chart into a rectangle of a Canvas: the frame,
-- ticks with numeric labels and light grid lines, the series (clipped to the frame), a legend,
-- the title and the axis labels. ember.plot (init.lua) checks the arguments and calls draw.
--
-- Layout, from the outside in: a margin, the title above and the x label below, the y label
-- (turned) at the left, the tick labels, then the plot area. Data maps linearly (or, with
-- logy, logarithmically) onto the plot area [left, right] x [top, bottom] in continuous pixel
-- coordinates; the frame is drawn in the pixels just outside it.
local Canvas = require 'ember.plot.canvas'
local ticks = require 'ember.plot.ticks'

local floor, min, max, log10 = math.floor, math.min, math.max, math.log10
local M = {}

local INK = { 40, 40, 40 }
local GRID = { 228, 228, 228 }
local FRAME = { 90, 90, 90 }
local LEGEND_EDGE = { 190, 190, 190 }
local WHITE = { 255, 255, 255 }

-- The data's range over all series: lo, hi (nil when no point is usable).
local function data_range(series, key, positive)
  local lo, hi
  for _, s in ipairs(series) do
    for _, v in ipairs(s[key]) do
      if v == v and v > -math.huge and v < math.huge and (not positive or v > 0) then
        lo, hi = lo and min(lo, v) or v, hi and max(hi, v) or v
      end
    end
  end
  return lo, hi
end

-- The axis limits: given ones, else the data's range with a 4% margin (in log space for log
-- axes); a single value gets a unit range around it (a decade for log axes).
local function limits(given, lo, hi, log)
  if given then return given[1], given[2] end
  if not lo then return log and 1 or 0, log and 10 or 1 end
  if log then
    local a, b = log10(lo), log10(hi)
    if a == b then return 10 ^ (a - 0.5), 10 ^ (a + 0.5) end
    local m = (b - a) * 0.04
    return 10 ^ (a - m), 10 ^ (b + m)
  end
  if lo == hi then return lo - 1, hi + 1 end
  local m = (hi - lo) * 0.04
  return lo - m, hi + m
end

-- draw(canvas, {x, y, w, h}, series, opts) -> info. series: { {name=, x={...}, y={...},
-- color={r,g,b}} ... } (x and y the same length, checked by the caller); opts: title, xlabel,
-- ylabel, logy, xlim, ylim, legend, line_width, antialias, grid, font_scale.
function M.draw(canvas, rect, series, opts)
  local rx, ry, rw, rh = rect[1], rect[2], rect[3], rect[4]
  local s = opts.font_scale or max(1, floor(min(rw / 300, rh / 200)))
  local ch = 7 * s
  local pad = 4 * s
  local tick = 3 * s
  local logy = opts.logy

  -- limits and ticks
  local dx0, dx1 = data_range(series, 'x')
  local dy0, dy1 = data_range(series, 'y', logy)
  local x0, x1 = limits(opts.xlim, dx0, dx1, false)
  local y0, y1 = limits(opts.ylim, dy0, dy1, logy)
  local xt, xstep = ticks.linear(x0, x1, max(2, floor(rw / (60 * s))))
  local yt, ystep
  if logy then yt, ystep = ticks.log(y0, y1, max(2, floor(rh / (30 * s))))
  else yt, ystep = ticks.linear(y0, y1, max(2, floor(rh / (40 * s)))) end
  local xlabels, ylabels = {}, {}
  local ylabel_w = 0
  for i, v in ipairs(xt) do xlabels[i] = ticks.label(v, xstep) end
  for i, v in ipairs(yt) do
    ylabels[i] = ticks.label(v, ystep)
    ylabel_w = max(ylabel_w, (Canvas.text_size(ylabels[i], s)))
  end

  -- the plot area
  local top = ry + pad + (opts.title and ch + 2 * pad or s * 4)
  local bottom = ry + rh - pad - ch - tick - 2 * s - (opts.xlabel and ch + pad or 0)
  local left = rx + pad + (opts.ylabel and ch + pad or 0) + ylabel_w + tick + 2 * s
  local last_w = #xlabels > 0 and Canvas.text_size(xlabels[#xlabels], s) or 0
  local right = rx + rw - max(pad * 2, floor(last_w / 2) + pad)
  top, bottom, left, right = floor(top), floor(bottom), floor(left), floor(right)
  if right - left < 10 or bottom - top < 10 then
    error(('lines: the chart is too small for its labels (%d x %d pixels)'):format(rw, rh), 0)
  end

  local function X(v) return left + (v - x0) / (x1 - x0) * (right - left) end
  local function Y(v)
    if logy then return bottom - (log10(v) - log10(y0)) / (log10(y1) - log10(y0)) * (bottom - top) end
    return bottom - (v - y0) / (y1 - y0) * (bottom - top)
  end

  -- grid, frame, ticks, tick labels
  for i, v in ipairs(xt) do
    local px = floor(X(v))
    if px >= left and px <= right then
      if opts.grid ~= false then canvas:fill_rect(px, top, 1, bottom - top, GRID) end
      canvas:fill_rect(px, bottom, 1, tick + 1, FRAME)
      local w = Canvas.text_size(xlabels[i], s)
      canvas:text(px - floor(w / 2), bottom + tick + 2 * s, xlabels[i], INK, { scale = s })
    end
  end
  for i, v in ipairs(yt) do
    local py = floor(Y(v))
    if py >= top and py <= bottom then
      if opts.grid ~= false then canvas:fill_rect(left, py, right - left, 1, GRID) end
      canvas:fill_rect(left - tick - 1, py, tick + 1, 1, FRAME)
      local w = Canvas.text_size(ylabels[i], s)
      canvas:text(left - tick - 2 * s - w, py - floor(ch / 2), ylabels[i], INK, { scale = s })
    end
  end
  canvas:fill_rect(left - 1, top - 1, right - left + 2, 1, FRAME)
  canvas:fill_rect(left - 1, bottom, right - left + 2, 1, FRAME)
  canvas:fill_rect(left - 1, top - 1, 1, bottom - top + 2, FRAME)
  canvas:fill_rect(right, top - 1, 1, bottom - top + 2, FRAME)

  -- the series: runs of usable points, each a polyline clipped to the plot area
  local width = opts.line_width or 1.5 * s
  local clip = { left, top, right, bottom }
  local drawn = {} -- points along the lines, where a legend would hide them
  for _, ser in ipairs(series) do
    local xs, ys = {}, {}
    local function flush()
      if #xs > 0 then
        canvas:polyline(xs, ys, ser.color, { width = width, antialias = opts.antialias, clip = clip })
        local stride = max(1, floor(#xs / 512)) -- a few thousand samples of a long line
        for k = 1, #xs, stride do
          local k1 = min(k + stride, #xs)
          for t = 0, 7 do
            drawn[#drawn + 1] = { xs[k] + (xs[k1] - xs[k]) * t / 8, ys[k] + (ys[k1] - ys[k]) * t / 8 }
          end
        end
      end
      xs, ys = {}, {}
    end
    for k = 1, #ser.y do
      local vx, vy = ser.x[k], ser.y[k]
      local ok = vx == vx and vy == vy and vx > -math.huge and vx < math.huge and
        vy > -math.huge and vy < math.huge and (not logy or vy > 0)
      if ok then
        xs[#xs + 1], ys[#ys + 1] = X(vx), Y(vy)
      else
        flush()
      end
    end
    flush()
  end

  -- title and axis labels
  if opts.title then
    local w = Canvas.text_size(opts.title, s)
    canvas:text(floor((left + right - w) / 2), ry + pad, opts.title, INK, { scale = s })
  end
  if opts.xlabel then
    local w = Canvas.text_size(opts.xlabel, s)
    canvas:text(floor((left + right - w) / 2), ry + rh - pad - ch, opts.xlabel, INK, { scale = s })
  end
  if opts.ylabel then
    local w = Canvas.text_size(opts.ylabel, s)
    canvas:text(rx + pad, floor((top + bottom - w) / 2), opts.ylabel, INK, { scale = s, vertical = true })
  end

  -- the legend: a swatch and the name of each named series, in a box in a corner
  local legend
  local named = {}
  for _, ser in ipairs(series) do if ser.name then named[#named + 1] = ser end end
  if opts.legend ~= false and #named > 0 then
    local swatch, line_h = 6 * s * 3, ch + 3 * s
    local name_w = 0
    for _, ser in ipairs(named) do name_w = max(name_w, (Canvas.text_size(ser.name, s))) end
    local bw, bh = 3 * s + swatch + 2 * s + name_w + 5 * s, #named * line_h + 3 * s
    local function box(corner)
      return corner:find('left') and left + pad or right - pad - bw,
        corner:find('lower') and bottom - pad - bh or top + pad
    end
    -- by default, the corner that hides the fewest points of the lines (ties: in this order)
    local corner = type(opts.legend) == 'string' and opts.legend
    if not corner then
      local fewest
      for _, c in ipairs({ 'upper right', 'upper left', 'lower left', 'lower right' }) do
        local x, y = box(c)
        local hidden = 0
        for _, p in ipairs(drawn) do
          if p[1] >= x - s and p[1] <= x + bw + s and p[2] >= y - s and p[2] <= y + bh + s then
            hidden = hidden + 1
          end
        end
        if not fewest or hidden < fewest then corner, fewest = c, hidden end
      end
    end
    local bx, by = box(corner)
    canvas:fill_rect(bx, by, bw, bh, LEGEND_EDGE)
    canvas:fill_rect(bx + 1, by + 1, bw - 2, bh - 2, WHITE)
    legend = { x = bx, y = by, width = bw, height = bh, corner = corner, entries = {} }
    for k, ser in ipairs(named) do
      local ly = by + 2 * s + (k - 1) * line_h
      local mid = ly + floor(ch / 2)
      canvas:fill_rect(bx + 3 * s, mid - floor(width / 2), swatch, max(1, floor(width + 0.5)), ser.color)
      canvas:text(bx + 3 * s + swatch + 2 * s, ly, ser.name, INK, { scale = s })
      legend.entries[k] = { name = ser.name, swatch = { bx + 3 * s, mid, swatch }, color = ser.color }
    end
  end

  return {
    left = left, right = right, top = top, bottom = bottom,
    xlim = { x0, x1 }, ylim = { y0, y1 }, logy = logy or false,
    xticks = xt, yticks = yt, font_scale = s, legend = legend,
    colors = (function()
      local c = {}
      for k, ser in ipairs(series) do c[k] = ser.color end
      return c
    end)(),
  }
end

return M
