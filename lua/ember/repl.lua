-- ember.repl: the Lua half of the REPL (the C half is runtime/cli/).
--  * complete(text_before_cursor): tab-completion candidates (globals, keywords, table fields
--    along __index chains, tensor methods), called from readline's completion callback.
--  * help(name_or_value): the reference entry from docs/api/*.md and docs/*.md, as `?name`
--    shows it; ember.help is this function.
--  * format / print_results: how the REPL prints values (tables pretty-printed, tensors as
--    tostring gives them).
-- It loads before `ember` finishes loading (init.lua requires it for ember.help), so it reaches
-- ember through package.loaded, lazily.
local M = {}

-- The REPL must keep working when the user redefines globals (select = nil, type = ...).
local select, tostring, type, pairs, ipairs, next, pcall = select, tostring, type, pairs,
  ipairs, next, pcall
local getmetatable, rawget, rawequal = getmetatable, rawget, rawequal
local string, table, math, io, package, debug = string, table, math, io, package, debug
local _G = _G

local function ember() return package.loaded.ember end

local function is_tensor(v)
  local E = ember()
  return type(v) == 'cdata' and E ~= nil and E.is_tensor ~= nil and E.is_tensor(v)
end

-- ---- completion -----------------------------------------------------------------------------

local keywords = {}
for _, k in ipairs({ 'and', 'break', 'do', 'else', 'elseif', 'end', 'false', 'for', 'function',
  'goto', 'if', 'in', 'local', 'nil', 'not', 'or', 'repeat', 'return', 'then', 'true', 'until',
  'while' }) do
  keywords[k] = true
end

local function is_name(s) return type(s) == 'string' and s:match('^[%a_][%w_]*$') ~= nil end

local function index(v, k)
  local ok, r = pcall(function() return v[k] end)
  if ok then return r end
  return nil
end

-- Calls f(key, value) for the fields reachable from v with '.' or ':': a tensor's methods
-- (ember.Tensor); a table's own fields, then those of the tables its metatable's __index
-- names, and so on up the chain (classes, inheritance); for other values (strings, files) the
-- __index chain of their metatable.
local function each_field(v, f)
  if is_tensor(v) then
    for k, m in pairs(ember().Tensor) do f(k, m) end
    return
  end
  local t = v
  if type(t) ~= 'table' then
    local mt = getmetatable(t)
    t = type(mt) == 'table' and rawget(mt, '__index') or nil
  end
  local seen = {}
  while type(t) == 'table' and not seen[t] do
    seen[t] = true
    for k, val in next, t do f(k, val) end
    local mt = getmetatable(t)
    t = type(mt) == 'table' and rawget(mt, '__index') or nil
  end
end

-- Resolves "a.b.c" from the globals; nil when a part is missing or not a plain name.
local function resolve(path, env)
  local v = env
  for part in (path .. '.'):gmatch('([^.]*)%.') do
    if not is_name(part) then return nil end
    v = index(v, part)
    if v == nil then return nil end
  end
  return v
end

local function callable(v)
  if type(v) == 'function' then return true end
  local mt = (type(v) == 'table' or type(v) == 'userdata') and getmetatable(v)
  return type(mt) == 'table' and rawget(mt, '__call') ~= nil
end

-- The candidate words completing the word before the cursor (letters, digits, '_', '.' and
-- ':'), each a full word: complete('x = ember.zer') -> {'ember.zeros', 'ember.zeros_like'}.
-- Names are looked up in env (default: the globals, where the REPL runs chunks). The second
-- result is what to type after a unique candidate: a space after a keyword, nothing after a
-- name (a '.', ':' or '(' usually follows).
function M.complete(text, env)
  env = env or _G
  local word = tostring(text or ''):match('[%w_%.:]*$')
  local head, sep, prefix = word:match('^(.*)([.:])([%w_]*)$')
  if head == nil then prefix = word end
  if prefix:match('^%d') then return {}, '' end
  local hidden = prefix:sub(1, 1) ~= '_' -- names starting with '_' only when asked for
  local found, out = {}, {}
  local function offer(k, v, lead)
    if not is_name(k) or k:sub(1, #prefix) ~= prefix then return end
    if lead ~= '' and keywords[k] then return end -- x:repeat would not parse
    if hidden and k:sub(1, 1) == '_' then return end
    if sep == ':' and not callable(v) then return end
    local w = lead .. k
    if not found[w] then
      found[w] = true
      out[#out + 1] = w
    end
  end
  if head == nil then
    each_field(env, function(k, v) offer(k, v, '') end)
    for k in pairs(keywords) do offer(k, nil, '') end
  else
    if head:find(':', 1, true) then return {}, '' end -- x:m.y is not a path
    local v = resolve(head, env)
    if v == nil then return {}, '' end
    each_field(v, function(k, val) offer(k, val, head .. sep) end)
    -- ember's __index (a function) makes every tensor method an ember function too
    -- (ember.reshape(x, 4) is x:reshape(4)): offered when ember's own fields give nothing, so
    -- that ember.zer still completes to ember.zeros and not to the in-place zero_.
    local E = ember()
    if #out == 0 and E ~= nil and rawequal(v, E) and type(E.Tensor) == 'table' then
      for k, m in pairs(E.Tensor) do offer(k, m, head .. sep) end
    end
  end
  table.sort(out)
  local append = (#out == 1 and head == nil and keywords[out[1]]) and ' ' or ''
  return out, append
end

-- ---- help -----------------------------------------------------------------------------------

-- Where the docs are: M.docs_dir if set, else what the `ember` program found
-- (package.ember_docs_dir), else those installed with this package, else the docs folder next
-- to this package's lua folder.
local function docs_dir()
  if M.docs_dir then return M.docs_dir end
  if package.ember_docs_dir then return package.ember_docs_dir end
  local installed = require('ember.core').installed
  if installed then return installed.docs end
  local here = debug.getinfo(1, 'S').source:match('^@(.*)/[^/]*$') or '.'
  return here .. '/../../docs'
end

-- The *.md files of a folder, sorted: through libc's glob (no subprocess), else `ls`. The
-- functions get private names (asm labels), so another module may declare glob its own way.
local glob_ready = pcall(require('ffi').cdef, [[
typedef struct ember_repl_glob {
  size_t gl_pathc; char **gl_pathv; size_t gl_offs; int gl_flags;
  void *gl_closedir, *gl_readdir, *gl_opendir, *gl_lstat, *gl_stat;
} ember_repl_glob;
int ember_repl_glob_files(const char *pattern, int flags, void *errfunc, ember_repl_glob *g)
  __asm__("glob");
void ember_repl_globfree(ember_repl_glob *g) __asm__("globfree");
]])

local function markdown_files(dir)
  local files = {}
  if glob_ready then
    local ffi = require 'ffi'
    local g = ffi.new('ember_repl_glob')
    if ffi.C.ember_repl_glob_files(dir .. '/*.md', 0, nil, g) == 0 then
      for i = 0, tonumber(g.gl_pathc) - 1 do files[#files + 1] = ffi.string(g.gl_pathv[i]) end
    end
    ffi.C.ember_repl_globfree(g)
  else
    local p = io.popen("ls -1 '" .. dir:gsub("'", "'\\''") .. "' 2>/dev/null")
    if p then
      for name in p:lines() do
        if name:match('%.md$') then files[#files + 1] = dir .. '/' .. name end
      end
      p:close()
    end
  end
  table.sort(files)
  return files
end

-- The names a level-3 heading defines: "add, add_" -> add, add_; "ember (the program)" ->
-- ember; "`x:reshape(...)`" -> x:reshape; "x[i], x[{...}]" -> x[i], x[{...}] (as written).
local function heading_names(heading)
  local names = {}
  heading = heading:gsub('%b()', ''):gsub('`', '')
  for part in (heading .. ','):gmatch('([^,]*),') do
    local name = part:match('^%s*(.-)%s*$')
    if name ~= '' then names[#names + 1] = name end
  end
  return names
end

local function trim_lines(lines)
  while #lines > 0 and lines[#lines]:match('^%s*$') do lines[#lines] = nil end
  local first = 1
  while first <= #lines and lines[first]:match('^%s*$') do first = first + 1 end
  return table.concat(lines, '\n', first)
end

-- Reads the entries of one file: each level-3 heading outside code fences, with the text up
-- to the next heading of any level.
local function parse_file(path, short, entries)
  local f = io.open(path, 'r')
  if not f then return end
  local text = f:read('*a')
  f:close()
  local fence, entry = false, nil
  for line in (text:gsub('\r', '') .. '\n'):gmatch('([^\n]*)\n') do
    if line:match('^%s*```') or line:match('^%s*~~~') then fence = not fence end
    local hashes, title = line:match('^(#+)%s+(.-)%s*#*%s*$')
    if hashes and not fence then
      entry = nil
      if #hashes == 3 then
        local names = heading_names(title)
        if #names > 0 then
          entry = { names = names, title = title, file = short, lines = {} }
          entries[#entries + 1] = entry
        end
      end
    elseif entry then
      entry.lines[#entry.lines + 1] = line
    end
  end
end

local cache = nil

-- The help index: entries in file order (docs/api/*.md, then docs/*.md) and a name lookup.
local function help_index()
  local dir = docs_dir()
  if cache and cache.dir == dir then return cache end
  local entries = {}
  for _, sub in ipairs({ 'api/', '' }) do
    for _, path in ipairs(markdown_files(dir .. '/' .. sub:gsub('/$', ''))) do
      parse_file(path, sub .. path:match('[^/]*$'), entries)
    end
  end
  local by_name, names = {}, {}
  local function add(name, e)
    local list = by_name[name]
    if not list then
      list = {}
      by_name[name] = list
      names[#names + 1] = name
    end
    if list[#list] ~= e then list[#list + 1] = e end
  end
  for _, e in ipairs(entries) do
    e.text = trim_lines(e.lines)
    e.lines = nil
    for _, n in ipairs(e.names) do
      add(n, e)
      local tail = n:match('[.:]([%w_]+)$') -- x:reshape is also found as reshape
      if tail and not by_name[tail] then add(tail, e) end
    end
  end
  table.sort(names)
  cache = { dir = dir, entries = entries, by_name = by_name, names = names }
  return cache
end

function M.reload_help() cache = nil end

-- Entries for a name as users write it: 'zeros', 'ember.zeros', 'x:reshape', 'reshape()'.
local function lookup(idx, name)
  name = name:gsub('^%s+', ''):gsub('%s*%(.*$', ''):gsub('%s+$', '')
  local tries = { name, (name:gsub('^ember%.', '')), name:match('[.:]([%w_]+)$') }
  for _, n in ipairs(tries) do
    if idx.by_name[n] then return idx.by_name[n] end
  end
  local lower = name:lower()
  for _, n in ipairs(idx.names) do
    if n:lower() == lower then return idx.by_name[n] end
  end
  return nil
end

-- Names close to `name` (its last word): ember.util.names' suggestions, shared with the
-- errors for misspelt options, fields and methods.
local closest = require('ember.util.names').closest
local function suggestions(idx, name)
  local q = name:match('([%w_]+)$') or name
  return closest(q, idx.names, 6)
end

local function wrap(words, indent, width)
  local lines, line = {}, indent
  for i, w in ipairs(words) do
    local piece = w .. (i < #words and ',' or '')
    if #line > #indent and #line + 1 + #piece > width then
      lines[#lines + 1] = line
      line = indent .. piece
    else
      line = line .. (#line > #indent and ' ' or '') .. piece
    end
  end
  lines[#lines + 1] = line
  return table.concat(lines, '\n')
end

-- The list `?` shows: every documented name, by file.
function M.help_list()
  local idx = help_index()
  if #idx.entries == 0 then return 'no help found (looked in ' .. docs_dir() .. ')' end
  local out, order, by_file = { 'Help is available for these names (?name shows one):' }, {}, {}
  for _, e in ipairs(idx.entries) do
    if not by_file[e.file] then
      by_file[e.file] = {}
      order[#order + 1] = e.file
    end
    for _, n in ipairs(e.names) do table.insert(by_file[e.file], n) end
  end
  for _, file in ipairs(order) do
    out[#out + 1] = file:gsub('%.md$', '') .. ':'
    out[#out + 1] = wrap(by_file[file], '  ', 80)
  end
  return table.concat(out, '\n')
end

-- The help text for a name, and whether there was an entry for it.
function M.help_text(name)
  local idx = help_index()
  local found = lookup(idx, name)
  if not found then
    local near = suggestions(idx, name)
    local msg = ("no help for '%s'"):format(name)
    if #near > 0 then return msg .. '; did you mean ' .. table.concat(near, ', ') .. '?', false end
    return msg .. ' (? lists the names that have help)', false
  end
  local parts = {}
  for i, e in ipairs(found) do
    local head = e.title
    if #found > 1 then head = head .. '    (' .. e.file .. ')' end
    parts[i] = head .. '\n' .. e.text
  end
  return table.concat(parts, '\n\n'), true
end

-- The names under which a value can be found: in ember, ember.Tensor, ember's sub-tables,
-- and the globals (with their library tables).
local function names_of(v)
  local names = {}
  local function scan(t, lead, depth)
    if type(t) ~= 'table' then return end
    for k, val in pairs(t) do
      if type(k) == 'string' then
        if rawequal(val, v) then names[#names + 1] = lead .. k end
        if depth > 0 and type(val) == 'table' and val ~= t and k ~= '_G' and k ~= 'loaded' then
          scan(val, lead .. k .. '.', depth - 1)
        end
      end
    end
  end
  local E = ember()
  if E then
    scan(E, '', 1)
    scan(E.Tensor, '', 0)
  end
  scan(_G, '', 1)
  table.sort(names, function(a, b) return #a < #b or (#a == #b and a < b) end)
  return names
end

local function describe(v)
  if type(v) == 'string' then return v end
  local names = names_of(v)
  local idx = help_index()
  for _, n in ipairs(names) do
    if lookup(idx, n) then return n end
  end
  return nil, names[1]
end

-- help(name_or_function): prints the help entry; with no argument, the names that have one.
-- help('zeros'), help('x:reshape'), help(ember.zeros) and help(x.reshape) all work.
function M.help(v)
  local text
  if v == nil then
    text = M.help_list()
  else
    local name, known = describe(v)
    if name then
      text = M.help_text(name)
    elseif known then
      text = ("no help for '%s'"):format(known)
    else
      text = ('no help for this %s (%s)'):format(type(v), tostring(v))
    end
  end
  io.stdout:write(text, '\n')
  io.stdout:flush()
end

-- The REPL's `?` line: `?` lists the names, `?name` shows one.
function M.help_command(arg)
  arg = tostring(arg or ''):gsub('^%s+', ''):gsub('%s+$', '')
  if arg == '' then M.help() else M.help(arg) end
end

-- ---- printing results -----------------------------------------------------------------------

M.max_items = 100 -- fields shown per table before '...'
M.max_depth = 4   -- nesting shown before '{...}'
M.width = 80      -- a table longer than this on one line is shown one field per line

local function quote(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ['\n'] = '\\n', ['\t'] = '\\t', ['\r'] = '\\r', ['"'] = '\\"', ['\\'] = '\\\\' }
    return named[c] or ('\\%03d'):format(c:byte())
  end) .. '"'
end

local function tensor_summary(x)
  local dev = x:device()
  return ('<tensor %s [%s]%s>'):format(x:dtype(), table.concat(x:size(), ', '),
    dev ~= 'cpu' and ' ' .. dev or '')
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == 'table' and rawget(mt, '__tostring') ~= nil
end

local type_rank = { number = 1, string = 2, boolean = 3 }

local function key_less(a, b)
  local ra, rb = type_rank[type(a)] or 4, type_rank[type(b)] or 4
  if ra ~= rb then return ra < rb end
  if ra <= 2 then return a < b end
  return tostring(a) < tostring(b)
end

local format_value

local function format_table(t, indent, depth, seen)
  if has_tostring(t) then return tostring(t) end
  if seen[t] then return '<cycle>' end
  if next(t) == nil then return '{}' end
  if depth >= M.max_depth then return '{...}' end
  seen[t] = true
  local items, n, shown = {}, #t, 0
  local pad = indent .. '  '
  local function push(s)
    shown = shown + 1
    if shown <= M.max_items then items[#items + 1] = s end
  end
  for i = 1, n do push(format_value(rawget(t, i), pad, depth + 1, seen)) end
  local keys = {}
  for k in next, t do
    if not (type(k) == 'number' and k >= 1 and k <= n and k % 1 == 0) then keys[#keys + 1] = k end
  end
  table.sort(keys, key_less)
  for _, k in ipairs(keys) do
    local ks = is_name(k) and not keywords[k] and k
      or ('[' .. format_value(k, pad, depth + 1, seen) .. ']')
    push(ks .. ' = ' .. format_value(rawget(t, k), pad, depth + 1, seen))
  end
  if shown > M.max_items then items[#items + 1] = ('...(%d more)'):format(shown - M.max_items) end
  seen[t] = nil
  local line = '{' .. table.concat(items, ', ') .. '}'
  if #indent + #line <= M.width and not line:find('\n', 1, true) then return line end
  return '{\n' .. pad .. table.concat(items, ',\n' .. pad) .. '\n' .. indent .. '}'
end

function format_value(v, indent, depth, seen)
  local tv = type(v)
  if tv == 'string' then return quote(v) end
  if tv == 'table' then return format_table(v, indent, depth, seen) end
  if is_tensor(v) then return tensor_summary(v) end
  return tostring(v)
end

-- How the REPL shows one value: strings as they are, tensors as tostring prints them, tables
-- pretty-printed (nested, sorted keys, cycles marked), everything else with tostring.
function M.format(v)
  if type(v) == 'table' then return format_table(v, '', 0, {}) end
  return tostring(v)
end

-- Prints the results of an expression typed at the REPL, separated by tabs.
function M.print_results(...)
  local out = {}
  for i = 1, select('#', ...) do out[i] = M.format((select(i, ...))) end
  io.stdout:write(table.concat(out, '\t'), '\n')
  io.stdout:flush()
end

-- The line the REPL shows when it starts at a terminal.
function M.banner()
  local E = ember()
  local device = E and E.get_default_device and E.get_default_device() or '?'
  return ('Ember %s (%s), default device %s. ?name for help, ? lists the names, Ctrl-D quits.')
    :format(E and E.version or '?', jit and jit.version or _VERSION, device)
end

return M
