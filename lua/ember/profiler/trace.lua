-- ember.profiler.trace: prof:export_chrome_trace(path), the events as Chrome trace JSON, which
-- Perfetto (ui.perfetto.dev) and chrome://tracing open.
--
-- Layout ("JSON Object Format" of the Trace Event Format):
--   - process 1 is the host: one track (tid) per thread that recorded, with an 'X' (complete)
--     event per op, range and backward node; args hold input shapes, call site and bytes;
--   - process 100 + d is device d (vulkan:0 ...): one track, its queue, with an 'X' event per
--     dispatch (its interval, docs/design.md "GPU time attribution");
--   - a flow arrow from each op to each kernel it recorded: 's' on the op's track at the op's
--     start, 'f' (binding point 'e', the enclosing slice) on the kernel's track at its start;
--   - 'M' metadata events name the processes and threads and order them.
-- Times are microseconds from the trace's first event. The file is written atomically.
-- The runtime has the same writer for C programs (em_profiler_export_chrome_trace,
-- runtime/src/profiler/trace_json.c), but it writes the runtime's last profile; a Lua profile
-- keeps its own trace (a schedule's later warm-up steps replace the runtime's), so it writes
-- that. tests/lua/profiler_spec.lua checks that the two agree.
local M = {}

local HOST_PID = 1

local function esc(s)
  return (s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == '\\' then return '\\\\' end
    return ('\\u%04x'):format(c:byte())
  end))
end

local function num(x)
  return ('%.3f'):format(x)
end

local function device_pid(name)
  local d = tonumber(name:match(':(%d+)$')) or 0
  return 100 + d
end

function M.write(path, events)
  local out = { '{"displayTimeUnit":"ms","traceEvents":[' }
  local first = true
  local function emit(s)
    out[#out + 1] = (first and '' or ',') .. '\n' .. s
    first = false
  end
  local threads, devices = {}, {}
  for i, e in ipairs(events) do
    if e.kind == 'kernel' then
      local pid = device_pid(e.device or 'vulkan:0')
      devices[pid] = e.device or 'vulkan'
      emit(('{"ph":"X","cat":"kernel","name":"%s","pid":%d,"tid":0,"ts":%s,"dur":%s,'
        .. '"args":{"device":"%s","correlation":%d}}'):format(esc(e.name), pid, num(e.start),
        num(e.duration), esc(e.device or ''), e.op or 0))
      if e.op then
        local op = events[e.op]
        emit(('{"ph":"s","cat":"ac2g","name":"ac2g","id":%d,"pid":%d,"tid":%d,"ts":%s}')
          :format(i, HOST_PID, op.thread + 1, num(op.start)))
        emit(('{"ph":"f","bp":"e","cat":"ac2g","name":"ac2g","id":%d,"pid":%d,"tid":0,"ts":%s}')
          :format(i, pid, num(e.start)))
      end
    else
      threads[e.thread] = true
      local args = {}
      if e.shapes then args[#args + 1] = ('"Input Dims":"%s"'):format(esc(e.shapes)) end
      if e.site then args[#args + 1] = ('"Call site":"%s"'):format(esc(e.site)) end
      if e.device then args[#args + 1] = ('"Device":"%s"'):format(esc(e.device)) end
      if e.alloc ~= 0 or e.freed ~= 0 then
        args[#args + 1] = ('"Bytes allocated":%d,"Bytes freed":%d'):format(e.alloc, e.freed)
      end
      if e.device_alloc ~= 0 or e.device_freed ~= 0 then
        args[#args + 1] = ('"Device bytes allocated":%d,"Device bytes freed":%d'):format(
          e.device_alloc, e.device_freed)
      end
      if e.gpu > 0 then args[#args + 1] = ('"Vulkan time us":%s'):format(num(e.gpu)) end
      emit(('{"ph":"X","cat":"%s","name":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{%s}}')
        :format(e.kind == 'op' and 'cpu_op' or 'user_annotation', esc(e.name), HOST_PID,
        e.thread + 1, num(e.start), num(e.duration), table.concat(args, ',')))
    end
  end
  emit(('{"ph":"M","name":"process_name","pid":%d,"args":{"name":"ember (host)"}}'):format(HOST_PID))
  emit(('{"ph":"M","name":"process_sort_index","pid":%d,"args":{"sort_index":0}}'):format(HOST_PID))
  for t in pairs(threads) do
    emit(('{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"thread %d%s"}}')
      :format(HOST_PID, t + 1, t + 1, t == 0 and ' (first to record)' or ''))
  end
  for pid, name in pairs(devices) do
    emit(('{"ph":"M","name":"process_name","pid":%d,"args":{"name":"%s"}}'):format(pid, esc(name)))
    emit(('{"ph":"M","name":"process_sort_index","pid":%d,"args":{"sort_index":%d}}'):format(pid, pid))
    emit(('{"ph":"M","name":"thread_name","pid":%d,"tid":0,"args":{"name":"%s queue"}}')
      :format(pid, esc(name)))
  end
  out[#out + 1] = '\n]}\n'
  local tmp = path .. '.tmp'
  local f, err = io.open(tmp, 'wb')
  if f == nil then error('profiler.export_chrome_trace: cannot write ' .. tostring(err), 3) end
  local ok, werr = f:write(table.concat(out))
  f:close()
  if not ok then
    os.remove(tmp)
    error('profiler.export_chrome_trace: cannot write ' .. path .. ': ' .. tostring(werr), 3)
  end
  local moved, merr = os.rename(tmp, path)
  if not moved then
    os.remove(tmp)
    error('profiler.export_chrome_trace: cannot write ' .. path .. ': ' .. tostring(merr), 3)
  end
  return path
end

return M
