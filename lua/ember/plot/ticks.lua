-- ember.plot.ticks: axis limits, tick positions and their labels for ember.plot's charts.
--
-- Linear axes get ticks at multiples of a "nice" step (1, 2 or 5 times a power of ten) aiming
-- at about `target` ticks. Logarithmic axes get ticks at the powers of ten; when fewer than
-- three fall in the range, at 1, 2 and 5 times them; when fewer than two even then, at a
-- linear axis's nice values. Labels are as short as the step allows: 0.25, 1.5, 100, 1e-05 is
-- written 1e-5.
local floor, ceil, log10, abs, max = math.floor, math.ceil, math.log10, math.abs, math.max
local M = {}

function M.nice_step(span, target)
  local raw = span / max(target, 1)
  local p = 10 ^ floor(log10(raw))
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    if m * p >= raw * (1 - 1e-9) then return m * p end
  end
  return 10 * p
end

-- Multiples of step in [lo, hi] (with a little slack for rounding).
local function multiples(lo, hi, step)
  local out = {}
  local eps = step * 1e-9
  for k = ceil((lo - eps) / step), floor((hi + eps) / step) do
    local v = k * step
    if abs(v) < eps then v = 0 end
    out[#out + 1] = v
  end
  return out
end

-- Linear ticks for [lo, hi]: values, step.
function M.linear(lo, hi, target)
  local step = M.nice_step(hi - lo, target)
  return multiples(lo, hi, step), step
end

-- Logarithmic ticks for [lo, hi] (values > 0).
function M.log(lo, hi, target)
  local out = {}
  local e0, e1 = floor(log10(lo)), ceil(log10(hi))
  for _, mantissas in ipairs({ { 1 }, { 1, 2, 5 } }) do
    out = {}
    for e = e0, e1 do
      for _, m in ipairs(mantissas) do
        local v = m * 10 ^ e
        if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then out[#out + 1] = v end
      end
    end
    if #out >= 3 then break end
  end
  if #out >= 2 then
    -- too many decades for the space: every k-th power of ten
    local every = ceil(#out / max(target, 2))
    if every > 1 then
      local thin = {}
      for i = 1, #out, every do thin[#thin + 1] = out[i] end
      out = thin
    end
    return out, nil
  end
  return M.linear(lo, hi, target)
end

-- A compact label for v: fixed decimals that show step (when given), else %g; exponents
-- without '+' and leading zeros.
function M.label(v, step)
  local s
  if step and abs(v) < step * 1e-6 then v = 0 end -- rounding residue of a zero tick
  local a = abs(v)
  if step and a < 1e6 and (a == 0 or a >= 1e-4) and step >= 1e-6 then
    -- the fewest decimals that write the step exactly (0.25 needs 2, 500 none)
    local decimals = 0
    while decimals < 10 do
      local scaled = step * 10 ^ decimals
      if abs(scaled - floor(scaled + 0.5)) < 1e-6 * scaled then break end
      decimals = decimals + 1
    end
    s = ('%.' .. decimals .. 'f'):format(v)
  else
    s = ('%.6g'):format(v)
  end
  s = s:gsub('e%+?(%-?)0*(%d)', 'e%1%2')
  if s:match('^%-0%.?0*$') then s = s:sub(2) end -- no "-0"
  return s
end

return M
