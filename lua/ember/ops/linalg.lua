-- ember.ops.linalg: (being written) methods for the linalg family.
return {}
