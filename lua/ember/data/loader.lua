-- ember.data.loader: DataLoader, batches from a dataset (PyTorch's DataLoader, in Lua).
--
--   local loader = ember.data.DataLoader(ds, {batch_size = 64, shuffle = true, seed = 1,
--                                              drop_last = false, num_workers = 2})
--   for x, y in loader:iter() do ... end        -- #loader batches per epoch
--
-- Sample order. Without shuffle, samples come in order. With shuffle, epoch k's order is a
-- permutation drawn from Ember's Philox generator keyed by the loader's seed at offset
-- (k - 1) * 2^32: it depends on (seed, k) only, not on what else drew random numbers, so a
-- resumed run sees exactly the batches the interrupted one would have. The global generator's
-- state is saved and restored around the draw. Each iter() runs the next epoch; set_epoch(k),
-- state() and load_state() choose where to resume, down to the batch.
--
-- Workers. LuaJIT has one Lua state, so workers are C threads (runtime/src/io/prefetch.c) that
-- gather rows of tensors; they serve TensorDatasets (and subclasses that keep its get) on the
-- CPU with the default collate. Other datasets load in the main thread; with num_workers > 0
-- the loader says so once on stderr. Batches are the same either way.
--
-- Samplers. {sampler = ember.data.DistributedSampler(ds, ...)} reads the sampler's indices
-- for the epoch instead (shuffle then belongs to the sampler); the loader moves the sampler to
-- the next epoch after each, and state() records the sampler's global position, so a job
-- resumes at another number of processes (ember/data/sampler.lua).
local ffi = require 'ffi'
local core = require 'ember.core'
local class = require 'ember.data.class'
local dataset = require 'ember.data.dataset'
local collate = require 'ember.data.collate'
local random = require 'ember.random'
local epoch_order = require 'ember.data.epoch_order'
local is_tensor = require('ember.tensor').is_tensor

local C = core.C
local TensorDataset = dataset.TensorDataset

local DataLoader = class.class('DataLoader')


local function is_int(v) return type(v) == 'number' and v == math.floor(v) and v == v end

local function check_count(fn, what, v, min, max)
  if not is_int(v) or v < min or (max and v > max) then
    error(('%s: expected %s to be an integer %s, got %s'):format(fn, what,
      max and ('in %d..%d'):format(min, max) or ('>= ' .. min), tostring(v)), 4)
  end
  return v
end

local options = { batch_size = true, shuffle = true, drop_last = true, num_workers = true,
  seed = true, collate = true, prefetch = true, pin_memory = true, sampler = true }

function DataLoader:init(ds, opts)
  if (type(ds) ~= 'table' and type(ds) ~= 'userdata') or type(ds.size) ~= 'function'
      or type(ds.get) ~= 'function' then
    error('DataLoader: expected a dataset with size() and get(i), got ' .. type(ds), 3)
  end
  if opts ~= nil and type(opts) ~= 'table' then
    error('DataLoader: expected an options table, got ' .. type(opts), 3)
  end
  opts = require('ember.util.names').check_options('DataLoader', opts, options, 3)
  for _, k in ipairs({ 'shuffle', 'drop_last' }) do
    if opts[k] ~= nil and type(opts[k]) ~= 'boolean' then
      error(('DataLoader: expected %s to be a boolean, got %s'):format(k, type(opts[k])), 3)
    end
  end
  if opts.collate ~= nil and type(opts.collate) ~= 'function' then
    error('DataLoader: expected collate to be a function, got ' .. type(opts.collate), 3)
  end
  -- pin_memory: true pins for the default device when it is a GPU (and does nothing on a
  -- CPU-only run, so a script runs everywhere); a device name pins for that device
  local pin = opts.pin_memory
  if pin ~= nil and type(pin) ~= 'boolean' and type(pin) ~= 'string' then
    error('DataLoader: expected pin_memory to be a boolean or a device name, got ' .. type(pin), 3)
  end
  if type(pin) == 'string' then core.device_id(pin, 'DataLoader') end
  self.pin_memory = pin or false
  self.dataset = ds
  self.batch_size = check_count('DataLoader', 'batch_size', opts.batch_size or 1, 1)
  self.shuffle = opts.shuffle or false
  self.drop_last = opts.drop_last or false
  self.num_workers = check_count('DataLoader', 'num_workers', opts.num_workers or 0, 0, 64)
  self.prefetch = check_count('DataLoader', 'prefetch', opts.prefetch or
    math.max(2 * self.num_workers, 1), 1, 1024)
  self.collate = opts.collate
  if opts.sampler ~= nil then
    local sp = opts.sampler
    if (type(sp) ~= 'table' and type(sp) ~= 'userdata') or type(sp.indices) ~= 'function'
        or type(sp.num_samples) ~= 'function' then
      error('DataLoader: expected sampler to be a sampler (DistributedSampler), got ' ..
        type(sp), 3)
    end
    if opts.shuffle then
      error('DataLoader: sampler and shuffle = true cannot go together (the sampler shuffles)', 3)
    end
    self.sampler = sp
  end
  if opts.seed ~= nil then
    self.seed = check_count('DataLoader', 'seed', opts.seed, 0, 2 ^ 53)
  elseif self.shuffle then
    -- Drawn from the global generator, so manual_seed makes an unseeded loader reproducible.
    self.seed = math.floor(random.rand(1, { dtype = 'float64' }):item() * 2 ^ 53)
  else
    self.seed = 0
  end
  self.epoch = 1
  self.start_batch = 0
end

local function dataset_size(ds)
  local n = ds:size()
  if not is_int(n) or n < 0 then
    error('DataLoader: dataset size() returned ' .. tostring(n) .. ', expected an integer >= 0', 3)
  end
  return n
end

local function num_batches(n, bs, drop_last)
  if drop_last then return math.floor(n / bs) end
  return math.ceil(n / bs)
end

-- Samples one epoch reads: the dataset's, or this process's share under a sampler.
local function epoch_samples(self)
  if self.sampler then return self.sampler:num_samples() end
  return dataset_size(self.dataset)
end

function DataLoader:size()
  return num_batches(epoch_samples(self), self.batch_size, self.drop_last)
end

function DataLoader:__tostring()
  return ('DataLoader(%d batches of %d, shuffle=%s, num_workers=%d)'):format(self:size(),
    self.batch_size, tostring(self.shuffle), self.num_workers)
end

-- The epoch's sample order: an int64 tensor of n 1-based indices.
function DataLoader:order(epoch, n)
  epoch = epoch or self.epoch
  n = n or dataset_size(self.dataset)
  check_count('order', 'epoch', epoch, 1, 2 ^ 32)
  return epoch_order('DataLoader', n, self.shuffle, self.seed, epoch)
end

-- ---- resuming -------------------------------------------------------------------------------
-- state() = {seed, epoch, batch}: the epoch in progress and the batches it has yielded, or the
-- next epoch and 0 between epochs. load_state(s) makes the next iter() continue from there.
-- With a sampler, state() = {seed, epoch, batch = 0, position}: the sampler's global position
-- (samples the whole job consumed in the epoch), which any number of processes resumes from.
function DataLoader:state()
  local p = self._progress
  local sp = self.sampler
  if sp then
    local taken = p and math.min(p.batch * self.batch_size, p.samples) or 0
    local s = p and { p.epoch, p.position } or { sp.epoch, sp.position }
    local epoch, position = sp:position_after(s[1], s[2], taken)
    return { seed = sp.seed, epoch = epoch, batch = 0, position = position }
  end
  if p then return { seed = self.seed, epoch = p.epoch, batch = p.batch } end
  return { seed = self.seed, epoch = self.epoch, batch = self.start_batch }
end

function DataLoader:load_state(s)
  if type(s) ~= 'table' then
    error('load_state: expected a table {seed=, epoch=, batch=} from state(), got ' .. type(s), 2)
  end
  self:close()
  self.seed = check_count('load_state', 'seed', s.seed, 0, 2 ^ 53)
  self.epoch = check_count('load_state', 'epoch', s.epoch, 1, 2 ^ 32)
  self.start_batch = check_count('load_state', 'batch', s.batch or 0, 0)
  self._progress = nil
  local sp = self.sampler
  if sp then -- a plain loader's state counts batches of this loader's size
    local position = s.position or self.start_batch * self.batch_size
    sp:load_state({ seed = s.seed, epoch = self.epoch, position = position })
    self.epoch, self.start_batch = sp.epoch, 0
  elseif s.position ~= nil then -- a sampler's state, resumed by one process without a sampler
    local position = check_count('load_state', 'position', s.position, 0)
    if position % self.batch_size ~= 0 then
      error(('load_state: position %d is not a whole number of batches of %d; resume with a ' ..
        'DistributedSampler'):format(position, self.batch_size), 2)
    end
    self.start_batch = position / self.batch_size
  end
end

function DataLoader:set_epoch(epoch)
  self:close()
  self.epoch = check_count('set_epoch', 'epoch', epoch, 1, 2 ^ 32)
  self.start_batch = 0
  self._progress = nil
  if self.sampler then self.sampler:set_epoch(epoch) end
end

-- Ends the current iteration now: stops its workers and frees the batches they prepared.
-- (Garbage collection does the same for an iteration abandoned with `break`.)
function DataLoader:close()
  local st = self._pf_state
  if st and st.pf ~= nil then
    local pf = st.pf
    st.pf = nil
    ffi.gc(pf, nil)
    C.em_prefetcher_free(pf)
  end
  self._pf_state = nil
end

-- ---- iteration ------------------------------------------------------------------------------
local function pack(...) return { n = select('#', ...), ... } end

-- The tensors a worker may gather from, or nil when this loader must call get().
local function worker_sources(self)
  local ds = self.dataset
  if self.collate ~= nil or not class.is_instance(ds, TensorDataset)
      or ds.get ~= TensorDataset.get then
    return nil
  end
  for _, t in ipairs(ds.tensors) do
    if t.ptr.device_id ~= 0 then return nil end
  end
  return ds.tensors
end

-- The device whose pinned memory batches go to, or -1.
local function pin_device(self)
  local pin = self.pin_memory
  if pin == false then return -1 end
  if pin == true then
    local d = C.em_default_device()
    return d ~= 0 and d or -1
  end
  return core.device_id(pin, 'DataLoader')
end

local function prefetch_iter(self, sources, order, first, count, progress)
  local k, bs = #sources, self.batch_size
  local srcs = ffi.new('em_tensor*[?]', k)
  for s = 1, k do srcs[s - 1] = sources[s].ptr end
  local sel = order:narrow(1, first, count)
  local idx = (sel - 1):contiguous()
  local ptr = count > 0 and ffi.cast('const int64_t *', idx:data_ptr()) or nil
  local pin = pin_device(self)
  local pf = C.em_prefetcher_new(k, srcs, count, ptr, bs, self.num_workers, self.prefetch, pin)
  if pf == nil then core.raise(3) end
  pf = ffi.gc(pf, C.em_prefetcher_free)
  local st = { pf = pf }
  self._pf_state = st
  local out = ffi.new('em_tensor*[?]', k)
  local loader, taken = self, 0
  -- A worker that ran out of memory (a limit, or garbage batches Lua has not collected yet)
  -- fails its batch; that batch is gathered again here, on this thread, after a collection.
  local function rebuild()
    core.collect()
    local len = math.min(bs, count - taken * bs)
    local one = C.em_prefetcher_new(k, srcs, len, ptr + taken * bs, len, 0, 1, pin)
    local rc = one ~= nil and C.em_prefetcher_next(one, out) or -1
    local msg = rc ~= 1 and ffi.string(C.em_last_error())
    C.em_prefetcher_free(one)
    if rc ~= 1 then error(msg, 0) end
    local r = {}
    for s = 1, k do r[s] = core.own(out[s - 1]) end
    local _ = idx -- ptr points into idx: keep it alive as long as this iterator
    return r
  end
  return function()
    local p = st.pf
    if p == nil then return nil end
    local rc = C.em_prefetcher_next(p, out)
    local r
    if rc == 1 then
      r = {}
      for s = 1, k do r[s] = core.own(out[s - 1]) end
    elseif rc < 0 and C.em_last_error_kind() == C.EM_ERR_OOM then
      local ok, res = pcall(rebuild)
      if not ok then loader:close(); error(res, 2) end
      r = res
    else
      st.pf = nil
      ffi.gc(p, nil)
      C.em_prefetcher_free(p)
      if loader._progress == progress then loader._progress = nil end
      if rc < 0 then core.raise(2) end
      return nil
    end
    taken = taken + 1
    progress.batch = progress.batch + 1
    return unpack(r, 1, k)
  end
end

local function generic_iter(self, order, first, last, progress)
  local ds, bs, custom = self.dataset, self.batch_size, self.collate
  local pin = pin_device(self)
  local idx = order:totable()
  local pos = first
  local loader = self
  local function load(lo, hi)
    local samples, arity = {}, nil
    for j = lo, hi do
      local r = pack(ds:get(idx[j]))
      if r.n == 0 or r[1] == nil then
        error(('DataLoader: get(%d) returned no sample'):format(idx[j]), 0)
      end
      if arity == nil then
        arity = r.n
      elseif r.n ~= arity then
        error(('DataLoader: get(%d) returned %d values, get(%d) returned %d'):format(idx[j], r.n,
          idx[lo], arity), 0)
      end
      samples[#samples + 1] = arity == 1 and r[1] or r
    end
    if custom then return custom(samples) end
    if arity == 1 then return collate.default(samples) end
    return collate.tuples(samples, arity)
  end
  return function()
    if pos > last then
      if loader._progress == progress then loader._progress = nil end
      return nil
    end
    local lo, hi = pos, math.min(pos + bs - 1, last)
    pos = hi + 1
    local r = pack(load(lo, hi))
    if pin >= 0 then -- batches built in the main thread are pinned after collation
      for i = 1, r.n do
        if is_tensor(r[i]) and r[i]:device() == 'cpu' then
          r[i] = r[i]:pin_memory(pin)
        end
      end
    end
    progress.batch = progress.batch + 1
    return unpack(r, 1, r.n)
  end
end

-- for batch in loader:iter() do ... end, or for x, y in loader:iter() for tuple samples.
-- Runs the next epoch (or resumes where load_state says); ends any earlier iteration.
function DataLoader:iter()
  self:close()
  local sp = self.sampler
  local bs = self.batch_size
  local epoch, skip = self.epoch, self.start_batch
  local order, progress
  if sp then -- the sampler's epoch and position lead; the loader follows them
    epoch = sp.epoch
    order = sp:indices(epoch, sp.position)
    progress = { epoch = epoch, batch = 0, position = sp.position, samples = order:size(1) }
    sp.epoch, sp.position = epoch + 1, 0
  else
    order = self:order(epoch, dataset_size(self.dataset))
    progress = { epoch = epoch, batch = skip }
  end
  local n = order:size(1)
  local nb = num_batches(n, bs, self.drop_last)
  if skip > nb then
    error(('DataLoader: cannot resume at batch %d of an epoch of %d batches'):format(skip, nb), 2)
  end
  self.epoch, self.start_batch = epoch + 1, 0
  self._progress = progress
  local used = self.drop_last and nb * bs or n
  local first = skip * bs + 1
  local sources = worker_sources(self)
  if sources then
    return prefetch_iter(self, sources, order, first, math.max(used - first + 1, 0), progress)
  end
  if self.num_workers > 0 and not self._warned then
    self._warned = true
    io.stderr:write(('ember.data: DataLoader workers gather TensorDatasets only; loading %s ' ..
      'in the main thread\n'):format(tostring(self.dataset)))
  end
  return generic_iter(self, order, first, used, progress)
end

return { DataLoader = DataLoader }
