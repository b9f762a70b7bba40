-- ember.image: tensors as pictures (docs/api/image.md).
--
--   ember.image.save_png(path, x [, opts])  an image [H, W] or [C, H, W] (or a batch, as a grid)
--                                           as a PNG file (runtime/src/io/png.c writes it)
--   ember.image.grid(batch [, opts])        a batch [N, C, H, W] or [N, H, W] tiled into one
--                                           image [C, H', W'], as torchvision's make_grid
--   ember.image.pixels(x [, opts])          the uint8 [H, W, C] CPU tensor save_png writes
--
-- Values: floating tensors are taken in [0, 1] (clamped, times 255, rounded; NaN is 0); uint8
-- as is; other integers clamped to [0, 255]; bool as 0 and 255. value_range = {lo, hi} maps
-- [lo, hi] to [0, 1] first, and normalize = true uses the tensor's own minimum and maximum,
-- with the names torchvision's save_image and make_grid use.
local core = require 'ember.core'
local tensor = require 'ember.tensor'
local names = require 'ember.util.names'

local C, check = core.C, core.check
local M = {}

local function need_tensor(fn, x, what)
  if not tensor.is_tensor(x) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(x)), 3)
  end
end

local function shape_str(x)
  local s = {}
  for i = 1, x:dim() do s[i] = tostring(x:size(i)) end
  return '[' .. table.concat(s, ', ') .. ']'
end

-- {lo, hi} with lo < hi, or nil.
local function value_range(fn, r)
  if r == nil then return nil end
  if type(r) ~= 'table' or type(r[1]) ~= 'number' or type(r[2]) ~= 'number' or not (r[1] < r[2]) then
    error(('%s: expected value_range to be {lo, hi} with lo < hi, got %s'):format(fn,
      type(r) == 'table' and ('{' .. tostring(r[1]) .. ', ' .. tostring(r[2]) .. '}') or tostring(r)), 4)
  end
  return r
end

-- x (float32) mapped from [lo, hi] to [0, 1]; a constant tensor (hi == lo) becomes 0.
local function rescale(x, lo, hi)
  return (x - lo) / math.max(hi - lo, 1e-5)
end

-- float32 values in [0, 1] -> uint8 (round half up; NaN -> 0).
local function float_to_uint8(x)
  return ((x:nan_to_num(0, 1, 0):clamp(0, 1) * 255) + 0.5):floor():byte()
end

-- Any tensor -> uint8 of the same shape, on the CPU, by the rules at the head of this file.
local function to_uint8(fn, x, opts)
  x = x:cpu()
  local r = value_range(fn, opts.value_range)
  if opts.normalize ~= nil and type(opts.normalize) ~= 'boolean' then
    error(('%s: expected normalize to be a boolean, got %s'):format(fn, type(opts.normalize)), 3)
  end
  if r or opts.normalize then
    local f = x:float()
    if not r then
      if f:numel() == 0 then return x:byte() end
      r = { f:amin():item(), f:amax():item() }
    end
    return float_to_uint8(rescale(f, r[1], r[2]))
  end
  local dt = x:dtype()
  if dt == 'uint8' then return x end
  if dt == 'bool' then return x:byte() * 255 end
  if x:is_floating_point() then return float_to_uint8(x:float()) end
  return x:clamp(0, 255):byte()
end

-- [H, W] or [C, H, W] -> [H, W, C] (C = 1..4).
local function to_hwc(fn, x)
  if x:dim() == 2 then return x:view(x:size(1), x:size(2), 1) end
  if x:dim() == 3 then
    local c = x:size(1)
    if c < 1 or c > 4 then
      error(('%s: expected an image [C, H, W] with C = 1 (gray), 2 (gray, alpha), 3 (RGB) or ' ..
        '4 (RGBA) channels first, as PyTorch, got %s (an [H, W, C] image: x:permute(3, 1, 2))')
        :format(fn, shape_str(x)), 4)
    end
    return x:permute(2, 3, 1):contiguous()
  end
  error(('%s: expected an image [H, W] or [C, H, W], got %s'):format(fn, shape_str(x)) ..
    (x:dim() == 4 and ' (a batch: ember.image.grid(batch) tiles it)' or ''), 4)
end

local convert_options = { 'normalize', 'value_range' }

-- pixels(x [, {normalize=, value_range=}]): the uint8 [H, W, C] CPU tensor that save_png writes
-- for the image x ([H, W] or [C, H, W], any dtype and device).
function M.pixels(x, opts)
  need_tensor('pixels', x, 'the image')
  opts = names.check_options('pixels', opts, convert_options, 2)
  return to_hwc('pixels', to_uint8('pixels', x, opts))
end

-- ---- grid -----------------------------------------------------------------------------------
local grid_options = { 'nrow', 'padding', 'pad_value', 'normalize', 'value_range', 'scale_each' }

local function whole(fn, what, v, default, min)
  if v == nil then return default end
  if type(v) ~= 'number' or v ~= math.floor(v) or v < min then
    error(('%s: expected %s to be a whole number >= %d, got %s'):format(fn, what, min, tostring(v)), 4)
  end
  return v
end

local function make_grid(fn, batch, opts)
  if type(batch) == 'table' and not tensor.is_tensor(batch) then
    if #batch == 0 then error(fn .. ': expected a batch of images, got an empty list', 3) end
    for i, t in ipairs(batch) do need_tensor(fn, t, 'image ' .. i) end
    batch = require('ember').stack(batch, 1)
  end
  need_tensor(fn, batch, 'the batch')
  if batch:dim() == 3 then batch = batch:unsqueeze(2) end
  if batch:dim() ~= 4 then
    error(('%s: expected a batch [N, C, H, W] or [N, H, W], got %s'):format(fn, shape_str(batch)), 3)
  end
  local n, c, h, w = batch:size(1), batch:size(2), batch:size(3), batch:size(4)
  if n == 0 then error(fn .. ': expected at least one image, got an empty batch', 3) end
  local nrow = whole(fn, 'nrow', opts.nrow, 8, 1)
  local padding = whole(fn, 'padding', opts.padding, 2, 0)
  local pad_value = opts.pad_value or 0
  if type(pad_value) ~= 'number' then
    error(('%s: expected pad_value to be a number, got %s'):format(fn, type(pad_value)), 3)
  end
  local r = value_range(fn, opts.value_range)
  if opts.normalize or r then
    -- as make_grid: the whole batch's (or each image's, scale_each) range maps to [0, 1]
    batch = batch:float()
    if opts.scale_each then
      local parts = {}
      for k = 1, n do
        local img = batch:narrow(1, k, 1)
        local lo, hi = r and r[1] or img:amin():item(), r and r[2] or img:amax():item()
        parts[k] = rescale(img, lo, hi):clamp(0, 1)
      end
      batch = require('ember').cat(parts, 1)
    else
      local lo, hi = r and r[1] or batch:amin():item(), r and r[2] or batch:amax():item()
      batch = rescale(batch, lo, hi):clamp(0, 1)
    end
  elseif opts.scale_each then
    error(fn .. ': scale_each applies with normalize = true', 3)
  end
  local cols = math.min(nrow, n)
  local rows = math.ceil(n / cols)
  local cell_h, cell_w = h + padding, w + padding
  local out = require('ember').full({ c, rows * cell_h + padding, cols * cell_w + padding },
    pad_value, { dtype = batch:dtype(), device = batch:device() })
  for k = 0, n - 1 do
    local y, x = math.floor(k / cols), k % cols
    out:narrow(2, y * cell_h + padding + 1, h):narrow(3, x * cell_w + padding + 1, w)
      :copy_(batch:select(1, k + 1))
  end
  return out
end

-- grid(batch [, {nrow = 8, padding = 2, pad_value = 0, normalize = false, value_range = nil,
-- scale_each = false}]): the images of batch ([N, C, H, W], [N, H, W] or a list of [C, H, W]
-- tensors) tiled nrow to a row with padding pixels of pad_value between and around them, as
-- one image [C, H', W'] of the batch's dtype and device (torchvision's make_grid, except that
-- one-channel images stay one channel). normalize (or a value_range) gives float32 in [0, 1].
function M.grid(batch, opts)
  opts = names.check_options('grid', opts, grid_options, 2)
  return make_grid('grid', batch, opts)
end

-- ---- save_png -------------------------------------------------------------------------------
local save_options = { 'normalize', 'value_range', 'nrow', 'padding', 'pad_value', 'scale_each' }

-- save_png(path, x [, opts]): writes x ([H, W] or [C, H, W] with C = 1, 2, 3 or 4, any dtype
-- and device) as an 8-bit PNG file, atomically. A batch [N, C, H, W] is tiled by grid first
-- (nrow, padding, pad_value, scale_each are grid's options).
function M.save_png(path, x, opts)
  if type(path) ~= 'string' then
    error('save_png: expected a file path, got ' .. type(path), 2)
  end
  opts = names.check_options('save_png', opts, save_options, 2)
  local batch = type(x) == 'table' and not tensor.is_tensor(x) or (tensor.is_tensor(x) and x:dim() == 4)
  if batch then
    -- grid maps the values to [0, 1] already when asked to
    x = make_grid('save_png', x, opts)
    opts = {}
  else
    need_tensor('save_png', x, 'the image')
    for _, k in ipairs({ 'nrow', 'padding', 'pad_value', 'scale_each' }) do
      if opts[k] ~= nil then
        error(('save_png: %s applies to a batch [N, C, H, W], got an image %s'):format(k,
          shape_str(x)), 2)
      end
    end
  end
  local px = to_hwc('save_png', to_uint8('save_png', x, opts))
  check(C.em_write_png(path, px.ptr))
end

return M
