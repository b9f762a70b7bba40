-- atomic_save_spec: what an atomic save (runtime/src/io/atomic.c) does to the file it replaces,
-- through ember.save and ember.data.write_npy: the file's mode is kept, a symbolic link is
-- written through to its target (the link stays), and temporary files left by writers that
-- died mid-save are removed by the next save to that path, while a live writer's are not.
local H = require 'tests.lua.helpers'
local ember = H.ember

local function sh(cmd)
  local f = assert(io.popen(cmd))
  local out = f:read('*a')
  f:close()
  return (out:gsub('%s+$', ''))
end

local dir
local function path(name) return dir .. '/' .. name end

describe('atomic saves', function()
  setup(function() dir = sh('mktemp -d /tmp/ember_atomic_XXXXXX') end)
  teardown(function() os.execute('rm -rf ' .. dir) end)

  it('keep the mode of the file they replace', function()
    local p = path('mode.safetensors')
    ember.save(p, { w = ember.ones(2) })
    os.execute('chmod 600 ' .. p)
    ember.save(p, { w = ember.zeros(3) })
    assert.are.equal('600', sh('stat -c %a ' .. p))
    os.execute('chmod 640 ' .. p)
    ember.data.write_npy(p, ember.ones(1))
    assert.are.equal('640', sh('stat -c %a ' .. p))
    -- a new file gets the usual 0666 less the umask
    local q = path('fresh.npy')
    ember.data.write_npy(q, ember.ones(1))
    local umask = tonumber(sh('umask'), 8)
    assert.are.equal(('%o'):format(bit.band(438, bit.bnot(umask))), sh('stat -c %a ' .. q))
  end)

  it('write through a symbolic link to its target, keeping the link', function()
    os.execute('mkdir -p ' .. path('run3'))
    local target = path('run3/ckpt')
    ember.save(target, { step = 1 })
    os.execute('ln -s run3/ckpt ' .. path('latest'))          -- relative link
    os.execute('ln -s ' .. path('latest') .. ' ' .. path('chain')) -- a link to the link
    ember.save(path('latest'), { step = 2 })
    assert.are.equal(0, os.execute('test -L ' .. path('latest')))
    assert.are.equal(2, ember.load(target).step)
    ember.save(path('chain'), { step = 3 })
    assert.are.equal(0, os.execute('test -L ' .. path('chain')))
    assert.are.equal(0, os.execute('test -L ' .. path('latest')))
    assert.are.equal(3, ember.load(target).step)
    -- a dangling link creates its target
    os.execute('ln -s made_later ' .. path('dangling'))
    ember.save(path('dangling'), { step = 4 })
    assert.are.equal(0, os.execute('test -L ' .. path('dangling')))
    assert.are.equal(4, ember.load(path('made_later')).step)
  end)

  it('remove temporary files of dead writers, and only those', function()
    local p = path('model.safetensors')
    ember.save(p, { w = ember.ones(1) })
    -- a pid that has exited: the shell's own, printed before it ends
    local dead = sh('sh -c \'echo $$\'')
    local live = sh('sleep 30 >/dev/null 2>&1 & echo $!')
    local stale = p .. '.tmp.' .. dead .. '.0'
    local busy = p .. '.tmp.' .. live .. '.7'
    local other = path('other.safetensors.tmp.' .. dead .. '.0')
    local odd = p .. '.tmp.' .. dead .. '.x'
    for _, f in ipairs({ stale, busy, other, odd }) do H.write_file(f, 'partial') end
    ember.save(p, { w = ember.zeros(1) })
    os.execute('kill ' .. live)
    assert.is_nil(io.open(stale))
    assert.is_not_nil(io.open(busy))
    assert.is_not_nil(io.open(other)) -- another path's
    assert.is_not_nil(io.open(odd))   -- not a name a writer makes
    assert.are.equal(0, ember.load(p).w:item())
  end)
end)
