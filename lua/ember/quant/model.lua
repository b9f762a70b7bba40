-- ember.quant.model: post-training, weight-only quantization of a model's layers in place
-- (ember.quant.quantize_model, docs/api/quant.md).
--
-- Each nn.Linear becomes a QuantLinear: its weight a tensor of the block dtype (a buffer, so
-- :to(device), state_dict and ember.save carry it), the bias kept dense, forward through the
-- quant_linear op of the input's device (ember.quant.linear). Each nn.Embedding becomes a
-- QuantEmbedding: a lookup picks the rows of blocks (index_select on the block dtype) and
-- dequantizes only those. A layer that cannot be quantized stays as it is and the reason is
-- printed: a dimension that is not whole blocks, a format without a Linear kernel on the
-- layer's device. The weights are quantized on the CPU (the quantize kernel's device) and the
-- blocks then moved to the layer's device, explicitly.
local Module = require 'ember.nn.module'
local names = require 'ember.util.names'

local M = {}

local function Q() return require 'ember.quant' end
local function ember() return require 'ember' end

-- w quantized on the CPU, the blocks placed on w's device.
local function quantize_weight(w, dtype)
  local dev = w:device()
  local q = Q().quantize_as(w:detach():to('cpu'), dtype)
  if tostring(dev) ~= 'cpu' then q = q:to(dev) end
  return q
end

local QuantLinear = Module:extend('QuantLinear')
function QuantLinear:__init(linear, dtype)
  Module.__init(self)
  self.in_features, self.out_features = linear.in_features, linear.out_features
  self:register_buffer('weight', quantize_weight(linear.weight, dtype))
  if linear.bias ~= nil then self:register_buffer('bias', linear.bias:detach()) end
end
function QuantLinear:forward(x) return Q().linear(x, self.weight, self.bias) end
function QuantLinear:extra_repr()
  return ('in_features=%d, out_features=%d, bias=%s, dtype=%s'):format(self.in_features,
    self.out_features, tostring(self.bias ~= nil), self.weight:dtype())
end
M.QuantLinear = QuantLinear

local QuantEmbedding = Module:extend('QuantEmbedding')
function QuantEmbedding:__init(emb, dtype)
  Module.__init(self)
  self.num_embeddings, self.embedding_dim = emb.num_embeddings, emb.embedding_dim
  self.padding_idx = emb.padding_idx
  self:register_buffer('weight', quantize_weight(emb.weight, dtype))
end
-- idx: integer indices (1-based) of any shape: [..., embedding_dim] float32.
function QuantEmbedding:forward(idx)
  local fn = 'QuantEmbedding'
  if not ember().is_tensor(idx) or idx:is_floating_point() or idx:dtype() == 'bool' then
    error(('%s: expected integer indices, got %s'):format(fn,
      ember().is_tensor(idx) and idx:dtype() or type(idx)), 2)
  end
  local shape = idx:size()
  local rows = self.weight:index_select(1, idx:reshape(-1))
  local out = rows:dequantize()
  shape[#shape + 1] = self.embedding_dim
  return out:view(unpack(shape))
end
function QuantEmbedding:extra_repr()
  return ('%d, %d, dtype=%s'):format(self.num_embeddings, self.embedding_dim, self.weight:dtype())
end
M.QuantEmbedding = QuantEmbedding

-- Whether the quant_linear op has a kernel for dtype on device dev (a probe on one block), and
-- if not, the op's reason.
local function linear_kernel(dtype, dev)
  local probe = ember().zeros(1, M.block_elems(dtype), { device = dev })
  local w = ember().zeros(1, M.block_elems(dtype))
  local ok, err = pcall(function() return Q().linear(probe, Q().quantize_as(w, dtype):to(dev)) end)
  return ok, not ok and tostring(err):gsub('^.-ember%.quant%.linear: ', '') or nil
end
function M.block_elems(dtype) return Q().block_elems(dtype) end
M.linear_kernel = linear_kernel

-- Why `m` (a Linear or Embedding) cannot be quantized to dtype, or nil; the second result is
-- true when the reason is the block size (where a fallback format may serve).
local function obstacle(m, kind, dtype)
  local be = M.block_elems(dtype)
  local cols = kind == 'Linear' and m.in_features or m.embedding_dim
  if cols % be ~= 0 then
    return ('%s = %d is not a multiple of the %s block (%d)'):format(
      kind == 'Linear' and 'in_features' or 'embedding_dim', cols, dtype, be), true
  end
  if kind == 'Linear' then
    local ok, why = linear_kernel(dtype, m.weight:device())
    if not ok then return why end
  end
  return nil
end

function M.quantize_model(model, opts)
  local fn = 'ember.quant.quantize_model'
  if type(model) ~= 'table' or not model._modules then
    error(('%s: expected a module, got %s'):format(fn, type(model)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, group = true, symmetric = true,
    modules = true, verbose = true, fallback = true, skip = true })
  if opts.skip ~= nil and type(opts.skip) ~= 'function' then
    error(('%s: expected skip to be a function(path, module, dtype), got %s'):format(fn,
      type(opts.skip)), 2)
  end
  local dtype = Q().parse_format(fn, opts, 2)
  local fallback = opts.fallback and Q().parse_format(fn, { format = opts.fallback }, 2)
  local wanted = {}
  for i, name in ipairs(opts.modules or { 'Linear', 'Embedding' }) do
    if name ~= 'Linear' and name ~= 'Embedding' then
      error(("%s: expected modules[%d] to be 'Linear' or 'Embedding', got %s"):format(fn, i,
        tostring(name)), 2)
    end
    wanted[name] = true
  end
  local report = { quantized = {}, skipped = {}, fallback = {} }
  local function skip(path, kind, why)
    report.skipped[#report.skipped + 1] = { path, why }
    if opts.verbose ~= false then
      print(('%s: left %s (%s) as it was: %s'):format(fn, path, kind, why))
    end
  end
  local make = { Linear = QuantLinear, Embedding = QuantEmbedding }
  local function walk(m, prefix)
    for i, name in ipairs(m._modules) do
      local child = m[name]
      local path = prefix == '' and name or (prefix .. '.' .. name)
      local kind = child.__name
      if make[kind] and wanted[kind] then
        local use, why, by_block = dtype, obstacle(child, kind, dtype)
        if why and by_block and fallback and not obstacle(child, kind, fallback) then
          -- as llama.cpp's k-quants: a row that is not whole blocks takes the fallback format
          report.fallback[#report.fallback + 1] = { path, fallback }
          if opts.verbose ~= false then
            print(('%s: %s (%s) as %s: %s'):format(fn, path, kind, fallback, why))
          end
          use, why = fallback, nil
        end
        if not why and opts.skip then why = opts.skip(path, child, use) end
        if why then skip(path, kind, why)
        else
          local q = make[kind](child, use)
          -- lists (Sequential, ModuleList) hold children in their slots: m[i] = q replaces one
          if rawget(m, '_positions') then m[i] = q else rawset(m, name, q) end
          report.quantized[#report.quantized + 1] = path
        end
      elseif child._modules then
        walk(child, path)
      end
    end
  end
  walk(model, '')
  return model, report
end

return M
