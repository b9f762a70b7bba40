-- Shared test helpers: an independent reference for every check.
--  * Tensors are compared against plain Lua tables computed with plain loops (in double).
--  * `variants` produces the same logical values laid out contiguous, transposed, sliced,
--    broadcast (expanded) and as zero-size, so each op is tested on all of them.
package.path = 'lua/?.lua;lua/?/init.lua;tests/lua/?.lua;' .. package.path
local ember = require 'ember'

local H = { ember = ember }

-- A deterministic pseudo-random stream independent of Ember's generator.
local state = 12345
function H.seed(s) state = s end
function H.random()
  state = (state * 1103515245 + 12345) % 2147483648
  return state / 2147483648
end
function H.uniform(lo, hi) return lo + (hi - lo) * H.random() end

-- Nested table of the given shape, filled by f(i) with i the flat 1-based index.
function H.nested(shape, f)
  local i = 0
  local function build(d)
    local t = {}
    for k = 1, shape[d] do
      if d == #shape then i = i + 1; t[k] = f(i) else t[k] = build(d + 1) end
    end
    return t
  end
  if #shape == 0 then i = 1; return f(1) end
  return build(1)
end

function H.rand_table(shape, lo, hi)
  -- ---- shared by the index/join and io/checkpoint specs ----------------------------------------

-- Every coordinate of a shape, in row-major order, as 1-based tables.
function H.coords(shape)
  local out, c = {}, {}
  local function walk(d)
    if d > #shape then
      local cc = {}
      for k = 1, #c do cc[k] = c[k] end
      out[#out + 1] = cc
      return
    end
    for i = 1, shape[d] do c[d] = i; walk(d + 1) end
  end
  walk(1)
  return out
end

-- A copy of coordinate c with entry d set to v.
function H.with(c, d, v)
  local r = {}
  for k = 1, #c do r[k] = c[k] end
  r[d] = v
  return r
end

function H.zeros(shape) return H.nested(shape, function() return 0 end) end

-- Integer values, so every dtype (float16, bfloat16, int8, uint8) holds them exactly.
function H.int_table(shape, lo, hi)
  return H.nested(shape, function() return math.floor(H.uniform(lo or 0, (hi or 9) + 1)) end)
end

function H.write_file(path, bytes)
  local f = assert(io.open(path, 'wb'))
  f:write(bytes)
  f:close()
  return path
end

function H.read_file(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

return H.nested(shape, function() -- ---- shared by the index/join and io/checkpoint specs ----------------------------------------

-- Every coordinate of a shape, in row-major order, as 1-based tables.
function H.coords(shape)
  local out, c = {}, {}
  local function walk(d)
    if d > #shape then
      local cc = {}
      for k = 1, #c do cc[k] = c[k] end
      out[#out + 1] = cc
      return
    end
    for i = 1, shape[d] do c[d] = i; walk(d + 1) end
  end
  walk(1)
  return out
end

-- A copy of coordinate c with entry d set to v.
function H.with(c, d, v)
  local r = {}
  for k = 1, #c do r[k] = c[k] end
  r[d] = v
  return r
end

function H.zeros(shape) return H.nested(shape, function() return 0 end) end

-- Integer values, so every dtype (float16, bfloat16, int8, uint8) holds them exactly.
function H.int_table(shape, lo, hi)
  return H.nested(shape, function() return math.floor(H.uniform(lo or 0, (hi or 9) + 1)) end)
end

function H.write_file(path, bytes)
  local f = assert(io.open(path, 'wb'))
  f:write(bytes)
  f:close()
  return path
end

function H.read_file(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

return H.uniform(lo or -2, hi or 2) end)
end

-- Flattens a nested table in row-major order.
function H.flatten(t, out)
  out = out or {}
  if type(t) ~= 'table' then out[#out + 1] = t; return out end
  for _, v in ipairs(t) do H.flatten(v, out) end
  return out
end

function H.shape_of(t)
  local s = {}
  while type(t) == 'table' do s[#s + 1] = #t; t = t[1] end
  return s
end

-- Maps f over nested tables (one or several, same shape).
function H.map(f, a, ...)
  if type(a) ~= 'table' then return f(a, ...) end
  local r, rest = {}, { ... }
  for i = 1, #a do
    local args = {}
    for j = 1, #rest do
      if type(rest[j]) == 'table' then args[j] = rest[j][i] else args[j] = rest[j] end
    end
    r[i] = H.map(f, a[i], unpack(args))
  end
  return r
end

local function close(a, b, rtol, atol)
  if type(a) == 'boolean' or type(b) == 'boolean' then return a == b end
  if a ~= a and b ~= b then return true end
  if a == b then return true end
  return math.abs(a - b) <= atol + rtol * math.abs(b)
end

-- Asserts tensor x equals expected (nested table or number) within tolerances.
function H.assert_close(x, expected, rtol, atol, what)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  local got = x
  if ember.is_tensor(x) then got = x:totable() end -- (a 0-d false must not fall back to x)
  local gs, es = H.shape_of(got), H.shape_of(expected)
  if #gs ~= #es then
    error(('%sshape mismatch: got [%s], expected [%s]'):format(what and what .. ': ' or '',
      table.concat(gs, ','), table.concat(es, ',')), 2)
  end
  for i = 1, #gs do
    if gs[i] ~= es[i] then
      error(('%sshape mismatch: got [%s], expected [%s]'):format(what and what .. ': ' or '',
        table.concat(gs, ','), table.concat(es, ',')), 2)
    end
  end
  local fg, fe = H.flatten(got), H.flatten(expected)
  for i = 1, #fe do
    if not close(fg[i], fe[i], rtol, atol) then
      error(('%selement %d: got %s, expected %s'):format(what and what .. ': ' or '', i,
        tostring(fg[i]), tostring(fe[i])), 2)
    end
  end
end

-- The same values as table `t` (2-D or more) in several memory layouts. Each entry is
-- { name, tensor, table } where table holds the values the tensor has.
function H.variants(t, opts)
  opts = opts or {}
  local x = ember.tensor(t, { dtype = opts.dtype })
  local out = { { 'contiguous', x, t } }
  local shape = H.shape_of(t)
  if #shape >= 2 then
    -- transposed: build the transpose in memory, then view it back with :t()
    local tt = {}
    for j = 1, shape[2] do
      tt[j] = {}
      for i = 1, shape[1] do tt[j][i] = t[i][j] end
    end
    if #shape == 2 then
      out[#out + 1] = { 'transposed', ember.tensor(tt, { dtype = opts.dtype }):t(), t }
    end
    -- sliced: embed in a bigger tensor and take every other column
    local big = {}
    for i = 1, shape[1] do
      big[i] = {}
      for j = 1, shape[2] do big[i][2 * j - 1] = t[i][j]; big[i][2 * j] = 0 / 0 end
    end
    if #shape == 2 then
      out[#out + 1] = { 'sliced', ember.tensor(big, { dtype = opts.dtype })[{ {}, { 1, -1, 2 } }], t }
    end
  end
  -- broadcast: the first row expanded to the full shape
  if #shape >= 1 and shape[1] >= 1 then
    local row = ember.tensor({ t[1] }, { dtype = opts.dtype })
    local bt = {}
    for i = 1, shape[1] do bt[i] = t[1] end
    local sizes = {}
    for i = 1, #shape do sizes[i] = shape[i] end
    out[#out + 1] = { 'broadcast', row:expand(sizes), bt }
  end
  return out
end

-- A zero-size tensor and its table, for ops that must accept them.
function H.empty_variant(cols, opts)
  return ember.zeros(0, cols or 3, opts), {}
end

-- Asserts that f raises an error whose message contains `pattern` (plain text).
function H.assert_error(f, pattern)
  local ok, err = pcall(f)
  if ok then error('expected an error containing "' .. pattern .. '", got success', 2) end
  if not tostring(err):find(pattern, 1, true) then
    error('expected an error containing "' .. pattern .. '", got: ' .. tostring(err), 2)
  end
end

-- ---- shared by the index/join and io/checkpoint specs ----------------------------------------

-- Every coordinate of a shape, in row-major order, as 1-based tables.
function H.coords(shape)
  local out, c = {}, {}
  local function walk(d)
    if d > #shape then
      local cc = {}
      for k = 1, #c do cc[k] = c[k] end
      out[#out + 1] = cc
      return
    end
    for i = 1, shape[d] do c[d] = i; walk(d + 1) end
  end
  walk(1)
  return out
end

-- A copy of coordinate c with entry d set to v.
function H.with(c, d, v)
  local r = {}
  for k = 1, #c do r[k] = c[k] end
  r[d] = v
  return r
end

function H.zeros(shape) return H.nested(shape, function() return 0 end) end

-- Integer values, so every dtype (float16, bfloat16, int8, uint8) holds them exactly.
function H.int_table(shape, lo, hi)
  return H.nested(shape, function() return math.floor(H.uniform(lo or 0, (hi or 9) + 1)) end)
end

function H.write_file(path, bytes)
  local f = assert(io.open(path, 'wb'))
  f:write(bytes)
  f:close()
  return path
end

function H.read_file(path)
  local f = assert(io.open(path, 'rb'))
  local s = f:read('*a')
  f:close()
  return s
end

-- The bytes live tensors hold on `device` (default 'cpu') once collections free nothing more:
-- one collection can leave tensors that earlier specs dropped (their handles go in a later
-- sweep), which would then be freed in the middle of a measurement.
function H.settled_allocated(device)
  local last
  for _ = 1, 10 do
    H.ember.memory.collect()
    local now = H.ember.memory.stats(device or 'cpu').allocated
    if now == last then return now end
    last = now
  end
  return last
end

-- Runs Lua code in a fresh `luajit` process and returns its stdout, its stderr and its exit
-- status: for measurements that earlier specs' leftovers in this process would disturb, and
-- for start-up behaviour. `env` ("NAME=value ...") is added to an environment with Ember's
-- library from $EMBER_LIB and without EMBER_DEVICE or EMBER_STRICT_DEVICE.
function H.child(code, env)
  local script, errf = os.tmpname(), os.tmpname()
  local f = assert(io.open(script, 'w'))
  f:write('package.path = "lua/?.lua;lua/?/init.lua;tests/lua/?.lua;" .. package.path\n', code)
  f:close()
  local lib = os.getenv('EMBER_LIB') or 'build/libember.so'
  local p = io.popen(('env -u EMBER_DEVICE -u EMBER_STRICT_DEVICE EMBER_LIB=%q %s luajit %q 2> %q; echo "rc=$?"')
    :format(lib, env or '', script, errf))
  local out = p:read('*a')
  p:close()
  local ef = io.open(errf)
  local err = ef:read('*a')
  ef:close()
  os.remove(script)
  os.remove(errf)
  local rc = tonumber(out:match('rc=(%d+)\n$'))
  return (out:gsub('rc=%d+\n$', '')), err, rc
end

-- A PyTorch golden file (tests/lua/golden/make_*.py): get(name) is its tensor (an error when
-- missing); state_dict(case) is a case's PyTorch state_dict, the keys after "<case>.sd.";
-- the third result is the file's flat table itself.
function H.golden(path)
  local G = ember.load(path, { flat = true })
  local function get(name)
    local t = G[name]
    assert(t, 'golden tensor missing: ' .. name)
    return t
  end
  local function state_dict(case)
    local sd, prefix = {}, case .. '.sd.'
    for k, v in pairs(G) do
      if type(k) == 'string' and k:sub(1, #prefix) == prefix then sd[k:sub(#prefix + 1)] = v end
    end
    return sd
  end
  return get, state_dict, G
end

return H
