-- ember.nn recurrent layers: RNN, LSTM and GRU, and their cells RNNCell, LSTMCell and GRUCell,
-- with PyTorch's constructor arguments, gate order (LSTM i, f, g, o; GRU r, z, n), parameter
-- names (weight_ih_l0, bias_hh_l1_reverse, ...), initialization (uniform in ±1/sqrt(hidden))
-- and shapes, so a PyTorch state_dict loads by name.
--
-- The layers are compositions of ops, so they run and differentiate on every device. Each
-- layer and direction makes one matmul for the input projection of all time steps, then per
-- step one matmul with the hidden weights and a few pointwise ops. Nothing reads a value back
-- to the host, so on Vulkan a whole sequence is recorded without a wait.
--
-- Known cost: the backward of a view (a step's slice of the input projection) embeds its
-- gradient into zeros of what it views; slicing in two levels (run_direction) keeps that at
-- O(T^1.5 * batch * gates) over a sequence of length T. An unbind op with one backward would
-- make it O(T).
local Module = require 'ember.nn.module'
local init = require 'ember.nn.init_fns'

local M = {}
local function ember() return require 'ember' end
local function F() return require('ember.nn').functional end

-- ---- arguments -------------------------------------------------------------------------------
local args = require 'ember.nn.args'
local check_options, boolean = args.options, args.boolean
local function positive_int(fn, what, v, level) args.positive_int(fn, what, v, level + 1) end

local function need_tensor(fn, what, v, level)
  if not ember().is_tensor(v) then
    error(('%s: expected %s to be a tensor, got %s'):format(fn, what, type(v)), level + 1)
  end
end

local function shape_str(t) return '[' .. table.concat(t, ', ') .. ']' end

local function check_shape(fn, what, t, want, level)
  need_tensor(fn, what, t, level + 1)
  local got = t:size()
  local same = #got == #want
  for i = 1, #want do same = same and got[i] == want[i] end
  if not same then
    error(('%s: expected %s of shape %s, got %s'):format(fn, what, shape_str(want), shape_str(got)),
      level + 1)
  end
end

-- ---- one time step -----------------------------------------------------------------------------
-- h W_hh^T + b_hh, for a batch of hidden states h [B, H].
local function hidden_projection(h, w_hh, b_hh)
  if b_hh then return b_hh:addmm(h, w_hh:t()) end
  return h:matmul(w_hh:t())
end

-- A step takes xw (the input projection x W_ih^T + b_ih of this step, [B, gates * H]) and the
-- state, and returns the new state.
local steps = {}
function steps.RNN_TANH(xw, h, _, w_hh, b_hh) return (xw + hidden_projection(h, w_hh, b_hh)):tanh() end
function steps.RNN_RELU(xw, h, _, w_hh, b_hh) return (xw + hidden_projection(h, w_hh, b_hh)):relu() end

function steps.LSTM(xw, h, c, w_hh, b_hh)
  local g = (xw + hidden_projection(h, w_hh, b_hh)):chunk(4, 2) -- i, f, g, o
  c = g[2]:sigmoid() * c + g[1]:sigmoid() * g[3]:tanh()
  return g[4]:sigmoid() * c:tanh(), c
end

-- n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); h' = (1 - z) * n + z * h = n + z * (h - n)
function steps.GRU(xw, h, _, w_hh, b_hh)
  local x = xw:chunk(3, 2)
  local hh = hidden_projection(h, w_hh, b_hh):chunk(3, 2)
  local r = (x[1] + hh[1]):sigmoid()
  local z = (x[2] + hh[2]):sigmoid()
  local n = (x[3] + r * hh[3]):tanh()
  return n + z * (h - n)
end

local GATES = { RNN_TANH = 1, RNN_RELU = 1, LSTM = 4, GRU = 3 }

-- x W_ih^T + b_ih for x [N, I]: one matmul.
local function input_projection(x, w_ih, b_ih)
  if b_ih then return b_ih:addmm(x, w_ih:t()) end
  return x:matmul(w_ih:t())
end

-- One layer in one direction over x [T, B, I]: the input projection of every step in one
-- matmul, then the steps in order (reversed for the reverse direction). Returns the outputs
-- [T, B, H] in time order and the last state.
--
-- A step's slice is taken in two levels, a block of about sqrt(T) steps (narrow), then the
-- step in it (select): the backward of a view embeds its gradient into zeros of what it views,
-- so slicing the whole projection at each step would cost O(T^2) in backward, and the two
-- levels cost O(T^1.5).
local function run_direction(mode, x, w, h, c, reverse)
  local T, B, I = x:size(1), x:size(2), x:size(3)
  local xw = input_projection(x:reshape(T * B, I), w.w_ih, w.b_ih):view(T, B, w.w_ih:size(1))
  local step, outs = steps[mode], {}
  local block_len = math.ceil(math.sqrt(T))
  local block, first
  for s = 1, T do
    local t = reverse and T - s + 1 or s
    local start = math.floor((t - 1) / block_len) * block_len + 1
    if start ~= first then
      first = start
      block = xw:narrow(1, start, math.min(block_len, T - start + 1))
    end
    h, c = step(block:select(1, t - start + 1), h, c, w.w_hh, w.b_hh)
    outs[t] = h
  end
  return ember().stack(outs, 1), h, c
end

-- ---- the layers --------------------------------------------------------------------------------
local RNNBase = Module:extend('RNNBase')

local LAYER_OPTIONS = { num_layers = true, bias = true, batch_first = true, dropout = true,
  bidirectional = true, dtype = true, device = true }

-- (input_size, hidden_size [, num_layers] [, {options}])
local function layer_init(self, fn, mode, input_size, hidden_size, a, b, extra)
  local opts = b
  if type(a) == 'table' then
    if b ~= nil then error(('%s: unexpected argument 4 after the options table'):format(fn), 4) end
    opts = a
  end
  local allowed = {}
  for k in pairs(LAYER_OPTIONS) do allowed[k] = true end
  for k in pairs(extra) do allowed[k] = true end
  opts = check_options(fn, opts, allowed, 4)
  local num_layers = opts.num_layers or 1
  if type(a) == 'number' then
    if opts.num_layers ~= nil then error(fn .. ': num_layers given twice', 4) end
    num_layers = a
  elseif a ~= nil and type(a) ~= 'table' then
    error(('%s: expected num_layers or a table of options as argument 3, got %s'):format(fn, type(a)), 4)
  end
  positive_int(fn, 'input_size', input_size, 4)
  positive_int(fn, 'hidden_size', hidden_size, 4)
  positive_int(fn, 'num_layers', num_layers, 4)
  local dropout = opts.dropout or 0
  if type(dropout) ~= 'number' or dropout < 0 or dropout > 1 then
    error(('%s: expected dropout to be a probability in [0, 1], got %s'):format(fn, tostring(dropout)), 4)
  end
  if opts.proj_size ~= nil and opts.proj_size ~= 0 then
    error(fn .. ': proj_size is not implemented', 4)
  end
  local nonlinearity = opts.nonlinearity or 'tanh'
  if mode == 'RNN' then
    if nonlinearity ~= 'tanh' and nonlinearity ~= 'relu' then
      error(("%s: expected nonlinearity 'tanh' or 'relu', got %s"):format(fn, tostring(nonlinearity)), 4)
    end
    mode = nonlinearity == 'tanh' and 'RNN_TANH' or 'RNN_RELU'
    self.nonlinearity = nonlinearity
  end
  self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
  self.bias = boolean(fn, 'bias', opts.bias, true, 4)
  self.batch_first = boolean(fn, 'batch_first', opts.batch_first, false, 4)
  self.bidirectional = boolean(fn, 'bidirectional', opts.bidirectional, false, 4)
  self.dropout = dropout
  local E, o = ember(), { dtype = opts.dtype, device = opts.device }
  local k = 1 / math.sqrt(hidden_size)
  local G = GATES[mode] * hidden_size
  local D = self.bidirectional and 2 or 1
  -- PyTorch's registration order: per layer, per direction, w_ih, w_hh, b_ih, b_hh
  for l = 0, num_layers - 1 do
    for d = 0, D - 1 do
      local suffix = '_l' .. l .. (d == 1 and '_reverse' or '')
      local in_size = l == 0 and input_size or hidden_size * D
      self:register_parameter('weight_ih' .. suffix, init.uniform_(E.empty(G, in_size, o), -k, k))
      self:register_parameter('weight_hh' .. suffix, init.uniform_(E.empty(G, hidden_size, o), -k, k))
      if self.bias then
        self:register_parameter('bias_ih' .. suffix, init.uniform_(E.empty(G, o), -k, k))
        self:register_parameter('bias_hh' .. suffix, init.uniform_(E.empty(G, o), -k, k))
      end
    end
  end
end

-- The state tensor [L * D, B, H] (or [L * D, H] unbatched): given, or zeros like x.
local function initial_state(self, fn, what, s, x, batched, B)
  local LD, H = self.num_layers * (self.bidirectional and 2 or 1), self.hidden_size
  if s == nil then
    return ember().zeros({ LD, B, H }, { dtype = x:dtype(), device = x:device() })
  end
  if batched then
    check_shape(fn, what, s, { LD, B, H }, 4)
    return s
  end
  check_shape(fn, what, s, { LD, H }, 4)
  return s:unsqueeze(2)
end

-- forward(input [, hx]): input [T, B, I] ([B, T, I] when batch_first, [T, I] unbatched);
-- hx is h0 [L * D, B, H], or {h0, c0} for an LSTM. Returns output [T, B, D * H] (batch first
-- when batch_first) and h_n, or {h_n, c_n} for an LSTM, as PyTorch's tuple.
function RNNBase:forward(input, hx)
  local fn, E = self.__name, ember()
  need_tensor(fn, 'input', input, 3)
  local nd = input:dim()
  if nd ~= 2 and nd ~= 3 then
    error(('%s: expected a 2-D (unbatched) or 3-D input, got %d-D'):format(fn, nd), 3)
  end
  local batched = nd == 3
  local x = input
  if not batched then x = x:unsqueeze(2)
  elseif self.batch_first then x = x:transpose(1, 2) end
  local T, B = x:size(1), x:size(2)
  if x:size(3) ~= self.input_size then
    error(('%s: expected input with %d features in its last dimension, got %d'):format(fn,
      self.input_size, x:size(3)), 3)
  end
  if T == 0 then error(fn .. ': expected a sequence length larger than 0', 3) end
  local lstm = self.mode == 'LSTM'
  local h0, c0
  if lstm then
    if hx ~= nil and (type(hx) ~= 'table' or E.is_tensor(hx)) then
      error(fn .. ': expected the initial state as a table {h0, c0}', 3)
    end
    hx = hx or {}
    if (hx[1] == nil) ~= (hx[2] == nil) then error(fn .. ': expected both h0 and c0, or neither', 3) end
    h0 = initial_state(self, fn, 'h0', hx[1], x, batched, B)
    c0 = initial_state(self, fn, 'c0', hx[2], x, batched, B)
  else
    h0 = initial_state(self, fn, 'h0', hx, x, batched, B)
  end
  local D = self.bidirectional and 2 or 1
  local hn, cn = {}, {}
  for l = 0, self.num_layers - 1 do
    local outs = {}
    for d = 0, D - 1 do
      local suffix = '_l' .. l .. (d == 1 and '_reverse' or '')
      local w = { w_ih = self['weight_ih' .. suffix], w_hh = self['weight_hh' .. suffix],
        b_ih = self['bias_ih' .. suffix], b_hh = self['bias_hh' .. suffix] }
      local i = l * D + d + 1
      local out, h, c = run_direction(self.mode, x, w, h0[i], lstm and c0[i] or nil, d == 1)
      outs[d + 1], hn[i], cn[i] = out, h, c
    end
    x = D == 2 and E.cat(outs, 3) or outs[1]
    if self.dropout > 0 and self.training and l < self.num_layers - 1 then
      x = F().dropout(x, self.dropout, true)
    end
  end
  local h_n, c_n = E.stack(hn, 1), lstm and E.stack(cn, 1) or nil
  if not batched then
    x, h_n, c_n = x:squeeze(2), h_n:squeeze(2), c_n and c_n:squeeze(2)
  elseif self.batch_first then
    x = x:transpose(1, 2)
  end
  if lstm then return x, { h_n, c_n } end
  return x, h_n
end

function RNNBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if self.num_layers ~= 1 then s = s .. ', num_layers=' .. self.num_layers end
  if self.nonlinearity and self.nonlinearity ~= 'tanh' then s = s .. ', nonlinearity=' .. self.nonlinearity end
  if not self.bias then s = s .. ', bias=false' end
  if self.batch_first then s = s .. ', batch_first=true' end
  if self.dropout ~= 0 then s = s .. ', dropout=' .. self.dropout end
  if self.bidirectional then s = s .. ', bidirectional=true' end
  return s
end

-- RNN(input_size, hidden_size [, num_layers] [, {nonlinearity='tanh', bias=true,
-- batch_first=false, dropout=0, bidirectional=false, dtype=, device=}])
local RNN = RNNBase:extend('RNN')
function RNN:__init(input_size, hidden_size, a, b)
  layer_init(self, 'RNN', 'RNN', input_size, hidden_size, a, b, { nonlinearity = true })
end
M.RNN = RNN

-- LSTM(input_size, hidden_size [, num_layers] [, {bias, batch_first, dropout, bidirectional,
-- proj_size=0 (others: not implemented), dtype, device}])
local LSTM = RNNBase:extend('LSTM')
function LSTM:__init(input_size, hidden_size, a, b)
  layer_init(self, 'LSTM', 'LSTM', input_size, hidden_size, a, b, { proj_size = true })
end
M.LSTM = LSTM

-- GRU(input_size, hidden_size [, num_layers] [, {bias, batch_first, dropout, bidirectional,
-- dtype, device}])
local GRU = RNNBase:extend('GRU')
function GRU:__init(input_size, hidden_size, a, b)
  layer_init(self, 'GRU', 'GRU', input_size, hidden_size, a, b, {})
end
M.GRU = GRU

-- ---- the cells ---------------------------------------------------------------------------------
local CELL_OPTIONS = { bias = true, dtype = true, device = true }

local function cell_init(self, fn, mode, input_size, hidden_size, opts, extra)
  local allowed = {}
  for k in pairs(CELL_OPTIONS) do allowed[k] = true end
  for k in pairs(extra) do allowed[k] = true end
  opts = check_options(fn, opts, allowed, 4)
  positive_int(fn, 'input_size', input_size, 4)
  positive_int(fn, 'hidden_size', hidden_size, 4)
  if mode == 'RNN' then
    local nl = opts.nonlinearity or 'tanh'
    if nl ~= 'tanh' and nl ~= 'relu' then
      error(("%s: expected nonlinearity 'tanh' or 'relu', got %s"):format(fn, tostring(nl)), 4)
    end
    self.nonlinearity = nl
    mode = nl == 'tanh' and 'RNN_TANH' or 'RNN_RELU'
  end
  self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
  self.bias = boolean(fn, 'bias', opts.bias, true, 4)
  local E, o = ember(), { dtype = opts.dtype, device = opts.device }
  local k, G = 1 / math.sqrt(hidden_size), GATES[mode] * hidden_size
  self:register_parameter('weight_ih', init.uniform_(E.empty(G, input_size, o), -k, k))
  self:register_parameter('weight_hh', init.uniform_(E.empty(G, hidden_size, o), -k, k))
  if self.bias then
    self:register_parameter('bias_ih', init.uniform_(E.empty(G, o), -k, k))
    self:register_parameter('bias_hh', init.uniform_(E.empty(G, o), -k, k))
  end
end

-- A cell's state: given ([B, H], or [H] for an unbatched input) or zeros.
local function cell_state(self, fn, what, s, x, batched)
  local H = self.hidden_size
  if s == nil then return ember().zeros({ x:size(1), H }, { dtype = x:dtype(), device = x:device() }) end
  if batched then
    check_shape(fn, what, s, { x:size(1), H }, 4)
    return s
  end
  check_shape(fn, what, s, { H }, 4)
  return s:unsqueeze(1)
end

local CellBase = Module:extend('RNNCellBase')

-- forward(input [, hx]): input [B, I] or [I]; hx h [B, H] (or {h, c} for an LSTMCell).
-- Returns h' (h', c' for an LSTMCell), unbatched when the input was.
function CellBase:forward(input, hx)
  local fn, E = self.__name, ember()
  need_tensor(fn, 'input', input, 3)
  local nd = input:dim()
  if nd ~= 1 and nd ~= 2 then
    error(('%s: expected a 1-D (unbatched) or 2-D input, got %d-D'):format(fn, nd), 3)
  end
  local batched = nd == 2
  local x = batched and input or input:unsqueeze(1)
  if x:size(2) ~= self.input_size then
    error(('%s: expected input with %d features, got %d'):format(fn, self.input_size, x:size(2)), 3)
  end
  local h, c
  if self.mode == 'LSTM' then
    if hx ~= nil and (type(hx) ~= 'table' or E.is_tensor(hx)) then
      error(fn .. ': expected the state as a table {h, c}', 3)
    end
    hx = hx or {}
    if (hx[1] == nil) ~= (hx[2] == nil) then error(fn .. ': expected both h and c, or neither', 3) end
    h = cell_state(self, fn, 'h', hx[1], x, batched)
    c = cell_state(self, fn, 'c', hx[2], x, batched)
  else
    h = cell_state(self, fn, 'hx', hx, x, batched)
  end
  local xw = input_projection(x, self.weight_ih, self.bias_ih)
  h, c = steps[self.mode](xw, h, c, self.weight_hh, self.bias_hh)
  if not batched then h, c = h:squeeze(1), c and c:squeeze(1) end
  if c then return h, c end
  return h
end

function CellBase:extra_repr()
  local s = ('%d, %d'):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ', bias=false' end
  if self.nonlinearity and self.nonlinearity ~= 'tanh' then s = s .. ', nonlinearity=' .. self.nonlinearity end
  return s
end

-- RNNCell(input_size, hidden_size [, {bias=true, nonlinearity='tanh', dtype=, device=}])
local RNNCell = CellBase:extend('RNNCell')
function RNNCell:__init(input_size, hidden_size, opts)
  cell_init(self, 'RNNCell', 'RNN', input_size, hidden_size, opts, { nonlinearity = true })
end
M.RNNCell = RNNCell

-- LSTMCell(input_size, hidden_size [, {bias=true, dtype=, device=}])
local LSTMCell = CellBase:extend('LSTMCell')
function LSTMCell:__init(input_size, hidden_size, opts)
  cell_init(self, 'LSTMCell', 'LSTM', input_size, hidden_size, opts, {})
end
M.LSTMCell = LSTMCell

-- GRUCell(input_size, hidden_size [, {bias=true, dtype=, device=}])
local GRUCell = CellBase:extend('GRUCell')
function GRUCell:__init(input_size, hidden_size, opts)
  cell_init(self, 'GRUCell', 'GRU', input_size, hidden_size, opts, {})
end
M.GRUCell = GRUCell

return M
