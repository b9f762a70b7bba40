-- quant_generate_spec: quantized inference in the GPT example. ember.models.gpt's quantize
-- turns a small GPT's Linear layers and embeddings into block-dtype tensors (the tied LM head
-- through the quantized Linear), its logits stay close to the dense model's, and
-- `examples/generate.lua --quantize` runs from a checkpoint of examples/gpt.lua's layout on the
-- CPU (a tiny model written here, so the test needs no training run).
local H = require 'tests.lua.helpers'
local ember = H.ember
local G = require 'ember.models.gpt'

local bin = os.getenv('EMBER_BIN') or 'build/ember'

local function run(args)
  local p = io.popen(bin .. ' ' .. args .. ' 2>&1; echo "exit=$?"')
  local out = p:read('*a')
  p:close()
  return out, tonumber(out:match('exit=(%d+)%s*$'))
end

local CONFIG = { vocab_size = 12, block_size = 16, n_layer = 1, n_head = 2, n_embd = 64 }

describe('quantized GPT', function()
  it('quantizes every Linear and embedding, the tied head included, close to the dense logits', function()
    ember.manual_seed(5)
    local m = G.GPT(CONFIG)
    m:evaluate()
    local idx = ember.tensor({ { 1, 5, 3, 12, 7 } }, { dtype = 'int64' })
    local dense = ember.no_grad(function() return m(idx) end)
    local _, report = G.quantize(m, { format = 'q8_0', verbose = false })
    -- wte, wpe, and the block's four Linear layers (qkv, attention out, MLP in and out)
    assert.are.equal(6, #report.quantized)
    assert.are.same({}, report.skipped)
    assert.are.equal('q8_0', m.transformer.wte.weight:dtype())
    local q = ember.no_grad(function() return m(idx) end)
    local err = (q - dense):abs():max():item()
    assert.is_true(err < 0.05 * dense:abs():max():item(), 'error ' .. err)
    -- q4_k: rows of 64 are not whole 256-weight blocks; the fallback q4_0 serves, except the
    -- MLP's output layer (in_features 256), which has no q4_k Linear kernel on this CPU
    ember.manual_seed(5)
    local m2 = G.GPT(CONFIG)
    local _, r2 = G.quantize(m2, { format = 'q4_k', fallback = 'q4_0', verbose = false })
    assert.is_true(#r2.fallback >= 5)
    for _, s in ipairs(r2.skipped) do assert.matches('not implemented on cpu for q4_k', s[2]) end
  end)

  it('generates with examples/generate.lua --quantize on the CPU', function()
    ember.manual_seed(2)
    local m = G.GPT(CONFIG)
    local path = os.tmpname()
    local chars = {}
    for i = 1, CONFIG.vocab_size do chars[i] = 96 + i end  -- 'a' .. 'l'
    ember.save(path, { model = m:state_dict(), config = CONFIG, step = 1,
      vocab = ember.tensor(chars, { dtype = 'uint8' }) })
    for _, f in ipairs({ 'q8_0', 'q4_0', 'q4_k' }) do
      local out, code = run('examples/generate.lua --checkpoint ' .. path .. ' --quantize ' .. f ..
        " --prompt 'abc' --max-new-tokens 12 --device cpu --threads 1")
      assert.are.equal(0, code, out)
      assert.is_truthy(out:find('generate: quantized %d+ layers to ' .. f), out)
      assert.is_truthy(out:find('\nabc[a-l]+\n'), out)
    end
    local out, code = run('examples/generate.lua --checkpoint ' .. path .. ' --quantize q5 --prompt abc')
    os.remove(path)
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('--quantize: expected format to be one of', 1, true), out)
  end)
end)
