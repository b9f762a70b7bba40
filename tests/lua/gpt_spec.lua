-- The second main job (examples/gpt.lua) and examples/generate.lua, run as a user runs them on
-- a tiny GPT over Debian's fortunes: the loss falls, a run stopped and resumed from its
-- checkpoint prints the same losses and ends with the same weights as one never interrupted,
-- generation continues a prompt (with the key/value cache and without, the same text), and
-- misspelt or bad options are errors. ember.models.gpt's cache is checked against the full
-- forward.
local H = require 'tests.lua.helpers'
local ember = H.ember
local G = require 'ember.models.gpt'

local bin = os.getenv('EMBER_BIN') or 'build/ember'
local data = '/usr/share/games/fortunes'

local function run(args)
  local p = io.popen(bin .. ' ' .. args .. ' 2>&1; echo "exit=$?"')
  local out = p:read('*a')
  p:close()
  return out, tonumber(out:match('exit=(%d+)%s*$'))
end

local function have_data()
  local f = io.open(data .. '/fortunes', 'rb')
  if f then f:close() return true end
  return false
end

describe('ember.models.gpt', function()
  local function tiny()
    ember.manual_seed(3)
    local m = G.GPT { vocab_size = 20, block_size = 16, n_layer = 2, n_head = 2, n_embd = 16 }
    m:evaluate()
    return m
  end

  it('decodes with a key/value cache as the full forward does', function()
    local m = tiny()
    local ids = { 1, 5, 7, 3, 2, 9, 11, 4, 20, 6 }
    ember.no_grad(function()
      local full = m(ember.tensor({ ids }, { dtype = 'int64' }))[1]
      local cache = G.cache(m, 1)
      local first = m(ember.tensor({ { 1, 5, 7 } }, { dtype = 'int64' }), cache)[1]
      assert.is_true((first - full:narrow(1, 1, 3)):abs():max():item() < 1e-5)
      for i = 4, #ids do
        local l = m(ember.tensor({ { ids[i] } }, { dtype = 'int64' }), cache)[1][1]
        assert.is_true((l - full[i]):abs():max():item() < 1e-5, 'position ' .. i)
      end
      assert.are.equal(#ids, cache.len)
    end)
  end)

  it('generates the same tokens with and without the cache, within one block', function()
    local m = tiny()
    ember.manual_seed(5)
    local a = G.generate(m, { 1, 2 }, 12, { temperature = 1, top_k = 5 })
    ember.manual_seed(5)
    local b = G.generate(m, { 1, 2 }, 12, { temperature = 1, top_k = 5, cache = false })
    assert.are.same(a, b)
    assert.are.equal(12, #a)
    -- past the block size the cached form restarts from half a block; ids stay in range
    local long = G.generate(m, { 1 }, 40, { temperature = 1 })
    assert.are.equal(40, #long)
    for _, id in ipairs(long) do assert.is_true(id >= 1 and id <= 20) end
  end)

  it("trains as PyTorch's nanoGPT model does from the same weights (golden/make_gpt.py)", function()
    local golden = dofile('tests/lua/golden/gpt_tiny.lua')
    local m = G.GPT(golden.config)
    local sd = {}
    for name, w in pairs(golden.weights) do sd[name] = ember.tensor(w.values):view(w.shape) end
    m:load_state_dict(sd)
    local x = ember.tensor(golden.x, { dtype = 'int64' })
    local y = ember.tensor(golden.y, { dtype = 'int64' })
    local opt = G.optimizer(m, { lr = 1e-2, weight_decay = 0.1 })
    for i, want in ipairs(golden.steps) do
      opt:zero_grad()
      local loss = m:loss(x, y)
      loss:backward()
      local norm = ember.nn.utils.clip_grad_norm_(m:parameters(), 1.0)
      opt:step()
      assert.is_true(math.abs(loss:item() - want[1]) < 1e-5, ('step %d loss %.7f, PyTorch %.7f'):format(i, loss:item(), want[1]))
      assert.is_true(math.abs(norm - want[2]) < 1e-5, ('step %d norm %.7f, PyTorch %.7f'):format(i, norm, want[2]))
    end
  end)

  it('checks its config', function()
    assert.has_error(function() G.GPT { n_embd = 10, n_head = 3 } end,
      'GPT: n_embd (10) must be divisible by n_head (3)')
    assert.has_error(function() G.GPT { n_layers = 2 } end, "GPT: unknown config key 'n_layers'")
  end)
end)

describe('ember.precision: step with clipping', function()
  -- SGD at lr 1 moves the weights by minus the (clipped) gradient: its norm is the clip value.
  for _, p in ipairs({ 'fp32', 'fp16' }) do
    it('clips the ' .. (p == 'fp16' and 'unscaled ' or '') .. 'gradients to the total norm (' .. p .. ')', function()
      ember.manual_seed(2)
      local lin = ember.nn.Linear(8, 4)
      local params = lin:parameters()
      local before = {}
      for i, t in ipairs(params) do before[i] = t:detach():clone() end
      local opt = ember.optim.SGD(params, { lr = 1 })
      local recipe = require('ember.precision').new(p, 'cpu')
      local x = ember.randn(16, 8)
      local loss = recipe:forward(function() return (lin(x) ^ 2):mean() end)
      recipe:step(loss, opt, { clip = 0.05, params = params })
      local sq = 0
      for i, t in ipairs(params) do sq = sq + ((t:detach() - before[i]) ^ 2):sum():item() end
      assert.is_true(math.abs(math.sqrt(sq) - 0.05) < 1e-4, tostring(math.sqrt(sq)))
      assert.has_error(function() recipe:step(loss, opt, { clip = 1 }) end,
        'precision:step: expected opts.params (the parameters to clip) with opts.clip')
    end)
  end
end)

describe('examples/gpt.lua', function()
  if not have_data() then
    pending("Debian's fortunes package is not installed")
    return
  end
  local dir = os.tmpname()
  os.remove(dir)
  os.execute('mkdir -p ' .. dir)
  local common = 'examples/gpt.lua --n-layer 1 --n-head 2 --n-embd 16 --block-size 16 --batch-size 4' ..
    ' --steps 8 --eval-interval 4 --eval-batches 2 --warmup 2 --lr 0.01 --threads 1 --seed 5' ..
    ' --sample-tokens 20 --final-tokens 30 --dropout 0.1'

  local function losses(out)
    local r = {}
    for step, train, val in out:gmatch('step (%d+)/%d+: train loss (%S+), val loss (%S+),') do
      r[#r + 1] = { tonumber(step), train, val }
    end
    return r
  end

  it('trains, samples, and resumes exactly from a checkpoint', function()
    local full = dir .. '/full.ckpt'
    local curves = dir .. '/curves.png'
    local out, code = run(common .. ' --checkpoint ' .. full .. ' --plot ' .. curves)
    assert.are.equal(0, code, out)
    local png = require('tests.lua.png_helpers').decode(curves) -- --plot: read back independently
    assert.are.same({ 800, 500, 3 }, { png.width, png.height, png.channels })
    assert.is_truthy(out:find('fortunes: 43 files, %d+ characters'), out)
    assert.is_truthy(out:find('step 4/8: train loss %d%.%d+, val loss %d%.%d+, lr %S+, %d+ tokens/s'), out)
    assert.is_truthy(out:find('  sample: ', 1, true), out)
    assert.is_truthy(out:find('generated text:\n.', 1), out)
    local a = losses(out)
    assert.are.equal(2, #a, out)
    -- from log(114) = 4.74 at the start, eight steps at lr 0.01 bring the loss down
    assert.is_true(tonumber(a[2][3]) < tonumber(a[1][3]), out)
    assert.is_true(tonumber(a[2][3]) < 4.5, out)

    local half = dir .. '/half.ckpt'
    out, code = run(common .. ' --stop 4 --checkpoint ' .. half)
    assert.are.equal(0, code, out)
    assert.is_falsy(out:find('generated text', 1, true), out)
    local b = losses(out)
    assert.are.same(a[1], b[1])
    local resumed = dir .. '/resumed.ckpt'
    out, code = run(common .. ' --resume ' .. half .. ' --checkpoint ' .. resumed)
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find('resumed from ' .. half .. ' at step 4', 1, true), out)
    local c = losses(out)
    assert.are.same({ a[2] }, c)
    local x, y = ember.load(full), ember.load(resumed)
    assert.are.equal(8, x.step)
    assert.are.equal(8, y.step)
    local n = 0
    for name, t in pairs(x.model) do
      assert.are.equal(0, (t - y.model[name]):abs():max():item(), name)
      n = n + 1
    end
    assert.are.equal(2 + 12 + 2, n) -- embeddings, one block, the final LayerNorm (tied head)
    assert.are.same(x.vocab:totable(), y.vocab:totable())
  end)

  it('trains in bfloat16 and float16 autocast (clipping the unscaled gradients)', function()
    for _, p in ipairs({ 'bf16', 'fp16' }) do
      local out, code = run(common .. ' --precision ' .. p .. ' --checkpoint ""')
      assert.are.equal(0, code, out)
      assert.is_truthy(out:find(', ' .. p .. ', 1 threads', 1, true), out)
      local l = losses(out)
      assert.are.equal(2, #l, out)
      assert.is_true(tonumber(l[2][3]) < tonumber(l[1][3]), out)
    end
  end)

  it('generates from a checkpoint with examples/generate.lua', function()
    local ckpt = dir .. '/full.ckpt'
    local out, code = run('examples/generate.lua --checkpoint ' .. ckpt ..
      " --prompt 'The ' --max-new-tokens 40 --device cpu --seed 1")
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find('generate: [^\n]+ %(step 8%), [%d.]+M parameters, on cpu, fp32'), out)
    local text = out:match('\n(The [^\n]*)')
    assert.is_truthy(text, out)
    local again = run('examples/generate.lua --checkpoint ' .. ckpt ..
      " --prompt 'The ' --max-new-tokens 40 --device cpu --seed 1")
    assert.are.equal(text, again:match('\n(The [^\n]*)')) -- seeded
    out, code = run('examples/generate.lua --checkpoint ' .. ckpt .. ' --prompt "\xff"')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find("--prompt: the character '\\255' (byte 255) is not in the vocabulary", 1, true), out)
    out, code = run('examples/generate.lua --checkpoint ' .. dir .. '/none.ckpt')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('generate: cannot load the checkpoint', 1, true), out)
  end)

  it('rejects misspelt and bad options', function()
    local out, code = run('examples/gpt.lua --n-layers 2')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('unknown option n_layers (see --help)', 1, true), out)
    out, code = run('examples/gpt.lua --precision fp8')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find("--precision: expected precision fp32, bf16 or fp16, got 'fp8'", 1, true), out)
    out, code = run('examples/gpt.lua --steps 0')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('--steps: expected a positive integer, got 0', 1, true), out)
    out, code = run('examples/gpt.lua --n-embd 10 --n-head 3 --steps 1')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('n_embd (10) must be divisible by n_head (3)', 1, true), out)
    out, code = run('examples/generate.lua --top-k many')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('option --top_k: expected a number, got "many"', 1, true), out)
    out, code = run('examples/gpt.lua --help')
    assert.are.equal(0, code, out)
    for _, o in ipairs({ '--device', '--precision', '--n-layer', '--n-head', '--n-embd', '--block-size',
      '--batch-size', '--steps', '--lr', '--warmup', '--eval-interval', '--checkpoint', '--resume',
      '--seed', '--dropout' }) do
      assert.is_truthy(out:find(o, 1, true), o)
    end
  end)
end)
