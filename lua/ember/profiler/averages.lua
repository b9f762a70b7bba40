-- ember.profiler.averages: prof:key_averages(), the events grouped by name (and by input
-- shapes, or call site), and the table it prints, laid out like PyTorch's.
--
-- A row: key, count, and in microseconds self_cpu_time_total, cpu_time_total, cpu_time (the
-- mean), self_vulkan_time_total, vulkan_time_total, vulkan_time; in bytes
-- self_cpu_memory_usage and cpu_memory_usage (host memory allocated less freed), and
-- self_vulkan_memory_usage and vulkan_memory_usage (the other devices' memory);
-- input_shapes and stack when grouped by them. CPU rows are ops, ranges and backward nodes;
-- kernel rows are GPU dispatches (their Vulkan time only). An event nested in another of the
-- same name on its thread (a range around itself) counts once in cpu_time_total, as PyTorch.
local names = require 'ember.util.names'

local M = {}

local SORT_KEYS = { 'self_cpu_time_total', 'cpu_time_total', 'cpu_time', 'self_vulkan_time_total',
  'vulkan_time_total', 'vulkan_time', 'self_cpu_memory_usage', 'cpu_memory_usage',
  'self_vulkan_memory_usage', 'vulkan_memory_usage', 'count' }

local Averages = {}
Averages.__index = function(a, k)
  if type(k) == 'number' then return rawget(a, 'rows')[k] end -- averages[1] is the first row
  return Averages[k]
end

function M.compute(events, opts, vulkan)
  local by_key, rows = {}, {}
  local self_cpu_total, self_vulkan_total = 0, 0
  for _, e in ipairs(events) do
    local key = e.name
    if opts.group_by_input_shape then key = key .. '\0' .. (e.shapes or '') end
    if opts.group_by_stack_n then key = key .. '\0' .. (e.site or '') end
    local r = by_key[key]
    if r == nil then
      r = { key = e.name, count = 0, self_cpu_time_total = 0, cpu_time_total = 0,
        self_vulkan_time_total = 0, vulkan_time_total = 0, self_cpu_memory_usage = 0,
        cpu_memory_usage = 0, self_vulkan_memory_usage = 0, vulkan_memory_usage = 0,
        is_kernel = e.kind == 'kernel',
        input_shapes = opts.group_by_input_shape and (e.shapes or '') or nil,
        stack = opts.group_by_stack_n and (e.site or '') or nil }
      by_key[key] = r
      rows[#rows + 1] = r
    end
    r.count = r.count + 1
    if e.kind == 'kernel' then
      r.self_vulkan_time_total = r.self_vulkan_time_total + e.duration
      r.vulkan_time_total = r.vulkan_time_total + e.duration
      self_vulkan_total = self_vulkan_total + e.duration
    else
      r.self_cpu_time_total = r.self_cpu_time_total + e.self
      self_cpu_total = self_cpu_total + e.self
      -- recursion: an ancestor of the same name already counts this time
      local p, nested = e.parent, false
      while p and not nested do
        nested = events[p].name == e.name
        p = events[p].parent
      end
      if not nested then
        r.cpu_time_total = r.cpu_time_total + e.duration
        r.vulkan_time_total = r.vulkan_time_total + e.gpu
        r.cpu_memory_usage = r.cpu_memory_usage + e.alloc - e.freed
        r.vulkan_memory_usage = r.vulkan_memory_usage + e.device_alloc - e.device_freed
      end
      r.self_vulkan_time_total = r.self_vulkan_time_total + e.self_gpu
      r.self_cpu_memory_usage = r.self_cpu_memory_usage + e.self_alloc - e.self_freed
      r.self_vulkan_memory_usage = r.self_vulkan_memory_usage + e.self_device_alloc
        - e.self_device_freed
    end
  end
  for _, r in ipairs(rows) do
    r.cpu_time = r.cpu_time_total / r.count
    r.vulkan_time = r.vulkan_time_total / r.count
  end
  return setmetatable({ rows = rows, self_cpu_time_total = self_cpu_total,
    self_vulkan_time_total = self_vulkan_total, vulkan = vulkan,
    memory = false, by_shape = opts.group_by_input_shape, by_stack = opts.group_by_stack_n },
    Averages)
end

-- ---- printing --------------------------------------------------------------------------------

local function fmt_time(us)
  if math.abs(us) >= 1e6 then return ('%.3fs'):format(us / 1e6) end
  if math.abs(us) >= 1e3 then return ('%.3fms'):format(us / 1e3) end
  return ('%.3fus'):format(us)
end

local function fmt_bytes(b)
  local a = math.abs(b)
  if a >= 1024 ^ 3 then return ('%.2f Gb'):format(b / 1024 ^ 3) end
  if a >= 1024 ^ 2 then return ('%.2f Mb'):format(b / 1024 ^ 2) end
  if a >= 1024 then return ('%.2f Kb'):format(b / 1024) end
  return ('%d b'):format(b)
end

local function pct(x, total)
  return total > 0 and ('%.2f%%'):format(100 * x / total) or '0.00%'
end

-- table({sort_by=, row_limit=, max_name_column_width=}): the table as a string.
function Averages:table(opts)
  opts = names.check_options('profiler.table', opts, { 'sort_by', 'row_limit',
    'max_name_column_width' }, 2)
  local sort_by = opts.sort_by or 'self_cpu_time_total'
  local valid = false
  for _, k in ipairs(SORT_KEYS) do valid = valid or k == sort_by end
  if not valid then
    error(('profiler.table: sort_by: unknown column %s%s (expected one of %s)'):format(
      tostring(sort_by), names.hint(tostring(sort_by), SORT_KEYS), table.concat(SORT_KEYS, ', ')), 2)
  end
  local limit = opts.row_limit or 100
  if type(limit) ~= 'number' then
    error('profiler.table: row_limit: expected a number, got ' .. type(limit), 2)
  end
  local rows = {}
  for i, r in ipairs(self.rows) do rows[i] = r end
  table.sort(rows, function(a, b)
    if a[sort_by] ~= b[sort_by] then return a[sort_by] > b[sort_by] end
    return a.key < b.key
  end)
  local memory, device_memory = false, false
  for _, r in ipairs(rows) do
    memory = memory or r.cpu_memory_usage ~= 0 or r.self_cpu_memory_usage ~= 0
    device_memory = device_memory or r.vulkan_memory_usage ~= 0 or r.self_vulkan_memory_usage ~= 0
  end
  local name_w = 25
  for i = 1, math.min(limit, #rows) do name_w = math.max(name_w, #rows[i].key) end
  name_w = math.min(name_w, opts.max_name_column_width or 55)
  local cols = { { 'Name', name_w } }
  local function col(title) cols[#cols + 1] = { title, math.max(12, #title) } end
  for _, t in ipairs({ 'Self CPU %', 'Self CPU', 'CPU total %', 'CPU total', 'CPU time avg' }) do col(t) end
  if self.vulkan then
    for _, t in ipairs({ 'Self Vulkan', 'Self Vulkan %', 'Vulkan total', 'Vulkan time avg' }) do col(t) end
  end
  if memory then col('CPU Mem'); col('Self CPU Mem') end
  if device_memory then col('Vulkan Mem'); col('Self Vulkan Mem') end
  col('# of Calls')
  if self.by_shape then cols[#cols + 1] = { 'Input Shapes', 40 } end
  if self.by_stack then cols[#cols + 1] = { 'Source Location', 30 } end

  local out = {}
  local function line(cells)
    local parts = {}
    for i, c in ipairs(cols) do
      local s = tostring(cells[i])
      if #s > c[2] and i == 1 then s = s:sub(1, c[2] - 3) .. '...' end
      parts[i] = i == 1 and ('%-' .. c[2] .. 's'):format(s) or ('%' .. c[2] .. 's'):format(s)
    end
    if self.by_shape or self.by_stack then -- the last columns read left-aligned
      for i = #cols - ((self.by_shape and 1 or 0) + (self.by_stack and 1 or 0)) + 1, #cols do
        parts[i] = ('%-' .. cols[i][2] .. 's'):format(tostring(cells[i]))
      end
    end
    out[#out + 1] = table.concat(parts, '  ')
  end
  local rule = {}
  for i, c in ipairs(cols) do rule[i] = ('-'):rep(c[2]) end
  local rule_line = table.concat(rule, '  ')
  local titles = {}
  for i, c in ipairs(cols) do titles[i] = c[1] end
  out[1] = rule_line
  line(titles)
  out[#out + 1] = rule_line
  local cpu_total, vk_total = self.self_cpu_time_total, self.self_vulkan_time_total
  for i = 1, math.min(limit, #rows) do
    local r = rows[i]
    local cells = { r.key }
    if r.is_kernel then
      for _ = 1, 5 do cells[#cells + 1] = '0.000us' end
      cells[2], cells[4] = '0.00%', '0.00%'
    else
      cells[#cells + 1] = pct(r.self_cpu_time_total, cpu_total)
      cells[#cells + 1] = fmt_time(r.self_cpu_time_total)
      cells[#cells + 1] = pct(r.cpu_time_total, cpu_total)
      cells[#cells + 1] = fmt_time(r.cpu_time_total)
      cells[#cells + 1] = fmt_time(r.cpu_time)
    end
    if self.vulkan then
      cells[#cells + 1] = fmt_time(r.self_vulkan_time_total)
      cells[#cells + 1] = pct(r.self_vulkan_time_total, vk_total)
      cells[#cells + 1] = fmt_time(r.vulkan_time_total)
      cells[#cells + 1] = fmt_time(r.vulkan_time)
    end
    if memory then
      cells[#cells + 1] = fmt_bytes(r.cpu_memory_usage)
      cells[#cells + 1] = fmt_bytes(r.self_cpu_memory_usage)
    end
    if device_memory then
      cells[#cells + 1] = fmt_bytes(r.vulkan_memory_usage)
      cells[#cells + 1] = fmt_bytes(r.self_vulkan_memory_usage)
    end
    cells[#cells + 1] = r.count
    if self.by_shape then cells[#cells + 1] = r.input_shapes ~= '' and '[' .. r.input_shapes .. ']' or '[]' end
    if self.by_stack then cells[#cells + 1] = r.stack end
    line(cells)
  end
  out[#out + 1] = rule_line
  out[#out + 1] = 'Self CPU time total: ' .. fmt_time(cpu_total)
  if self.vulkan then out[#out + 1] = 'Self Vulkan time total: ' .. fmt_time(vk_total) end
  return table.concat(out, '\n') .. '\n'
end

Averages.__tostring = function(a) return a:table() end

return M
