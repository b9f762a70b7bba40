-- Inputs, layouts and checks shared by reduce_spec.lua and reduce_dim_spec.lua.
--
-- Inputs are multiples of 1/8 in [-4, 4] (exact in every float dtype, bfloat16 included), so
-- references see exactly the values the tensors hold and only the output rounding of each
-- dtype enters the tolerance.
local H = require 'tests.lua.helpers'
local ember = H.ember
local ref = require 'tests.lua.reduce_ref'
local ref_reduce = ref.reduce

local function eighths(shape, lo, hi)
  lo, hi = lo or -32, hi or 32
  return H.nested(shape, function() return math.floor(H.uniform(lo, hi + 1)) / 8 end)
end

local function ints(shape, lo, hi)
  return H.nested(shape, function() return math.floor(H.uniform(lo, hi + 1)) end)
end

-- Tolerances for results stored in each dtype.
local tol = {
  float32 = { 1e-6, 1e-6 }, float64 = { 1e-12, 1e-12 }, float16 = { 2e-3, 2e-3 },
  bfloat16 = { 1e-2, 1e-2 }, int32 = { 0, 0 }, int64 = { 0, 0 }, bool = { 0, 0 },
}

-- 3-D layouts of table t ([a][b][c]): contiguous, permuted (the data laid out [c][a][b] and
-- permuted back), and the first slice expanded.
local function variants3(t, dtype)
  local s = H.shape_of(t)
  local out = { { 'contiguous', ember.tensor(t, { dtype = dtype }), t } }
  local p = {}
  for k = 1, s[3] do
    p[k] = {}
    for i = 1, s[1] do
      p[k][i] = {}
      for j = 1, s[2] do p[k][i][j] = t[i][j][k] end
    end
  end
  out[#out + 1] = { 'permuted', ember.tensor(p, { dtype = dtype }):permute(2, 3, 1), t }
  local e = {}
  for i = 1, s[1] do e[i] = t[1] end
  out[#out + 1] = { 'expanded', ember.tensor(t[1], { dtype = dtype }):expand(s[1], s[2], s[3]), e }
  return out
end

-- The 2-D shapes every op runs on: short lines (which take the kernels' column path in any
-- layout) and lines longer than the short-reduction cutoff (the row path when contiguous).
local SHAPES = { { 5, 7 }, { 3, 41 } }

-- H.variants of make(shape) for every shape in SHAPES, named with the shape.
local function layouts(make, dtype)
  local out = {}
  for _, s in ipairs(SHAPES) do
    for _, v in ipairs(H.variants(make(s), { dtype = dtype })) do
      out[#out + 1] = { ('%s [%d,%d]'):format(v[1], s[1], s[2]), v[2], v[3] }
    end
  end
  return out
end

-- Checks `name` against R[name] on 2-D layouts for dims nil, 1, 2, -1 and keepdim both ways.
local function check_2d(name, ref, dtypes, make)
  for _, dtype in ipairs(dtypes) do
    H.seed(7)
    local rt, at = tol[dtype][1], tol[dtype][2]
    for _, v in ipairs(layouts(make or eighths, dtype)) do
      local lname, x, xt = v[1], v[2], v[3]
      local flat, shape = H.flatten(xt), H.shape_of(xt)
      for _, dim in ipairs({ false, 1, 2, -1 }) do
        for _, keepdim in ipairs({ false, true }) do
          local d = dim or nil
          -- totable first: the helper cannot take a 0-d false bool tensor
          local got = x[name](x, d, keepdim):totable()
          local what = ('%s %s %s dim=%s keepdim=%s'):format(name, dtype, lname, tostring(d),
            tostring(keepdim))
          H.assert_close(got, ref_reduce(flat, shape, d, keepdim, ref), rt, at, what)
        end
      end
    end
  end
end

local function check_3d(name, ref, dtype, opts_fn)
  H.seed(11)
  local t = eighths({ 3, 4, 5 })
  local rt, at = tol[dtype][1], tol[dtype][2]
  for _, v in ipairs(variants3(t, dtype)) do
    local lname, x, xt = v[1], v[2], v[3]
    local flat, shape = H.flatten(xt), H.shape_of(xt)
    for _, dims in ipairs({ { 1, 3 }, { 2 }, { -1, 1 }, { 1, 2, 3 }, { 3, 2 } }) do
      for _, keepdim in ipairs({ false, true }) do
        local got = (opts_fn and opts_fn(x, dims, keepdim) or x[name](x, dims, keepdim)):totable()
        local what = ('%s %s dims={%s} keepdim=%s'):format(name, lname, table.concat(dims, ','),
          tostring(keepdim))
        H.assert_close(got, ref_reduce(flat, shape, dims, keepdim, ref), rt, at, what)
      end
    end
  end
end

return {
  eighths = eighths, ints = ints, tol = tol, variants3 = variants3, SHAPES = SHAPES,
  layouts = layouts, check_2d = check_2d, check_3d = check_3d,
}
