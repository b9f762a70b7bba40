-- ember.repl: (being written) REPL support: completion and help.
return {}
