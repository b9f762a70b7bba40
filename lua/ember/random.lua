-- ember.random: seeded random numbers from the runtime's Philox-4x32-10 generator (see
-- docs/api/random.md): seeding and state, rand/randn/randint/randperm/bernoulli/normal and the
-- _like forms, multinomial, the in-place fills (uniform_, normal_, bernoulli_, random_) and Torch7's names
-- for them (x:uniform(a, b) fills x in place, as in Torch7).
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local creation = require 'ember.creation'
local C, own, check = core.C, core.own, core.check
local methods, is_tensor = tensor.methods, tensor.is_tensor

local M = {}

-- ---- seeds and state ------------------------------------------------------------------------
local u64, i64 = ffi.typeof('uint64_t'), ffi.typeof('int64_t')
local TWO53, TWO63, TWO64 = 2 ^ 53, 2 ^ 63, 2 ^ 64

-- A seed or offset as uint64_t: an integer Lua number (a negative seed wraps modulo 2^64, as in
-- PyTorch) or an int64/uint64 cdata such as 0xffffffffffffffffULL.
local function to_u64(v, fn, what, allow_negative)
  if type(v) == 'number' then
    if v ~= v or v ~= math.floor(v) or v == math.huge or v == -math.huge then
      error(('%s: expected an integer %s, got %s'):format(fn, what, tostring(v)), 3)
    end
    if v >= TWO64 or v < (allow_negative and -TWO63 or 0) then
      error(('%s: %s %.0f is out of range'):format(fn, what, v), 3)
    end
    if v < 0 then return ffi.cast(u64, ffi.cast(i64, v)) end
    if v >= TWO63 then return ffi.cast(u64, v - TWO63) + 0x8000000000000000ULL end
    return ffi.cast(u64, v)
  end
  if type(v) == 'cdata' and (ffi.istype(u64, v) or ffi.istype(i64, v)) then
    if ffi.istype(i64, v) and v < 0 and not allow_negative then
      error(('%s: %s %s is out of range'):format(fn, what, tostring(v)), 3)
    end
    return ffi.cast(u64, v)
  end
  error(('%s: expected an integer %s, got %s'):format(fn, what, type(v)), 3)
end

-- Back to Lua: a number when exact (below 2^53), else the uint64_t cdata.
local function from_u64(v)
  if v < TWO53 then return tonumber(v) end
  return ffi.new(u64, v)
end

function M.manual_seed(seed)
  C.em_manual_seed(to_u64(seed, 'manual_seed', 'seed', true))
end

function M.initial_seed() return from_u64(C.em_initial_seed()) end

local state_seed, state_offset = ffi.new('uint64_t[1]'), ffi.new('uint64_t[1]')
function M.get_rng_state()
  C.em_rng_get_state(state_seed, state_offset)
  return { seed = from_u64(state_seed[0]), offset = from_u64(state_offset[0]) }
end

function M.set_rng_state(state)
  if type(state) ~= 'table' or state.seed == nil or state.offset == nil then
    error('set_rng_state: expected a table {seed=..., offset=...} from get_rng_state, got '
      .. type(state), 2)
  end
  C.em_rng_set_state(to_u64(state.seed, 'set_rng_state', 'seed', true),
    to_u64(state.offset, 'set_rng_state', 'offset', false))
end

-- ---- new tensors ----------------------------------------------------------------------------
local function sized(fn, cfun)
  return function(...)
    local n, sizes, opts = core.parse_sizes(fn, ...)
    local dtype, device = creation.options(opts, fn)
    return creation.leaf(own(cfun(n, sizes, dtype, device), cfun, n, sizes, dtype, device), opts)
  end
end
M.rand = sized('rand', C.em_rand)
M.randn = sized('randn', C.em_randn)

local function check_int(fn, what, v)
  if type(v) ~= 'number' or v ~= math.floor(v) or v ~= v or math.abs(v) == math.huge then
    error(('%s: expected an integer %s, got %s'):format(fn, what, tostring(v)), 3)
  end
end

-- The dtype of an options table, or `default`.
local function opts_dtype(opts, fn, default)
  if opts ~= nil and type(opts) ~= 'table' then
    error(fn .. ': expected an options table {dtype=..., device=...}, got ' .. type(opts), 3)
  end
  local d = opts and opts.dtype
  if d == nil then return default end
  return core.dtype_id(d, fn)
end

-- randint(low, high, sizes [, opts]) or randint(high, sizes [, opts]): integers in [low, high).
function M.randint(a, b, ...)
  local low, high, n, sizes, opts
  if type(b) == 'number' then
    low, high = a, b
    n, sizes, opts = core.parse_sizes('randint', ...)
  else
    low, high = 0, a
    n, sizes, opts = core.parse_sizes('randint', b, ...)
  end
  check_int('randint', 'low', low)
  check_int('randint', 'high', high)
  local dtype = opts_dtype(opts, 'randint', C.EM_INT64)
  local _, device = creation.options(opts and { device = opts.device }, 'randint')
  return own(C.em_randint(low, high, n, sizes, dtype, device), C.em_randint, low, high, n, sizes,
    dtype, device)
end

-- Largest n whose permutation 1..n a dtype holds exactly.
local perm_limit = {
  int8 = 127, uint8 = 255, int16 = 32767, int32 = 2147483647, int64 = TWO53 - 1,
  float16 = 2048, bfloat16 = 256, float32 = 2 ^ 24, float64 = TWO53,
}

-- randperm(n [, opts]): a random permutation of 1..n (1-based, like every index in Lua).
function M.randperm(n, opts)
  check_int('randperm', 'n', n)
  local dtype = opts_dtype(opts, 'randperm', C.EM_INT64)
  local _, device = creation.options(opts and { device = opts.device }, 'randperm')
  local limit = perm_limit[core.dtype_names[dtype]]
  if limit and n > limit then
    error(('randperm: n=%d is too large for %s (values 1..n)'):format(n, core.dtype_names[dtype]), 2)
  end
  local p = own(C.em_randperm(n, dtype, device), C.em_randperm, n, dtype, device)
  check(C.em_binary_scalar_(C.EM_ADD, p.ptr, 1)) -- C's 0-based permutation to Lua's 1-based
  return p
end

-- bernoulli(p): 0 or 1 with probability p[i] per element, p's dtype. bernoulli(x, p) with a
-- number p: a tensor shaped like x.
function M.bernoulli(p, q)
  if not is_tensor(p) then
    error('bernoulli: expected a tensor of probabilities, got ' .. type(p), 2)
  end
  if q ~= nil then
    return methods.bernoulli_(creation.empty_like(p), q)
  end
  return own(C.em_bernoulli(p.ptr), C.em_bernoulli, p.ptr)
end

-- multinomial(probs, n [, {replacement = false}]) or multinomial(probs, n, replacement): n
-- categories per row of probs ([K] or [B, K] non-negative weights, which need not sum to 1),
-- 1-based int64 indices [n] or [B, n], drawn from the same generator as rand. The weights are
-- checked by the kernel: at the call on the CPU, at the next synchronization on a GPU.
function M.multinomial(probs, n, opts)
  local fn = 'multinomial'
  if not is_tensor(probs) then error(fn .. ': expected a tensor of weights, got ' .. type(probs), 2) end
  check_int(fn, 'number of samples', n)
  local replacement = false
  if type(opts) == 'boolean' then
    replacement = opts
  elseif type(opts) == 'table' then
    require('ember.util.names').check_options(fn, opts, { 'replacement' })
    replacement = opts.replacement or false
    if type(replacement) ~= 'boolean' then
      error(fn .. ': expected replacement to be a boolean, got ' .. type(replacement), 2)
    end
  elseif opts ~= nil then
    error(fn .. ': expected an options table {replacement = ...} or a boolean, got ' .. type(opts), 2)
  end
  local r = replacement and 1 or 0
  local ptr = C.em_multinomial(probs.ptr, n, r)
  if ptr == nil and C.em_last_error_kind() ~= C.EM_ERR_OOM then
    error(ffi.string(C.em_last_error()), 2)
  end
  local t = own(ptr, C.em_multinomial, probs.ptr, n, r)
  check(C.em_binary_scalar_(C.EM_ADD, t.ptr, 1)) -- C's 0-based categories to Lua's 1-based
  return t
end
methods.multinomial = M.multinomial

-- normal(mean, std, sizes [, opts]): a new tensor of normal samples (numbers mean and std).
function M.normal(mean, std, ...)
  if type(mean) ~= 'number' or type(std) ~= 'number' then
    error('normal: expected numbers for mean and std, got ' .. type(mean) .. ' and '
      .. type(std) .. ' (for tensors use randn(...) * std + mean)', 2)
  end
  local n, sizes, opts = core.parse_sizes('normal', ...)
  local dtype, device = creation.options(opts, 'normal')
  local t = own(C.em_empty(n, sizes, dtype, device), C.em_empty, n, sizes, dtype, device)
  check(C.em_normal_(t.ptr, mean, std))
  return t
end

-- The _like forms: x's shape, and x's dtype and device unless opts says otherwise.
local function like(x, opts, fn)
  if not is_tensor(x) then error(fn .. ': expected a tensor, got ' .. type(x), 3) end
  if opts ~= nil and type(opts) ~= 'table' then
    error(fn .. ': expected an options table {dtype=..., device=...}, got ' .. type(opts), 3)
  end
  opts = require('ember.util.names').check_options(fn, opts, { 'dtype', 'device', 'requires_grad' }, 3)
  return { dtype = opts.dtype or x.ptr.dtype_id, device = opts.device or x.ptr.device_id,
    requires_grad = opts.requires_grad }
end
function M.rand_like(x, opts) return M.rand(x:size(), like(x, opts, 'rand_like')) end
function M.randn_like(x, opts) return M.randn(x:size(), like(x, opts, 'randn_like')) end
-- randint_like(x, [low,] high [, opts])
function M.randint_like(x, a, b, opts)
  if type(b) ~= 'number' then a, b, opts = 0, a, b end
  return M.randint(a, b, x:size(), like(x, opts, 'randint_like'))
end

-- ---- in-place fills -------------------------------------------------------------------------
local function number_or(v, default, fn, what)
  if v == nil then return default end
  if type(v) ~= 'number' then
    error(('%s: expected a number for %s, got %s'):format(fn, what, type(v)), 3)
  end
  return v
end

function methods.uniform_(x, a, b)
  check(C.em_uniform_(x.ptr, number_or(a, 0, 'uniform_', 'low'), number_or(b, 1, 'uniform_', 'high')))
  return x
end

function methods.normal_(x, mean, std)
  check(C.em_normal_(x.ptr, number_or(mean, 0, 'normal_', 'mean'), number_or(std, 1, 'normal_', 'std')))
  return x
end

-- Fills that go through a temporary check here what the C fills check: no two elements of x
-- may share an address (an expanded view), or the last write would silently win.
local function check_no_overlap(x, fn)
  for d = 0, x.ptr.ndim - 1 do
    if x.ptr.strides[d] == 0 and x.ptr.sizes[d] > 1 then
      error(fn .. ': cannot write into a tensor whose elements share memory (an expanded '
        .. 'view); clone it first', 3)
    end
  end
end

-- bernoulli_(p): p a number (default 0.5) or a tensor of probabilities broadcast to x's shape.
function methods.bernoulli_(x, p)
  if is_tensor(p) then
    check_no_overlap(x, 'bernoulli_')
    local draws = own(C.em_bernoulli(methods.expand(p, x:size()).ptr))
    check(C.em_copy_(x.ptr, draws.ptr))
    return x
  end
  check(C.em_bernoulli_(x.ptr, number_or(p, 0.5, 'bernoulli_', 'p')))
  return x
end

-- random_(b) fills with integers in [1, b], random_(a, b) in [a, b]: both ends included, as
-- Torch7's random (randint is the half-open PyTorch form).
function methods.random_(x, a, b)
  if a == nil then error('random_: expected random_(b) or random_(a, b)', 2) end
  if b == nil then a, b = 1, a end
  check_int('random_', 'bound', a)
  check_int('random_', 'bound', b)
  if a > b then error(('random_: expected a <= b, got a=%d, b=%d'):format(a, b), 2) end
  check_no_overlap(x, 'random_')
  local n, sizes = core.parse_sizes('random_', x:size())
  local draws = own(C.em_randint(a, b + 1, n, sizes, x.ptr.dtype_id, x.ptr.device_id))
  check(C.em_copy_(x.ptr, draws.ptr))
  return x
end

-- Torch7's names: x:uniform(a, b), x:normal(mean, std), x:bernoulli(p), x:random(a, b) fill x
-- in place and return it, as they did in Torch7.
methods.uniform = methods.uniform_
methods.normal = methods.normal_
methods.bernoulli = methods.bernoulli_
methods.random = methods.random_

return M
