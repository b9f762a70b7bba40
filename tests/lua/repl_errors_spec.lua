-- Error positions point at the user's code: a broad sample of bad calls, each made from this
-- file, must raise a message that starts with this file's name (or with no position at all),
-- never with one of Ember's own files (lua/ember/...). Also the REPL's habits: piped input
-- that fails exits non-zero, `_` holds the last result, and a tensor that requires grad says so.
local H = require 'helpers'
local ember = H.ember
local nn, F = ember.nn, ember.nn.functional

local function i64(t) return ember.tensor(t, { dtype = 'int64' }) end

-- name, bad call
local bad = {
  { 'add broadcast', function() return ember.zeros(2, 3) + ember.zeros(4) end },
  { 'sub shapes', function() return ember.zeros(2, 3):sub(ember.zeros(5)) end },
  { 'mul operand', function() return ember.zeros(2) * {} end },
  { 'div string', function() return ember.zeros(2):div('x') end },
  { 'pow shapes', function() return ember.zeros(3):pow(ember.zeros(2)) end },
  { 'matmul', function() return ember.zeros(2, 3):matmul(ember.zeros(2, 3)) end },
  { 'mm', function() return ember.zeros(2, 3):mm(ember.zeros(4, 3)) end },
  { 'bmm', function() return ember.zeros(2, 3):bmm(ember.zeros(2, 3)) end },
  { 'view', function() return ember.zeros(2, 3):view(4, 2) end },
  { 'view fractional', function() return ember.zeros(2, 3):view(1.5, 4) end },
  { 'reshape', function() return ember.zeros(2, 3):reshape(7) end },
  { 'expand', function() return ember.zeros(2, 3):expand(4, 4) end },
  { 'permute', function() return ember.zeros(2, 3):permute(1, 1) end },
  { 'transpose', function() return ember.zeros(2, 3):transpose(1, 5) end },
  { 'narrow', function() return ember.zeros(4):narrow(1, 3, 5) end },
  { 'select', function() return ember.zeros(4):select(1, 9) end },
  { 'index', function() return ember.zeros(4)[9] end },
  { 'squeeze', function() return ember.zeros(4):squeeze(3) end },
  { 'unsqueeze', function() return ember.zeros(4):unsqueeze(5) end },
  { 'flatten', function() return ember.zeros(2, 3):flatten(2, 1) end },
  { 'cat', function() return ember.cat({ ember.zeros(2, 3), ember.zeros(3, 2) }, 1) end },
  { 'stack', function() return ember.stack({ ember.zeros(2), ember.zeros(3) }) end },
  { 'split', function() return ember.zeros(4):split(0) end },
  { 'chunk', function() return ember.zeros(4):chunk(0) end },
  { 'index_select', function() return ember.zeros(4):index_select(1, i64({ 9 })) end },
  { 'gather', function() return ember.zeros(2, 2):gather(2, i64({ { 3, 1 }, { 1, 1 } })) end },
  { 'scatter', function() return ember.zeros(2, 2):scatter(2, i64({ { 3 } }), 1) end },
  { 'masked_fill', function() return ember.zeros(4):masked_fill(ember.zeros(4), 1) end },
  { 'masked_select', function() return ember.zeros(4):masked_select(ember.zeros(3)) end },
  { 'index_fill overflow', function()
    return ember.zeros(3, { dtype = 'uint8' }):index_fill(1, i64({ 1 }), -1.5)
  end },
  { 'fill_ overflow', function() return ember.zeros(3, { dtype = 'int8' }):fill_(300) end },
  { 'where', function() return ember.where(ember.zeros(3), ember.zeros(3), ember.zeros(3)) end },
  { 'clamp', function() return ember.zeros(3):clamp() end },
  { 'sum dim', function() return ember.zeros(3):sum(4) end },
  { 'mean int', function() return i64({ 1, 2 }):mean() end },
  { 'max dim', function() return ember.zeros(3):max(3) end },
  { 'softmax dim', function() return ember.zeros(3):softmax(3) end },
  { 'var option', function() return ember.zeros(3):var({ bias = 1 }) end },
  { 'topk', function() return ember.zeros(3):topk(5) end },
  { 'sort dim', function() return ember.zeros(3):sort(4) end },
  { 'cumsum dim', function() return ember.zeros(3):cumsum(4) end },
  { 'argmax dim', function() return ember.zeros(3):argmax(4) end },
  { 'zeros fractional', function() return ember.zeros(2.5) end },
  { 'zeros options', function() return ember.zeros(2, { dtpye = 'float64' }) end },
  { 'zeros dtype', function() return ember.zeros(2, { dtype = 'float128' }) end },
  { 'ones device', function() return ember.ones(2, { device = 'gpu9' }) end },
  { 'full value', function() return ember.full({ 2 }, 'x') end },
  { 'arange step', function() return ember.arange(0, 1, 0) end },
  { 'linspace steps', function() return ember.linspace(0, 1, -1) end },
  { 'eye', function() return ember.eye(-1) end },
  { 'tensor ragged', function() return ember.tensor({ { 1, 2 }, { 3 } }) end },
  { 'rand size', function() return ember.rand(-1) end },
  { 'randint', function() return ember.randint(5, 1, { 3 }) end },
  { 'multinomial', function() return ember.multinomial(ember.zeros(3), 1) end },
  { 'to', function() return ember.zeros(2):to('float128') end },
  { 'item', function() return ember.zeros(2):item() end },
  { 'no method', function() return ember.zeros(2):nosuch() end },
  { 'ember field', function() return ember.zeors(2) end },
  { 'copy_', function() return ember.zeros(2):copy_(ember.zeros(3)) end },
  { 'add_ in place dtype', function() return i64({ 1 }):add_(0.5) end },
  { 'div_ rounding', function() return i64({ 1 }):div_(2.5, 'floor') end },
  { 'div mode', function() return ember.zeros(1):div(2, 'round') end },
  { 'softplus int', function() return i64({ 1 }):softplus(2, 3) end },
  { 'bool sub', function() return ember.tensor({ true }):sub(ember.tensor({ true }), 2) end },
  { 'add alpha', function() return i64({ 1 }):add(1, 0.5) end },
  { 'backward no grad', function() return ember.zeros(2):sum():backward() end },
  { 'backward non-scalar', function() return ember.zeros(2, { dtype = 'float32' }):requires_grad_():mul(2):backward() end },
  { 'requires_grad int', function() return i64({ 1 }):requires_grad_() end },
  { 'grad of', function() return ember.autograd.grad({ ember.zeros(1) }, { ember.zeros(1) }) end },
  { 'Linear input', function() return nn.Linear(3, 2)(ember.zeros(2, 4)) end },
  { 'Linear option', function() return nn.Linear(3, 2, { biass = false }) end },
  { 'Linear size', function() return nn.Linear(0, 2) end },
  { 'Conv2d input', function() return nn.Conv2d(3, 4, 3)(ember.zeros(1, 2, 5, 5)) end },
  { 'Conv2d option', function() return nn.Conv2d(3, 4, 3, { stirde = 1 }) end },
  { 'MaxPool2d input', function() return nn.MaxPool2d(2)(ember.zeros(3)) end },
  { 'BatchNorm input', function() return nn.BatchNorm1d(3)(ember.zeros(2, 4)) end },
  { 'LayerNorm input', function() return nn.LayerNorm(3)(ember.zeros(2, 4)) end },
  { 'Embedding index', function() return nn.Embedding(3, 2)(i64({ 5 })) end },
  { 'Embedding float index', function() return nn.Embedding(3, 2)(ember.zeros(2)) end },
  { 'LookupTable padding', function() return nn.LookupTable(3, 2, 7) end },
  { 'Sequential forward', function()
    return nn.Sequential():add(nn.Linear(2, 3)):add(nn.Linear(4, 1))(ember.zeros(1, 2))
  end },
  { 'Sequential add', function() return nn.Sequential():add(3) end },
  { 'MSELoss shapes', function() return nn.MSELoss()(ember.zeros(2), ember.zeros(3)) end },
  { 'CrossEntropy class', function() return nn.CrossEntropyLoss()(ember.zeros(2, 3), i64({ 1, 9 })) end },
  { 'NLLLoss target', function() return F.nll_loss(ember.zeros(2, 3), ember.zeros(2)) end },
  { 'criterion backward', function() return nn.MSELoss():backward(ember.zeros(2), ember.zeros(3)) end },
  { 'F.linear', function() return F.linear(ember.zeros(2, 3), ember.zeros(2, 4)) end },
  { 'F.softmax', function() return F.softmax(ember.zeros(2), 4) end },
  { 'F.dropout', function() return F.dropout(ember.zeros(2), 2) end },
  { 'F.conv2d', function() return F.conv2d(ember.zeros(1, 1, 3, 3), ember.zeros(1, 2, 2, 2)) end },
  { 'F.embedding', function() return F.embedding(i64({ 9 }), ember.zeros(3, 2)) end },
  { 'F.layer_norm', function() return F.layer_norm(ember.zeros(2, 3), { 4 }) end },
  { 'GRU input', function() return nn.GRU(3, 4)(ember.zeros(2, 1, 5)) end },
  { 'MHA input', function()
    return nn.MultiheadAttention(4, 2)(ember.zeros(2, 1, 3), ember.zeros(2, 1, 3), ember.zeros(2, 1, 3))
  end },
  { 'SGD option', function() return ember.optim.SGD({ ember.zeros(1) }, { lrr = 1 }) end },
  { 'Adam lr', function() return ember.optim.Adam({ ember.zeros(1) }, { lr = -1 }) end },
  { 'optim params', function() return ember.optim.SGD(3, { lr = 1 }) end },
  { 'DataLoader option', function()
    return ember.data.DataLoader(ember.data.TensorDataset(ember.zeros(4)), { batchsize = 1 })
  end },
  { 'TensorDataset sizes', function() return ember.data.TensorDataset(ember.zeros(4), ember.zeros(3)) end },
  { 'save path', function() return ember.save('/nonexistent/dir/x.safetensors', { a = ember.zeros(1) }) end },
  { 'load path', function() return ember.load('/nonexistent/x.safetensors') end },
  { 'load option', function() return ember.load('/nonexistent/x.safetensors', { mmap = true }) end },
  { 'read_csv', function() return ember.data.read_csv('/nonexistent.csv') end },
  { 'set_num_threads', function() return ember.set_num_threads(0) end },
  { 'set_default_dtype', function() return ember.set_default_dtype('float128') end },
  { 'manual_seed', function() return ember.manual_seed('x') end },
  { 'no_grad arg', function() return ember.no_grad(3) end },
  { 'autocast option', function() return ember.autocast({ devcie = 'cpu' }, function() end) end },
  { 'sample option', function() return ember.generation.sample(ember.zeros(1, 3), { topk = 3 }) end },
  { 'state_dict load', function() return nn.Linear(2, 2):load_state_dict({ weight = ember.zeros(3, 3) }) end },
  { 'clip_grad_norm', function() return ember.optim.clip_grad_norm_(3, 1) end },
  -- the wider API: math, shaping, linear algebra, nn.functional extras
  { 'einsum', function() return ember.einsum('ij,jk->ik', ember.zeros(2, 3), ember.zeros(4, 2)) end },
  { 'kron', function() return ember.kron(ember.zeros(2), 'x') end },
  { 'diagonal dim', function() return ember.zeros(2, 2):diagonal(0, 1, 9) end },
  { 'movedim', function() return ember.zeros(2, 2):movedim(1, 5) end },
  { 'tile', function() return ember.zeros(2):tile(-1) end },
  { 'linalg.inv', function() return ember.linalg.inv(ember.zeros(2, 3)) end },
  { 'linalg.solve', function() return ember.linalg.solve(ember.eye(2), ember.zeros(3)) end },
  { 'cross', function() return ember.zeros(2):cross(ember.zeros(2)) end },
  { 'hypot operand', function() return ember.zeros(2):hypot('x') end },
  { 'isin', function() return ember.zeros(2):isin('x') end },
  { 'searchsorted', function() return ember.searchsorted(ember.zeros(2, 2), ember.zeros(3)) end },
  { 'bincount', function() return ember.tensor({ -1 }, { dtype = 'int64' }):bincount() end },
  { 'quantile', function() return ember.zeros(3):quantile(2) end },
  { 'F.pad mode', function() return F.pad(ember.zeros(1, 2, 3), { 1, 1 }, 'mirror') end },
  { 'F.interpolate', function() return F.interpolate(ember.zeros(1, 1, 2, 2), { scale_factor = 2, mode = 'cubic' }) end },
  { 'F.glu', function() return F.glu(ember.zeros(3)) end },
  { 'huber shapes', function() return F.huber_loss(ember.zeros(2), ember.zeros(3)) end },
  { 'Conv3d input', function() return nn.Conv3d(2, 2, 1)(ember.zeros(1, 3, 2, 2, 2)) end },
}

describe('error positions', function()
  local here = debug.getinfo(1, 'S').source:match('^@(.*)$')
  for _, c in ipairs(bad) do
    it(c[1] .. ': the message points at the calling line, not at Ember', function()
      local ok, err = pcall(c[2])
      assert.is_false(ok, c[1] .. ' should fail')
      local msg = tostring(err)
      assert(not msg:find('^[^:]*ember/[%w_/]+%.lua:%d+:'),
        c[1] .. ': the message starts with an internal path: ' .. msg)
      local path = msg:match('^([^:]*%.lua):%d+:')
      assert(path == nil or path == here, c[1] .. ': unexpected position in ' .. msg)
    end)
  end
end)

-- ---- the REPL with piped input ----------------------------------------------------------------
local BIN = os.getenv('EMBER_BIN') or 'build/ember'

-- Runs `input` through the REPL's stdin; returns stdout and stderr together, and the status.
local function pipe(input)
  local path = os.tmpname()
  local f = assert(io.open(path, 'w'))
  f:write(input)
  f:close()
  local p = io.popen(('env -u EMBER_DEVICE %s < %q 2>&1; echo "rc=$?"'):format(BIN, path))
  local out = p:read('*a')
  p:close()
  os.remove(path)
  local rc = tonumber(out:match('rc=(%d+)\n$'))
  return (out:gsub('rc=%d+\n$', '')), rc
end

describe('the REPL', function()
  it('exits non-zero when piped input raised an error, and goes on to the end', function()
    local out, rc = pipe('x = 1\nember.zeros(2.5)\nprint("after", x)\n')
    assert.are.equal(1, rc, out)
    assert.is_truthy(out:find('stdin:1: zeros: expected an integer size, got 2.5', 1, true), out)
    assert.is_truthy(out:find('after\t1', 1, true), out)
    local out2, rc2 = pipe('x = (\n') -- incomplete at the end of input
    assert.are.equal(1, rc2, out2)
    local out3, rc3 = pipe('x = 1 +\n')
    assert.are.equal(1, rc3, out3)
    local ok, rc4 = pipe('x = 1\nx + 1\n')
    assert.are.equal(0, rc4, ok)
  end)

  it('keeps the last result in _', function()
    local out, rc = pipe('ember.tensor({1.5, 2})\n_ * 2\nprint(_:sum():item())\n40 + 2\nprint(_)\n')
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find('tensor([3., 4.])', 1, true), out)
    assert.is_truthy(out:find('\n7\n', 1, true), out)
    assert.is_truthy(out:find('\n42\n42\n', 1, true), out)
  end)

  it('reports errors of Ember calls at the user line', function()
    local out = pipe('x = ember.zeros(2, 3)\nx:view(4, 2)\n')
    assert.is_truthy(out:find('stdin:1: view: shape', 1, true), out)
    assert.is_falsy(out:find('^lua/ember/'), out)
  end)
end)

describe('a tensor that requires grad', function()
  it('says so in its repr, with the op that made it', function()
    local x = ember.ones(2):requires_grad_()
    assert.are.equal('tensor([1., 1.], requires_grad=true)', tostring(x))
    assert.are.equal('tensor([2., 2.], grad_fn=<MulBackward>)', tostring(x * 2))
    assert.are.equal('tensor([1., 1.])', tostring(x:detach()))
    local d = ember.ones(2, { dtype = 'float64' }):requires_grad_()
    assert.are.equal('tensor([1., 1.], dtype=float64, requires_grad=true)', tostring(d))
  end)
end)
