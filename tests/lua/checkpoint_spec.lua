-- checkpoint_spec: ember.save / ember.load (safetensors files) and the C reader/writer.
--
-- Round trips compare loaded tensors with the tables they were made from; the format itself is
-- checked from outside: headers are written and read here byte by byte, every cut of a valid
-- file must be refused with a clear message, and Python (json + struct + torch, independent of
-- Ember) writes a reference file for Ember to read and checks the files Ember writes.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local C = ember.C

local write_file, read_file = H.write_file, H.read_file
local made = {}
local function tmp(suffix)
  local p = os.tmpname()
  os.remove(p)
  p = p .. (suffix or '.safetensors')
  made[#made + 1] = p
  return p
end



local function le64(v)
  local b = {}
  for i = 1, 8 do
    b[i] = string.char(v % 256)
    v = math.floor(v / 256)
  end
  return table.concat(b)
end

-- A safetensors file from header text and raw data.
local function st_file(header, raw)
  return write_file(tmp(), le64(#header) .. header .. (raw or ''))
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Exact values for each dtype: (i - 7) / 2 for floats, fitted integers, alternating booleans.
local dtype_values = {
  float32 = function(i) return (i - 7) / 2 end,
  float64 = function(i) return (i - 7) / 4 + 1e-9 * i end,
  float16 = function(i) return (i - 7) / 2 end,
  bfloat16 = function(i) return (i - 7) * 4 end,
  int8 = function(i) return (i - 7) * 17 end,
  uint8 = function(i) return i * 20 end,
  int16 = function(i) return (i - 7) * 4000 end,
  int32 = function(i) return (i - 7) * 300000000 end,
  int64 = function(i) return (i - 7) * 2 ^ 40 + i end,
  bool = function(i) return i % 2 == 0 end,
}
local all_dtypes = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16',
  'int32', 'int64', 'bool' }

local function make(dtype, sizes)
  local f = dtype_values[dtype]
  if #sizes == 0 then return ember.tensor(f(3), { dtype = dtype }), f(3) end
  local n = 1
  for _, s in ipairs(sizes) do n = n * s end
  if n == 0 then return ember.zeros(sizes, { dtype = dtype }), nil end
  local t = H.nested(sizes, f)
  return ember.tensor(t, { dtype = dtype }), t
end

local function assert_tensor(x, dtype, sizes, expected, what)
  assert.is_true(ember.is_tensor(x), what .. ': not a tensor')
  assert.are.equal(dtype, x:dtype(), what)
  assert.are.same(sizes, x:size(), what)
  if expected ~= nil then H.assert_close(x, expected, 0, 0, what) end
end

describe('save / load', function()
  teardown(function()
    for _, p in ipairs(made) do os.remove(p) end
  end)

  it('round-trips nested tables of every dtype, 0-dim and zero-size tensors included', function()
    local obj, expect = { model = {}, extra = {} }, {}
    for k, dtype in ipairs(all_dtypes) do
      local sizes = ({ { 3, 4 }, { 5 }, { 2, 1, 3 }, {}, { 0, 3 } })[k % 5 + 1]
      local t, tab = make(dtype, sizes)
      obj.model[k] = { weight = t, tag = dtype }
      expect[k] = { dtype, sizes, tab }
    end
    obj.extra.deep = { deeper = { x = ember.ones(2, { dtype = 'int64' }) } }
    local path = tmp()
    ember.save(path, obj)
    local r = ember.load(path)
    assert.are.equal(#all_dtypes, #r.model)
    for k, e in ipairs(expect) do
      assert_tensor(r.model[k].weight, e[1], e[2], e[3], e[1])
      assert.are.equal(e[1], r.model[k].tag)
    end
    H.assert_close(r.extra.deep.deeper.x, { 1, 1 }, 0, 0)
    -- int64 beyond 2^53 survives exactly
    local big = ember.tensor({ 0 }, { dtype = 'int64' })
    big:fill_(2 ^ 62)
    big:add_(ember.tensor({ 7 }, { dtype = 'int64' }))
    ember.save(path, { big = big })
    assert.are.equal(2LL ^ 62 + 7, ember.load(path).big:select(1, 1):item_int64())
  end)

  it('stores non-tensor leaves in __metadata__ and restores their types', function()
    local path = tmp()
    local obj = {
      lr = 0.1, step = 1000, neg_zero = -0.0, huge = 1e300, tiny = 5e-324, third = 1 / 3,
      inf = math.huge, ninf = -math.huge, nan = 0 / 0,
      flag = true, off = false,
      name = 'resnet "v2"\n\t\\ \195\188 \226\130\172', empty_string = '', digits = '123',
      i64 = ffi.new('int64_t', -9007199254740993LL), u64 = 0xffffffffffffffffULL,
      nothing = {}, list = { 3, 1, 2 }, words = { 'a', 'b' },
      nested = { a = { b = { c = 'deep' } } },
      w = ember.zeros(2),
    }
    ember.save(path, obj)
    local r = ember.load(path)
    for _, k in ipairs({ 'lr', 'step', 'huge', 'tiny', 'third', 'inf', 'ninf', 'flag', 'off',
      'name', 'empty_string', 'digits' }) do
      assert.are.equal(obj[k], r[k], k)
      assert.are.equal(type(obj[k]), type(r[k]), k)
    end
    assert.are.equal(-math.huge, 1 / r.neg_zero)
    assert.is_true(r.nan ~= r.nan)
    assert.is_true(ffi.istype('int64_t', r.i64))
    assert.are.equal(-9007199254740993LL, r.i64)
    assert.is_true(ffi.istype('uint64_t', r.u64))
    assert.are.equal(0xffffffffffffffffULL, r.u64)
    assert.are.same({}, r.nothing)
    assert.are.same({ 3, 1, 2 }, r.list)
    assert.are.same({ 'a', 'b' }, r.words)
    assert.are.equal('deep', r.nested.a.b.c)
    -- plain strings are stored as they are, for other tools to read
    local f = C.em_safetensors_open(path)
    local meta = {}
    for i = 0, tonumber(C.em_safetensors_metadata_count(f)) - 1 do
      meta[ffi.string(C.em_safetensors_metadata_key(f, i))] = ffi.string(C.em_safetensors_metadata_value(f, i))
    end
    C.em_safetensors_close(f)
    assert.are.equal(obj.name, meta.name)
    assert.are.equal('0.1', meta.lr)
    assert.are.equal('true', meta.flag)
    assert.are.equal('-9007199254740993', meta.i64)
    assert.is_truthy(meta.__ember_types__:find('"lr":"number"', 1, true))
    assert.is_nil(meta.__ember_types__:find('"name"', 1, true))
  end)

  it('rebuilds arrays, sparse integer keys, key 0 and mixed tables', function()
    local path = tmp()
    local t1, t2, t3 = ember.ones(1), ember.ones(2), ember.ones(3)
    ember.save(path, { layers = { { w = t1 }, { w = t2 }, { w = t3 } }, sparse = { [2] = 'b', [5] = 'e' },
      zero = { [0] = 'z', [1] = 'o' }, mixed = { 10, 20, name = 'm' } })
    local r = ember.load(path)
    assert.are.equal(3, #r.layers)
    for i = 1, 3 do assert.are.same({ i }, r.layers[i].w:size()) end
    assert.are.same({ [2] = 'b', [5] = 'e' }, r.sparse)
    assert.are.same({ [0] = 'z', [1] = 'o' }, r.zero)
    assert.are.same({ 10, 20, name = 'm' }, r.mixed)
    local flat = ember.load(path, { flat = true })
    assert.are.same({ 2 }, flat['layers.2.w']:size())
    assert.are.equal('m', flat['mixed.name'])
  end)

  it('gives back tables with dotted keys (state_dicts) as they were', function()
    local path = tmp()
    local w, b = ember.ones(2, 3), ember.zeros(2)
    ember.save(path, { ['1.weight'] = w, ['1.bias'] = b, ['note.text'] = 'x', [2] = 'two' })
    local r = ember.load(path)
    assert.are.same({ '1.bias', '1.weight', 2, 'note.text' }, (function()
      local ks = {}
      for k in pairs(r) do ks[#ks + 1] = k end
      table.sort(ks, function(p, q) return tostring(p) < tostring(q) end)
      return ks
    end)())
    assert.are.same({ 2, 3 }, r['1.weight']:size())
    assert.are.equal('x', r['note.text'])
    assert.are.equal('two', r[2])
    ember.save(path, { model = { ['0.weight'] = w, ['0.bias'] = b }, optim = { lr = 0.5 }, epoch = 3 })
    r = ember.load(path)
    assert.are.same({ 2, 3 }, r.model['0.weight']:size())
    assert.are.same({ 2 }, r.model['0.bias']:size())
    assert.are.equal(0.5, r.optim.lr)
    assert.are.equal(3, r.epoch)
    -- the names in the file are the usual dotted ones
    assert.are.same({ 2 }, ember.load(path, { flat = true })['model.0.bias']:size())
  end)

  it('round-trips an nn module state_dict', function()
    local ok, nn = pcall(function() return ember.nn end)
    if not ok or type(nn) ~= 'table' or not nn.Linear then pending('ember.nn is not available') return end
    local m = nn.Sequential():add(nn.Linear(3, 4)):add(nn.ReLU()):add(nn.Linear(4, 2))
    local path = tmp()
    ember.save(path, { model = m:state_dict(), epoch = 7 })
    local m2 = nn.Sequential():add(nn.Linear(3, 4)):add(nn.ReLU()):add(nn.Linear(4, 2))
    local r = ember.load(path)
    m2:load_state_dict(r.model)
    local x = ember.randn(5, 3)
    H.assert_close(m2:forward(x), m:forward(x):totable(), 0, 0)
    assert.are.equal(7, r.epoch)
  end)

  it('saves strided, transposed and expanded tensors as their values, contiguous', function()
    local base = ember.tensor(H.nested({ 4, 6 }, function(i) return i end))
    local views = {
      t = base:t(), step = base[{ {}, { 1, -1, 2 } }], row = base:select(1, 3),
      expanded = ember.tensor({ 1, 2, 3 }):view(1, 3):expand(4, 3),
      narrow = base:narrow(2, 2, 3):narrow(1, 2, 2),
    }
    local path = tmp()
    ember.save(path, views)
    local r = ember.load(path)
    for k, v in pairs(views) do
      assert.is_true(r[k]:is_contiguous(), k)
      assert.are.same(v:size(), r[k]:size(), k)
      H.assert_close(r[k], v:totable(), 0, 0, k)
    end
    -- the file holds 24 + 12 + 6 + 12 + 6 floats, not whole storages
    local total = #read_file(path)
    local hlen = 0
    for i = 8, 1, -1 do hlen = hlen * 256 + read_file(path):byte(i) end
    assert.are.equal((24 + 12 + 6 + 12 + 6) * 4, total - 8 - hlen)
    assert.are.equal(0, hlen % 8)
  end)

  it('honours the device option and checks options', function()
    local path = tmp()
    ember.save(path, { a = ember.ones(2) })
    assert.are.equal('cpu', ember.load(path, { device = 'cpu' }).a:device())
    H.assert_error(function() ember.load(path, { device = 'nowhere' }) end, 'load')
    H.assert_error(function() ember.load(path, { mmap = true }) end, 'load: unknown option mmap')
    H.assert_error(function() ember.load(path, 'cpu') end, 'load: expected an options table')
    H.assert_error(function() ember.load(nil) end, 'load: expected a file path, got nil')
    H.assert_error(function() ember.load('/nonexistent/x.safetensors') end,
      'load: cannot open /nonexistent/x.safetensors: No such file or directory')
  end)

  describe('save errors', function()
    it('rejects what the format cannot hold, naming where', function()
      local path = tmp()
      local cyclic = { a = {} }
      cyclic.a.back = cyclic
      local cases = {
        { ember.ones(2), 'save: expected a table of tensors and values, got a tensor (wrap it' },
        { { f = print }, "save: cannot save a function at 'f'" },
        { { a = { b = { coroutine.create(print) } } }, "save: cannot save a thread at 'a.b.1'" },
        { cyclic, "save: the table at 'a.back' contains itself" },
        { { x = { [''] = 1 } }, "save: key \"\" at 'x' cannot be empty or hold a NUL byte" },
        { { ['a\0b'] = 1 }, 'cannot be empty or hold a NUL byte' },
        { { m = { ['a.b'] = 1, c = {} } }, "save: the table at 'm' has dotted keys ('a.b'), so its values cannot be tables (one is at 'm.c')" },
        { { [1.5] = 1 }, "save: key 1.5 at '(root)' is not a string or an integer >= 0" },
        { { [-1] = 1 }, 'is not a string or an integer >= 0' },
        { { [true] = 1 }, 'save: key true' },
        { { [1] = 'x', ['1'] = 'y' }, "save: key '1' appears twice" },
        { { __metadata__ = 1 }, "save: '__metadata__' is reserved" },
        { { __ember_types__ = 'x' }, "save: '__ember_types__' is reserved" },
        { { s = 'a\0b' }, "save: the string at 's' holds a NUL byte" },
      }
      for _, c in ipairs(cases) do
        H.assert_error(function() ember.save(path, c[1]) end, c[2])
        assert.is_nil(io.open(path, 'rb'), 'nothing written for ' .. c[2])
      end
      H.assert_error(function() ember.save(42, {}) end, 'save: expected a file path, got number')
      H.assert_error(function() ember.save('/nonexistent/dir/x.safetensors', { a = ember.ones(1) }) end,
        'save: cannot write /nonexistent/dir/x.safetensors: No such file or directory')
      H.assert_error(function() ember.save('/tmp', { a = ember.ones(1) }) end, 'save: cannot write /tmp: it is a directory')
    end)
  end)

  describe('atomic writes', function()
    local dir
    before_each(function()
      dir = tmp('.d')
      assert(os.execute('mkdir -p ' .. dir) == 0)
    end)
    after_each(function() os.execute('rm -rf ' .. dir) end)

    local function leftovers(path)
      local p = io.popen('ls -a ' .. dir)
      local names = {}
      for line in p:lines() do
        if line ~= '.' and line ~= '..' and dir .. '/' .. line ~= path then names[#names + 1] = line end
      end
      p:close()
      return names
    end

    -- Runs a child luajit that saves a 4 MiB tensor to path under a 50 KiB file-size limit.
    local function child_save(path, ignore_signal)
      local script = write_file(tmp('.lua'), ([[
package.path = 'lua/?.lua;lua/?/init.lua;' .. package.path
local ember = require 'ember'
local ok, err = pcall(ember.save, %q, { big = ember.ones(1024, 1024) })
io.write(ok and 'saved' or err)
]]):format(path))
      local inner = ('ulimit -f 100; %s exec luajit %s'):format(ignore_signal and "trap '' XFSZ;" or '', script)
      local p = io.popen(('sh -c %s 2>&1; echo " status=$?"'):format(sh_quote(inner)))
      local out = p:read('*a')
      p:close()
      return out, tonumber(out:match(' status=(%d+)%s*$'))
    end

    it('keeps the old file when a save fails before writing', function()
      local path = dir .. '/ckpt.safetensors'
      ember.save(path, { w = ember.ones(3), step = 1 })
      local before = read_file(path)
      H.assert_error(function() ember.save(path, { w = ember.zeros(3), f = print }) end, 'cannot save a function')
      assert.are.equal(before, read_file(path))
      -- a NULL tensor given to the C writer
      local names = ffi.new('const char*[1]', { 'w' })
      local ts = ffi.new('em_tensor*[1]')
      assert.are.equal(-1, C.em_safetensors_save(path, 1, names, ts, 0, nil, nil))
      assert.are.equal("save: tensor 'w' is NULL", ffi.string(C.em_last_error()))
      assert.are.equal(before, read_file(path))
      assert.are.same({}, leftovers(path))
    end)

    it('keeps the old file when the disk fills mid-write, and cleans up', function()
      local path = dir .. '/ckpt.safetensors'
      ember.save(path, { w = ember.ones(3), step = 1 })
      local before = read_file(path)
      local out, status = child_save(path, true)
      assert.are.equal(0, status, out)
      assert.is_truthy(out:find('save: cannot write ' .. path .. ': File too large', 1, true), out)
      assert.are.equal(before, read_file(path))
      assert.are.equal(1, ember.load(path).step)
      assert.are.same({}, leftovers(path))
    end)

    it('keeps the old file when the process dies mid-write', function()
      local path = dir .. '/ckpt.safetensors'
      ember.save(path, { w = ember.ones(3), step = 2 })
      local before = read_file(path)
      local out, status = child_save(path, false)
      assert.is_falsy(out:find('saved', 1, true))
      assert.are.equal(128 + 25, status, out) -- killed by SIGXFSZ
      assert.are.equal(before, read_file(path))
      assert.are.equal(2, ember.load(path).step)
      -- what the killed process left is a temporary file next to it, never the target
      for _, name in ipairs(leftovers(path)) do
        assert.is_truthy(name:find('^ckpt%.safetensors%.tmp%.'), name)
      end
    end)

    it('replaces the file in one step on success', function()
      local path = dir .. '/ckpt.safetensors'
      ember.save(path, { w = ember.ones(3) })
      ember.save(path, { w = ember.zeros(5) })
      assert.are.same({ 5 }, ember.load(path).w:size())
      assert.are.same({}, leftovers(path))
    end)
  end)

  describe('corrupt files', function()
    local function load_err(path, pattern)
      H.assert_error(function() ember.load(path) end, pattern)
    end

    it('refuses every truncation of a valid file with a clear message', function()
      local path = tmp()
      ember.save(path, { w = ember.ones(2, 3), b = ember.zeros(2, { dtype = 'int64' }), name = 'x', n = 3 })
      local whole = read_file(path)
      local cut = tmp()
      local messages = { 'is not a safetensors file', 'is truncated', 'is corrupt', 'is not valid JSON' }
      for len = 0, #whole - 1 do
        write_file(cut, whole:sub(1, len))
        local ok, err = pcall(ember.load, cut)
        assert.is_false(ok, 'a cut at ' .. len .. ' bytes loaded')
        local clear = false
        for _, m in ipairs(messages) do clear = clear or err:find(m, 1, true) ~= nil end
        assert.is_true(clear and err:find('load: ', 1, true) ~= nil, 'cut at ' .. len .. ': ' .. err)
      end
      write_file(cut, whole:sub(1, #whole - 4))
      load_err(cut, 'is truncated: its tensors need 40 bytes of data after the header, the file has 36')
    end)

    it('reports impossible header lengths', function()
      local path = write_file(tmp(), le64(9999999999) .. string.rep(' ', 1226))
      load_err(path, 'load: ' .. path .. ' is not a safetensors file: header length 9999999999 exceeds the file size 1234')
      load_err(write_file(tmp(), 'abcde'), 'is not a safetensors file: it has 5 bytes, too few for the 8-byte header length')
      local big = write_file(tmp(), le64(150000000))
      assert(os.execute('truncate -s 200000000 ' .. big) == 0)
      load_err(big, 'header length 150000000 passes the limit of 100000000')
    end)

    it('reports malformed headers', function()
      load_err(st_file('[]      '), "its header does not start with '{'")
      local p = st_file('{"a": }')
      load_err(p, 'load: the header of ' .. p .. ' is not valid JSON: unexpected character at byte 6')
      load_err(st_file('{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'), 'unterminated object')
      load_err(st_file('{"a\\q": 1}'), 'unknown escape in string')
      load_err(st_file('{"a": ' .. string.rep('[', 100)), 'nesting too deep')
      load_err(st_file('{"a": 5}'), "entry 'a' in")
      load_err(st_file('{"__metadata__": {"k": 5}}'), "__metadata__ value 'k' in")
      load_err(st_file('{"__metadata__": [1]}'), 'is not an object of strings')
    end)

    it('reports bad tensor entries', function()
      local function entry(e, raw) return st_file('{"t": ' .. e .. '}', raw) end
      load_err(entry('{"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}', '1234'), "tensor 't' in")
      load_err(entry('{"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}', '1234'), "has an unknown dtype 'F33'")
      load_err(entry('{"dtype": "U32", "shape": [1], "data_offsets": [0, 4]}', '1234'), 'has dtype U32, which Ember does not support')
      load_err(entry('{"shape": [1], "data_offsets": [0, 4]}', '1234'), 'has no "dtype" string')
      load_err(entry('{"dtype": "F32", "data_offsets": [0, 4]}', '1234'), 'has no "shape" array')
      load_err(entry('{"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}', '1234'), 'shape entry 0 is not a non-negative integer')
      load_err(entry('{"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}', '1234'), 'shape entry 0 is not')
      load_err(entry('{"dtype": "F32", "shape": [1,1,1,1,1,1,1,1,1], "data_offsets": [0, 4]}', '1234'),
        'has 9 dimensions; Ember allows at most 8')
      load_err(entry('{"dtype": "F32", "shape": [1]}', '1234'), 'has no "data_offsets" pair of integers')
      load_err(entry('{"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}', '1234'), 'out of order')
      load_err(entry('{"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}', string.rep('x', 20)),
        'shape [2,3] of F32 needs 24 bytes, data_offsets [0, 20] give 20')
      load_err(entry('{"dtype": "F64", "shape": [4294967296, 4294967296, 4294967296], "data_offsets": [0, 8]}', '12345678'),
        'has an absurd shape')
    end)

    it('reports byte ranges that overlap, leave gaps, or miss the data', function()
      local t = '{"dtype": "F32", "shape": [2], "data_offsets": [%d, %d]}'
      load_err(st_file('{"a": ' .. t:format(0, 8) .. ', "b": ' .. t:format(4, 12) .. '}', string.rep('x', 12)),
        "tensor 'b' starts at byte 4 of the data, expected 8")
      load_err(st_file('{"a": ' .. t:format(0, 8) .. ', "b": ' .. t:format(12, 20) .. '}', string.rep('x', 20)),
        'expected 8 (ranges must follow each other without gaps or overlaps)')
      load_err(st_file('{"a": ' .. t:format(0, 8) .. '}', string.rep('x', 10)), '2 bytes of data follow the last tensor')
      load_err(st_file('{"a": ' .. t:format(0, 8) .. ', "a": ' .. t:format(8, 16) .. '}', string.rep('x', 16)),
        "names tensor 'a' twice")
    end)

    it('reports bad Ember metadata and key conflicts', function()
      local t = '"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
      load_err(st_file('{"__metadata__": {"__ember_types__": "{bad"}, ' .. t .. '}', '1234'),
        'has a malformed __ember_types__ entry')
      load_err(st_file('{"__metadata__": {"x": "abc", "__ember_types__": "{\\"x\\":\\"number\\"}"}, ' .. t .. '}', '1234'),
        "metadata 'x' in")
      load_err(st_file('{"__metadata__": {"a.b": "1"}, ' .. t .. '}', '1234'), "key 'a.b' in")
      -- the same file loads flat
      local p = st_file('{"__metadata__": {"a.b": "1"}, ' .. t .. '}', '1234')
      assert.are.equal('1', ember.load(p, { flat = true })['a.b'])
    end)
  end)

  describe('the C API', function()
    it('opens, lists, finds and reads tensors one at a time', function()
      local path = tmp()
      ember.save(path, { a = ember.ones(2), b = ember.zeros(3, { dtype = 'int16' }), note = 'hi' })
      local f = C.em_safetensors_open(path)
      assert.is_true(f ~= nil)
      assert.are.equal(2, tonumber(C.em_safetensors_count(f)))
      local ib = C.em_safetensors_find(f, 'b')
      assert.are.equal('b', ffi.string(C.em_safetensors_name(f, ib)))
      assert.are.equal(-1, tonumber(C.em_safetensors_find(f, 'zzz')))
      local t = C.em_safetensors_tensor(f, ib)
      assert.are.equal(C.EM_INT16, t.dtype_id)
      assert.are.equal(3, tonumber(t.sizes[0]))
      C.em_release(t)
      assert.is_true(C.em_safetensors_tensor(f, 2) == nil)
      assert.are.equal('load: tensor index 2 out of range for 2 tensors', ffi.string(C.em_last_error()))
      assert.is_true(C.em_safetensors_name(f, -1) == nil)
      assert.is_true(C.em_safetensors_metadata_key(f, 5) == nil)
      C.em_safetensors_close(f)
    end)

    it('refuses bad arguments to the writer', function()
      local path = tmp()
      local t = ember.ones(1)
      local names = ffi.new('const char*[2]', { 'x', 'x' })
      local ts = ffi.new('em_tensor*[2]', { t.ptr, t.ptr })
      assert.are.equal(-1, C.em_safetensors_save(path, 2, names, ts, 0, nil, nil))
      assert.are.equal("save: two tensors are named 'x'", ffi.string(C.em_last_error()))
      names[1] = '__metadata__'
      assert.are.equal(-1, C.em_safetensors_save(path, 2, names, ts, 0, nil, nil))
      assert.is_truthy(ffi.string(C.em_last_error()):find('reserved', 1, true))
      assert.are.equal(-1, C.em_safetensors_save(path, 1, nil, ts, 0, nil, nil))
      local keys = ffi.new('const char*[2]', { 'k', 'k' })
      assert.are.equal(-1, C.em_safetensors_save(path, 1, names, ts, 2, keys, keys))
      assert.are.equal("save: two metadata entries are named 'k'", ffi.string(C.em_last_error()))
      assert.is_nil(io.open(path, 'rb'))
    end)
  end)

  describe('interop with Python', function()
    local have_torch = os.execute('/usr/bin/python3 -c "import torch" >/dev/null 2>&1') == 0

    local function python(code, ...)
      local args = {}
      for i, a in ipairs({ ... }) do args[i] = sh_quote(a) end
      local p = io.popen('/usr/bin/python3 -c ' .. sh_quote(code) .. ' ' .. table.concat(args, ' ') .. ' 2>&1; echo "rc=$?"')
      local out = p:read('*a')
      p:close()
      local body, rc = out:match('^(.-)rc=(%d+)%s*$')
      assert(rc == '0', 'python failed: ' .. out)
      return body
    end

    -- Python's side: a writer and a reader of the format with json + struct only, and the values
    -- both sides expect (the formulas of dtype_values, over arange(6)).
    local common = [==[
import json, struct, sys, torch
try:
    import safetensors.torch as st
except ImportError:
    st = None
DT = {'F32': torch.float32, 'F64': torch.float64, 'F16': torch.float16, 'BF16': torch.bfloat16,
      'I8': torch.int8, 'U8': torch.uint8, 'I16': torch.int16, 'I32': torch.int32,
      'I64': torch.int64, 'BOOL': torch.bool}
NAME = {v: k for k, v in DT.items()}
i = torch.arange(6, dtype=torch.float64)
EXPECT = {
  'model.0.weight': ((i - 7) / 2).float().reshape(2, 3),
  'model.0.bias': (i - 7) / 4 + 1e-9 * i,
  'half': ((i - 7) / 2).half(),
  'bf': ((i - 7) * 4).bfloat16(),
  'i8': ((i - 7) * 17).to(torch.int8),
  'u8': (i * 20).to(torch.uint8),
  'i16': ((i - 7) * 4000).to(torch.int16),
  'i32': ((i - 7) * 300000000).to(torch.int32),
  'i64': (torch.arange(6) - 7) * 2**40 + torch.arange(6),
  'mask': torch.arange(6) % 2 == 0,
  'scalar': torch.tensor(2.5),
  'empty': torch.zeros(0, 3),
}
def raw(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()
def read(path):
    data = open(path, 'rb').read()
    n = struct.unpack('<Q', data[:8])[0]
    header = json.loads(data[8:8 + n])
    assert n % 8 == 0, 'header length %d is not a multiple of 8' % n
    body = data[8 + n:]
    out = {}
    for k, v in header.items():
        if k == '__metadata__':
            continue
        b, e = v['data_offsets']
        dt = DT[v['dtype']]
        size = torch.empty(0, dtype=dt).element_size()
        assert b % size == 0, '%s is not aligned' % k
        if e > b:
            t = torch.frombuffer(bytearray(body[b:e]), dtype=dt)
        else:
            t = torch.empty(0, dtype=dt)
        out[k] = t.reshape(v['shape'])
    return out, header.get('__metadata__', {})
]==]

    -- One Python run (importing torch takes seconds): it checks the file Ember wrote, then
    -- writes a reference file of its own for Ember to load.
    it('exchanges files with Python both ways', function()
      if not have_torch then pending('/usr/bin/python3 with torch is not available') return end
      local function t6(dtype, sizes)
        local t = {}
        for k = 0, 5 do t[k + 1] = dtype_values[dtype](k) end
        local x = ember.tensor(t, { dtype = dtype })
        if sizes then x = x:view(sizes) end
        return x
      end
      local mine, theirs = tmp(), tmp()
      -- weight is a transposed view: Python must see its [3,2] values
      ember.save(mine, {
        model = { [0] = { weight = t6('float32', { 2, 3 }):t(), bias = t6('float64') } },
        half = t6('float16'), bf = t6('bfloat16'), i8 = t6('int8'), u8 = t6('uint8'),
        i16 = t6('int16'), i32 = t6('int32'), i64 = t6('int64'), mask = t6('bool'),
        scalar = ember.tensor(2.5), empty = ember.zeros(0, 3),
        lr = 0.001, name = 'ember',
      })
      local out = python(common .. [==[
mine, theirs = sys.argv[1], sys.argv[2]
got, meta = read(mine)
want = dict(EXPECT)
want['model.0.weight'] = EXPECT['model.0.weight'].t().contiguous()
assert set(got) == set(want), sorted(set(got) ^ set(want))
for k, v in want.items():
    g = got[k]
    assert g.dtype == v.dtype and g.shape == v.shape and torch.equal(g, v), (k, g, v)
assert meta['name'] == 'ember' and meta['lr'] == '0.001', meta
assert json.loads(meta['__ember_types__']) == {'lr': 'number'}, meta
if st is not None:
    again = st.load_file(mine)
    assert all(torch.equal(again[k], v) for k, v in want.items())
print('checked', len(got))

header = {'__metadata__': {'format': 'pt', 'note': 'from python'}}
blobs, off = [], 0
for k, t in EXPECT.items():
    b = raw(t)
    header[k] = {'dtype': NAME[t.dtype], 'shape': list(t.shape), 'data_offsets': [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(header).encode()
h += b' ' * (-len(h) % 8)
open(theirs, 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
if st is not None:
    st.save_file(EXPECT, theirs + '.st', metadata={'format': 'pt', 'note': 'from python'})
]==], mine, theirs)
      assert.are.equal('checked 12\n', out)
      local paths = { theirs }
      local f = io.open(theirs .. '.st', 'rb')
      if f then f:close(); paths[2] = theirs .. '.st'; made[#made + 1] = theirs .. '.st' end
      for _, p in ipairs(paths) do
        local r = ember.load(p)
        assert.are.equal('pt', r.format)
        assert.are.equal('from python', r.note)
        local function vals(f6, sizes)
          local t = {}
          for k = 0, 5 do t[k + 1] = f6(k) end
          if sizes then t = { { t[1], t[2], t[3] }, { t[4], t[5], t[6] } } end
          return t
        end
        assert_tensor(r.model[0].weight, 'float32', { 2, 3 }, vals(dtype_values.float32, true), 'weight')
        assert_tensor(r.model[0].bias, 'float64', { 6 }, vals(dtype_values.float64), 'bias')
        assert_tensor(r.half, 'float16', { 6 }, vals(dtype_values.float16), 'half')
        assert_tensor(r.bf, 'bfloat16', { 6 }, vals(dtype_values.bfloat16), 'bf')
        for _, k in ipairs({ 'int8', 'uint8', 'int16', 'int32' }) do
          local key = ({ int8 = 'i8', uint8 = 'u8', int16 = 'i16', int32 = 'i32' })[k]
          assert_tensor(r[key], k, { 6 }, vals(dtype_values[k]), key)
        end
        assert_tensor(r.i64, 'int64', { 6 }, vals(dtype_values.int64), 'i64')
        assert_tensor(r.mask, 'bool', { 6 }, vals(dtype_values.bool), 'mask')
        assert_tensor(r.scalar, 'float32', {}, 2.5, 'scalar')
        assert_tensor(r.empty, 'float32', { 0, 3 }, nil, 'empty')
      end
    end)
  end)
end)
