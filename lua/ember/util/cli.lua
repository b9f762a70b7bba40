-- ember.util.cli: command-line options for scripts. A script declares its options once (name,
-- default, help); parse() reads `--name value`, `--flag`, `--config file.lua` (a Lua file
-- returning a table of options) and trailing `key=value` overrides, checks types against the
-- defaults, and prints --help from the same declarations.
local M = {}

local function convert(name, text, default, kind)
  kind = kind or type(default)
  if kind == 'number' then
    local n = tonumber(text)
    if n == nil then error(('option --%s: expected a number, got %q'):format(name, tostring(text)), 0) end
    return n
  elseif kind == 'boolean' then
    if text == true or text == 'true' or text == '1' or text == 'yes' then return true end
    if text == false or text == 'false' or text == '0' or text == 'no' then return false end
    error(('option --%s: expected true or false, got %q'):format(name, tostring(text)), 0)
  end
  return text
end

-- spec: { {name, default, help [, kind]}, ... } (kind overrides the default's type, e.g.
-- 'string' for an option whose default is nil). Returns the options table, or nil and the help
-- text when --help was given.
function M.parse(args, spec, usage)
  local defs, opts = {}, {}
  for _, s in ipairs(spec) do
    defs[s[1]] = s
    opts[s[1]] = s[2]
  end
  local function help()
    local lines = { usage or 'usage: ember script.lua [options] [key=value ...]', '', 'options:' }
    for _, s in ipairs(spec) do
      local d = s[2] == nil and '' or (' (default: ' .. tostring(s[2]) .. ')')
      lines[#lines + 1] = ('  --%-14s %s%s'):format(s[1]:gsub('_', '-'), s[3], d)
    end
    lines[#lines + 1] = '  --config FILE   a Lua file returning a table of options'
    lines[#lines + 1] = '  key=value       overrides an option (after --config)'
    lines[#lines + 1] = '  --help          this text'
    return table.concat(lines, '\n')
  end
  local function set(name, value)
    name = name:gsub('-', '_')
    local s = defs[name]
    if s == nil then error(('unknown option %s (see --help)'):format(name), 0) end
    opts[name] = convert(name, value, s[2], s[4])
  end
  local i = 1
  local overrides = {}
  while i <= #args do
    local a = args[i]
    if a == '--help' or a == '-h' then return nil, help() end
    local name = a:match('^%-%-(.+)$')
    if name == 'config' then
      local path = args[i + 1]
      if not path then error('option --config: expected a file name', 0) end
      local chunk, err = loadfile(path)
      if not chunk then error('--config: ' .. err, 0) end
      local ok, cfg = pcall(chunk)
      if not ok then error('--config ' .. path .. ': ' .. tostring(cfg), 0) end
      if type(cfg) ~= 'table' then error('--config ' .. path .. ': expected the file to return a table', 0) end
      for k, v in pairs(cfg) do set(k, v) end
      i = i + 2
    elseif name then
      local s = defs[name:gsub('-', '_')]
      if s and (s[4] or type(s[2])) == 'boolean' and (args[i + 1] == nil or args[i + 1]:match('^%-%-')) then
        set(name, true)
        i = i + 1
      else
        if args[i + 1] == nil then error(('option --%s: expected a value'):format(name), 0) end
        set(name, args[i + 1])
        i = i + 2
      end
    elseif a:match('^[%w_%-]+=') then
      overrides[#overrides + 1] = a
      i = i + 1
    else
      error(('unexpected argument %q (see --help)'):format(a), 0)
    end
  end
  for _, o in ipairs(overrides) do
    local k, v = o:match('^([%w_%-]+)=(.*)$')
    set(k, v)
  end
  return opts
end

return M
