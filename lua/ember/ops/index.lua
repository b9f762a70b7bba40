-- ember.ops.index: (being written) methods for the index family.
return {}
