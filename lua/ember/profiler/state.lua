-- ember.profiler.state: the one flag that Ember's Lua layers read to learn whether the
-- profiler is recording (nn.Module's __call names its forward as a range then). Kept apart
-- from ember.profiler so that those layers need not load it.
return { recording = false, call = nil }
