-- Sequential and ModuleList as Lua lists: blocks[i] (1-based, negative from the end), #blocks,
-- ipairs(blocks), blocks[i] = m, with PyTorch's 0-based child names in state_dict keys.
local H = require 'helpers'
local ember = H.ember
local nn = ember.nn

local function keys(sd)
  local r = {}
  for k in pairs(sd) do r[#r + 1] = k end
  table.sort(r)
  return r
end

describe('nn list containers', function()
  it('index from 1, from the end with negatives, and raise out of range', function()
    for _, make in ipairs({
      function(a, b, c) return nn.Sequential(a, b, c) end,
      function(a, b, c) return nn.ModuleList({ a, b, c }) end,
    }) do
      local a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
      local s = make(a, b, c)
      assert.are.equal(3, #s)
      assert.are.equal(a, s[1]); assert.are.equal(b, s[2]); assert.are.equal(c, s[3])
      assert.are.equal(c, s[-1]); assert.are.equal(a, s[-3])
      assert.are.equal(b, s:get(2)); assert.are.equal(c, s:get(-1))
      assert.are.equal(a, s['0']) -- PyTorch's child name
      H.assert_error(function() return s[4] end, 'index 4 is out of range (3 modules; indices are 1-based')
      H.assert_error(function() return s[0] end, 'index 0 is out of range')
      H.assert_error(function() return s[-4] end, 'index -4 is out of range')
      local seen = {}
      for i, m in ipairs(s) do seen[i] = m end
      assert.are.same({ a, b, c }, seen)
      seen = {}
      for i, m in s:ipairs() do seen[i] = m end
      assert.are.same({ a, b, c }, seen)
    end
  end)

  it('keep PyTorch 0-based names in state_dict keys and printing', function()
    local Net = nn.Module:extend('Net')
    function Net:__init()
      self:add_module('blocks', nn.ModuleList({ nn.Linear(2, 2), nn.Linear(2, 2, { bias = false }) }))
      self:add_module('head', nn.Sequential(nn.ReLU(), nn.Linear(2, 1)))
    end
    local m = Net()
    assert.are.same({ 'blocks.0.bias', 'blocks.0.weight', 'blocks.1.weight', 'head.1.bias', 'head.1.weight' },
      keys(m:state_dict()))
    assert.is_truthy(tostring(m):find('(0): Linear', 1, true))
    -- a state_dict by PyTorch's names loads, flat and nested (as ember.load nests "0" as 0)
    local m2 = Net()
    m2:load_state_dict(m:state_dict())
    H.assert_close(m2.blocks[2].weight, m.blocks[2].weight:totable(), 0, 0)
    local m3 = Net()
    m3:load_state_dict({ blocks = { [0] = { weight = m.blocks[1].weight, bias = m.blocks[1].bias },
      [1] = { weight = m.blocks[2].weight } }, head = { [1] = { weight = m.head[2].weight, bias = m.head[2].bias } } })
    H.assert_close(m3.head[-1].bias, m.head[2].bias:totable(), 0, 0)
  end)

  it('replace a child by assignment, append at n + 1, and reject the rest', function()
    local s = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    local t = nn.Tanh()
    s[2] = t
    assert.are.equal(t, s[2])
    assert.are.equal(t, s['1'])
    assert.are.equal(t, s:children()[2])
    local x = ember.tensor({ { 1, -2 } })
    H.assert_close(s(x), s[1](x):tanh():totable(), 0, 0)
    local l = nn.Linear(2, 1)
    s[3] = l -- n + 1 appends
    assert.are.equal(3, #s)
    assert.are.same({ '0.bias', '0.weight', '2.bias', '2.weight' }, keys(s:state_dict()))
    local u = nn.Sigmoid()
    s[-1] = u
    assert.are.equal(u, s[3])
    H.assert_error(function() s[5] = nn.ReLU() end, 'index 5 is out of range')
    H.assert_error(function() s[-1] = 3 end, 'expected a module at index -1, got number')
    H.assert_error(function() s['0'] = 'x' end, 'expected a module for 0, got string')
    local l2 = nn.ModuleList()
    l2[1] = nn.ReLU()
    assert.are.equal(1, #l2)
    assert.are.same({ '0' }, (function() local r = {} for i, c in ipairs(l2:named_children()) do r[i] = c[1] end return r end)())
  end)

  it('keep list behaviour in subclasses and named children', function()
    local Stack = nn.Sequential:extend('Stack')
    function Stack:__init(n)
      for _ = 1, n do self:add(nn.Linear(2, 2)) end
    end
    local s = Stack(3)
    assert.are.equal(3, #s)
    assert.are.equal(s[3], s['2'])
    local q = nn.Sequential()
    q:add_module('conv', nn.Linear(1, 1))
    q:add(nn.ReLU())
    assert.are.equal(q.conv, q[1])
    assert.are.equal(2, #q)
    assert.are.same({ 'conv.bias', 'conv.weight' }, keys(q:state_dict()))
  end)

  it('raise clearly on what is not a module', function()
    H.assert_error(function() nn.Sequential(nn.ReLU(), 3) end, 'Sequential: expected a module as argument 2, got number')
    H.assert_error(function() nn.ModuleList({ nn.ReLU(), 'x' }) end, 'ModuleList: expected a module at index 2, got string')
    H.assert_error(function() nn.ModuleList():append(1) end, 'ModuleList:append: expected a module, got number')
    H.assert_error(function() nn.ModuleList({ nn.ReLU() }):forward() end, 'ModuleList: a list has no forward')
  end)
end)
