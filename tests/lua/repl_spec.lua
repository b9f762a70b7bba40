-- The REPL. First its Lua half (ember.repl: completion, help lookup, result formatting) in
-- this process; then the real program at a terminal: tmux gives it a pseudo-terminal, the
-- tests type keys into it and read the screen back (polling with a deadline, never sleeping
-- a fixed time). The piped-input side of the REPL is in cli_spec.lua.
local H = require 'tests.lua.helpers'
local ember = H.ember
local repl = require 'ember.repl'

local BIN = os.getenv('EMBER_BIN') or 'build/ember'

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function sorted_copy(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  return c
end

describe('ember.repl.complete', function()
  -- Completion looks names up in an environment (the REPL's is _G); these tests give their own.
  local function env(extra)
    local e = { ember = ember, string = string, ipairs = ipairs, print = print,
                _VERSION = _VERSION }
    for k, v in pairs(extra or {}) do e[k] = v end
    return e
  end

  it('completes table fields to full words', function()
    local got = repl.complete('ember.zer', env())
    local has = {}
    for _, w in ipairs(got) do has[w] = true end
    assert.is_true(has['ember.zeros'])
    -- exactly the ember fields with that prefix (the reference: a plain scan of the table)
    local expected = {}
    for k in pairs(ember) do
      if type(k) == 'string' and k:sub(1, 3) == 'zer' then
        expected[#expected + 1] = 'ember.' .. k
      end
    end
    assert.are.same(sorted_copy(expected), got)
    -- the globals are the default environment
    rawset(_G, 'ReplSpecGlobal', { alpha = 1 })
    local from_globals = repl.complete('ReplSpecGlobal.al')
    rawset(_G, 'ReplSpecGlobal', nil)
    assert.are.same({ 'ReplSpecGlobal.alpha' }, from_globals)
  end)

  it('offers tensor methods as ember functions when ember has no field of that name', function()
    local got = repl.complete('ember.resha', env())
    assert.are.same({ 'ember.reshape', 'ember.reshape_as' }, got)
    for _, w in ipairs(got) do assert.are.equal('function', type(ember[w:sub(7)])) end
    -- ember's own fields first: zero_ is a tensor method, and not offered next to zeros
    for _, w in ipairs(repl.complete('ember.zer', env())) do
      assert.are.equal('ember.zeros', w:sub(1, 11))
    end
  end)

  it('looks only at the word before the cursor', function()
    local got = repl.complete('local y = ember.ar', env())
    assert.is_true(#got >= 1)
    for _, w in ipairs(got) do assert.are.equal('ember.ar', w:sub(1, 8)) end
    assert.are.same(repl.complete('ember.ar', env()), got)
    assert.are.same(repl.complete('print(ember.ar', env()), got)
  end)

  it('completes tensor methods after ":" and "."', function()
    local e = env({ t = ember.zeros(2, 2) })
    assert.are.same({ 't:reshape', 't:reshape_as' }, repl.complete('t:resh', e))
    local all = repl.complete('t:', e)
    local n = 0
    for k, v in pairs(ember.Tensor) do
      local keyword = (k == 'repeat' or k == 'end' or k == 'function' or k == 'and' or k == 'or'
        or k == 'not' or k == 'in' or k == 'for' or k == 'while' or k == 'do' or k == 'if')
      local name = type(k) == 'string' and k:match('^[%a][%w_]*$')
      if name and type(v) == 'function' and not keyword then
        n = n + 1
      end
    end
    assert.is_true(n > 50)
    assert.are.equal(n, #all)
    assert.are.same({ 't.numel' }, repl.complete('t.nume', e))
  end)

  it('follows the __index chain of metatables', function()
    local Base = { greet_all = function() end, greeting = 'hi' }
    local Mid = setmetatable({ greet_mid = function() end }, { __index = Base })
    local e = env({ Obj = setmetatable({ greet_own = 1 }, { __index = Mid }) })
    assert.are.same({ 'Obj.greet_all', 'Obj.greet_mid', 'Obj.greet_own', 'Obj.greeting' },
      repl.complete('Obj.gree', e))
    -- ':' offers only what can be called
    assert.are.same({ 'Obj:greet_all', 'Obj:greet_mid' }, repl.complete('Obj:gree', e))
    -- a cycle in the chain ends
    local a, b = {}, {}
    setmetatable(a, { __index = b })
    setmetatable(b, { __index = a })
    e.Obj = setmetatable({ only = 1 }, { __index = a })
    assert.are.same({ 'Obj.only' }, repl.complete('Obj.on', e))
    -- nested paths
    e.deep = { er = { est = 1, esx = 2 } }
    assert.are.same({ 'deep.er.est', 'deep.er.esx' }, repl.complete('deep.er.es', e))
  end)

  it('completes string methods through the string metatable', function()
    assert.are.same({ 'string.upper' }, repl.complete('string.upp', env()))
    assert.are.same({ 's:upper' }, repl.complete('s:upp', env({ s = 'text' })))
  end)

  it('completes globals and keywords, with a space after a unique keyword', function()
    local got, append = repl.complete('functi', env())
    assert.are.same({ 'function' }, got)
    assert.are.equal(' ', append)
    got, append = repl.complete('embe', env())
    assert.are.same({ 'ember' }, got)
    assert.are.equal('', append)
    assert.are.same({ 'ipairs' }, repl.complete('x = ipai', env()))
    assert.are.same({ 'else', 'elseif', 'end' }, repl.complete('e', {}))
    -- keywords are not offered as fields (x:repeat would not parse)
    assert.are.same({}, repl.complete('t.whi', env({ t = { ['while'] = 1 } })))
  end)

  it('hides names starting with _ unless asked', function()
    local all = repl.complete('', env())
    assert.is_true(#all > 20)
    for _, w in ipairs(all) do assert.are_not.equal('_', w:sub(1, 1)) end
    assert.are.same({ '_VERSION' }, repl.complete('_VERS', env()))
  end)

  it('offers nothing for unknown paths, numbers and nonsense', function()
    local e = env()
    assert.are.same({}, repl.complete('no_such_global_xyz.a', e))
    assert.are.same({}, repl.complete('x = 1.5', e))
    assert.are.same({}, repl.complete('ember..zer', e))
    assert.are.same({}, repl.complete('ember:zeros.x', e))
    assert.are.same({}, repl.complete('qqqzzz', e))
  end)

  it('survives __index metamethods that raise', function()
    local e = env({ Obj = setmetatable({}, { __index = function() error('no fields here') end }) })
    assert.are.same({}, repl.complete('Obj.field.x', e))
  end)
end)

describe('ember.repl help', function()
  local dir = os.tmpname()
  os.remove(dir)

  setup(function()
    assert(os.execute('mkdir -p ' .. q(dir .. '/api')) == 0)
    local f = assert(io.open(dir .. '/api/fam.md', 'w'))
    f:write([[
# A family

Intro text that belongs to no entry.

### frob, frob_
`x:frob(n)`, `ember.frob(x, n)`

Frobs x.
```sh
### not a heading inside a fence
```

### ember (the program)
`ember [options]`

Program text.
## Next section
Not part of any entry.

### x[i], x[{...}]
Indexing text.
]])
    f:close()
    f = assert(io.open(dir .. '/guide.md', 'w'))
    f:write('# Guide\n\n### frob\nGuide notes on frob.\n\n### zap\nZap text.\n')
    f:close()
    repl.docs_dir = dir
  end)

  teardown(function()
    repl.docs_dir = nil
    os.execute('rm -rf ' .. q(dir))
  end)

  it('shows an entry up to the next heading, including fenced lines', function()
    local text, found = repl.help_text('zap')
    assert.is_true(found)
    assert.are.equal('zap\nZap text.', text)
    text = repl.help_text('ember')
    assert.are.equal('ember (the program)\n`ember [options]`\n\nProgram text.', text)
  end)

  it('finds aliases and the ways users write names, and shows every entry of a name', function()
    local text, found = repl.help_text('frob_')
    assert.is_true(found)
    assert.are.equal('frob, frob_\n`x:frob(n)`, `ember.frob(x, n)`\n\nFrobs x.\n```sh\n'
      .. '### not a heading inside a fence\n```', text)
    for _, name in ipairs({ 'ember.frob_', 'x:frob_', 'frob_()', '  frob_ ' }) do
      assert.are.equal(text, (repl.help_text(name)), name)
    end
    local both = repl.help_text('frob')
    assert.truthy(both:find('frob, frob_    (api/fam.md)', 1, true), both)
    assert.truthy(both:find('frob    (guide.md)\nGuide notes on frob.', 1, true), both)
    assert.are.equal('x[i], x[{...}]\nIndexing text.', (repl.help_text('x[i]')))
  end)

  it('says when there is no entry, with close names', function()
    local text, found = repl.help_text('forb')
    assert.is_false(found)
    assert.are.equal("no help for 'forb'; did you mean frob?", text)
    assert.are.equal("no help for 'frobb'; did you mean frob, frob_?", (repl.help_text('frobb')))
    text, found = repl.help_text('completely_unknown')
    assert.is_false(found)
    assert.are.equal("no help for 'completely_unknown' (? lists the names that have help)", text)
  end)

  it('lists the names by file', function()
    assert.are.equal('Help is available for these names (?name shows one):\n'
      .. 'api/fam:\n  frob, frob_, ember, x[i], x[{...}]\nguide:\n  frob, zap', repl.help_list())
  end)

  it('help() prints, for names and for function values', function()
    local written = {}
    local real = io.stdout
    local fake = {
      write = function(self, ...)
        for _, str in ipairs({ ... }) do written[#written + 1] = str end
        return self
      end,
      flush = function() end,
    }
    local zap = function() end
    rawset(_G, 'ReplSpecFns', { zap = zap })
    local ok, err = pcall(function()
      io.stdout = fake
      repl.help('zap')
      repl.help(zap)
      repl.help(function() end)
      repl.help()
    end)
    io.stdout = real
    rawset(_G, 'ReplSpecFns', nil)
    assert(ok, err)
    local out = table.concat(written)
    assert.truthy(out:find('zap\nZap text.\nzap\nZap text.\n', 1, true), out)
    assert.truthy(out:find('no help for this function', 1, true), out)
    assert.truthy(out:find('Help is available', 1, true), out)
  end)

  it('finds the real docs when no folder is set', function()
    repl.docs_dir = nil
    local text, found = repl.help_text('help')
    repl.docs_dir = dir
    assert.is_true(found)
    assert.truthy(text:find('`ember.help([name_or_function])`', 1, true), text)
  end)
end)

describe('ember.repl.format', function()
  it('prints tables nested, keys sorted, strings quoted', function()
    assert.are.equal('{1, 2, 3}', repl.format({ 1, 2, 3 }))
    assert.are.equal('{}', repl.format({}))
    assert.are.equal('{1, "two", [2.5] = 0, a = true, b = {c = "d\\n"}, ["end"] = 2, ["x y"] = 1}',
      repl.format({ 1, 'two', a = true, b = { c = 'd\n' }, [2.5] = 0, ['x y'] = 1, ['end'] = 2 }))
  end)

  it('marks cycles and limits depth and length', function()
    local t = { 1 }
    t.self = t
    assert.are.equal('{1, self = <cycle>}', repl.format(t))
    assert.are.equal('{{{{{...}}}}}', repl.format({ { { { { { 1 } } } } } }))
    local long = {}
    for i = 1, 150 do long[i] = 0 end
    local s = repl.format(long)
    assert.truthy(s:find('...(50 more)', 1, true), s)
  end)

  it('breaks long tables over lines', function()
    local t = {}
    for i = 1, 30 do t['key' .. i] = i end
    local s = repl.format(t)
    local head = '{\n  key1 = 1,\n  key10 = 10,\n  key11 = 11,'
    assert.are.equal(head, s:sub(1, #head))
    assert.are.equal(',\n  key9 = 9\n}', s:sub(-14))
  end)

  it('uses __tostring, and shows tensors as tostring does at the top level', function()
    local x = ember.zeros(2, 3, { dtype = 'int64' })
    assert.are.equal(tostring(x), repl.format(x))
    assert.are.equal('{w = <tensor int64 [2, 3]>}', repl.format({ w = x }))
    local obj = setmetatable({}, { __tostring = function() return 'Obj!' end })
    assert.are.equal('Obj!', repl.format(obj))
    assert.are.equal('s', repl.format('s'))
    assert.are.equal('nil', repl.format(nil))
  end)
end)

-- ---- at a terminal, through tmux ------------------------------------------------------------

local has_tmux = os.execute('command -v tmux > /dev/null 2>&1') == 0
local socket = ('ember-repl-spec-%d-%d'):format(os.time(), math.random(1e6))
local tmux = 'tmux -L ' .. socket .. ' -f /dev/null '

local function sh(cmd)
  local p = io.popen(cmd .. ' 2>&1')
  local out = p:read('*a')
  p:close()
  return out
end

local function sleep(s) os.execute('sleep ' .. s) end

local counter = 0
local Session = {}
Session.__index = Session

-- Starts the program in a new tmux session. The command line prints "[exit N]" when ember
-- ends and stays, so that the tests can read how it ended.
local function start(args, history)
  counter = counter + 1
  local s = setmetatable({ name = 'r' .. counter }, Session)
  local cmd = ('env -u EMBER_DEVICE INPUTRC=/dev/null TERM=xterm EMBER_HISTORY=%s %s %s; '
    .. 'echo "[exit $?]"; sleep 60'):format(q(history or ''), q(BIN), args or '')
  sh(tmux .. 'new-session -d -s ' .. s.name .. ' -x 200 -y 50 ' .. q(cmd))
  return s
end

function Session:keys(...)
  local words = {}
  for i, k in ipairs({ ... }) do words[i] = q(k) end
  sh(tmux .. 'send-keys -t ' .. self.name .. ' ' .. table.concat(words, ' '))
end

-- Types text literally (no key names), optionally followed by Enter.
function Session:type(text, enter)
  -- tmux reads a trailing ';' as its own command separator: escape it.
  sh(tmux .. 'send-keys -l -t ' .. self.name .. ' ' .. q((text:gsub(';$', '\\;'))))
  if enter then self:keys('Enter') end
end

-- Pastes text as a terminal does (bracketed paste): readline takes the line breaks into the
-- line, and Enter then submits the whole block.
function Session:paste(text)
  sh(tmux .. 'set-buffer -b paste ' .. q(text))
  sh(tmux .. 'paste-buffer -p -d -b paste -t ' .. self.name)
end

function Session:screen()
  return sh(tmux .. 'capture-pane -p -J -S -1000 -t ' .. self.name)
end

-- Waits until the screen satisfies pred(screen); fails with the screen after 10 s.
function Session:wait(pred, what)
  local deadline = os.time() + 10
  local screen
  repeat
    screen = self:screen()
    if pred(screen) then return screen end
    sleep(0.05)
  until os.time() > deadline
  error(('timed out waiting for %s; the screen:\n%s'):format(what, screen), 2)
end

function Session:wait_text(text)
  return self:wait(function(s) return s:find(text, 1, true) ~= nil end, ('%q'):format(text))
end

-- Waits until text is on the screen n times.
function Session:wait_count(text, n)
  return self:wait(function(s)
    local count, at = 0, 1
    while true do
      local i = s:find(text, at, true)
      if not i then break end
      count, at = count + 1, i + #text
    end
    return count >= n
  end, ('%d times %q'):format(n, text))
end

-- Ctrl-C, then waits until the REPL has shown it took it (the n-th "^C" on the screen): the
-- terminal drops input typed before the interrupt is handled, so nothing may be typed sooner.
function Session:interrupt_prompt(n)
  self:keys('C-c')
  self:wait_count('^C', n or 1)
end

-- Waits for a line that is exactly `line` (trailing spaces aside).
function Session:wait_line(line)
  return self:wait(function(s)
    for l in (s .. '\n'):gmatch('([^\n]*)\n') do
      if l:gsub('%s+$', '') == line then return true end
    end
    return false
  end, ('the line %q'):format(line))
end

-- Waits for an empty prompt at the bottom: the REPL is ready for a new line.
function Session:wait_prompt()
  return self:wait(function(s) return s:match('\n> *\n*$') ~= nil end, 'a fresh prompt')
end

function Session:kill() sh(tmux .. 'kill-session -t ' .. self.name) end

local function lines_after(screen, marker)
  local out, seen = {}, false
  for l in (screen .. '\n'):gmatch('([^\n]*)\n') do
    l = l:gsub('%s+$', '')
    if seen and l ~= '' then out[#out + 1] = l end
    if l == marker then seen = true end
  end
  return out
end

local function read_lines(path)
  local lines = {}
  local f = io.open(path, 'r')
  if not f then return lines end
  for l in f:lines() do lines[#lines + 1] = l end
  f:close()
  return lines
end

describe('the REPL at a terminal', function()
  if not has_tmux then
    pending('tmux is not installed: the terminal tests need it (scripts/install-deps.sh)')
    return
  end

  local s
  -- A session that lives for the whole block keeps the server up between tests (a server
  -- exits with its last session, and a new one could race with it going away).
  setup(function() sh(tmux .. 'new-session -d -s keeper -x 80 -y 10 "sleep 600"') end)
  after_each(function()
    if s then s:kill() end
    s = nil
  end)
  teardown(function() sh(tmux .. 'kill-server') end)

  it('prints expressions, several results, and nothing after a trailing ;', function()
    s = start()
    s:wait_text('?name for help')
    s:wait_prompt()
    s:type('40 + 2', true)
    s:wait_line('42')
    s:type('"a", 1, nil', true)
    s:wait(function(sc) return sc:find('\na +1 +nil\n') ~= nil end, 'a, 1, nil')
    s:type('6 * 111;', true)
    s:type('"mark" .. "er"', true)
    local screen = s:wait_line('marker')
    local after = lines_after(screen, '> 6 * 111;')
    assert.are.same({ '> "mark" .. "er"', 'marker' }, { after[1], after[2] })
  end)

  it('continues a multi-line function definition at a >> prompt', function()
    s = start()
    s:wait_prompt()
    s:type('function sq(v)', true)
    s:wait_text('>> ')
    s:type('return v * v', true)
    s:type('end', true)
    s:type('sq(12)', true)
    s:wait_line('144')
  end)

  it('runs a pasted block whole (locals stay in scope), else line by line', function()
    s = start()
    s:wait_prompt()
    s:paste('local a = 20\nprint(a + 1)')
    s:wait_text('> local a = 20\nprint(a + 1)')
    s:keys('Enter')
    s:wait_line('21')
    s:paste('x = 1\nx + 1\nfunction g()\n  return 5\nend\ng() * 2')
    s:wait_text('g() * 2')
    s:keys('Enter')
    local screen = s:wait_line('10')
    local after = lines_after(screen, 'g() * 2')
    assert.are.same({ '2', '10' }, { after[1], after[2] })
    s:paste('function h()\n  return 6')
    s:wait_text('  return 6')
    s:keys('Enter')
    s:wait_text('>> ')
    s:type('end', true)
    s:type('h()', true)
    s:wait_line('6')
  end)

  it('completes ember.zer and x:resh with Tab', function()
    s = start()
    s:wait_prompt()
    s:type('ember.zer')
    s:keys('Tab')
    s:wait_text('> ember.zeros')
    s:type('(3):numel()', true)
    s:wait_line('3')
    s:type('x = ember.zeros(2, 2)', true)
    s:wait_prompt()
    s:type('x:resh')
    s:keys('Tab')
    s:wait_text('> x:reshape')
    s:type('(4):size(1)', true)
    s:wait_line('4')
    s:type('Base = {greet_all = 1}; Obj = setmetatable({}, {__index = Base})', true)
    s:wait_prompt()
    s:type('Obj.gre')
    s:keys('Tab')
    s:type(' + 100', true)
    s:wait_line('101')
  end)

  it('completes file names inside a string', function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute('mkdir -p ' .. q(dir)) == 0)
    local f = assert(io.open(dir .. '/completion_target_file.lua', 'w'))
    f:write('print("target " .. "ran")\n')
    f:close()
    s = start()
    s:wait_prompt()
    s:type('dofile("' .. dir .. '/completion_tar')
    s:keys('Tab')
    s:wait_text('> dofile("' .. dir .. '/completion_target_file.lua"')
    s:type(')', true)
    s:wait_line('target ran')
    os.execute('rm -rf ' .. q(dir))
  end)

  it('stops running code on Ctrl-C and goes on', function()
    s = start()
    s:wait_prompt()
    s:type("print('loop' .. 'ing'); while true do end", true)
    s:wait_line('looping')
    s:keys('C-c')
    s:wait_text('stdin:1: interrupted!')
    s:wait_text('stack traceback:')
    s:type('1 + 2', true)
    s:wait_line('3')
    -- and a function defined at the prompt, looping, is interruptible too
    s:type('function spin() local n = 0 while true do n = n + 1 end end', true)
    s:type("print('spin' .. 'ning'); spin()", true)
    s:wait_line('spinning')
    s:keys('C-c')
    s:wait(function(sc)
      local _, n = sc:gsub('interrupted!', '')
      return n >= 2
    end, 'a second interruption')
    s:type('2 + 3', true)
    s:wait_line('5')
  end)

  it('drops the current line or chunk on Ctrl-C at the prompt', function()
    s = start()
    s:wait_prompt()
    s:type('1 + ')
    s:wait_text('> 1 +')
    s:interrupt_prompt(1)
    s:type('2 * 2', true)
    s:wait_line('4')
    s:type('function broken(', true)
    s:wait_text('>> ')
    s:interrupt_prompt(2)
    s:type('7 * 6', true)
    local screen = s:wait_line('42')
    assert.is_nil(screen:find('expected', 1, true), screen)
    assert.is_nil(screen:find('unexpected', 1, true), screen)
  end)

  it('recovers from errors', function()
    s = start()
    s:wait_prompt()
    s:type("error('bo' .. 'om')", true)
    s:wait_text('stdin:1: boom')
    s:wait_text('stack traceback:')
    s:type('ember.zeros(2, 3) + ember.zeros(5)', true)
    s:wait_text('cannot broadcast')
    s:type('5 + 5', true)
    s:wait_line('10')
  end)

  it('shows help for ?name', function()
    s = start()
    s:wait_prompt()
    s:type('?help', true)
    s:wait_text('`ember.help([name_or_function])`, `?name` and `?` at the REPL prompt')
    s:type('?EMBER_HISTORY', true)
    s:wait_text('keeps the last 1000 entries')
    s:type('?zerso', true)
    s:wait_text("no help for 'zerso'; did you mean zeros")
  end)

  it('suspends on Ctrl-Z at the prompt and comes back with fg', function()
    if os.execute('command -v bash > /dev/null 2>&1') ~= 0 then
      pending('needs bash for job control')
      return
    end
    counter = counter + 1
    s = setmetatable({ name = 'r' .. counter }, Session)
    sh(tmux .. 'new-session -d -s ' .. s.name .. ' -x 200 -y 50 '
      .. q('env -u EMBER_DEVICE PS1="sh$ " INPUTRC=/dev/null TERM=xterm '
        .. 'bash --norc --noprofile -i'))
    s:wait_text('sh$ ')
    s:type('EMBER_HISTORY= ' .. q(BIN), true)
    s:wait_prompt()
    s:type('ember.ze')
    s:wait_text('> ember.ze')
    s:keys('C-z')
    s:wait_text('Stopped')
    s:type('fg', true)
    -- back at the same line, with the terminal in readline's mode again: Tab completes, the
    -- arrows edit
    s:wait(function(sc) return sc:match('\n> ember%.ze *\n*$') ~= nil end, 'the line redrawn')
    s:keys('Tab')
    s:wait_text('> ember.zeros')
    s:type('(5):numel()', true)
    s:wait_line('5')
    s:type('y = 8')
    s:keys('Left', 'Left', 'Left', 'Left', 'Left')
    s:type('x')
    s:keys('Enter')
    s:type('xy', true)
    s:wait_line('8')
  end)

  it('exits on Ctrl-D', function()
    s = start()
    s:wait_prompt()
    s:keys('C-d')
    s:wait_text('[exit 0]')
  end)

  it('keeps a bounded history file across sessions', function()
    local hist = os.tmpname()
    local f = assert(io.open(hist, 'w'))
    for i = 1, 1100 do f:write(('old_entry_%d = %d\n'):format(i, i)) end
    f:close()
    s = start('', hist)
    s:wait_prompt()
    s:keys('Up')
    s:wait_text('> old_entry_1100 = 1100')
    s:interrupt_prompt(1)
    s:type('hist_marker = 123', true)
    s:wait_prompt()
    s:type('function mf()', true)
    s:type('return 7', true)
    s:type('end', true)
    s:wait_prompt()
    s:keys('C-d')
    s:wait_text('[exit 0]')
    s:kill()
    local lines = read_lines(hist)
    assert.are.equal(1000, #lines)
    assert.are.equal('old_entry_103 = 103', lines[1])
    assert.are.equal('old_entry_1100 = 1100', lines[998])
    assert.are.equal('hist_marker = 123', lines[999])
    assert.are.equal('function mf()\\nreturn 7\\nend', lines[1000])
    -- a new session recalls the multi-line chunk as one entry
    s = start('', hist)
    s:wait_prompt()
    s:keys('Up', 'Enter')
    s:type('mf()', true)
    s:wait_line('7')
    s:keys('C-d')
    s:wait_text('[exit 0]')
    os.remove(hist)
  end)

  it('goes on without history when the file cannot be written', function()
    s = start('', '/nonexistent_dir_for_ember_tests/history')
    s:wait_prompt()
    s:type('1 + 1', true)
    s:wait_text('ember: cannot write the history file /nonexistent_dir_for_ember_tests/history')
    s:wait_line('2')
    s:type('2 + 2', true)
    s:wait_line('4')
    local _, warnings = s:screen():gsub('cannot write the history file', '')
    assert.are.equal(1, warnings)
  end)

  it('interrupts a script with Ctrl-C: message, traceback, status 1', function()
    s = start([[-e "print('rea' .. 'dy') jit.off() while true do end"]])
    s:wait_line('ready')
    s:keys('C-c')
    s:wait_text('interrupted!')
    s:wait_text('[exit 1]')
    assert.truthy(s:screen():find('stack traceback:', 1, true))
  end)
end)
