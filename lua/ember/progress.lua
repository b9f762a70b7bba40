-- ember.progress: a progress bar for training loops (in the spirit of tqdm).
--
--   local bar = ember.progress(#loader, {desc = 'epoch 1'})
--   for x, y in loader:iter() do ...; bar:update(1, {loss = loss:item()}) end
--   bar:close()
--
--   for i, x, y in ember.progress.wrap(loader, {desc = 'epoch 1'}) do ... end
--
-- A line shows the description, the percentage and a bar, count/total, elapsed time and ETA,
-- the rate (items/s, or s/item when slower than one a second), and the running values passed
-- to update (smoothed with an exponential moving average, bias-corrected so the first value
-- shows as it is). On a terminal the line is redrawn in place with '\r' (at most every
-- `mininterval` seconds); elsewhere (a log file, a pipe) a plain line is written every
-- `every_pct` percent and at least every `interval` seconds, and a last one on close.
local ffi = require 'ffi'

local M = {}

-- ---- the platform: a monotonic clock and isatty ------------------------------------------------
-- Declared under private names with pcall: another module may have declared these functions
-- first (LuaJIT keeps the first declaration), and a void * argument converts to either.
pcall(ffi.cdef, [[
  struct ember_progress_timespec { int64_t sec; int64_t nsec; };
  int clock_gettime(int clk, struct ember_progress_timespec *ts);
  int isatty(int fd);
]])
local ts = ffi.new('struct ember_progress_timespec')
local ts_ptr = ffi.cast('void *', ts)

-- CLOCK_MONOTONIC (1 on Linux); os.time's whole seconds where the call is unavailable.
local have_clock = pcall(function() return ffi.C.clock_gettime(1, ts_ptr) end)
local function monotonic()
  if not have_clock then return os.time() end
  ffi.C.clock_gettime(1, ts_ptr)
  return tonumber(ts.sec) + tonumber(ts.nsec) * 1e-9
end
M.clock = monotonic

local function stdout_is_terminal()
  local term = os.getenv('TERM')
  if term == nil or term == '' or term == 'dumb' then return false end
  local ok, r = pcall(function() return ffi.C.isatty(1) end)
  return ok and r == 1
end

-- ---- formatting ---------------------------------------------------------------------------------

-- 75 -> "01:15", 3725 -> "1:02:05"
local function format_time(s)
  if s ~= s or s == math.huge or s < 0 then return '?' end
  s = math.floor(s + 0.5)
  local h, m = math.floor(s / 3600), math.floor(s / 60) % 60
  if h > 0 then return ('%d:%02d:%02d'):format(h, m, s % 60) end
  return ('%02d:%02d'):format(m, s % 60)
end
M.format_time = format_time

local function format_value(v)
  if type(v) == 'number' then
    if v ~= v then return 'nan' end
    if v == math.floor(v) and math.abs(v) < 1e9 then return ('%d'):format(v) end
    return ('%.4g'):format(v)
  end
  return tostring(v)
end

local function format_rate(rate, unit)
  if rate ~= rate or rate <= 0 or rate == math.huge then return '? ' .. unit .. '/s' end
  if rate < 1 then return ('%.2f s/%s'):format(1 / rate, unit) end
  if rate < 100 then return ('%.2f %s/s'):format(rate, unit) end
  return ('%.0f %s/s'):format(rate, unit)
end

-- ---- the bar ------------------------------------------------------------------------------------
local Bar = {}
Bar.__index = Bar
M.Bar = Bar

local function check_opt(name, v, kind)
  if v ~= nil and type(v) ~= kind then
    error(('progress: expected option %s to be a %s, got %s'):format(name, kind, type(v)), 4)
  end
end

-- progress(total [, opts]): total is the number of items (nil when unknown). opts:
--   desc          text before the bar
--   out           a file handle (io.stdout)
--   tty           redraw in place (true) or write lines (false); detected for io.stdout
--   width         line width on a terminal (COLUMNS, else 80)
--   unit          the items' name in the rate ('it')
--   smoothing     the moving average's weight of a new value (0.1); 1 shows the last value
--   mininterval   the least seconds between redraws on a terminal (0.1)
--   every_pct     lines at every this many percent when not a terminal (10)
--   interval      and at least every this many seconds (30)
--   ascii         draw the bar with '#' rather than block characters
--   clock         a function returning seconds (for tests)
local PROGRESS_OPTIONS = { 'desc', 'out', 'tty', 'width', 'unit', 'smoothing', 'mininterval',
  'every_pct', 'interval', 'ascii', 'clock', 'total' }
local function new(total, opts)
  opts = opts or {}
  if type(opts) ~= 'table' then error('progress: expected an options table, got ' .. type(opts), 3) end
  require('ember.util.names').check_options('progress', opts, PROGRESS_OPTIONS, 3)
  if total ~= nil and (type(total) ~= 'number' or total < 0 or total ~= math.floor(total)) then
    error('progress: expected total to be a count >= 0 or nil, got ' .. tostring(total), 3)
  end
  check_opt('desc', opts.desc, 'string')
  check_opt('unit', opts.unit, 'string')
  check_opt('width', opts.width, 'number')
  check_opt('smoothing', opts.smoothing, 'number')
  check_opt('mininterval', opts.mininterval, 'number')
  check_opt('every_pct', opts.every_pct, 'number')
  check_opt('interval', opts.interval, 'number')
  check_opt('clock', opts.clock, 'function')
  local out = opts.out or io.stdout
  if type(out) ~= 'userdata' and type(out) ~= 'table' then
    error('progress: expected option out to be a file handle, got ' .. type(out), 3)
  end
  local tty = opts.tty
  if tty == nil then tty = out == io.stdout and stdout_is_terminal() end
  local smoothing = opts.smoothing or 0.1
  if smoothing <= 0 or smoothing > 1 then
    error('progress: smoothing must be in (0, 1], got ' .. smoothing, 3)
  end
  local clock = opts.clock or monotonic
  local lang = (os.getenv('LC_ALL') or '') .. (os.getenv('LC_CTYPE') or '') .. (os.getenv('LANG') or '')
  local self = setmetatable({
    total = total, n = 0, desc = opts.desc, out = out, tty = tty and true or false,
    width = opts.width or tonumber(os.getenv('COLUMNS') or '') or 80,
    unit = opts.unit or 'it', smoothing = smoothing,
    mininterval = opts.mininterval or 0.1, every_pct = opts.every_pct or 10,
    interval = opts.interval or 30,
    ascii = opts.ascii or not (lang:upper():find('UTF%-?8') ~= nil),
    clock = clock, start = clock(), closed = false,
    stats = {}, stat_order = {}, stat_count = {},
    last_draw = nil, last_len = 0, next_pct = nil, last_line_n = nil,
  }, Bar)
  self.last_print = self.start
  self.next_pct = self.every_pct
  if self.tty then self:_draw() end
  return self
end

-- update([n = 1] [, stats]): n more items done; stats is a table of numbers (loss = 0.12, ...)
-- folded into the running averages shown on the line.
function Bar:update(n, stats)
  if type(n) == 'table' and stats == nil then n, stats = 1, n end
  n = n or 1
  if type(n) ~= 'number' then error('progress: update expects a count, got ' .. type(n), 2) end
  if self.closed then error('progress: update after close', 2) end
  self.n = self.n + n
  if stats ~= nil then self:set_postfix(stats, true) end
  self:_refresh(false)
end

-- set_postfix(stats): records values without counting items. Numbers are averaged as in
-- update; other values (strings) are shown as given.
function Bar:set_postfix(stats, no_refresh)
  if type(stats) ~= 'table' then
    error('progress: expected a table of values, got ' .. type(stats), 2)
  end
  local keys = {}
  for k in pairs(stats) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  for _, k in ipairs(keys) do
    local v = stats[k]
    if type(v) == 'cdata' then
      local ok, x = pcall(function() return v:item() end) -- a 0-d tensor
      if ok then v = x end
    end
    if self.stats[k] == nil then self.stat_order[#self.stat_order + 1] = k end
    if type(v) == 'number' then
      local c = (self.stat_count[k] or 0) + 1
      self.stat_count[k] = c
      local prev = type(self.stats[k]) == 'number' and self.stats[k] or 0
      if c == 1 then prev = 0 end
      self.stats[k] = prev + self.smoothing * (v - prev)
    else
      self.stat_count[k] = nil
      self.stats[k] = v
    end
  end
  if not no_refresh then self:_refresh(false) end
end

-- The smoothed value of stat k (bias-corrected EMA).
function Bar:value(k)
  local v, c = self.stats[k], self.stat_count[k]
  if type(v) ~= 'number' or c == nil then return v end
  return v / (1 - (1 - self.smoothing) ^ c)
end

function Bar:elapsed() return self.clock() - self.start end

function Bar:rate()
  local dt = self:elapsed()
  if dt <= 0 then return 0 / 0 end
  return self.n / dt
end

-- The status line, without '\r' or newline.
function Bar:line()
  local elapsed, rate = self:elapsed(), self:rate()
  local head = self.desc and (self.desc .. ': ') or ''
  local stats = {}
  for _, k in ipairs(self.stat_order) do
    stats[#stats + 1] = ('%s=%s'):format(tostring(k), format_value(self:value(k)))
  end
  local tail
  if self.total then
    local eta = (self.total - self.n) / rate
    if self.n >= self.total then eta = 0 end
    tail = ('%d/%d [%s<%s, %s'):format(self.n, self.total, format_time(elapsed), format_time(eta),
      format_rate(rate, self.unit))
  else
    tail = ('%d [%s, %s'):format(self.n, format_time(elapsed), format_rate(rate, self.unit))
  end
  if #stats > 0 then tail = tail .. ', ' .. table.concat(stats, ', ') end
  tail = tail .. ']'
  if not self.total then return head .. tail end
  local frac = self.total > 0 and math.min(self.n / self.total, 1) or 1
  local pct = ('%3d%%'):format(math.floor(frac * 100))
  if not self.tty then return head .. pct .. ' ' .. tail end
  -- The bar takes what the width leaves, between 10 and 40 cells.
  local room = self.width - 1 - #head - #pct - #tail - 3
  local cells = math.max(10, math.min(40, room))
  local filled = frac * cells
  local full = math.floor(filled)
  local bar
  if self.ascii then
    bar = ('#'):rep(full) .. (' '):rep(cells - full)
  else
    local partials = { '', '▏', '▎', '▍', '▌', '▋', '▊', '▉' }
    local part = full < cells and partials[math.floor((filled - full) * 8) + 1] or ''
    bar = ('█'):rep(full) .. part .. (' '):rep(cells - full - (part ~= '' and 1 or 0))
  end
  return head .. pct .. '|' .. bar .. '| ' .. tail
end

-- Characters on screen: UTF-8 continuation bytes take no column.
local function columns(s) return #s - select(2, s:gsub('[\128-\191]', '')) end

function Bar:_draw()
  local line = self:line()
  local len = columns(line)
  local pad = self.last_len > len and (' '):rep(self.last_len - len) or ''
  self.out:write('\r', line, pad)
  if self.out.flush then self.out:flush() end
  self.last_len = len
  self.last_draw = self.clock()
end

function Bar:_print_line()
  self.out:write(self:line(), '\n')
  if self.out.flush then self.out:flush() end
  self.last_print = self.clock()
  self.last_line_n = self.n
end

function Bar:_refresh(force)
  local now = self.clock()
  if self.tty then
    if force or self.last_draw == nil or now - self.last_draw >= self.mininterval
      or (self.total and self.n >= self.total) then
      self:_draw()
    end
    return
  end
  local due = force or now - self.last_print >= self.interval
  if self.total and self.total > 0 and self.every_pct > 0 then
    local pct = self.n / self.total * 100
    if pct >= self.next_pct then
      due = true
      while self.next_pct <= pct do self.next_pct = self.next_pct + self.every_pct end
    end
  end
  if due and self.n ~= self.last_line_n then self:_print_line() end
end

-- write(text): prints a message without breaking the bar (above it on a terminal).
function Bar:write(text)
  if self.tty and not self.closed then
    self.out:write('\r', (' '):rep(self.last_len), '\r', tostring(text), '\n')
    self.last_len = 0
    self:_draw()
  else
    self.out:write(tostring(text), '\n')
    if self.out.flush then self.out:flush() end
  end
end

-- close(): the final state, then a newline on a terminal. Closing twice does nothing.
function Bar:close()
  if self.closed then return end
  if self.tty then
    self:_draw()
    self.out:write('\n')
    if self.out.flush then self.out:flush() end
  elseif self.n ~= self.last_line_n or self.last_line_n == nil then
    self:_print_line()
  end
  self.closed = true
end

Bar.__tostring = function(self) return self:line() end

-- bar:wrap(iterable): iterates with the bar counting each item; see progress.wrap.
function Bar:wrap(iterable)
  local f, s, c
  local with_index = true
  if type(iterable) == 'number' then
    local i = 0
    f = function()
      i = i + 1
      if i <= iterable then return i end
    end
    with_index = false
  elseif type(iterable) == 'function' then
    f = iterable
  elseif type(iterable) == 'table' and type(iterable.iter) ~= 'function' then
    local i = 0
    f = function()
      i = i + 1
      if i <= #iterable then return iterable[i] end
    end
  elseif (type(iterable) == 'table' or type(iterable) == 'userdata') and type(iterable.iter) == 'function' then
    f, s, c = iterable:iter()
  else
    error('progress.wrap: expected a count, a list, an iterator function or an object with ' ..
      ':iter(), got ' .. type(iterable), 3)
  end
  local count, started = 0, false
  return function()
    if started then self:update(1) end
    started = true
    local r = { f(s, c) }
    c = r[1]
    if r[1] == nil then
      self:close()
      return nil
    end
    count = count + 1
    if with_index then return count, unpack(r, 1, table.maxn(r)) end
    return r[1]
  end
end

-- progress.wrap(iterable [, opts]) -> iterator, bar. Yields i, item... for each item of
-- iterable: a count n (yields 1..n), a list (i, list[i]), an iterator function (i, its
-- results; give opts.total) or an object with :iter() and a size (a DataLoader: i, batch...).
-- The bar counts an item when the next one is asked for, and closes when the items run out.
function M.wrap(iterable, opts)
  opts = opts or {}
  local total = opts.total
  if total == nil then
    if type(iterable) == 'number' then total = iterable
    elseif type(iterable) == 'table' and type(iterable.iter) ~= 'function' then total = #iterable
    elseif (type(iterable) == 'table' or type(iterable) == 'userdata') and type(iterable.size) == 'function' then
      total = iterable:size()
    end
  end
  local bar = new(total, opts)
  return bar:wrap(iterable), bar
end

return setmetatable(M, { __call = function(_, total, opts) return new(total, opts) end })
