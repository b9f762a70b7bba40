-- data_spec: Dataset, TensorDataset, DataLoader and the C batch prefetcher.
--
-- Batches are checked against references built here with plain Lua loops from the loader's
-- sample order; the order itself is checked for coverage (each sample once per epoch), for
-- reproducibility from (seed, epoch), and for independence from the global generator.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ffi = require 'ffi'
local C = ember.C
local data = ember.data

-- Rows of x (a tensor) at the given 1-based indices, as nested tables.
local function rows(x, idx)
  local t = x:totable()
  local out = {}
  for k, i in ipairs(idx) do out[k] = t[i] end
  return out
end

local function range(a, b)
  local t = {}
  for i = a, b do t[#t + 1] = i end
  return t
end

local function threads()
  local f = io.open('/proc/self/status')
  local s = f:read('*a')
  f:close()
  return tonumber(s:match('Threads:%s*(%d+)'))
end

local function collect(loader)
  local out = {}
  for x, y in loader:iter() do out[#out + 1] = { x, y } end
  return out
end

-- A dataset whose features are row-distinct: x[i] = {i, -i, i / 8}, y[i] = i * 10.
local function numbered(n)
  local xs, ys = {}, {}
  for i = 1, n do
    xs[i] = { i, -i, i / 8 }
    ys[i] = i * 10
  end
  return ember.tensor(xs), ember.tensor(ys, { dtype = 'int64' })
end

describe('Dataset', function()
  it('is subclassed Torch7 style, with #ds and 1-based get', function()
    local Squares = data.Dataset:extend('Squares')
    function Squares:init(n) self.n = n end
    function Squares:size() return self.n end
    function Squares:get(i) return i * i end
    local ds = Squares(7)
    assert.are.equal(7, #ds)
    assert.are.equal(7, ds:size())
    assert.are.equal(9, ds:get(3))
    assert.are.equal('Squares(7 samples)', tostring(ds))
    local Sub = Squares:extend()
    function Sub:get(i) return -i end
    local s = Sub(4)
    assert.are.equal(4, #s)
    assert.are.equal(-2, s:get(2))
  end)

  it('is built from functions', function()
    local ds = data.Dataset { size = function() return 3 end, get = function(_, i) return 'x' .. i end }
    assert.are.equal(3, #ds)
    assert.are.equal('x2', ds:get(2))
  end)

  it('says what is missing', function()
    local ds = data.Dataset()
    H.assert_error(function() ds:size() end, 'Dataset: size() is not defined')
    H.assert_error(function() ds:get(1) end, 'Dataset: get(i) is not defined')
    H.assert_error(function() data.Dataset(5) end, 'Dataset: expected a table {size = function, get = function}, got number')
  end)
end)

describe('TensorDataset', function()
  it('gives rows along dimension 1 as samples', function()
    local x, y = numbered(5)
    local ds = data.TensorDataset(x, y)
    assert.are.equal(5, #ds)
    local a, b = ds:get(2)
    H.assert_close(a, { 2, -2, 0.25 }, 0, 0)
    assert.are.equal(0, b:dim())
    assert.are.equal(20, b:item())
    local single = data.TensorDataset { x }
    H.assert_close(single:get(5), { 5, -5, 0.625 }, 0, 0)
    assert.are.same({ 3, 4 }, data.TensorDataset(ember.zeros(2, 3, 4)):get(2):size())
  end)

  it('rejects bad tensors and indices', function()
    H.assert_error(function() data.TensorDataset() end, 'TensorDataset: expected at least one tensor')
    H.assert_error(function() data.TensorDataset(ember.zeros(3), ember.zeros(4)) end,
      'TensorDataset: tensor 2 has 4 rows, tensor 1 has 3')
    H.assert_error(function() data.TensorDataset(ember.tensor(1)) end, 'TensorDataset: tensor 1 is 0-dim')
    H.assert_error(function() data.TensorDataset(ember.zeros(3), 'y') end, 'TensorDataset: argument 2 is a string')
    local ds = data.TensorDataset(ember.zeros(3))
    H.assert_error(function() ds:get(0) end, 'TensorDataset: index 0 is out of range 1..3')
    H.assert_error(function() ds:get(4) end, 'index 4 is out of range')
    H.assert_error(function() ds:get(1.5) end, 'index 1.5 is out of range')
  end)
end)

describe('DataLoader', function()
  it('makes batches of the requested size, the last one short unless drop_last', function()
    local x, y = numbered(10)
    local ds = data.TensorDataset(x, y)
    for _, workers in ipairs({ 0, 2 }) do
      local loader = data.DataLoader(ds, { batch_size = 3, num_workers = workers })
      assert.are.equal(4, #loader)
      local batches = collect(loader)
      assert.are.equal(4, #batches)
      local sizes = {}
      for b, xy in ipairs(batches) do
        sizes[b] = xy[1]:size(1)
        local idx = range((b - 1) * 3 + 1, math.min(b * 3, 10))
        H.assert_close(xy[1], rows(x, idx), 0, 0, 'x')
        H.assert_close(xy[2], rows(y, idx), 0, 0, 'y')
        assert.are.equal('int64', xy[2]:dtype())
        assert.are.same({ #idx, 3 }, xy[1]:size())
      end
      assert.are.same({ 3, 3, 3, 1 }, sizes)
      local dropping = data.DataLoader(ds, { batch_size = 3, drop_last = true, num_workers = workers })
      assert.are.equal(3, #dropping)
      assert.are.equal(3, #collect(dropping))
      assert.are.equal(0, #data.DataLoader(ds, { batch_size = 11, drop_last = true }))
      assert.are.equal(1, #data.DataLoader(ds, { batch_size = 11 }))
    end
  end)

  it('shuffles reproducibly from the seed and the epoch, covering every sample once', function()
    local n = 103
    local x, y = numbered(n)
    local ds = data.TensorDataset(x, y)
    local function epoch_order(loader)
      local order = {}
      for _, yb in loader:iter() do
        for _, v in ipairs(yb:totable()) do order[#order + 1] = v / 10 end
      end
      return order
    end
    local a = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 42 })
    local b = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 42, num_workers = 3 })
    local c = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 43 })
    local e1, e2 = epoch_order(a), epoch_order(a)
    assert.are.same(e1, epoch_order(b))
    assert.are.same(e2, epoch_order(b))
    assert.are_not.same(e1, e2)
    assert.are_not.same(e1, epoch_order(c))
    for _, order in ipairs({ e1, e2 }) do
      assert.are.equal(n, #order)
      local seen = {}
      for _, i in ipairs(order) do
        assert.is_nil(seen[i], 'sample ' .. i .. ' twice')
        seen[i] = true
      end
      assert.are_not.same(range(1, n), order)
    end
    -- epoch k is reproducible on its own, and matches the loader's order(k)
    local d = data.DataLoader(ds, { batch_size = 10, shuffle = true, seed = 42 })
    d:set_epoch(2)
    assert.are.same(e2, epoch_order(d))
    H.assert_close(d:order(1), e1, 0, 0)
    -- without shuffle, in order
    assert.are.same(range(1, n), epoch_order(data.DataLoader(ds, { batch_size = 7 })))
  end)

  it('neither depends on nor disturbs the global generator', function()
    local ds = data.TensorDataset(numbered(20))
    local loader = data.DataLoader(ds, { batch_size = 4, shuffle = true, seed = 7 })
    ember.manual_seed(1)
    local before = ember.get_rng_state()
    local first = collect(loader)
    local after = ember.get_rng_state()
    assert.are.same(before, after)
    ember.rand(1000)
    loader:set_epoch(1)
    local again = collect(loader)
    for i = 1, #first do H.assert_close(again[i][1], first[i][1]:totable(), 0, 0) end
    -- an unseeded loader draws its seed from the global generator: manual_seed fixes it
    ember.manual_seed(5)
    local u1 = data.DataLoader(ds, { shuffle = true }).seed
    ember.manual_seed(5)
    assert.are.equal(u1, data.DataLoader(ds, { shuffle = true }).seed)
  end)

  it('gives identical batches with 0, 1, 2 and 4 workers, whatever the source layout', function()
    H.seed(3)
    local n = 257
    local images = ember.tensor(H.nested({ n, 4, 5 }, function() return math.floor(H.uniform(0, 256)) end),
      { dtype = 'uint8' })
    local feats = ember.tensor(H.nested({ 6, n }, function() return H.uniform(-1, 1) end)):t() -- strided rows
    local labels = ember.tensor(H.nested({ n }, function(i) return i % 10 end), { dtype = 'int64' })
    local empty = ember.zeros(n, 0)
    local ds = data.TensorDataset(images, feats, labels, empty)
    local reference
    for _, workers in ipairs({ 0, 1, 2, 4 }) do
      local loader = data.DataLoader(ds, { batch_size = 16, shuffle = true, seed = 11, num_workers = workers })
      local order = loader:order(1):totable()
      local got = {}
      local b = 0
      for im, f, l, e in loader:iter() do
        b = b + 1
        local idx = {}
        for k = (b - 1) * 16 + 1, math.min(b * 16, n) do idx[#idx + 1] = order[k] end
        H.assert_close(im, rows(images, idx), 0, 0, 'images')
        H.assert_close(f, rows(feats, idx), 0, 0, 'features')
        H.assert_close(l, rows(labels, idx), 0, 0, 'labels')
        assert.are.same({ #idx, 0 }, e:size())
        assert.are.equal('uint8', im:dtype())
        got[b] = im:totable()
      end
      assert.are.equal(17, b)
      if reference then assert.are.same(reference, got) else reference = got end
    end
  end)

  it('handles an empty dataset', function()
    local loader = data.DataLoader(data.TensorDataset(ember.zeros(0, 3)), { batch_size = 4, num_workers = 2 })
    assert.are.equal(0, #loader)
    assert.are.equal(0, #collect(loader))
  end)

  it('stops its workers when an iteration ends early, is closed or is collected', function()
    local ds = data.TensorDataset(ember.zeros(1000, 8))
    local base = threads()
    for _ = 1, 5 do
      local loader = data.DataLoader(ds, { batch_size = 10, num_workers = 3 })
      for x in loader:iter() do
        assert.are.same({ 10, 8 }, x:size())
        break
      end
      -- a new epoch after a break starts cleanly
      local count = 0
      for _ in loader:iter() do count = count + 1 end
      assert.are.equal(100, count)
    end
    base = threads() -- again: an OpenMP pool may have started meanwhile
    local loader = data.DataLoader(ds, { batch_size = 10, num_workers = 4 })
    local it = loader:iter()
    it()
    assert.are.equal(base + 4, threads())
    loader:close()
    assert.are.equal(base, threads())
    assert.is_nil(it())
    -- abandoned iterators are cleaned up by the garbage collector
    for _ = 1, 3 do
      local l = data.DataLoader(ds, { batch_size = 10, num_workers = 2 })
      l:iter()()
    end
    assert.is_true(threads() > base)
    collectgarbage()
    collectgarbage()
    assert.are.equal(base, threads())
  end)

  it('resumes mid-epoch from state(), batch for batch', function()
    local ds = data.TensorDataset(numbered(50))
    local opts = { batch_size = 8, shuffle = true, seed = 9, num_workers = 2 }
    local full = data.DataLoader(ds, opts)
    local epoch1, epoch2 = collect(full), collect(full)
    local run = data.DataLoader(ds, opts)
    assert.are.same({ seed = 9, epoch = 1, batch = 0 }, run:state())
    local it = run:iter()
    it(); it(); it()
    local state = run:state()
    assert.are.same({ seed = 9, epoch = 1, batch = 3 }, state)
    -- a checkpoint round trip of the state, as a training script would do it
    local path = os.tmpname()
    ember.save(path, { loader = state })
    local restored = ember.load(path).loader
    os.remove(path)
    local resumed = data.DataLoader(ds, { batch_size = 8, shuffle = true, num_workers = 0 })
    resumed:load_state(restored)
    local rest = collect(resumed)
    assert.are.equal(#epoch1 - 3, #rest)
    for i, xy in ipairs(rest) do H.assert_close(xy[1], epoch1[i + 3][1]:totable(), 0, 0, 'batch ' .. i) end
    assert.are.same({ seed = 9, epoch = 2, batch = 0 }, resumed:state())
    local next_epoch = collect(resumed)
    for i, xy in ipairs(next_epoch) do H.assert_close(xy[1], epoch2[i][1]:totable(), 0, 0) end
    H.assert_error(function() resumed:load_state({ seed = 9, epoch = 1, batch = 99 }); resumed:iter() end,
      'DataLoader: cannot resume at batch 99 of an epoch of 7 batches')
    H.assert_error(function() resumed:load_state(5) end, 'load_state: expected a table')
    H.assert_error(function() resumed:load_state({ seed = 1, epoch = 0 }) end, 'load_state: expected epoch to be an integer in 1..')
    H.assert_error(function() resumed:set_epoch(1.5) end, 'set_epoch: expected epoch to be an integer')
  end)

  describe('with Lua datasets', function()
    it('collates tuples, records, numbers, booleans and strings', function()
      local ds = data.Dataset {
        size = function() return 5 end,
        get = function(_, i)
          return { image = ember.full({ 2, 2 }, i), label = i, weight = i / 2, flag = i % 2 == 0,
            name = 'n' .. i, pair = { i, ember.tensor(-i) } }, i * 100
        end,
      }
      local loader = data.DataLoader(ds, { batch_size = 2 })
      local batches = collect(loader)
      assert.are.equal(3, #batches)
      local rec, ids = batches[1][1], batches[1][2]
      assert.are.same({ 2, 2, 2 }, rec.image:size())
      H.assert_close(rec.image, { { { 1, 1 }, { 1, 1 } }, { { 2, 2 }, { 2, 2 } } }, 0, 0)
      assert.are.equal('int64', rec.label:dtype())
      H.assert_close(rec.label, { 1, 2 }, 0, 0)
      assert.are.equal('float64', rec.weight:dtype())
      H.assert_close(rec.weight, { 0.5, 1 }, 0, 0)
      assert.are.equal('bool', rec.flag:dtype())
      H.assert_close(rec.flag, { false, true }, 0, 0)
      assert.are.same({ 'n1', 'n2' }, rec.name)
      H.assert_close(rec.pair[1], { 1, 2 }, 0, 0)
      H.assert_close(rec.pair[2], { -1, -2 }, 0, 0)
      H.assert_close(ids, { 100, 200 }, 0, 0)
      assert.are.same({ 1 }, batches[3][2]:size())
    end)

    it('uses a custom collate', function()
      local ds = data.Dataset { size = function() return 4 end, get = function(_, i) return i, -i end }
      local loader = data.DataLoader(ds, { batch_size = 3, collate = function(samples)
        local s = 0
        for _, t in ipairs(samples) do s = s + t[1] * t[2] end
        return s, #samples
      end })
      local out = {}
      for s, n in loader:iter() do out[#out + 1] = { s, n } end
      assert.are.same({ { -14, 3 }, { -16, 1 } }, out)
      -- a TensorDataset with a custom collate goes through get() as well
      local tl = data.DataLoader(data.TensorDataset(ember.arange(4)), { batch_size = 2, collate = function(s) return #s end })
      local counts = {}
      for c in tl:iter() do counts[#counts + 1] = c end
      assert.are.same({ 2, 2 }, counts)
    end)

    it('loads in the main thread when workers are asked for, and says so once', function()
      local lines = {}
      local real = io.stderr
      io.stderr = { write = function(_, s) lines[#lines + 1] = s end }
      local ok, err = pcall(function()
        local ds = data.Dataset { size = function() return 6 end, get = function(_, i) return ember.tensor(i) end }
        local loader = data.DataLoader(ds, { batch_size = 4, num_workers = 2, shuffle = true, seed = 1 })
        local seen = {}
        for _ = 1, 2 do
          for b in loader:iter() do
            for _, v in ipairs(b:totable()) do seen[#seen + 1] = v end
          end
        end
        table.sort(seen)
        assert.are.same({ 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6 }, seen)
      end)
      io.stderr = real
      assert(ok, err)
      assert.are.equal(1, #lines)
      assert.is_truthy(lines[1]:find('DataLoader workers gather TensorDatasets only', 1, true))
    end)

    it('reports bad samples', function()
      local function loader_of(get, opts)
        return data.DataLoader(data.Dataset { size = function() return 4 end, get = get }, opts or { batch_size = 4 })
      end
      H.assert_error(function() loader_of(function() end):iter()() end, 'DataLoader: get(1) returned no sample')
      H.assert_error(function() loader_of(function(_, i) if i == 3 then return 1 end return 1, 2 end):iter()() end,
        'DataLoader: get(3) returned 1 values, get(1) returned 2')
      H.assert_error(function() loader_of(function(_, i) return i == 2 and 'a' or 1 end):iter()() end,
        'collate: sample 2 is a string, sample 1 is a number')
      H.assert_error(function() loader_of(function(_, i) return ember.zeros(i) end):iter()() end,
        'collate: sample 2 has shape [2], sample 1 has [1]')
      H.assert_error(function() loader_of(function(_, i) return { x = i == 1 and 1 or nil, y = 2 } end):iter()() end,
        'collate: sample 2 has no field x')
      H.assert_error(function() loader_of(function() return print end):iter()() end,
        'collate: cannot batch samples of type function')
      H.assert_error(function() loader_of(function(_, i) return { a = { b = i == 1 and 'x' or 2 } } end):iter()() end,
        'collate: a.b: sample 2 is a number, sample 1 is a string')
    end)
  end)

  it('checks its arguments', function()
    local ds = data.TensorDataset(ember.zeros(4))
    H.assert_error(function() data.DataLoader(nil) end, 'DataLoader: expected a dataset with size() and get(i), got nil')
    H.assert_error(function() data.DataLoader({}) end, 'DataLoader: expected a dataset with size() and get(i), got table')
    H.assert_error(function() data.DataLoader(ds, 5) end, 'DataLoader: expected an options table, got number')
    H.assert_error(function() data.DataLoader(ds, { batch_size = 0 }) end, 'DataLoader: expected batch_size to be an integer >= 1, got 0')
    H.assert_error(function() data.DataLoader(ds, { batch_size = 2.5 }) end, 'expected batch_size to be an integer >= 1, got 2.5')
    H.assert_error(function() data.DataLoader(ds, { num_workers = -1 }) end, 'DataLoader: expected num_workers to be an integer in 0..64, got -1')
    H.assert_error(function() data.DataLoader(ds, { shuffle = 1 }) end, 'DataLoader: expected shuffle to be a boolean, got number')
    H.assert_error(function() data.DataLoader(ds, { collate = 'stack' }) end, 'DataLoader: expected collate to be a function, got string')
    H.assert_error(function() data.DataLoader(ds, { seed = -3 }) end, 'DataLoader: expected seed to be an integer in 0..')
    H.assert_error(function() data.DataLoader(ds, { batchsize = 2 }) end, 'DataLoader: unknown option batchsize')
    local bad = data.Dataset { size = function() return -1 end, get = function() end }
    H.assert_error(function() data.DataLoader(bad):iter() end, 'DataLoader: dataset size() returned -1')
  end)
end)

describe('DataLoader workers out of memory', function()
  it('rebuild a failed batch after collecting garbage, or raise the error', function()
    local src = ember.arange(64 * 1024):view(64, 1024) -- 4 KiB rows, 64 KiB batches
    local ds = data.TensorDataset(src)
    ember.memory.collect()
    ember.memory.set_limit('cpu', ember.memory.stats('cpu').allocated + 150000)
    local ok, err = pcall(function()
      -- batches dropped as they come: failed ones are rebuilt, and every batch is right
      local loader = data.DataLoader(ds, { batch_size = 16, num_workers = 2 })
      local b = 0
      for x in loader:iter() do
        b = b + 1
        assert(x:select(1, 1):select(1, 1):item() == (b - 1) * 16 * 1024, 'batch ' .. b)
        x = nil
        collectgarbage()
      end
      assert(b == 4)
      -- batches kept: the memory is really gone, and the error reaches Lua
      local held = {}
      for x in loader:iter() do held[#held + 1] = x end
    end)
    ember.memory.set_limit('cpu', 0)
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find('out of memory on cpu', 1, true), err)
  end)
end)

describe('the C prefetcher', function()
  it('checks its sources and indices', function()
    local a, b = ember.zeros(4, 2), ember.zeros(5)
    local srcs = ffi.new('em_tensor*[2]', { a.ptr, b.ptr })
    local idx = ffi.new('int64_t[2]', { 0, 3 })
    assert.is_true(C.em_prefetcher_new(2, srcs, 2, idx, 1, 0, 0, -1) == nil)
    assert.are.equal('prefetcher: source 2 has 5 samples, source 1 has 4', ffi.string(C.em_last_error()))
    idx[1] = 4
    assert.is_true(C.em_prefetcher_new(1, srcs, 2, idx, 1, 0, 0, -1) == nil)
    assert.are.equal('prefetcher: index 4 (entry 2) is out of range for 4 samples', ffi.string(C.em_last_error()))
    idx[1] = 1
    assert.is_true(C.em_prefetcher_new(1, srcs, 2, idx, 0, 0, 0, -1) == nil)
    assert.are.equal('prefetcher: expected batch_size >= 1, got 0', ffi.string(C.em_last_error()))
    assert.is_true(C.em_prefetcher_new(1, srcs, 2, idx, 1, 65, 0, -1) == nil)
    assert.are.equal('prefetcher: expected 0 to 64 workers, got 65', ffi.string(C.em_last_error()))
    local s = ember.tensor(1)
    srcs[0] = s.ptr
    assert.is_true(C.em_prefetcher_new(1, srcs, 0, nil, 1, 0, 0, -1) == nil)
    assert.are.equal('prefetcher: source 1 is 0-dim; expected samples along dimension 1', ffi.string(C.em_last_error()))
    assert.are.equal(-1, C.em_prefetcher_next(nil, nil))
  end)

  it('raises an allocation failure in a worker as an error in the consumer', function()
    local src = ember.zeros(64, 1024) -- 4 KiB rows
    local srcs = ffi.new('em_tensor*[1]', { src.ptr })
    local idx = ffi.new('int64_t[64]')
    for i = 0, 63 do idx[i] = i end
    ember.memory.set_limit('cpu', ember.memory.stats('cpu').allocated + 100000)
    -- one worker builds batch 1 (64 KiB) then batch 2, while batch 1 is still held: the second
    -- allocation passes the limit in the worker thread
    local pf = C.em_prefetcher_new(1, srcs, 64, idx, 16, 1, 0, -1)
    local out = ffi.new('em_tensor*[1]')
    local results, held = {}, {}
    for _ = 1, 4 do
      local rc = C.em_prefetcher_next(pf, out)
      results[#results + 1] = rc
      if rc == 1 then held[#held + 1] = out[0] end
    end
    local msg = ffi.string(C.em_last_error())
    local kind = C.em_last_error_kind()
    C.em_prefetcher_free(pf)
    for _, t in ipairs(held) do C.em_release(t) end
    ember.memory.set_limit('cpu', 0)
    assert.are.same({ 1, -1, -1, -1 }, results)
    assert.are.equal(C.EM_ERR_OOM, kind)
    assert.is_truthy(msg:find('prefetcher', 1, true), msg)
  end)
end)
