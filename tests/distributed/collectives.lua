-- Run by tests/lua/distributed_spec.lua under `mpirun -np 2` (any number of ranks works): every
-- collective against the result computed locally from every rank's data, for every dtype, for
-- empty, one-element, odd-sized and non-contiguous tensors, on the CPU and on a Vulkan device
-- (lavapipe in CI) when there is one; async handles; the argument errors. Each rank can rebuild
-- any rank's data (a function of the rank), so the references need no communication. The data
-- are small integers, exact in every dtype, so sums are exact whatever order MPI adds in.
-- Prints "rank R: N checks passed" at the end; any failure raises (and the runner aborts the job).
local dist = ember.distributed
dist.init({ device = 'cpu', timeout = 120 })
local rank, world = dist.rank(), dist.world_size()
assert(dist.is_initialized() and dist.device() == 'cpu' and world >= 2, 'needs 2 or more ranks')

local checks = 0
local function check(cond, what)
  if not cond then error(('rank %d: check failed: %s'):format(rank, what), 2) end
  checks = checks + 1
end

local dtypes = { 'float32', 'float64', 'float16', 'bfloat16', 'int8', 'uint8', 'int16', 'int32',
                 'int64', 'bool' }
local floating = { float32 = true, float64 = true, float16 = true, bfloat16 = true }

-- Rank r's data: n small integers (0/1 for bool, 0..8 for uint8, -8..8 otherwise).
local function values(r, n, dtype, salt)
  local v = {}
  for i = 1, n do
    local x = (i * 7 + r * 13 + salt) % 17
    if dtype == 'bool' then x = x % 2 elseif dtype == 'uint8' then x = x % 9 else x = x - 8 end
    v[i] = x
  end
  return v
end

-- A tensor of `shape` (n = its element count) with rank r's data; non-contiguous when asked
-- (the transpose of a contiguous [c, r] tensor), on `device`.
local function make(r, shape, dtype, salt, device, noncontig)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  local t = ember.tensor(values(r, n, dtype, salt), { dtype = 'float64' }):to(dtype)
  if device ~= 'cpu' then t = t:to(device) end
  if noncontig then
    t = t:view(shape[2], shape[1]):t()
    assert(not t:is_contiguous())
  else
    t = t:view(unpack(shape))
  end
  return t
end

-- The reduction of every rank's tensor, computed here in float64.
local function reference(shape, dtype, salt, op, noncontig)
  local acc
  for r = 0, world - 1 do
    local t = make(r, shape, dtype, salt, 'cpu', noncontig):to('float64')
    if acc == nil then acc = t
    elseif op == 'sum' or op == 'avg' then acc = acc + t
    elseif op == 'max' then acc = ember.maximum(acc, t)
    else acc = ember.minimum(acc, t) end
  end
  if op == 'avg' then acc = acc / world end
  return acc:to(dtype)
end

local function same(a, b)
  a, b = a:to('cpu'), b:to('cpu')
  if a:dtype() ~= b:dtype() or a:dim() ~= b:dim() then return false end
  for d = 1, a:dim() do if a:size(d) ~= b:size(d) then return false end end
  if a:numel() == 0 then return true end
  return a:to('float64'):equal(b:to('float64'))
end

local shapes = { { 0 }, { 1 }, { 7 }, { 1001 }, { 3, 5 }, { 4, 0 } }

local function run_device(device)
  local salt = 0
  for _, dtype in ipairs(dtypes) do
    local ops = dtype == 'bool' and { 'max', 'min' } or
      floating[dtype] and { 'sum', 'avg', 'max', 'min' } or { 'sum', 'max', 'min' }
    for _, shape in ipairs(shapes) do
      for _, noncontig in ipairs(#shape == 2 and shape[1] * shape[2] > 0 and { false, true } or { false }) do
        local label = ('%s %s [%s]%s'):format(device, dtype, table.concat(shape, ','),
          noncontig and ' non-contiguous' or '')
        for _, op in ipairs(ops) do
          salt = salt + 1
          local t = make(rank, shape, dtype, salt, device, noncontig)
          local back = dist.all_reduce(t, { op = op })
          check(rawequal(back, t), label .. ': all_reduce returns t')
          check(same(t, reference(shape, dtype, salt, op, noncontig)), label .. ' all_reduce ' .. op)
        end
        -- broadcast from each root
        for root = 0, world - 1 do
          salt = salt + 1
          local t = make(rank, shape, dtype, salt, device, noncontig)
          dist.broadcast(t, root)
          check(same(t, make(root, shape, dtype, salt, 'cpu', noncontig)), label .. ' broadcast ' .. root)
        end
        -- all_gather: row r+1 is rank r's tensor
        salt = salt + 1
        local g = dist.all_gather(make(rank, shape, dtype, salt, device, noncontig))
        check(g:size(1) == world, label .. ' all_gather size')
        for r = 0, world - 1 do
          check(same(g[r + 1], make(r, shape, dtype, salt, 'cpu', noncontig)), label .. ' all_gather row ' .. r)
        end
      end
    end
    -- reduce_scatter: [2 * world, 3] split into world parts of [2, 3]
    for _, op in ipairs(ops) do
      salt = salt + 1
      local shape = { 2 * world, 3 }
      local part = dist.reduce_scatter(make(rank, shape, dtype, salt, device), { op = op })
      local full = reference(shape, dtype, salt, op)
      check(same(part, full:narrow(1, 2 * rank + 1, 2)), device .. ' ' .. dtype .. ' reduce_scatter ' .. op)
    end
    salt = salt + 1
    local empty = dist.reduce_scatter(make(rank, { 0, 3 }, dtype, salt, device), { op = 'max' })
    check(empty:size(1) == 0 and empty:size(2) == 3, device .. ' ' .. dtype .. ' empty reduce_scatter')
  end

  -- async: several in flight at once, waited in any order; the results as the sync forms'
  local a = make(rank, { 1001 }, 'float32', 1, device)
  local b = make(rank, { 64 }, 'int32', 2, device)
  local c = make(rank, { 5 }, 'float64', 3, device)
  local ha = dist.all_reduce(a, { async = true })
  local hb = dist.broadcast(b, world - 1, { async = true })
  local hc = dist.all_gather(c, { async = true })
  local hd = dist.barrier({ async = true })
  check(hc:wait():size(1) == world, device .. ' async all_gather')
  check(hb:wait() == b and same(b, make(world - 1, { 64 }, 'int32', 2, 'cpu')), device .. ' async broadcast')
  check(ha:wait() == a and same(a, reference({ 1001 }, 'float32', 1, 'sum')), device .. ' async all_reduce')
  check(hd:wait() == nil, device .. ' async barrier')
  check(ha:is_completed() and hb:is_completed(), device .. ' is_completed after wait')
  check(ha:wait() == a, device .. ' wait twice')
  local out = ember.empty({ world, 5 }, { dtype = 'float64', device = device })
  local ho = dist.all_gather(c, { out = out, async = true })
  check(ho:wait() == out, device .. ' all_gather into out')
  -- into a list of tensors (any layout, any device), sync and async
  local list = {}
  for r = 1, world do list[r] = ember.zeros({ 5 }, { dtype = 'float64', device = 'cpu' }) end
  check(dist.all_gather(c, { out = list }) == list, device .. ' all_gather into a list')
  for r = 0, world - 1 do
    check(same(list[r + 1], make(r, { 5 }, 'float64', 3, 'cpu')), device .. ' all_gather list ' .. r)
  end
  local list2 = {}
  for r = 1, world do list2[r] = ember.zeros({ 5, 2 }, { dtype = 'float64', device = device }):select(2, 1) end
  local hl = dist.all_gather(c, { out = list2, async = true })
  check(hl:wait() == list2 and hl:is_completed(), device .. ' async all_gather into a list')
  check(same(list2[world], make(world - 1, { 5 }, 'float64', 3, 'cpu')), device .. ' all_gather list, strided')
  local rs = dist.reduce_scatter(make(rank, { 2 * world }, 'float32', 4, device), { op = 'max', async = true })
  check(same(rs:wait(), reference({ 2 * world }, 'float32', 4, 'max'):narrow(1, 2 * rank + 1, 2)),
    device .. ' async reduce_scatter')
end

-- A device tensor's async all_reduce neither waits for the device when it is called (the copies
-- to pinned memory are recorded and started; the communication thread waits for them) nor at
-- wait (the copies back are recorded): the host keeps recording while the device works.
local function host_waits(name)
  for _, d in ipairs(ember.devices()) do
    if d.name == name then return d.host_waits end
  end
end
local function check_no_host_wait(device)
  local t = make(rank, { 5000 }, 'float32', 99, device)
  local name = t:device()
  local before = host_waits(name)
  local h = dist.all_reduce(t, { async = true })
  check(host_waits(name) == before, device .. ': async all_reduce waited for the device at the call')
  h:wait()
  check(host_waits(name) == before, device .. ': async all_reduce waited for the device at wait')
  check(same(t, reference({ 5000 }, 'float32', 99, 'sum')), device .. ': all_reduce without host waits')
  -- back to back, nothing read in between: the second reuses the first's pinned buffer while
  -- the first's copies back to the device may still be pending
  local u = make(rank, { 5000 }, 'float32', 100, device)
  local v = make(rank, { 3000 }, 'float32', 101, device)
  dist.all_reduce(u)
  dist.all_reduce(v, { op = 'max' })
  local w = make(rank, { 7000 }, 'float32', 102, device)
  dist.all_reduce(w) -- larger: a new kept buffer
  check(same(u, reference({ 5000 }, 'float32', 100, 'sum')), device .. ': back-to-back all_reduce 1')
  check(same(v, reference({ 3000 }, 'float32', 101, 'max')), device .. ': back-to-back all_reduce 2')
  check(same(w, reference({ 7000 }, 'float32', 102, 'sum')), device .. ': back-to-back all_reduce 3')
end

run_device('cpu')
local has_vulkan = false
for _, d in ipairs(ember.devices()) do
  if d.name:match('^vulkan') and not d.error then has_vulkan = true end
end
if has_vulkan then
  run_device('vulkan')
  check_no_host_wait('vulkan')
else
  print(('rank %d: no Vulkan device: Vulkan collectives not checked'):format(rank))
end

-- argument errors: raised before any transfer, on every rank alike (so the ranks stay in step)
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  check(not ok and tostring(err):find(pattern, 1, true), ('expected an error with %q, got %s'):format(
    pattern, ok and 'success' or tostring(err)))
end
local x = ember.ones(4)
raises("all_reduce: unknown op 'prod'", dist.all_reduce, x, { op = 'prod' })
raises("all_reduce: unknown option asyncc", dist.all_reduce, x, { asyncc = true })
raises('broadcast: root must be a rank from 0 to ' .. (world - 1) .. ', got ' .. world, dist.broadcast, x, world)
raises('broadcast: root must be a rank from 0 to', dist.broadcast, x, -1)
raises('broadcast: root must be a rank number', dist.broadcast, x, 0.5)
raises("all_reduce: op 'avg' needs a floating dtype, got int32", dist.all_reduce, x:to('int32'), { op = 'avg' })
raises("all_reduce: op 'sum' is not defined for bool", dist.all_reduce, x:to('bool'))
raises('reduce_scatter: t:size(1) (' .. (world + 1) .. ') must divide evenly', dist.reduce_scatter,
  ember.ones(world + 1))
raises('all_gather: out must have sizes', dist.all_gather, x, { out = ember.empty(world, 5) })
raises('all_gather: out must have t\'s dtype', dist.all_gather, x, { out = ember.empty({ world, 4 }, { dtype = 'float64' }) })
raises('all_reduce: t must be a tensor', dist.all_reduce, { 1, 2 })
raises('all_gather: out must be a tensor or a list of world_size (' .. world .. ') tensors, got a list of 1',
  dist.all_gather, x, { out = { ember.empty(4) } })
raises('ember.distributed.init: already initialized', dist.init)
raises('ember.distributed.init: unknown option devise', dist.init, { devise = 'cpu' })

dist.barrier()
print(('rank %d: %d checks passed'):format(rank, checks))
dist.finalize()
check(not dist.is_initialized(), 'finalize')
raises('ember.distributed.init: MPI was finalized', dist.init)
