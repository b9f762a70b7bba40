-- The Lua cdef must be the header's FFI section, word for word (DESIGN.md decision 1).
describe('lua/ember/cdef.lua', function()
  local function normalize(s)
    s = s:gsub('/%*.-%*/', ''):gsub('//[^\n]*', '')
    return (s:gsub('%s+', ' '):gsub('^ ', ''):gsub(' $', ''))
  end

  it('matches the FFI section of runtime/include/ember.h', function()
    local f = assert(io.open('runtime/include/ember.h'))
    local header = f:read('*a')
    f:close()
    local section = header:match('EMBER_FFI_BEGIN.-%*/(.*)/%* EMBER_FFI_END')
    assert.is_truthy(section, 'header has no EMBER_FFI_BEGIN/END section')
    package.path = 'lua/?.lua;' .. package.path
    local cdef = dofile('lua/ember/cdef.lua')
    assert.are.equal(normalize(section), normalize(cdef),
      'lua/ember/cdef.lua drifted from the header: run scripts/sync-cdef.sh')
  end)

  it('has no preprocessor lines (LuaJIT cannot parse them)', function()
    local cdef = dofile('lua/ember/cdef.lua')
    assert.is_nil(cdef:find('\n%s*#'))
  end)
end)
