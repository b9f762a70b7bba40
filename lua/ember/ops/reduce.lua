-- ember.ops.reduce: (being written) methods for the reduce family.
return {}
