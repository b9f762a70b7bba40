-- ember.util.names: close-name suggestions and the one options-table check. Every function
-- that takes an options table ({dtype = ..., bias = false}) checks it here, so a misspelt key
-- is an error that names it and the closest valid key, worded the same everywhere:
--   Linear: unknown option biass (did you mean bias? expected one of bias, dtype, device)
-- The REPL's `?name`, unknown tensor methods and unknown ember fields use the same
-- suggestions.
-- The REPL's help uses these too, and must keep working when the user redefines the standard
-- globals, so they are taken once here.
local tostring, type, pairs, ipairs, error, math, table = tostring, type, pairs, ipairs, error,
  math, table
local min, max, floor, sort, concat = math.min, math.max, math.floor, table.sort, table.concat

local M = {}

-- Edits (insert, delete, substitute, swap two neighbours) from a to b. A swap, the commonest
-- typo, counts half, so that 'zerso' is nearer 'zeros' than 'zero'.
function M.distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 0, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = min(v, d[i - 2][j - 2] + 0.5)
      end
      d[i][j] = v
    end
  end
  return d[#a][#b]
end

-- Up to `limit` (6) of `candidates` (a list) close to `name`: a small edit distance
-- (about a third of its letters), or starting with it (3 letters or more).
function M.closest(name, candidates, limit)
  local q = tostring(name):lower()
  local scored = {}
  for _, n in ipairs(candidates) do
    local l = n:lower()
    local d = M.distance(q, l)
    local near = d <= max(1, floor((#q + 1) / 3))
    if near or (#q >= 3 and l:sub(1, #q) == q) then
      scored[#scored + 1] = { n, near and d or #q }
    end
  end
  sort(scored, function(a, b) return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1]) end)
  local out = {}
  for i = 1, min(limit or 6, #scored) do out[i] = scored[i][1] end
  return out
end

-- " (did you mean 'x'?)" for the closest candidate, or "".
function M.hint(name, candidates)
  local near = M.closest(name, candidates, 3)
  if #near == 0 then return '' end
  return " (did you mean '" .. concat(near, "', '") .. "'?)"
end

local function keys_of(allowed)
  local list = {}
  if allowed[1] ~= nil then
    for _, k in ipairs(allowed) do list[#list + 1] = k end
  else
    for k in pairs(allowed) do list[#list + 1] = k end
  end
  if allowed[1] == nil then sort(list) end -- a list keeps its order
  return list
end

-- Checks an options table: nil gives {}; anything but a plain table, or a key not in `allowed`
-- (a list or a set of names), raises an error naming fn, at `level` as error's level in the
-- caller of check_options (default 2: the caller's caller; 0: no position, for a caller that
-- adds it when it raises the message again). Returns opts, or {} for nil.
function M.check_options(fn, opts, allowed, level)
  level = level == 0 and 0 or (level or 2) + 1
  if opts == nil then return {} end
  if type(opts) ~= 'table' then
    error(('%s: expected an options table, got %s'):format(fn, type(opts)), level)
  end
  local set = allowed
  if allowed[1] ~= nil then
    set = {}
    for _, k in ipairs(allowed) do set[k] = true end
  end
  for k in pairs(opts) do
    if not set[k] then
      local list = keys_of(allowed)
      local near = type(k) == 'string' and M.closest(k, list, 1) or {}
      local hint = #near > 0 and ('did you mean ' .. near[1] .. '? ') or ''
      error(('%s: unknown option %s (%sexpected one of %s)'):format(fn, tostring(k), hint,
        concat(list, ', ')), level)
    end
  end
  return opts
end

return M
