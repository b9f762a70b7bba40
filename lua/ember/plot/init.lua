-- ember.plot: line charts as PNG files, drawn by Ember's own rasterizer (docs/api/plot.md).
--
--   ember.plot.lines(path, series [, opts])     one chart; returns its layout (for tests)
--   ember.plot.figure(path, charts [, opts])    several charts side by side / in rows
--   ember.plot.Canvas(width, height [, opts])   the rasterizer, for pictures of one's own
--
-- A series is {name =, x =, y =, color =} with x and y Lua lists or 1-D tensors (x defaults to
-- 1..n), or just y (a list or a tensor). Points whose x or y is NaN or infinite (or y <= 0
-- with logy) are left out and break the line there.
local tensor = require 'ember.tensor'
local names = require 'ember.util.names'
local Canvas = require 'ember.plot.canvas'
local chart = require 'ember.plot.chart'

local M = {}

-- matplotlib's default cycle ("tab10"): ten colors told apart also by most color-blind eyes.
M.palette = { '#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2',
  '#7f7f7f', '#bcbd22', '#17becf' }

local chart_options = { 'title', 'xlabel', 'ylabel', 'logy', 'xlim', 'ylim', 'legend',
  'line_width', 'antialias', 'grid', 'font_scale' }
local series_keys = { 'name', 'x', 'y', 'color' }

-- A list of numbers from a Lua list or a tensor (1-D, or any shape flattened; any device).
local function numbers(fn, what, v)
  if tensor.is_tensor(v) then
    if v:dim() > 1 then
      error(('%s: expected %s to be a 1-D tensor or a list, got a %d-D tensor'):format(fn, what, v:dim()), 0)
    end
    return v:cpu():double():view(-1):totable()
  end
  if type(v) ~= 'table' then
    error(('%s: expected %s to be a list of numbers or a tensor, got %s'):format(fn, what, type(v)), 0)
  end
  local out = {}
  local n = 0
  for k in pairs(v) do
    if type(k) ~= 'number' then
      error(('%s: expected %s to be a list of numbers, got a table with key %s'):format(fn, what, tostring(k)), 0)
    end
    n = math.max(n, k)
  end
  for k = 1, n do
    local x = v[k]
    if x == nil then x = 0 / 0 end -- a hole is a gap in the line
    if type(x) ~= 'number' then
      error(('%s: expected %s[%d] to be a number, got %s'):format(fn, what, k, type(x)), 0)
    end
    out[k] = x
  end
  return out
end

-- The series, checked and completed: {name, x, y, color} each.
local function parse_series(fn, list)
  if tensor.is_tensor(list) or (type(list) == 'table' and list.y ~= nil) then list = { list } end
  if type(list) ~= 'table' then
    error(('%s: expected a list of series, got %s'):format(fn, type(list)), 0)
  end
  local out = {}
  for i, s in ipairs(list) do
    local what = ('series %d'):format(i)
    local ser
    if tensor.is_tensor(s) or (type(s) == 'table' and type(s[1]) == 'number') then
      ser = { y = numbers(fn, what, s) }
    elseif type(s) == 'table' then
      names.check_options(fn .. ' (' .. what .. ')', s, series_keys, 0)
      if s.y == nil then error(('%s: %s has no y values'):format(fn, what), 0) end
      if s.name ~= nil and type(s.name) ~= 'string' then
        error(('%s: expected the name of %s to be a string, got %s'):format(fn, what, type(s.name)), 0)
      end
      ser = { name = s.name, y = numbers(fn, what .. '.y', s.y) }
      if s.x ~= nil then ser.x = numbers(fn, what .. '.x', s.x) end
      if s.color ~= nil then ser.color = Canvas.color(s.color, fn) end
    else
      error(('%s: expected series %d to be a table or a tensor, got %s'):format(fn, i, type(s)), 0)
    end
    if ser.x == nil then
      ser.x = {}
      for k = 1, #ser.y do ser.x[k] = k end
    elseif #ser.x ~= #ser.y then
      error(('%s: %s has %d x values and %d y values'):format(fn, what, #ser.x, #ser.y), 0)
    end
    ser.color = ser.color or Canvas.color(M.palette[(i - 1) % #M.palette + 1])
    out[i] = ser
  end
  return out
end

local function check_chart_options(fn, opts)
  opts = names.check_options(fn, opts, chart_options, 0)
  for _, k in ipairs({ 'title', 'xlabel', 'ylabel' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'string' then
      error(('%s: expected %s to be a string, got %s'):format(fn, k, type(opts[k])), 0)
    end
  end
  for _, k in ipairs({ 'logy', 'antialias', 'grid' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
      error(('%s: expected %s to be a boolean, got %s'):format(fn, k, type(opts[k])), 0)
    end
  end
  for _, k in ipairs({ 'xlim', 'ylim' }) do
    local v = opts[k]
    if v ~= nil and (type(v) ~= 'table' or type(v[1]) ~= 'number' or type(v[2]) ~= 'number' or
      not (v[1] < v[2]) or (k == 'ylim' and opts.logy and v[1] <= 0)) then
      error(('%s: expected %s to be {lo, hi} with lo < hi%s'):format(fn, k,
        k == 'ylim' and opts.logy and ' and lo > 0 (logy)' or ''), 0)
    end
  end
  local lg = opts.legend
  if lg ~= nil and lg ~= true and lg ~= false and lg ~= 'upper right' and lg ~= 'upper left' and
    lg ~= 'lower right' and lg ~= 'lower left' then
    error(("%s: expected legend to be a boolean or 'upper right', 'upper left', 'lower right', " ..
      "'lower left', got %s"):format(fn, tostring(lg)), 0)
  end
  if opts.line_width ~= nil and (type(opts.line_width) ~= 'number' or opts.line_width <= 0) then
    error(('%s: expected line_width to be a positive number, got %s'):format(fn, tostring(opts.line_width)), 0)
  end
  if opts.font_scale ~= nil and (type(opts.font_scale) ~= 'number' or opts.font_scale < 1 or
    opts.font_scale % 1 ~= 0) then
    error(('%s: expected font_scale to be a positive integer, got %s'):format(fn, tostring(opts.font_scale)), 0)
  end
  return opts
end

local function size_option(fn, opts, key, default)
  local v = opts[key]
  if v == nil then return default end
  if type(v) ~= 'number' or v < 16 or v > 32768 or v % 1 ~= 0 then
    error(('%s: expected %s to be a whole number of pixels (16..32768), got %s'):format(fn, key, tostring(v)), 0)
  end
  return v
end

-- Runs f, re-raising its error at the caller of the public function (level 3 from here).
-- The checks raise without a position (level 0); a message that has one already (from a
-- module called on the way, which places it at the user's line too) keeps it.
local function at_caller(f, ...)
  local ok, r = pcall(f, ...)
  if not ok then
    if type(r) == 'string' and r:match('^[^\n]-:%d+: ') then error(r, 0) end
    error(r, 3)
  end
  return r
end

local function check_path(fn, path)
  if type(path) ~= 'string' then error(('%s: expected a file path, got %s'):format(fn, type(path)), 0) end
end

-- lines(path, series [, {title =, xlabel =, ylabel =, logy = false, width = 800, height = 500,
-- xlim =, ylim =, legend = true, line_width =, antialias = true, grid = true, font_scale =}]):
-- draws the series as one line chart into a PNG file. Returns the chart's layout: the plot
-- area (left, right, top, bottom, in pixels), xlim, ylim, the ticks, the series' colors.
function M.lines(path, series, opts)
  return at_caller(function()
    check_path('lines', path)
    local allowed = { 'width', 'height' }
    for _, k in ipairs(chart_options) do allowed[#allowed + 1] = k end
    opts = names.check_options('lines', opts, allowed, 0)
    local w = size_option('lines', opts, 'width', 800)
    local h = size_option('lines', opts, 'height', 500)
    local o = {}
    for k, v in pairs(opts) do if k ~= 'width' and k ~= 'height' then o[k] = v end end
    o = check_chart_options('lines', o)
    local canvas = Canvas.new(w, h)
    local info = chart.draw(canvas, { 0, 0, w, h }, parse_series('lines', series), o)
    canvas:save(path)
    return info
  end)
end

-- figure(path, charts [, {ncols = #charts, width = 600 * ncols, height = 450 * nrows}]): several
-- charts in one PNG file, ncols to a row. Each chart is {series = {...}, title = ..., ...} with
-- lines's chart options. Returns the list of the charts' layouts.
function M.figure(path, charts, opts)
  return at_caller(function()
    check_path('figure', path)
    opts = names.check_options('figure', opts, { 'ncols', 'width', 'height' }, 0)
    if type(charts) ~= 'table' or #charts == 0 then
      error('figure: expected a list of charts {series = ..., title = ...}, got ' ..
        (type(charts) == 'table' and 'an empty list' or type(charts)), 0)
    end
    local ncols = opts.ncols or #charts
    if type(ncols) ~= 'number' or ncols < 1 or ncols % 1 ~= 0 then
      error('figure: expected ncols to be a positive integer, got ' .. tostring(ncols), 0)
    end
    local nrows = math.ceil(#charts / ncols)
    local w = size_option('figure', opts, 'width', 600 * math.min(ncols, #charts))
    local h = size_option('figure', opts, 'height', 450 * nrows)
    local canvas = Canvas.new(w, h)
    local cw, chh = math.floor(w / math.min(ncols, #charts)), math.floor(h / nrows)
    local infos = {}
    for i, c in ipairs(charts) do
      if type(c) ~= 'table' then error(('figure: expected chart %d to be a table, got %s'):format(i, type(c)), 0) end
      local o = {}
      for k, v in pairs(c) do if k ~= 'series' then o[k] = v end end
      o = check_chart_options(('figure (chart %d)'):format(i), o)
      if c.series == nil then error(('figure: chart %d has no series'):format(i), 0) end
      local col, row = (i - 1) % ncols, math.floor((i - 1) / ncols)
      infos[i] = chart.draw(canvas, { col * cw, row * chh, cw, chh },
        parse_series(('figure (chart %d)'):format(i), c.series), o)
    end
    canvas:save(path)
    return infos
  end)
end

-- Canvas(width, height [, {background = color}]): see lua/ember/plot/canvas.lua.
M.Canvas = Canvas.new
M.text_size = Canvas.text_size

return M
