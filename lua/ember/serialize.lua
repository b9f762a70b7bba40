-- ember.serialize: ember.save / ember.load, checkpoints as safetensors files
-- (docs/api/checkpoint.md; the format is written and read in C, runtime/src/io/safetensors.c).
--
-- A nested Lua table is flattened into dotted keys: {model = {{weight = w}}} saves tensor w as
-- "model.1.weight". Tensors become the file's tensors; other leaves go into __metadata__, whose
-- values the format requires to be strings:
--   strings            stored as they are, so other tools read them unchanged;
--   numbers, booleans  stored as text ("0.001", "true"), with their type recorded in one more
--                      entry, "__ember_types__", a JSON object {"optim.lr": "number", ...};
--   int64/uint64 cdata stored as decimal text, types "int64" / "uint64";
--   empty tables       recorded in __ember_types__ as "table", so they come back too;
--   dotted keys        a table whose own keys hold dots (a state_dict, {['1.weight'] = w}) is
--                      recorded as "flat": load gives back its keys as they were.
-- On load, the dotted keys rebuild the nesting, and every key that is an integer written
-- plainly ("0", "12", not "012") becomes a number: saved arrays come back as arrays, and a
-- PyTorch "layers.0.weight" is t.layers[0].weight. Files from other tools load the
-- same way; their metadata values are strings.
local ffi = require 'ffi'
local core = require 'ember.core'
local tensor = require 'ember.tensor'

local C = core.C
local is_tensor = tensor.is_tensor

local M = {}

local TYPES_KEY = '__ember_types__'
local i64_ct, u64_ct = ffi.typeof('int64_t'), ffi.typeof('uint64_t')

-- ---- a little JSON, for the __ember_types__ entry (a flat object of strings) ----------------
local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ('\\u%04x'):format(c:byte())
  end) .. '"'
end

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
    0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local simple = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r',
  t = '\t' }

-- Decodes {"k": "v", ...}; returns nil and a reason for anything else.
local function decode_flat_object(s)
  local pos = 1
  local function ws() pos = s:find('[^ \t\r\n]', pos) or #s + 1 end
  local function str()
    if s:sub(pos, pos) ~= '"' then return nil, 'expected a string at byte ' .. pos end
    pos = pos + 1
    local parts = {}
    while true do
      local c = s:sub(pos, pos)
      if c == '' then return nil, 'unterminated string' end
      if c == '"' then pos = pos + 1; break end
      if c == '\\' then
        local e = s:sub(pos + 1, pos + 1)
        if simple[e] then
          parts[#parts + 1] = simple[e]; pos = pos + 2
        elseif e == 'u' then
          local hex = s:sub(pos + 2, pos + 5)
          if not hex:match('^%x%x%x%x$') then return nil, 'bad \\u escape' end
          local cp = tonumber(hex, 16)
          pos = pos + 6
          if cp >= 0xD800 and cp <= 0xDBFF and s:sub(pos, pos + 1) == '\\u' then
            local lo = tonumber(s:sub(pos + 2, pos + 5), 16)
            if lo and lo >= 0xDC00 and lo <= 0xDFFF then
              cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
              pos = pos + 6
            end
          end
          parts[#parts + 1] = utf8_char(cp)
        else
          return nil, 'bad escape'
        end
      else
        local j = s:find('["\\]', pos) or #s + 1
        parts[#parts + 1] = s:sub(pos, j - 1)
        pos = j
      end
    end
    return table.concat(parts)
  end
  local out = {}
  ws()
  if s:sub(pos, pos) ~= '{' then return nil, "expected '{'" end
  pos = pos + 1
  ws()
  if s:sub(pos, pos) == '}' then pos = pos + 1; ws(); return pos > #s and out or nil end
  while true do
    ws()
    local k, err = str()
    if not k then return nil, err end
    ws()
    if s:sub(pos, pos) ~= ':' then return nil, "expected ':'" end
    pos = pos + 1
    ws()
    local v
    v, err = str()
    if not v then return nil, err end
    out[k] = v
    ws()
    local c = s:sub(pos, pos)
    pos = pos + 1
    if c == '}' then break end
    if c ~= ',' then return nil, "expected ',' or '}'" end
  end
  ws()
  if pos <= #s then return nil, 'text after the object' end
  return out
end

-- ---- leaves as text -------------------------------------------------------------------------
-- The shortest text that reads back as the same double.
local function number_text(v)
  if v ~= v then return 'nan' end
  if v == math.huge then return 'inf' end
  if v == -math.huge then return '-inf' end
  for digits = 15, 17 do
    local s = ('%.' .. digits .. 'g'):format(v)
    if tonumber(s) == v then return s end
  end
  return ('%.17g'):format(v)
end

local function parse_number(s)
  if s == 'nan' then return 0 / 0 end
  if s == 'inf' then return math.huge end
  if s == '-inf' then return -math.huge end
  return tonumber(s)
end

local function parse_int64(s, ct)
  local neg, digits = s:match('^(%-?)(%d+)$')
  if not digits or (neg == '-' and ct == u64_ct) then return nil end
  local v = ffi.new(ct, 0)
  for i = 1, #digits do v = v * 10 + (digits:byte(i) - 48) end
  if neg == '-' then v = -v end
  if tostring(v):gsub('U?LL$', '') ~= s then return nil end -- overflowed
  return v
end

-- ---- save -----------------------------------------------------------------------------------
local function key_text(k, path)
  if type(k) == 'string' then
    if k == '' or k:find('\0', 1, true) then
      error(("save: key %q at '%s' cannot be empty or hold a NUL byte"):format(k, path), 0)
    end
    return k
  end
  if type(k) == 'number' and k >= 0 and k == math.floor(k) and k < 2 ^ 53 then
    return ('%d'):format(k)
  end
  error(("save: key %s at '%s' is not a string or an integer >= 0"):format(tostring(k), path), 0)
end

local function flatten(obj, prefix, out, seen)
  if seen[obj] then
    error(("save: the table at '%s' contains itself"):format(prefix == '' and '(root)' or prefix), 0)
  end
  seen[obj] = true
  local keys, dotted = {}, nil
  for k in pairs(obj) do
    keys[#keys + 1] = k
    if type(k) == 'string' and k:find('.', 1, true) then dotted = k end
  end
  if #keys == 0 and prefix ~= '' then out.types[prefix] = 'table' end
  -- A table with dotted keys (a state_dict: {['1.weight'] = w}) is saved as it is and marked
  -- "flat", so that load gives back its keys rather than nesting them.
  if dotted then out.types[prefix] = 'flat' end
  for _, k in ipairs(keys) do
    local v = obj[k]
    local name = (prefix == '' and '' or prefix .. '.') .. key_text(k, prefix == '' and '(root)' or prefix)
    if dotted and type(v) == 'table' then
      error(("save: the table at '%s' has dotted keys ('%s'), so its values cannot be tables " ..
        "(one is at '%s')"):format(prefix == '' and '(root)' or prefix, dotted, name), 0)
    end
    if name == '__metadata__' or name == TYPES_KEY then
      error(("save: '%s' is reserved by the file format"):format(name), 0)
    end
    if out.used[name] then error(("save: key '%s' appears twice"):format(name), 0) end
    out.used[name] = true
    local tv = type(v)
    if is_tensor(v) then
      out.names[#out.names + 1] = name
      if C.em_dtype_is_block(v.ptr.dtype_id) ~= 0 then
        -- quantized blocks: safetensors has no such type, so the file holds their bytes (U8,
        -- the last dimension in bytes) and __ember_types__ says "dtype:q4_k"; other readers
        -- see the raw blocks
        out.types[name] = 'dtype:' .. core.dtype_names[v.ptr.dtype_id]
        v = core.own(C.em_view_dtype(v:contiguous().ptr, C.EM_UINT8))
      end
      out.tensors[#out.tensors + 1] = v
    elseif tv == 'table' then
      flatten(v, name, out, seen)
    elseif tv == 'string' then
      if v:find('\0', 1, true) then
        error(("save: the string at '%s' holds a NUL byte"):format(name), 0)
      end
      out.meta[name] = v
    elseif tv == 'number' then
      out.meta[name] = number_text(v)
      out.types[name] = 'number'
    elseif tv == 'boolean' then
      out.meta[name] = tostring(v)
      out.types[name] = 'boolean'
    elseif tv == 'cdata' and (ffi.istype(i64_ct, v) or ffi.istype(u64_ct, v)) then
      out.meta[name] = (tostring(v):gsub('U?LL$', ''))
      out.types[name] = ffi.istype(i64_ct, v) and 'int64' or 'uint64'
    else
      error(("save: cannot save a %s at '%s' (expected tensors, numbers, strings, booleans and " ..
        'tables of them)'):format(tv, name), 0)
    end
  end
  seen[obj] = nil
end

-- save(path, obj): obj is a table of tensors, numbers, strings, booleans and nested tables.
function M.save(path, obj)
  if type(path) ~= 'string' then error('save: expected a file path, got ' .. type(path), 2) end
  if type(obj) ~= 'table' then
    error('save: expected a table of tensors and values, got ' .. (is_tensor(obj) and 'a tensor'
      or type(obj)) .. (is_tensor(obj) and ' (wrap it: save(path, {x = x}))' or ''), 2)
  end
  local out = { names = {}, tensors = {}, meta = {}, types = {}, used = {} }
  local ok, err = pcall(flatten, obj, '', out, {})
  if not ok then error(err, 2) end

  local n = #out.names
  local names = ffi.new('const char*[?]', math.max(n, 1))
  local ptrs = ffi.new('em_tensor*[?]', math.max(n, 1))
  for i = 1, n do
    names[i - 1] = out.names[i]
    ptrs[i - 1] = out.tensors[i].ptr
  end
  local mkeys = {}
  for k in pairs(out.meta) do mkeys[#mkeys + 1] = k end
  table.sort(mkeys)
  local tkeys = {}
  for k in pairs(out.types) do tkeys[#tkeys + 1] = k end
  table.sort(tkeys)
  local values = {}
  for i, k in ipairs(mkeys) do values[i] = out.meta[k] end
  if #tkeys > 0 then
    local parts = {}
    for i, k in ipairs(tkeys) do parts[i] = json_string(k) .. ':' .. json_string(out.types[k]) end
    mkeys[#mkeys + 1] = TYPES_KEY
    values[#values + 1] = '{' .. table.concat(parts, ',') .. '}'
  end
  local m = #mkeys
  local ckeys = ffi.new('const char*[?]', math.max(m, 1))
  local cvalues = ffi.new('const char*[?]', math.max(m, 1))
  for i = 1, m do
    ckeys[i - 1] = mkeys[i]
    cvalues[i - 1] = values[i]
  end
  -- The Lua strings and tensors stay referenced by out/mkeys/values through the call.
  local rc = C.em_safetensors_save(path, n, names, ptrs, m, ckeys, cvalues)
  local _ = { out, mkeys, values }
  if rc ~= 0 then core.raise(2) end
end

-- ---- load -----------------------------------------------------------------------------------
local function key_of(part)
  if (part == '0' or part:match('^[1-9]%d*$')) and #part < 16 then return tonumber(part) end
  return part
end

-- The path of a name: its dot-separated parts, except that the rest of a name under a table
-- saved "flat" is one key.
local function split(key, flat)
  local parts, pos = {}, 1
  if flat[''] then return { key_of(key) } end
  while true do
    local dot = key:find('.', pos, true)
    if not dot then break end
    parts[#parts + 1] = key_of(key:sub(pos, dot - 1))
    if flat[key:sub(1, dot - 1)] then
      pos = dot + 1
      parts[#parts + 1] = key_of(key:sub(pos))
      return parts
    end
    pos = dot + 1
  end
  parts[#parts + 1] = key_of(key:sub(pos))
  return parts
end

local function insert(root, key, value, path, flat)
  local parts = split(key, flat)
  local t = root
  for i = 1, #parts - 1 do
    local p = parts[i]
    local nxt = t[p]
    if nxt == nil then
      nxt = {}
      t[p] = nxt
    elseif type(nxt) ~= 'table' then
      error(("load: key '%s' in %s conflicts with the value at '%s'"):format(key, path,
        table.concat(parts, '.', 1, i)), 0)
    end
    t = nxt
  end
  local last = parts[#parts]
  if t[last] ~= nil then
    if type(t[last]) == 'table' and type(value) == 'table' and next(value) == nil then return end
    error(("load: key '%s' in %s conflicts with another key"):format(key, path), 0)
  end
  t[last] = value
end

local function typed_value(s, kind, key, path)
  local v
  if kind == 'table' or kind == 'flat' then
    error(("load: %s records '%s' as a table but it holds a value"):format(path, key), 0)
  elseif kind == 'number' then v = parse_number(s)
  elseif kind == 'boolean' then
    if s == 'true' then v = true elseif s == 'false' then v = false end
  elseif kind == 'int64' then v = parse_int64(s, i64_ct)
  elseif kind == 'uint64' then v = parse_int64(s, u64_ct)
  else
    error(("load: %s records an unknown type '%s' for '%s'"):format(path, tostring(kind), key), 0)
  end
  if v == nil then
    error(("load: metadata '%s' in %s is not a %s: '%s'"):format(key, path, kind, s), 0)
  end
  return v
end

local function read_file(path, opts)
  local f = C.em_safetensors_open(path)
  if f == nil then error(ffi.string(C.em_last_error()), 0) end
  f = ffi.gc(f, C.em_safetensors_close)
  local meta = {}
  for i = 0, tonumber(C.em_safetensors_metadata_count(f)) - 1 do
    meta[ffi.string(C.em_safetensors_metadata_key(f, i))] =
      ffi.string(C.em_safetensors_metadata_value(f, i))
  end
  local types = {}
  if meta[TYPES_KEY] then
    local t, why = decode_flat_object(meta[TYPES_KEY])
    if not t then error(('load: %s has a malformed %s entry: %s'):format(path, TYPES_KEY, why), 0) end
    types = t
    meta[TYPES_KEY] = nil
  end
  local entries = {}
  for i = 0, tonumber(C.em_safetensors_count(f)) - 1 do
    local name = ffi.string(C.em_safetensors_name(f, i))
    local t = core.own(C.em_safetensors_tensor(f, i), C.em_safetensors_tensor, f, i)
    local block = types[name] and types[name]:match('^dtype:(.*)$')
    if block then
      -- quantized blocks saved as bytes: view them as their block dtype again
      types[name] = nil
      local id = core.dtype_id(block, 'load')
      if t:dtype() ~= 'uint8' or C.em_dtype_is_block(id) == 0 then
        error(("load: tensor '%s' in %s is marked as %s blocks but holds %s"):format(name, path,
          block, t:dtype()), 0)
      end
      local v = C.em_view_dtype(t.ptr, id)
      if v == nil then
        error(("load: tensor '%s' in %s: its bytes are not whole %s blocks (%s)"):format(name,
          path, block, ffi.string(C.em_last_error())), 0)
      end
      t = core.own(v)
    end
    if opts.device ~= nil then t = t:to(opts.device) end
    entries[#entries + 1] = { name, t }
  end
  ffi.gc(f, nil)
  C.em_safetensors_close(f)
  for k, s in pairs(meta) do
    local kind, v = types[k], s
    if kind then v = typed_value(s, kind, k, path) end
    entries[#entries + 1] = { k, v }
  end
  local flat = {}
  for k, kind in pairs(types) do
    if kind == 'table' then entries[#entries + 1] = { k, {} } end
    if kind == 'flat' then flat[k] = true end
  end
  return entries, flat
end

-- load(path [, {device = 'cpu', flat = false}]): the table save wrote (or any safetensors file,
-- nested by its dotted names). flat = true keeps the file's names as keys instead.
function M.load(path, opts)
  if type(path) ~= 'string' then error('load: expected a file path, got ' .. type(path), 2) end
  if opts ~= nil and type(opts) ~= 'table' then
    error('load: expected an options table {device=, flat=}, got ' .. type(opts), 2)
  end
  opts = require('ember.util.names').check_options('load', opts, { 'device', 'flat' })
  if opts.device ~= nil then core.device_id(opts.device, 'load') end
  local ok, entries, flat = pcall(read_file, path, opts)
  if not ok then error(entries, 2) end
  local root = {}
  -- Tables first, so that an empty table never shadows the entries below it.
  table.sort(entries, function(a, b) return a[1] < b[1] end)
  for _, e in ipairs(entries) do
    if opts.flat then
      root[e[1]] = e[2]
    else
      local ok2, err = pcall(insert, root, e[1], e[2], path, flat)
      if not ok2 then error(err, 2) end
    end
  end
  return root
end

return M
