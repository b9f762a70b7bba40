-- ember.random: (being written) seeded random numbers.
return {}
