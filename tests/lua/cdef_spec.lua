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
    section = ('\n' .. section):gsub('\nEM_API ', '\n')
    package.path = 'lua/?.lua;' .. package.path
    local cdef = dofile('lua/ember/cdef.lua')
    assert.are.equal(normalize(section), normalize(cdef),
      'lua/ember/cdef.lua drifted from the header: run scripts/sync-cdef.sh')
  end)

  -- The library is built with hidden visibility: a function declared without EM_API is not
  -- exported, and LuaJIT would fail to find it only when first called.
  it('marks every function of the FFI section EM_API', function()
    local f = assert(io.open('runtime/include/ember.h'))
    local header = f:read('*a')
    f:close()
    local section = header:match('EMBER_FFI_BEGIN.-%*/(.*)/%* EMBER_FFI_END')
    local unmarked = {}
    for line in section:gmatch('[^\n]+') do
      if line:match('^[%a_][%w_%s%*]-em_[%w_]+%s*%(') and not line:match('^EM_API ')
          and not line:match('^typedef') then
        unmarked[#unmarked + 1] = line
      end
    end
    assert.are.same({}, unmarked)
  end)

  it('has no preprocessor lines (LuaJIT cannot parse them)', function()
    local cdef = dofile('lua/ember/cdef.lua')
    assert.is_nil(cdef:find('\n%s*#'))
  end)
end)
