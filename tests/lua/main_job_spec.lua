-- The main job (examples/fashion_mnist.lua) and examples/predict.lua, run as a user runs them,
-- on a small slice of Fashion-MNIST: options, config files, checkpoints and exact resumption.
local H = require 'tests.lua.helpers'
local ember = H.ember

local bin = os.getenv('EMBER_BIN') or 'build/ember'
local data = '/usr/share/datasets/fashion-mnist'

local function run(args)
  local p = io.popen(bin .. ' ' .. args .. ' 2>&1; echo "exit=$?"')
  local out = p:read('*a')
  p:close()
  local code = tonumber(out:match('exit=(%d+)%s*$'))
  return out, code
end

local function have_data()
  local f = io.open(data .. '/train-images-idx3-ubyte.gz', 'rb')
  if f then f:close() return true end
  return false
end

describe('examples/fashion_mnist.lua', function()
  if not have_data() then
    pending('Fashion-MNIST is not installed (dataset-fashion-mnist)')
    return
  end
  local dir = os.tmpname()
  os.remove(dir)
  os.execute('mkdir -p ' .. dir)
  local common = ' --model mlp --limit 1024 --batch-size 64 --threads 1 --workers 0 --seed 7'

  it('prints its options', function()
    local out, code = run('examples/fashion_mnist.lua --help')
    assert.are.equal(0, code)
    for _, opt in ipairs({ '--model', '--epochs', '--batch-size', '--lr', '--optimizer', '--device',
      '--threads', '--seed', '--workers', '--checkpoint', '--resume', '--config' }) do
      assert.is_truthy(out:find(opt, 1, true), opt)
    end
  end)

  it('trains, reports per epoch and resumes exactly from a checkpoint', function()
    local full = dir .. '/full.ckpt'
    local curves = dir .. '/curves.png'
    local out, code = run('examples/fashion_mnist.lua' .. common .. ' --epochs 2 --checkpoint ' .. full ..
      ' --plot ' .. curves)
    assert.are.equal(0, code, out)
    -- --plot: the loss and accuracy charts side by side, read back by an independent decoder
    local png = require('tests.lua.png_helpers').decode(curves)
    assert.are.same({ 1200, 450, 3 }, { png.width, png.height, png.channels })
    assert.is_truthy(out:find('epoch 1: train loss %d+%.%d+, test accuracy 0%.%d+, %d+ samples/s'), out)
    assert.is_truthy(out:find('epoch 2: train loss', 1, true), out)
    local acc = tonumber(out:match('final test accuracy: (%d+%.%d+)'))
    assert.is_true(acc > 0.6, out) -- two epochs on 1024 images: far above chance (0.1)

    local half = dir .. '/half.ckpt'
    out, code = run('examples/fashion_mnist.lua' .. common .. ' --epochs 1 --checkpoint ' .. half)
    assert.are.equal(0, code, out)
    local resumed = dir .. '/resumed.ckpt'
    out, code = run('examples/fashion_mnist.lua' .. common .. ' --epochs 2 --resume ' .. half ..
      ' --checkpoint ' .. resumed)
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find('resumed from', 1, true), out)
    local a, b = ember.load(full), ember.load(resumed)
    assert.are.equal(2, a.epoch)
    assert.are.equal(2, b.epoch)
    local na = 0
    for name, t in pairs(a.model) do
      local u = b.model[name]
      local function cmp(x, y)
        if ember.is_tensor(x) then
          assert.are.equal(0, (x - y):abs():max():item(), name)
          na = na + 1
        else
          for k, v in pairs(x) do cmp(v, y[k]) end
        end
      end
      cmp(t, u)
    end
    assert.is_true(na >= 6)
  end)

  it('trains in mixed precision (--precision bf16, fp16) to float32 accuracy', function()
    local acc = {}
    for _, p in ipairs({ 'fp32', 'bf16', 'fp16' }) do
      local ckpt = dir .. '/' .. p .. '.ckpt'
      local out, code = run('examples/fashion_mnist.lua' .. common .. ' --epochs 2 --precision ' .. p ..
        ' --checkpoint ' .. ckpt)
      assert.are.equal(0, code, out)
      assert.is_truthy(out:find(', ' .. p .. ', 1 threads', 1, true), out)
      acc[p] = tonumber(out:match('final test accuracy: (%d+%.%d+)'))
      local saved = ember.load(ckpt)
      -- float32 master weights in every precision; the loss scaler's state with fp16 only
      for name, t in pairs(saved.model) do assert.are.equal('float32', t:dtype(), name) end
      if p == 'fp16' then
        assert.is_true(saved.scaler.scale > 1, 'fp16 saves its loss scale')
      else
        assert.is_nil(saved.scaler)
      end
    end
    -- two epochs on 1024 images: 16-bit rounding moves the accuracy a little, not more
    assert.is_true(math.abs(acc.bf16 - acc.fp32) < 0.03, ('bf16 %.4f fp32 %.4f'):format(acc.bf16, acc.fp32))
    assert.is_true(math.abs(acc.fp16 - acc.fp32) < 0.03, ('fp16 %.4f fp32 %.4f'):format(acc.fp16, acc.fp32))
    local out, code = run('examples/fashion_mnist.lua --precision fp8')
    assert.are.equal(1, code)
    assert.is_truthy(out:find("--precision: expected precision fp32, bf16 or fp16, got 'fp8'", 1, true), out)
  end)

  it('reads a config file and key=value overrides', function()
    local cfg = dir .. '/cfg.lua'
    local f = assert(io.open(cfg, 'w'))
    f:write("return { model = 'mlp', epochs = 1, lr = 0.002, limit = 512 }\n")
    f:close()
    local out, code = run('examples/fashion_mnist.lua --config ' .. cfg ..
      ' --threads 1 --workers 0 --checkpoint "" batch_size=128')
    assert.are.equal(0, code, out)
    assert.is_truthy(out:find('512 training', 1, true), out)
    out, code = run('examples/fashion_mnist.lua --model transformer')
    assert.are.equal(1, code)
    assert.is_truthy(out:find("--model must be cnn or mlp, got 'transformer'", 1, true), out)
    out, code = run('examples/fashion_mnist.lua --epochs many')
    assert.are.equal(1, code)
    assert.is_truthy(out:find('option --epochs: expected a number, got "many"', 1, true), out)
  end)

  it('classifies test images by name with examples/predict.lua', function()
    local ckpt = dir .. '/full.ckpt'
    local grid = dir .. '/grid.png'
    local out, code = run('examples/predict.lua --checkpoint ' .. ckpt .. ' --count 5 --grid ' .. grid)
    assert.are.equal(0, code, out)
    -- --grid: five images three times their size, labels under them
    local png = require('tests.lua.png_helpers').decode(grid)
    assert.are.same({ 5 * 96 + 8, 114 + 8 }, { png.width, png.height })
    local lines = 0
    for line in out:gmatch('image%s+%d+: [^\n]+true: ') do lines = lines + 1; local _ = line end
    assert.are.equal(5, lines, out)
    assert.is_truthy(out:find('Ankle boot', 1, true), out) -- test image 1 is an ankle boot
    assert.is_truthy(out:find('%d of 5 correct'), out)
  end)
end)

-- examples/adaptive_batch.lua: a memory limit makes the first batch sizes fail; the example
-- halves the batch size on each out-of-memory error and finishes the epoch with one that fits.
describe('examples/adaptive_batch.lua', function()
  local script = 'examples/adaptive_batch.lua --samples 2048 --batch-size 1024 --threads 1 '

  -- Checks the output of a run that started at 1024 and had to come down to 128, and
  -- returns it.
  local function check_run(out, code, device)
    assert.are.equal(0, code, out)
    local halvings = {}
    for from, to in out:gmatch('out of memory at batch (%d+) %(out of memory on ' .. device:gsub('%p', '%%%0') ..
      ': tried to allocate [^\n]*%); batch size now (%d+)\n') do
      halvings[#halvings + 1] = { tonumber(from), tonumber(to) }
    end
    assert.are.same({ { 1024, 512 }, { 512, 256 }, { 256, 128 } }, halvings, out)
    assert.is_truthy(out:find('epoch 1: 16 steps, loss', 1, true), out) -- 2048 samples by 128
    local final, loss = out:match('final batch size (%d+), loss (%S+)\n')
    assert.are.equal('128', final, out)
    loss = tonumber(loss)
    -- random 10-class data: the loss starts near log(10) = 2.30 and a few steps move it a little
    assert.is_true(loss ~= nil and loss > 0 and loss < 3, out)
    assert.is_truthy(out:find('memory on ' .. device .. ': allocated [^\n]*limit 5%.0 MiB, %d+ allocations'), out)
    return out
  end

  it('halves the batch size on out-of-memory until a step fits, on the CPU', function()
    -- The model, its gradients and Adam's state take 3.6 MiB; under a 5 MiB limit the steps
    -- of 1024, 512 and 256 samples fail, 128 fit (measured; one thread, so deterministic).
    local out, code = run(script .. '--device cpu --limit 5M')
    check_run(out, code, 'cpu')
    -- without a limit the first batch size fits
    out, code = run(script .. '--device cpu')
    assert.are.equal(0, code, out)
    assert.is_falsy(out:find('out of memory', 1, true), out)
    assert.is_truthy(out:find('final batch size 1024, loss %d+%.%d+'), out)
  end)

  it('re-raises what is not out of memory, and out of memory at batch size 1', function()
    -- 2 MiB hold the model (0.9 MiB) but not its gradients and Adam's state besides
    local out, code = run(script .. '--device cpu --limit 2M')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('out of memory at batch 2 (', 1, true), out)
    assert.is_truthy(out:find('batch size now 1\n', 1, true), out)
    assert.is_truthy(out:find('\nember: [^\n]*out of memory on cpu'), out) -- batch 1 failed too
    assert.is_falsy(out:find('final batch size', 1, true), out)
    out, code = run(script .. '--device cpu --limit lots')
    assert.are.equal(1, code, out)
    assert.is_truthy(out:find('option --limit: expected bytes or a size such as 64M, got "lots"', 1, true), out)
  end)

  local VK = require('vk_helpers')
  if VK.V == nil then
    pending('no Vulkan device: ' .. tostring(VK.why))
  else
    it('halves the batch size on out-of-memory on ' .. VK.V, function()
      local out, code = run(script .. '--device ' .. VK.V .. ' --limit 5M')
      check_run(out, code, VK.V)
    end)
  end
end)
