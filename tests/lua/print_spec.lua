-- print_spec: printing a tensor reads only the elements it shows (lua/ember/print.lua).
--
-- A summary of a huge expanded view must not materialize the view (it asked for 8 TiB before).
-- The summaries are compared with the same tensor made small and printed whole, cut to the
-- same corners by hand: the shown values and their layout must agree.
local H = require 'tests.lua.helpers'
local ember = H.ember

describe('printing', function()
  it('summarizes a huge expanded view without materializing it', function()
    local x = ember.tensor({ { 1.5, -2 } }):expand(2 ^ 40, 2)
    local s = tostring(x)
    assert.are.equal(table.concat({
      'tensor([[ 1.5000, -2.0000],',
      '        [ 1.5000, -2.0000],',
      '        [ 1.5000, -2.0000],',
      '        ...,',
      '        [ 1.5000, -2.0000],',
      '        [ 1.5000, -2.0000],',
      '        [ 1.5000, -2.0000]])' }, '\n'), s)
    local y = ember.ones(1, 1, { dtype = 'float64' }):expand(2 ^ 29, 2 ^ 29)
    assert.is_truthy(tostring(y):find('[1., 1., 1., ..., 1., 1., 1.]', 1, true))
  end)

  it('shows the same corners as the whole tensor would', function()
    local t = ember.arange(0, 24000, { dtype = 'float32' }):view(20, 30, 40)
    local s = tostring(t)
    -- first and last rows of the first and last blocks
    assert.is_truthy(s:find('[[[    0.,     1.,     2., ...,    37.,    38.,    39.]', 1, true))
    assert.is_truthy(s:find('[23960., 23961., 23962., ..., 23997., 23998., 23999.]]])', 1, true))
    assert.is_truthy(s:find('[ 1160.,  1161.,  1162., ...,  1197.,  1198.,  1199.]]', 1, true))
    -- a strided view: every other element of a row
    local v = ember.arange(0, 4000, { dtype = 'float32' }):view(2, 2000):slice(2, 1, 2000, 2)
    assert.is_truthy(tostring(v):find('[   0.,    2.,    4., ..., 1994., 1996., 1998.]', 1, true))
    -- an integer tensor under autograd's no-copy path keeps its dtype line
    local i = ember.zeros(2000, { dtype = 'int32' })
    assert.is_truthy(tostring(i):find('dtype=int32', 1, true))
  end)

  it('prints a view that requires grad without recording anything', function()
    local w = ember.ones(3000):requires_grad_()
    local s = tostring(w)
    assert.is_truthy(s:find('1., 1., 1., ..., 1., 1., 1.', 1, true))
    assert.is_true(ember.is_grad_enabled())
  end)
end)
