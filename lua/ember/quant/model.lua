-- ember.quant.model: post-training, weight-only quantization of a model's layers in place
-- (ember.quant.quantize_model, docs/api/quant.md).
--
-- Each nn.Linear whose format has a kernel on its device becomes a QuantLinear (the weight
-- quantized, the bias kept dense, forward through ember.quant.linear). A layer that cannot be
-- quantized stays as it is, and the reason is printed: no kernel for the format or device, an
-- in_features that is not whole blocks, or a module type without a quantized version yet
-- (Embedding).
local Module = require 'ember.nn.module'
local names = require 'ember.util.names'

local M = {}

local function Q() return require 'ember.quant' end

local QuantLinear = Module:extend('QuantLinear')
function QuantLinear:__init(linear, format)
  Module.__init(self)
  self.in_features, self.out_features = linear.in_features, linear.out_features
  rawset(self, 'qweight', Q().quantize(linear.weight:detach(), { format = format }))
  if linear.bias ~= nil then self:register_buffer('bias', linear.bias:detach()) end
end
function QuantLinear:forward(x) return Q().linear(x, self.qweight, self.bias) end
function QuantLinear:extra_repr()
  return ('in_features=%d, out_features=%d, bias=%s, format=%s'):format(self.in_features,
    self.out_features, tostring(self.bias ~= nil), self.qweight.format)
end
M.QuantLinear = QuantLinear

local LINEAR_FORMATS = { q8_0 = true, q4_0 = true, q4_1 = true, q4_k = true, q6_k = true }
local BLOCK = { q4_k = 256, q6_k = 256 }  -- the others: 32

-- Why `m` (a Linear) cannot become a QuantLinear in `format`, or nil.
local function linear_obstacle(m, format)
  if not LINEAR_FORMATS[format] then
    return ('format %s has no Linear kernel yet (q8_0, q4_0, q4_1, q4_k and q6_k have)'):format(format)
  end
  local dev = tostring(m.weight:device())
  if dev ~= 'cpu' then return ('format %s is not implemented on %s'):format(format, dev) end
  local block = BLOCK[format] or 32
  if m.in_features % block ~= 0 then
    return ('in_features = %d is not a multiple of the %s block (%d)'):format(m.in_features, format, block)
  end
  return nil
end

function M.quantize_model(model, opts)
  local fn = 'ember.quant.quantize_model'
  if type(model) ~= 'table' or not model._modules then
    error(('%s: expected a module, got %s'):format(fn, type(model)), 2)
  end
  opts = names.check_options(fn, opts, { format = true, modules = true, verbose = true })
  local format = opts.format
  local formats = Q().formats
  local known = false
  for _, f in ipairs(formats) do known = known or f == format end
  if not known then
    error(('%s: expected format to be one of %s, got %s'):format(fn, table.concat(formats, ', '),
      tostring(format)), 2)
  end
  local wanted = {}
  for i, name in ipairs(opts.modules or { 'Linear', 'Embedding' }) do
    if name ~= 'Linear' and name ~= 'Embedding' then
      error(("%s: expected modules[%d] to be 'Linear' or 'Embedding', got %s"):format(fn, i,
        tostring(name)), 2)
    end
    wanted[name] = true
  end
  local report = { quantized = {}, skipped = {} }
  local function skip(path, kind, why)
    report.skipped[#report.skipped + 1] = { path, why }
    if opts.verbose ~= false then
      print(('%s: left %s (%s) as it was: %s'):format(fn, path, kind, why))
    end
  end
  local function walk(m, prefix)
    for i, name in ipairs(m._modules) do
      local child = m[name]
      local path = prefix == '' and name or (prefix .. '.' .. name)
      local kind = child.__name
      if kind == 'Linear' and wanted.Linear then
        local why = linear_obstacle(child, format)
        if why then skip(path, kind, why)
        else
          -- lists (Sequential, ModuleList) hold children in their slots: m[i] = q replaces one
          if rawget(m, '_positions') then m[i] = QuantLinear(child, format)
          else rawset(m, name, QuantLinear(child, format)) end
          report.quantized[#report.quantized + 1] = path
        end
      elseif kind == 'Embedding' and wanted.Embedding then
        skip(path, kind, 'a quantized Embedding is not implemented yet')
      elseif child._modules then
        walk(child, path)
      end
    end
  end
  walk(model, '')
  return model, report
end

return M
