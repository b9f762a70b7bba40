-- ember.progress: the text it writes to a file, with a fake clock, against lines built by hand
-- (percentages, counts, times, rates and the smoothed values computed independently here).
local H = require 'tests.lua.helpers'
local ember = H.ember
local progress = ember.progress

-- A file handle's text: write into a temporary file, then read it back.
local function capture(f)
  local path = os.tmpname()
  local out = assert(io.open(path, 'w'))
  f(out)
  out:close()
  local r = assert(io.open(path, 'r'))
  local text = r:read('*a')
  r:close()
  os.remove(path)
  return text
end

local function lines_of(text)
  local t = {}
  for line in text:gmatch('([^\n]*)\n') do t[#t + 1] = line end
  return t
end

local function fake_clock()
  local c = { t = 1000 }
  c.fn = function() return c.t end
  return c
end

-- The bias-corrected moving average, written out: weights alpha * (1 - alpha)^(n - i).
local function smoothed(values, alpha)
  local num, den = 0, 0
  for i, v in ipairs(values) do
    local w = alpha * (1 - alpha) ^ (#values - i)
    num, den = num + w * v, den + w
  end
  return num / den
end

describe('progress on a file (not a terminal)', function()
  it('writes a line every 10% with count, times, rate and the smoothed loss', function()
    local clock = fake_clock()
    local losses = {}
    local text = capture(function(out)
      local bar = progress(20, { desc = 'epoch 1', out = out, tty = false, clock = clock.fn })
      for i = 1, 20 do
        clock.t = clock.t + 0.5
        losses[i] = 1 / i
        bar:update(1, { loss = losses[i] })
      end
      bar:close()
      bar:close() -- a second close writes nothing
    end)
    local lines = lines_of(text)
    assert.are.equal(10, #lines)
    for k = 1, 10 do
      local n = 2 * k
      local seen = {}
      for i = 1, n do seen[i] = losses[i] end
      local elapsed, eta = n * 0.5, (20 - n) * 0.5
      local expected = ('epoch 1: %3d%% %d/20 [00:%02d<00:%02d, 2.00 it/s, loss=%.4g]'):format(
        10 * k, n, math.floor(elapsed + 0.5), math.floor(eta + 0.5), smoothed(seen, 0.1))
      assert.are.equal(expected, lines[k])
    end
    assert.is_nil(text:find('\r', 1, true))
  end)

  it('writes every `interval` seconds when the total is unknown, and a last line on close', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(nil, { out = out, tty = false, clock = clock.fn, interval = 2, unit = 'batch' })
      for _ = 1, 10 do
        clock.t = clock.t + 0.5
        bar:update()
      end
      bar:close()
    end)
    assert.are.same({
      '4 [00:02, 2.00 batch/s]',
      '8 [00:04, 2.00 batch/s]',
      '10 [00:05, 2.00 batch/s]',
    }, lines_of(text))
  end)

  it('shows slow rates as seconds per item, long times with hours, strings as given', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(4, { out = out, tty = false, clock = clock.fn, every_pct = 50, interval = 1e9 })
      clock.t = clock.t + 3725
      bar:set_postfix({ phase = 'warm-up' })
      bar:update(2, { acc = 0.5 })
      bar:close()
    end)
    assert.are.same({ ' 50% 2/4 [1:02:05<1:02:05, 1862.50 s/it, phase=warm-up, acc=0.5]' }, lines_of(text))
    assert.are.equal('01:15', progress.format_time(75))
    assert.are.equal('?', progress.format_time(math.huge))
  end)

  it('uses smoothing 1 to show the last value, and accepts 0-d tensors', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(2, { out = out, tty = false, clock = clock.fn, smoothing = 1, every_pct = 100 })
      clock.t = clock.t + 1
      bar:update(1, { loss = ember.tensor(3, { dtype = 'float64' }) })
      bar:update(1, { loss = 0.25 })
      assert.are.equal(0.25, bar:value('loss'))
      bar:close()
    end)
    assert.are.same({ '100% 2/2 [00:01<00:00, 2.00 it/s, loss=0.25]' }, lines_of(text))
  end)

  it('write() prints a message line', function()
    local text = capture(function(out)
      local bar = progress(10, { out = out, tty = false, clock = fake_clock().fn })
      bar:write('validation loss 0.5')
      bar:close()
    end)
    assert.are.equal('validation loss 0.5', lines_of(text)[1])
  end)
end)

describe('progress on a terminal', function()
  it('redraws in place with \\r and ends with a newline', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(4, { desc = 'train', out = out, tty = true, clock = clock.fn,
        width = 80, ascii = true, mininterval = 0 })
      for _ = 1, 4 do
        clock.t = clock.t + 1
        bar:update(1, { loss = 2 })
      end
      bar:close()
    end)
    assert.are.equal('\n', text:sub(-1))
    local draws = {}
    for d in text:gmatch('\r([^\r\n]*)') do draws[#draws + 1] = d end
    assert.are.equal(6, #draws) -- the opening draw, four updates, close
    for k, d in ipairs(draws) do
      local line = d:gsub('%s+$', '')
      assert.is_true(#d <= 79, 'line ' .. k .. ' is wider than the terminal')
      local pct, bar, rest = line:match('^train: +(%d+)%%|([# ]+)| (.*)$')
      assert.is_truthy(pct, 'line ' .. k .. ': ' .. line)
      local n = math.min(k - 1, 4)
      assert.are.equal(25 * n, tonumber(pct))
      local hashes = select(2, bar:gsub('#', ''))
      assert.are.equal(math.floor(#bar * n / 4), hashes)
      if n > 0 then
        assert.are.equal(('%d/4 [00:%02d<00:%02d, 1.00 it/s, loss=2]'):format(n, n, 4 - n), rest)
      else
        assert.are.equal('0/4 [00:00<?, ? it/s]', rest)
      end
    end
  end)

  it('redraws at most every mininterval seconds, always at the end', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(100, { out = out, tty = true, clock = clock.fn, mininterval = 1, ascii = true })
      for _ = 1, 100 do
        clock.t = clock.t + 0.1
        bar:update()
      end
      bar:close()
    end)
    local n = select(2, text:gsub('\r', ''))
    assert.is_true(n >= 10 and n <= 13, 'draws: ' .. n)
    assert.is_truthy(text:find('100/100', 1, true))
  end)

  it('pads over a longer previous line, and write() prints above the bar', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(2, { out = out, tty = true, clock = clock.fn, mininterval = 0, ascii = true })
      bar:set_postfix({ note = 'a long note here' })
      bar:set_postfix({ note = 'x' })
      bar:write('hello')
      bar:close()
    end)
    local draws = {}
    for d in text:gmatch('\r([^\r\n]*)') do draws[#draws + 1] = d end
    assert.is_true(#draws[3] >= #draws[2]) -- the shorter line is padded over the longer one
    assert.is_truthy(text:find('\rhello\n', 1, true))
  end)

  it('draws block characters when the locale is UTF-8', function()
    local clock = fake_clock()
    local text = capture(function(out)
      local bar = progress(8, { out = out, tty = true, clock = clock.fn, mininterval = 0, ascii = false, width = 60 })
      bar:update(3)
      bar:close()
    end)
    assert.is_truthy(text:find('█', 1, true))
  end)
end)

describe('progress.wrap', function()
  local function run(iterable, opts)
    local got = {}
    local text = capture(function(out)
      opts = opts or {}
      opts.out, opts.tty, opts.clock = out, false, fake_clock().fn
      for i, a, b in progress.wrap(iterable, opts) do got[#got + 1] = { i, a, b } end
    end)
    return got, lines_of(text)
  end

  it('counts to n', function()
    local got, lines = run(3)
    assert.are.same({ { 1 }, { 2 }, { 3 } }, got)
    assert.are.equal('100% 3/3 [00:00<00:00, ? it/s]', lines[#lines])
  end)

  it('walks a list with indices', function()
    local got, lines = run({ 'a', 'b' }, { desc = 'list' })
    assert.are.same({ { 1, 'a' }, { 2, 'b' } }, got)
    assert.are.equal('list: 100% 2/2 [00:00<00:00, ? it/s]', lines[#lines])
  end)

  it('wraps an iterator function, with opts.total', function()
    local k = 0
    local function it() k = k + 1; if k <= 4 then return k * 10, -k end end
    local got, lines = run(it, { total = 4 })
    assert.are.same({ { 1, 10, -1 }, { 2, 20, -2 }, { 3, 30, -3 }, { 4, 40, -4 } }, got)
    assert.is_truthy(lines[#lines]:find('4/4', 1, true))
  end)

  it('wraps an object with :iter() and :size(), like a DataLoader', function()
    local loader = {
      size = function() return 2 end,
      iter = function()
        local i = 0
        return function()
          i = i + 1
          if i <= 2 then return 'x' .. i, 'y' .. i end
        end
      end,
    }
    local got, lines = run(loader)
    assert.are.same({ { 1, 'x1', 'y1' }, { 2, 'x2', 'y2' } }, got)
    assert.is_truthy(lines[#lines]:find('2/2', 1, true))
  end)

  it('wraps an empty list', function()
    local got, lines = run({})
    assert.are.same({}, got)
    assert.are.equal('100% 0/0 [00:00<00:00, ? it/s]', lines[1])
  end)

  it('returns the bar for set_postfix inside the loop', function()
    local text = capture(function(out)
      local it, bar = progress.wrap(2, { out = out, tty = false, clock = fake_clock().fn, every_pct = 100 })
      for _ in it do bar:set_postfix({ loss = 1 }) end
    end)
    assert.is_truthy(text:find('loss=1]', 1, true))
  end)
end)

describe('progress errors', function()
  it('rejects bad arguments', function()
    H.assert_error(function() progress(-1) end, 'progress: expected total to be a count >= 0 or nil')
    H.assert_error(function() progress(1.5) end, 'expected total to be a count')
    H.assert_error(function() progress(10, 'fast') end, 'expected an options table')
    H.assert_error(function() progress(10, { desc = 3 }) end, 'expected option desc to be a string')
    H.assert_error(function() progress(10, { out = 3, tty = false }) end, 'expected option out to be a file handle')
    H.assert_error(function() progress(10, { smoothing = 0, tty = false }) end, 'smoothing must be in (0, 1]')
    H.assert_error(function() progress.wrap(true) end, 'progress.wrap: expected a count, a list')
    local text = capture(function(out)
      local bar = progress(10, { out = out, tty = false })
      H.assert_error(function() bar:update('x') end, 'update expects a count')
      H.assert_error(function() bar:set_postfix(3) end, 'expected a table of values')
      bar:close()
      H.assert_error(function() bar:update() end, 'update after close')
    end)
    assert.is_string(text)
  end)

  it('is not a terminal when writing to a file', function()
    capture(function(out)
      local bar = progress(10, { out = out })
      assert.is_false(bar.tty)
      bar:close()
    end)
  end)
end)
