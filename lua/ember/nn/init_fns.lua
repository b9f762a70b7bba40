-- ember.nn.init: parameter initialization, in place, with PyTorch's formulas. Every function
-- draws from Ember's seeded generator.
local M = {}

local function fans(t)
  local d = t:dim()
  if d < 2 then
    error(('init: fan in and fan out need a tensor with at least 2 dimensions, got %d'):format(d), 3)
  end
  local receptive = 1
  for i = 3, d do receptive = receptive * t:size(i) end
  return t:size(2) * receptive, t:size(1) * receptive
end
M.calculate_fans = fans

-- The gain of a nonlinearity, as torch.nn.init.calculate_gain.
function M.calculate_gain(nonlinearity, param)
  local n = nonlinearity or 'leaky_relu'
  if n == 'linear' or n == 'sigmoid' or n:match('^conv') then return 1 end
  if n == 'tanh' then return 5 / 3 end
  if n == 'relu' then return math.sqrt(2) end
  if n == 'selu' then return 3 / 4 end
  if n == 'leaky_relu' then
    local slope = param or 0.01
    return math.sqrt(2 / (1 + slope * slope))
  end
  error('calculate_gain: unknown nonlinearity ' .. tostring(n), 2)
end

local function no_grad(f)
  local ember = require 'ember'
  return ember.no_grad(f)
end

function M.uniform_(t, a, b)
  no_grad(function() t:uniform_(a or 0, b or 1) end)
  return t
end

function M.normal_(t, mean, std)
  no_grad(function() t:normal_(mean or 0, std or 1) end)
  return t
end

function M.constant_(t, v)
  no_grad(function() t:fill_(v) end)
  return t
end
function M.zeros_(t) return M.constant_(t, 0) end
function M.ones_(t) return M.constant_(t, 1) end

function M.xavier_uniform_(t, gain)
  local fan_in, fan_out = fans(t)
  local a = (gain or 1) * math.sqrt(6 / (fan_in + fan_out))
  return M.uniform_(t, -a, a)
end

function M.xavier_normal_(t, gain)
  local fan_in, fan_out = fans(t)
  return M.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

local function kaiming_std(t, a, mode, nonlinearity)
  local fan_in, fan_out = fans(t)
  local fan = (mode or 'fan_in') == 'fan_in' and fan_in or fan_out
  if mode and mode ~= 'fan_in' and mode ~= 'fan_out' then
    error('kaiming: mode must be fan_in or fan_out, got ' .. tostring(mode), 3)
  end
  return M.calculate_gain(nonlinearity or 'leaky_relu', a or 0) / math.sqrt(fan)
end

-- kaiming_uniform_(t, a=0, mode='fan_in', nonlinearity='leaky_relu')
function M.kaiming_uniform_(t, a, mode, nonlinearity)
  local bound = math.sqrt(3) * kaiming_std(t, a, mode, nonlinearity)
  return M.uniform_(t, -bound, bound)
end

function M.kaiming_normal_(t, a, mode, nonlinearity)
  return M.normal_(t, 0, kaiming_std(t, a, mode, nonlinearity))
end

return M
