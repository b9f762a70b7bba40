-- A short guided tour of Ember's tensors. Run it with `make run` or `ember examples/tour.lua`.
local function say(title) print('\n== ' .. title) end
local function show(code)
  print('> ' .. code)
  local f = assert(load('return ' .. code))
  print(tostring(f()))
end

say('Creating tensors')
show('ember.tensor{{1, 2}, {3, 4}}')
show('ember.zeros(2, 3)')
show("ember.zeros({2, 3}, {dtype = 'int64'})")
show('ember.arange(6):view(2, 3)')

say('Views share storage: no copies')
x = ember.arange(12):view(3, 4)
show('x')
show('x:t()')
show('x[2]')
show('x[{{1, 2}, 3}]')
show('x:narrow(2, 2, 2)')

say('Arithmetic broadcasts like NumPy')
show('x + 1')
show('x * ember.tensor{1, 10, 100, 1000}')
show('(x / 2):exp()')

say('Shapes and dtypes')
show('x:size()')
show("x:to('float64'):dtype()")
print('\nThat was the tour. Type `ember` for the REPL.')
