-- The `ember` program, run as a separate process: scripts and their arguments, -e, -l, -i,
-- --version, --help, exit statuses and tracebacks, EMBER_DEVICE, and the REPL reading piped
-- input (no terminal: no prompts, results still printed). The terminal side of the REPL is in
-- repl_spec.lua.
local BIN = os.getenv('EMBER_BIN') or 'build/ember'

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local tmpdir = os.tmpname()
os.remove(tmpdir)
assert(os.execute('mkdir -p ' .. q(tmpdir)) == 0)

local function write_file(name, text)
  local path = tmpdir .. '/' .. name
  local f = assert(io.open(path, 'w'))
  f:write(text)
  f:close()
  return path
end

local function read_file(path)
  local f = assert(io.open(path, 'r'))
  local s = f:read('*a')
  f:close()
  return s
end

-- Runs `ember <args>` through sh; returns stdout, stderr and the exit status. opts.stdin is
-- fed as the standard input, opts.env is a prefix of VAR=value words.
local function ember(args, opts)
  opts = opts or {}
  local out, err = tmpdir .. '/out', tmpdir .. '/err'
  local input = write_file('stdin', opts.stdin or '')
  local cmd = ('env -u EMBER_DEVICE %s %s %s < %s > %s 2> %s; echo $? > %s/rc'):format(
    opts.env or '', q(BIN), args, q(input), q(out), q(err), q(tmpdir))
  os.execute(cmd)
  return read_file(out), read_file(err), tonumber(read_file(tmpdir .. '/rc'))
end

local function contains(haystack, needle)
  if not haystack:find(needle, 1, true) then
    error(('expected to find %q in:\n%s'):format(needle, haystack), 2)
  end
end

local function lacks(haystack, needle)
  if haystack:find(needle, 1, true) then
    error(('did not expect %q in:\n%s'):format(needle, haystack), 2)
  end
end

describe('the ember program', function()
  setup(function()
    local f = io.open(BIN, 'r')
    assert(f, 'the ember program is not at ' .. BIN .. ' (set EMBER_BIN)')
    f:close()
  end)

  teardown(function() os.execute('rm -rf ' .. q(tmpdir)) end)

  describe('ember bench', function()
    it('times training steps per device and prints the comparison table', function()
      local out, err, rc = ember('bench --model mlp --batch-size 8 --steps 2 --warmup 1 --repeats 3 --devices cpu,cpu')
      assert.are.equal(0, rc, err)
      contains(out, 'model mlp, batch 8, median of 3 runs of 2 steps after 1 warm-up')
      local rows = 0
      for ms, sps, ratio in out:gmatch('\ncpu%s+%d+ threads%s+([%d.]+)%s+(%d+)%s+([%d.]+)') do
        rows = rows + 1
        assert.is_true(tonumber(ms) > 0 and tonumber(sps) > 0, out)
        if rows == 1 then assert.are.equal('1.00', ratio) end
      end
      assert.are.equal(2, rows, out)
    end)

    it('adds a row per precision with --precision', function()
      local out, err, rc = ember('bench --model mlp --batch-size 8 --steps 2 --warmup 1 --repeats 1 --devices cpu --precision fp32,bf16,fp16')
      assert.are.equal(0, rc, err)
      contains(out, 'vs cpu fp32')
      for _, p in ipairs({ 'fp32', 'bf16', 'fp16' }) do
        assert.is_truthy(out:find('\ncpu ' .. p .. '%s+%d+ threads%s+[%d.]+%s+%d+%s+[%d.]+'), out)
      end
      local _, err2, rc2 = ember('bench --precision fp8 --devices cpu')
      assert.are_not.equal(0, rc2)
      contains(err2, "bench: --precision: expected precision fp32, bf16 or fp16, got 'fp8'")
    end)

    it('rejects a bad option and an unknown device with a clear message', function()
      local _, err, rc = ember('bench --model resnet --steps 1 --devices cpu')
      assert.are_not.equal(0, rc)
      contains(err, "bench: --model must be cnn or mlp, got 'resnet'")
      local _, err2, rc2 = ember('bench --devices nosuch')
      assert.are_not.equal(0, rc2)
      contains(err2, 'nosuch')
    end)

    it('prints its options with --help', function()
      local out, err, rc = ember('bench --help')
      assert.are.equal(0, rc, err)
      contains(out, 'usage: ember bench')
      contains(out, '--batch-size')
    end)
  end)

  describe('scripts', function()
    it('gets its arguments in arg and as ...', function()
      local script = write_file('args.lua', [[
print('n', select('#', ...), ...)
print('arg', arg[0], arg[1], arg[2], #arg)
print('prog', arg[-1])
]])
      local out, err, rc = ember(q(script) .. ' alpha "two words"')
      assert.are.equal(0, rc, err)
      contains(out, 'n\t2\talpha\ttwo words\n')
      contains(out, 'arg\t' .. script .. '\talpha\ttwo words\t2\n')
      contains(out, 'prog\t' .. BIN .. '\n')
    end)

    it('has ember loaded as a global before it runs', function()
      local script = write_file('global.lua',
        "local x = ember.tensor{{1, 2, 3}, {4, 5, 6}}\nprint(type(ember), x:numel(), x:size(2))\n")
      local out, err, rc = ember(q(script))
      assert.are.equal(0, rc, err)
      assert.are.equal('table\t6\t3\n', out)
    end)

    it('runs options in order before the script, and -- ends the options', function()
      local script = write_file('order.lua', 'print("script", order, ...)\n')
      local out, err, rc = ember("-e 'order = 1' -e 'order = order * 10 print(order)' -- "
        .. q(script) .. ' -e')
      assert.are.equal(0, rc, err)
      assert.are.equal('10\nscript\t10\t-e\n', out)
    end)

    it('skips a #! first line', function()
      local script = write_file('shebang.lua', '#!/usr/bin/env ember\nprint("ran", ...)\n')
      local out, err, rc = ember(q(script) .. ' z')
      assert.are.equal(0, rc, err)
      assert.are.equal('ran\tz\n', out)
    end)

    it('reads the script from stdin with -', function()
      local out, err, rc = ember('- x y', { stdin = 'print("stdin script", ...)\n' })
      assert.are.equal(0, rc, err)
      assert.are.equal('stdin script\tx\ty\n', out)
    end)

    it('exits with the status given to os.exit', function()
      local _, _, rc = ember("-e 'os.exit(3)'")
      assert.are.equal(3, rc)
    end)
  end)

  describe('errors', function()
    it('prints the message and a traceback on stderr and exits with 1', function()
      local script = write_file('fails.lua', [[
local function inner() error('kaboom') end
local function outer() inner() end
print('before')
outer()
print('after')
]])
      local out, err, rc = ember(q(script))
      assert.are.equal(1, rc)
      assert.are.equal('before\n', out)
      contains(err, 'ember: ' .. script .. ':1: kaboom')
      contains(err, 'stack traceback:')
      contains(err, "in function 'inner'")
      contains(err, script .. ':4: in main chunk')
    end)

    it('reports Ember errors raised from the runtime', function()
      local out, err, rc = ember("-e 'local y = ember.zeros(2, 3):view(4)'")
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      contains(err, 'ember: (command line):1:')
      contains(err, 'view')
      contains(err, 'stack traceback:')
    end)

    it('reports error objects that are not strings', function()
      local _, err, rc =
        ember("-e 'error(setmetatable({}, {__tostring = function() return \"custom!\" end}))'")
      assert.are.equal(1, rc)
      contains(err, 'custom!')
      local _, err2, rc2 = ember("-e 'error({})'")
      assert.are.equal(1, rc2)
      contains(err2, '(error object is a table value)')
    end)

    it('reports a syntax error in the script', function()
      local script = write_file('syntax.lua', 'print("ok"\nx = = 1\n')
      local out, err, rc = ember(q(script))
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      contains(err, 'ember: ' .. script .. ':2:')
    end)

    it('says clearly that a script is missing', function()
      local missing = tmpdir .. '/no/such/script.lua'
      local out, err, rc = ember(q(missing) .. ' arg1')
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      contains(err, 'ember: cannot open ' .. missing .. ': No such file or directory')
    end)

    it('rejects unknown options and a missing option argument', function()
      local _, err, rc = ember('-z')
      assert.are.equal(1, rc)
      contains(err, 'ember: unknown option -z')
      local _, err2, rc2 = ember('-e')
      assert.are.equal(1, rc2)
      contains(err2, 'ember: option -e needs an argument')
      local _, err3, rc3 = ember('-l')
      assert.are.equal(1, rc3)
      contains(err3, 'ember: option -l needs an argument')
    end)
  end)

  describe('options', function()
    it('-e runs statements, also written -estmt', function()
      local out, err, rc = ember("-e 'print(6 * 7)' '-eprint(\"joined\")'")
      assert.are.equal(0, rc, err)
      assert.are.equal('42\njoined\n', out)
    end)

    it('-l requires a module as a global named after its last part', function()
      write_file('mymod.lua', 'return { value = 41 + 1 }\n')
      local env = 'LUA_PATH=' .. q(tmpdir .. '/?.lua;;')
      local out, err, rc = ember("-l mymod -e 'print(mymod.value)'", { env = env })
      assert.are.equal(0, rc, err)
      assert.are.equal('42\n', out)
      out, err, rc = ember("-l ember.repl -e 'print(type(repl.complete))'")
      assert.are.equal(0, rc, err)
      assert.are.equal('function\n', out)
    end)

    it('-l of a missing module is an error', function()
      local _, err, rc = ember("-l no_such_module_xyz -e 'print(1)'")
      assert.are.equal(1, rc)
      contains(err, "module 'no_such_module_xyz' not found")
    end)

    it('-i runs the script, then the REPL on stdin', function()
      local script = write_file('setup.lua', 'answer = 21\nprint("setup ran", ...)\n')
      local out, err, rc = ember('-i ' .. q(script) .. ' p',
        { stdin = 'answer * 2\nanswer + 1, "x"\n' })
      assert.are.equal(0, rc, err)
      assert.are.equal('setup ran\tp\n42\n22\tx\n', out)
    end)

    it('-e alone does not start the REPL; -e with -i does', function()
      local out, _, rc = ember("-e 'v = 5'", { stdin = 'v * 3\n' })
      assert.are.equal(0, rc)
      assert.are.equal('', out)
      out, _, rc = ember("-i -e 'v = 5'", { stdin = 'v * 3\n' })
      assert.are.equal(0, rc)
      assert.are.equal('15\n', out)
    end)

    it('--version and -v print the versions', function()
      for _, opt in ipairs({ '--version', '-v' }) do
        local out, err, rc = ember(opt)
        assert.are.equal(0, rc, err)
        contains(out, 'ember 0.1.0 (LuaJIT ')
        contains(out, 'devices: cpu')
        contains(out, 'threads: ')
      end
    end)

    it('--help and -h print the usage', function()
      for _, opt in ipairs({ '--help', '-h' }) do
        local out, err, rc = ember(opt)
        assert.are.equal(0, rc, err)
        contains(out, 'usage: ember [options] [script.lua [args...]]')
        contains(out, '-e stmt')
        contains(out, 'EMBER_DEVICE')
      end
    end)
  end)

  describe('EMBER_DEVICE', function()
    it('sets the default device before anything runs', function()
      local out, err, rc = ember("-e 'print(ember.get_default_device(), ember.zeros(2):device())'",
        { env = 'EMBER_DEVICE=cpu' })
      assert.are.equal(0, rc, err)
      assert.are.equal('cpu\tcpu\n', out)
      out, err, rc = ember("-e 'print(ember.get_default_device())'", { env = 'EMBER_DEVICE=auto' })
      assert.are.equal(0, rc, err)
      assert.truthy(out == 'cpu\n' or out:match('^vulkan:%d+\n$'), out)
    end)

    it('stops at start with status 1 for an unknown device', function()
      local script = write_file('never.lua', 'print("should not run")\n')
      local out, err, rc = ember(q(script), { env = 'EMBER_DEVICE=bogus' })
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      contains(err, "ember: EMBER_DEVICE=bogus: device: unknown device 'bogus'")
      -- the REPL does not start either
      out, err, rc = ember('', { env = 'EMBER_DEVICE=bogus', stdin = 'print("nor this")\n' })
      assert.are.equal(1, rc)
      assert.are.equal('', out)
      contains(err, 'EMBER_DEVICE=bogus')
    end)
  end)

  describe('the REPL on piped input', function()
    it('prints results without prompts, tab-separated, and ; suppresses them', function()
      local out, err, rc = ember('', { stdin = table.concat({
        '1 + 1',
        'x = 10',
        'x, x * 2, "s", nil',
        'x * 3;',
        '= x - 1',
        '{1, 2, k = "v"}',
        'print("printed")',
        '',
      }, '\n') })
      assert.are.equal(0, rc, err)
      assert.are.equal('', err)
      assert.are.equal('2\n10\t20\ts\tnil\n9\n{1, 2, k = "v"}\nprinted\n', out)
    end)

    it('continues incomplete chunks over several lines', function()
      local out, err, rc = ember('', { stdin = table.concat({
        'function sq(v)',
        '  return v * v',
        'end',
        'sq(12)',
        '{',
        '  3,',
        '  4 }',
        '1 +',
        '2',
        '',
      }, '\n') })
      assert.are.equal(0, rc, err)
      assert.are.equal('', err)
      assert.are.equal('144\n{3, 4}\n3\n', out)
    end)

    it('prints an error with a traceback and goes on', function()
      local out, err, rc = ember('', { stdin = table.concat({
        'local function f() error("boom") end f()',
        '"still here"',
        'x = = 1',
        '"and here"',
        '',
      }, '\n') })
      assert.are.equal(1, rc) -- piped input that failed exits non-zero
      assert.are.equal('still here\nand here\n', out)
      contains(err, 'stdin:1: boom')
      contains(err, 'stack traceback:')
      contains(err, "in function 'f'")
      contains(err, "stdin:1: unexpected symbol near '='")
    end)

    it('keeps working when the user redefines the standard globals', function()
      local out, err, rc = ember('', { stdin = table.concat({
        'select, tostring, type, pairs, next, print, string = nil, nil, nil, nil, nil, nil, nil',
        '1, {2, a = "b"}',
        '?zerso',
        '',
      }, '\n') })
      assert.are.equal(0, rc, err)
      assert.are.equal('', err)
      contains(out, '1\t{2, a = "b"}\n')
      contains(out, "no help for 'zerso'")
    end)

    it('names the line of an error raised by the expression itself', function()
      local _, err = ember('', { stdin = 'error("direct")\n' })
      contains(err, 'stdin:1: direct')
    end)

    it('reports a chunk left unfinished at the end of the input', function()
      local out, err, rc = ember('', { stdin = 'print("ran")\nfunction g()\n  return 1\n' })
      assert.are.equal(1, rc)
      assert.are.equal('ran\n', out)
      contains(err, "'end' expected")
    end)

    it('answers ?name from the docs and ? with the list of names', function()
      local out, err, rc = ember('', { stdin = '?help\n? EMBER_HISTORY \n?zerso\n?\n' })
      assert.are.equal(0, rc, err)
      contains(out, 'help\n`ember.help([name_or_function])`')
      contains(out, 'EMBER_HISTORY\n`EMBER_HISTORY=path ember`')
      contains(out, "no help for 'zerso'; did you mean zeros")
      contains(out, 'Help is available for these names')
      contains(out, 'api/repl:\n  ember, help, EMBER_DEVICE, EMBER_HISTORY')
      lacks(out, '> ')
    end)

    it('exposes ember.help', function()
      local out, err, rc = ember("-e 'ember.help(ember.help)'")
      assert.are.equal(0, rc, err)
      contains(out, 'help\n`ember.help([name_or_function])`')
    end)
  end)
end)
