-- field_module.lua: how the extension files (activation_ext, loss_ext, functional_ext, conv3d)
-- build their simple modules: constructor arguments named by `fields` (positional, or one
-- options table, through ember.nn.named_args, so misspelt names are errors), their defaults,
-- a forward function, and an extra_repr that lists the fields.
local Module = require 'ember.nn.module'
local named = require 'ember.nn.named_args'

-- A field's value as extra_repr shows it: tables as [a,b,c].
local function show(v)
  return type(v) == 'table' and '[' .. table.concat(v, ',') .. ']' or tostring(v)
end

-- field_module(name, fields, defaults, forward [, opts]) -> the class. opts: init(self), run
-- after the fields are set; repr(self), which replaces the listing; hide = {field = true},
-- fields the listing leaves out (nil fields are always left out).
return function(name, fields, defaults, forward, opts)
  opts = opts or {}
  local cls = Module:extend(name)
  function cls:__init(...)
    local o = named(name, fields, ...)
    for i, f in ipairs(fields) do
      local v = o[f]
      if v == nil then v = defaults[i] end
      self[f] = v
    end
    if opts.init then opts.init(self) end
  end
  cls.forward = forward
  function cls:extra_repr()
    if opts.repr then return opts.repr(self) end
    local parts = {}
    for _, f in ipairs(fields) do
      local v = self[f]
      if v ~= nil and not (opts.hide and opts.hide[f]) then parts[#parts + 1] = f .. '=' .. show(v) end
    end
    return table.concat(parts, ', ')
  end
  return cls
end
