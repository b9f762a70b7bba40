-- Shared by image_spec and plot_spec: PNG files read back by an independent decoder
-- (tests/lua/png_decode.py, Python's zlib only), and temporary file names.
local M = {}

local made = {}
-- A fresh temporary path ending in suffix; M.cleanup() removes every one made.
function M.tmp(suffix)
  local p = os.tmpname()
  os.remove(p)
  p = p .. (suffix or '.png')
  made[#made + 1] = p
  return p
end
function M.cleanup()
  for _, p in ipairs(made) do os.remove(p) end
  made = {}
end

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Decodes path: { width, height, channels, chunks = {...}, filters = {rows with filter 0, ..4},
-- bytes = <string of the pixels, row-major, interleaved> }. Fails (error) when the decoder rejects the file.
function M.decode(path)
  local raw = M.tmp('.raw')
  local p = io.popen('/usr/bin/python3 tests/lua/png_decode.py ' .. sh_quote(path) .. ' ' ..
    sh_quote(raw) .. ' 2>&1; echo "rc=$?"')
  local out = p:read('*a')
  p:close()
  local body, rc = out:match('^(.-)rc=(%d+)%s*$')
  if rc ~= '0' then error('png_decode.py failed: ' .. out, 2) end
  local info = {
    width = tonumber(body:match('"width": (%d+)')),
    height = tonumber(body:match('"height": (%d+)')),
    channels = tonumber(body:match('"channels": (%d+)')),
    chunks = {},
  }
  for c in body:match('"chunks": %[(.-)%]'):gmatch('"(%w+)"') do info.chunks[#info.chunks + 1] = c end
  info.filters = {} -- rows per scanline filter type, 0-based types: filters[1] is None
  for n in body:match('"filters": %[(.-)%]'):gmatch('%d+') do info.filters[#info.filters + 1] = tonumber(n) end
  local f = assert(io.open(raw, 'rb'))
  info.bytes = f:read('*a')
  f:close()
  return info
end

-- The pixels as a flat Lua list of numbers.
function M.list(info)
  local t = {}
  for i = 1, #info.bytes do t[i] = info.bytes:byte(i) end
  return t
end

-- The channel values of the pixel at 0-based (x, y), as a list.
function M.pixel(info, x, y)
  local c = info.channels
  local base = (y * info.width + x) * c
  local t = {}
  for k = 1, c do t[k] = info.bytes:byte(base + k) end
  return t
end

return M
