-- ember.profiler.state: what Ember's Lua layers share with the profiler without loading it.
--   recording  whether a profile records now (nn.Module's __call then makes its forward a
--              range, through `call`)
--   parent_of, name_in_parent  every module's place in its tree, noted by add_module at
--              construction (weak: they keep nothing alive), so that a range is named by the
--              module's path (GPT.transformer.h.0.attn) whichever way the forward was reached
return {
  recording = false,
  call = nil,
  backward = nil,
  parent_of = setmetatable({}, { __mode = 'kv' }),
  name_in_parent = setmetatable({}, { __mode = 'k' }),
}
