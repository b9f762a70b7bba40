-- gguf_spec: ember.gguf.save / load (GGUF v3), checked by an independent reader.
--
-- Files Ember writes are read by the npm package @huggingface/gguf (pinned and cached by
-- scripts/gguf-reader.sh, run with the machine's node): names, types, shapes, offsets and the
-- metadata must be what was saved, and the quantized blocks at the offsets it reports, decoded
-- by tests/lua/quant_ref.lua (plain Lua), must equal Ember's dequantized tensors. Damaged files
-- (wrong magic, version, tensor type, truncation, offsets outside the file) give clear errors.
local H = require 'tests.lua.helpers'
local R = require 'tests.lua.quant_ref'
local ember = H.ember
local Q = ember.quant

-- Runs a command without the sanitizer preload of the ASan test run (node is not ours to check).
local function sh(cmd)
  local p = assert(io.popen('env -u LD_PRELOAD ' .. cmd))
  local out = p:read('*a')
  local ok = p:close()
  return out, ok
end

local reader_dir
local function independent_read(path)
  if not reader_dir then
    local out, ok = sh('bash scripts/gguf-reader.sh')
    assert(ok, 'scripts/gguf-reader.sh failed')
    reader_dir = out:gsub('%s+$', '')
  end
  local out, ok = sh(("node tests/lua/gguf_read.mjs '%s' '%s' 2>&1"):format(reader_dir, path))
  assert(ok, 'the independent reader failed: ' .. out)
  local r = { meta = {}, arrays = {}, tensors = {} }
  for line in out:gmatch('[^\n]+') do
    local f = {}
    for field in (line .. '\t'):gmatch('([^\t]*)\t') do f[#f + 1] = field end
    if f[1] == 'D' then r.data = tonumber(f[2])
    elseif f[1] == 'M' then r.meta[f[2]] = { f[3], f[4] }
    elseif f[1] == 'A' then
      r.arrays[f[2]] = r.arrays[f[2]] or {}
      r.arrays[f[2]][tonumber(f[3])] = f[5]
    elseif f[1] == 'T' then
      local dims = {}
      for d in f[5]:gmatch('%d+') do dims[#dims + 1] = tonumber(d) end
      r.tensors[f[2]] = { type = tonumber(f[3]), offset = tonumber(f[4]), dims = dims }
    end
  end
  return r
end

local function file_bytes(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end
local function write(path, s)
  local f = assert(io.open(path, 'wb'))
  f:write(s)
  f:close()
end

local function rows(r, c, seed)
  H.seed(seed)
  local t = {}
  for i = 1, r do
    t[i] = {}
    for j = 1, c do t[i][j] = (H.random() - 0.5) * 4 end
  end
  return ember.tensor(t)
end

local GGML = { q8_0 = 8, q4_0 = 2, q4_1 = 3, q4_k = 12, q6_k = 14 }

describe('ember.gguf', function()
  local path = os.tmpname()
  after_each(function() os.remove(path) end)

  local function sample()
    local w = rows(3, 512, 1)
    local t = {
      ['tok_embd.weight'] = rows(5, 8, 2),
      ['norm.weight'] = ember.ones({ 8 }),
      ['half'] = rows(2, 4, 3):to('float16'),
      ['ids'] = ember.tensor({ { 1, -2, 3 } }, { dtype = 'int32' }),
    }
    for f in pairs(GGML) do t['blk.' .. f] = Q.quantize(w, { format = f }) end
    local meta = {
      ['general.architecture'] = 'llama', ['llama.context_length'] = 2048,
      ['llama.rope.freq_base'] = 10000.5, ['tokenizer.ggml.tokens'] = { '<s>', 'hello', '' },
      ['tokenizer.ggml.scores'] = { 0.5, -1.25 }, ['general.flag'] = true, ['x.neg'] = -7,
      ['x.u64'] = { type = 'uint64', value = 12345678901 }, ['x.f64'] = { type = 'float64', value = 0.1 },
    }
    return t, meta
  end

  it('round-trips tensors, quantized blocks and typed metadata', function()
    local t, meta = sample()
    ember.gguf.save(path, t, meta)
    local t2, m2 = ember.gguf.load(path)
    for name, x in pairs(t) do
      local y = t2[name]
      assert.is_not_nil(y, name)
      if Q.is_quantized(x) then
        assert.is_true(Q.is_quantized(y))
        assert.are.equal(x:dtype(), y:dtype())
        assert.are.same(x:weight_size(), y:weight_size())
        assert.are.same(Q.bytes(x):totable(), Q.bytes(y):totable())
      else
        assert.are.equal(x:dtype(), y:dtype())
        assert.are.same(x:float():totable(), y:float():totable())
      end
    end
    assert.are.equal('llama', m2['general.architecture'])
    assert.are.equal(2048, m2['llama.context_length'])
    assert.are.equal(10000.5, m2['llama.rope.freq_base'])
    assert.are.same({ '<s>', 'hello', '' }, m2['tokenizer.ggml.tokens'])
    assert.are.same({ 0.5, -1.25 }, m2['tokenizer.ggml.scores'])
    assert.are.equal(true, m2['general.flag'])
    assert.are.equal(-7, m2['x.neg'])
    assert.are.equal(12345678901, m2['x.u64'])
    assert.are.equal(0.1, m2['x.f64'])
    assert.are.equal(32, m2['general.alignment'])
  end)

  it('writes files an independent reader accepts, with the blocks where it says', function()
    local t, meta = sample()
    ember.gguf.save(path, t, meta)
    local r = independent_read(path)
    assert.are.same({ 'string', 'llama' }, r.meta['general.architecture'])
    assert.are.same({ 'number', '2048' }, r.meta['llama.context_length'])
    assert.are.same({ 'boolean', 'true' }, r.meta['general.flag'])
    assert.are.same({ '<s>', 'hello', '' }, r.arrays['tokenizer.ggml.tokens'])
    assert.are.equal(0.1, tonumber(r.meta['x.f64'][2]))
    assert.are.same({ 'number', '3' }, r.meta['version'])
    local bytes = file_bytes(path)
    local n = 0
    for name, x in pairs(t) do
      n = n + 1
      local info = r.tensors[name]
      assert.is_not_nil(info, name)
      local shape = {}
      for d = 1, x:dim() do shape[d] = Q.is_quantized(x) and x:weight_size(d) or x:size(d) end
      local rev = {}
      for i = #shape, 1, -1 do rev[#rev + 1] = shape[i] end
      assert.are.same(rev, info.dims)
      if Q.is_quantized(x) then
        assert.are.equal(GGML[x:dtype()], info.type)
        local at, nb = r.data + info.offset, x:nbytes()
        local list = { bytes:byte(at + 1, at + nb) }
        assert.are.same(R.decode(x:dtype(), list), x:dequantize():view(-1):totable())
      end
    end
    local seen = 0
    for _ in pairs(r.tensors) do seen = seen + 1 end
    assert.are.equal(n, seen)
    assert.are.equal(0, r.tensors['norm.weight'].type)
    assert.are.equal(1, r.tensors['half'].type)
    assert.are.equal(26, r.tensors['ids'].type)
  end)

  it('loads onto a device given by opts.device', function()
    local t, meta = sample()
    ember.gguf.save(path, t, meta)
    local t2 = ember.gguf.load(path, { device = 'cpu' })
    assert.are.equal('cpu', tostring(t2['blk.q8_0']:device()))
    assert.matches('unknown option devcie', select(2, pcall(ember.gguf.load, path, { devcie = 'cpu' })))
  end)

  describe('rejects damaged files with clear errors', function()
    local good
    before_each(function()
      ember.gguf.save(path, { w = Q.quantize(rows(2, 64, 4), { format = 'q8_0' }) },
        { ['general.name'] = 'x' })
      good = file_bytes(path)
    end)
    local function load_err(s)
      write(path, s)
      local ok, err = pcall(ember.gguf.load, path)
      assert.is_false(ok)
      return err
    end
    it('wrong magic', function()
      assert.matches('is not a GGUF file', load_err('GGUX' .. good:sub(5)))
    end)
    it('unsupported version', function()
      assert.matches('has GGUF version 1, expected 2 or 3', load_err(good:sub(1, 4) .. '\1' .. good:sub(6)))
    end)
    it('truncation at every point of the header, and of the data', function()
      for cut = 0, #good - 25, 7 do  -- the last 24 bytes are padding after the data
        local err = load_err(good:sub(1, cut))
        assert.is_truthy(err:find('truncated') or err:find('lies outside the file'), err)
      end
    end)
    it('an unknown tensor type and an offset outside the file', function()
      -- the record: name (uint64 length 1, 'w'), ndim 2 (uint32), dims 64, 2 (uint64), type, offset
      local rec = good:find('\1\0\0\0\0\0\0\0w\2\0\0\0', 1, true)
      assert.is_truthy(rec)
      local type_at = rec + 8 + 1 + 4 + 16
      local bad_type = good:sub(1, type_at - 1) .. '\99\0\0\0' .. good:sub(type_at + 4)
      assert.matches("tensor 'w' has ggml type 99, which Ember does not read", load_err(bad_type))
      local far = good:sub(1, type_at + 3) .. '\0\0\0\1\0\0\0\0' .. good:sub(type_at + 12)
      assert.matches("tensor 'w' %(136 bytes at offset 16777216%) lies outside the file", load_err(far))
    end)
  end)

  it('checks what it is given', function()
    assert.matches('dtype int8_g64 has no GGUF type', select(2, pcall(ember.gguf.save, path,
      { w = Q.quantize(ember.zeros({ 1, 64 }), { format = 'int8' }) })))
    assert.matches('cannot open', select(2, pcall(ember.gguf.load, '/nonexistent/x.gguf')))
  end)
end)
