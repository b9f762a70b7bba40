-- ember.nn.encoding: F.one_hot, class indices to one-hot rows (PyTorch's
-- torch.nn.functional.one_hot with Lua's 1-based classes, as F.embedding and F.cross_entropy
-- take them).
--
-- The rows are built on the input's device by one scatter into zeros. On the CPU the classes
-- are checked here, so the error names one_hot; on a GPU the scatter checks them on the device
-- and a class out of range is raised at the next synchronization (docs/devices.md), so that
-- one_hot never waits for the device, unless num_classes must be inferred from the data.
local tensor = require 'ember.tensor'
local is_tensor = tensor.is_tensor

local F = {}

-- one_hot(tensor, num_classes = -1): int64 of tensor's shape plus a last dim of num_classes,
-- 1 at each element's class (1-based) and 0 elsewhere. num_classes = -1 takes the largest
-- class present (a read of the data on the host).
function F.one_hot(t, num_classes)
  local fn = 'one_hot'
  if not is_tensor(t) then error(fn .. ': expected a tensor of class indices, got ' .. type(t), 2) end
  if t:is_floating_point() or t:dtype() == 'bool' then
    error(('%s: expected integer class indices (1-based), got %s'):format(fn, t:dtype()), 2)
  end
  num_classes = num_classes == nil and -1 or num_classes
  if type(num_classes) ~= 'number' or num_classes ~= math.floor(num_classes)
      or (num_classes < 1 and num_classes ~= -1) then
    error(fn .. ': expected num_classes to be a positive integer or -1, got ' .. tostring(num_classes), 2)
  end
  local n = t:numel()
  local on_cpu = t:device() == 'cpu'
  if num_classes == -1 then
    if n == 0 then error(fn .. ': cannot infer the number of classes from an empty tensor', 2) end
    num_classes = t:max():item()
    if num_classes < 1 then
      error(('%s: class indices are 1-based, got %d'):format(fn, num_classes), 2)
    end
  end
  if on_cpu and n > 0 then
    local lo, hi = t:min():item(), t:max():item()
    if lo < 1 then error(('%s: class indices are 1-based, got %d'):format(fn, lo), 2) end
    if hi > num_classes then
      error(('%s: class %d is out of range for %d classes'):format(fn, hi, num_classes), 2)
    end
  end
  local shape = {}
  for d = 1, t:dim() do shape[d] = t:size(d) end
  shape[#shape + 1] = num_classes
  local ember = require 'ember'
  local out = ember.zeros(shape, { dtype = 'int64', device = t:device() })
  if n == 0 then return out end
  return out:scatter_(#shape, t:unsqueeze(-1), 1)
end

return { functional = F }
