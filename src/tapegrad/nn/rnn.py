"""Recurrent layers as in ``torch.nn``: the cells ``RNNCell``, ``GRUCell``, ``LSTMCell`` (one
time step) and the sequence layers ``RNN``, ``GRU``, ``LSTM`` (stacked, optionally
bidirectional), with PyTorch's parameter names, gate order, initialisation and reprs.

A sequence is unrolled in Python into ordinary recorded ops, one step after another, so
backward, ``compile`` (which replays the unrolled tape) and the transforms work on it.
"""
import math
import warnings

import tapegrad as tg

from . import functional as F
from . import init
from .modules import Module, Parameter

__all__ = ["RNNCellBase", "RNNCell", "GRUCell", "LSTMCell", "RNNBase", "RNN", "GRU", "LSTM"]

# how many stacked gate blocks each kind of cell has in its weights
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "GRU": 3, "LSTM": 4}


def _rnn_step(x, h, w_ih, w_hh, b_ih, b_hh, relu):
    """Elman step: ``act(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    pre = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    return tg.relu(pre) if relu else tg.tanh(pre)


def _gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    """GRU step, gates in PyTorch's order reset, update, new; the reset gate scales the
    hidden part of the new gate after its bias, as in PyTorch (and cuDNN)."""
    from_input = F.linear(x, w_ih, b_ih).chunk(3, -1)
    from_hidden = F.linear(h, w_hh, b_hh).chunk(3, -1)
    reset = tg.sigmoid(from_input[0] + from_hidden[0])
    update = tg.sigmoid(from_input[1] + from_hidden[1])
    new = tg.tanh(from_input[2] + reset * from_hidden[2])
    # (h - new) * update + new, PyTorch's form of (1 - update) * new + update * h: its
    # rounding, its last nodes (Add of Mul and Tanh), and one op fewer
    return (h - new) * update + new


def _lstm_step(x, h, c, w_ih, w_hh, b_ih, b_hh):
    """LSTM step, gates in PyTorch's order input, forget, cell, output."""
    gates = (F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = tg.sigmoid(gates[1]) * c + tg.sigmoid(gates[0]) * tg.tanh(gates[2])
    return tg.sigmoid(gates[3]) * tg.tanh(c), c


def _init_uniform(module, hidden_size):
    """PyTorch's init of every recurrent weight and bias: U(-1/sqrt(hidden), 1/sqrt(hidden))."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
    for weight in module.parameters():
        init.uniform_(weight, -bound, bound)


# ---------------------------------------------------------------------------------------------
# Cells
# ---------------------------------------------------------------------------------------------


class RNNCellBase(Module):
    """The base class of ``RNNCell``, ``GRUCell`` and ``LSTMCell``, as PyTorch's:
    ``weight_ih`` ``(num_chunks * hidden_size, input_size)``, ``weight_hh``
    ``(num_chunks * hidden_size, hidden_size)`` and, with ``bias``, ``bias_ih`` and
    ``bias_hh``, all U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); the subclasses give the
    step (``num_chunks`` is the number of gates: 1, 3, 4).

    Example:
        >>> isinstance(nn.GRUCell(3, 4), nn.RNNCellBase)
        True
        >>> nn.RNNCellBase(3, 4, True, 2).weight_ih.shape
        tapegrad.Size([8, 3])
    """

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(tg.empty(rows, input_size, dtype=dtype))
        self.weight_hh = Parameter(tg.empty(rows, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(tg.empty(rows, dtype=dtype))
            self.bias_hh = Parameter(tg.empty(rows, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        _init_uniform(self, self.hidden_size)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text

    def _batched(self, input, hx_list):
        """Check the input (``(N, input_size)`` or unbatched ``(input_size,)``); return it and
        the hidden states with a batch dimension, zeros for absent ones, and whether the
        input came unbatched."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        unbatched = input.ndim == 1
        if unbatched:
            input = input.unsqueeze(0)
        states = []
        for h in hx_list:
            if h is None:
                h = tg.zeros(input.shape[0], self.hidden_size, dtype=input.dtype)
            elif unbatched:
                h = h.unsqueeze(0)
            if tuple(h.shape) != (input.shape[0], self.hidden_size):
                raise RuntimeError(
                    f"Input batch size {input.shape[0]} doesn't match hidden0 batch size "
                    f"{h.shape[0]}" if h.shape[0] != input.shape[0] else
                    f"hidden0 has inconsistent hidden_size: got {h.shape[-1]}, expected "
                    f"{self.hidden_size}")
            states.append(h)
        return input, states, unbatched

    def _weights(self):
        return self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (``relu`` with
    ``nonlinearity="relu"``). Weights and biases start as U(-1/sqrt(hidden), 1/sqrt(hidden)).

    Shape: input ``(N, input_size)`` or ``(input_size,)``, hx as the output,
    ``(N, hidden_size)`` or ``(hidden_size,)``; hx defaults to zeros.

    Example:
        >>> cell = nn.RNNCell(3, 4)
        >>> cell
        RNNCell(3, 4)
        >>> cell(tg.ones(2, 3)).shape
        tapegrad.Size([2, 4])
    """

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, (h,), unbatched = self._batched(input, [hx])
        h = _rnn_step(input, h, *self._weights(), self.nonlinearity == "relu")
        return h.squeeze(0) if unbatched else h


class GRUCell(RNNCellBase):
    """One GRU step (gates reset, update, new in PyTorch's order and formulas).

    Shape: as for ``RNNCell``; weights ``(3 * hidden_size, *)``.

    Example:
        >>> cell = nn.GRUCell(3, 4)
        >>> cell(tg.ones(3), tg.zeros(4)).shape
        tapegrad.Size([4])
    """
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, (h,), unbatched = self._batched(input, [hx])
        h = _gru_step(input, h, *self._weights())
        return h.squeeze(0) if unbatched else h


class LSTMCell(RNNCellBase):
    """One LSTM step (gates input, forget, cell, output in PyTorch's order); returns
    ``(h', c')``.

    Shape: input as for ``RNNCell``; hx a pair ``(h, c)`` of ``(N, hidden_size)`` (zeros by
    default); weights ``(4 * hidden_size, *)``.

    Example:
        >>> cell = nn.LSTMCell(3, 4)
        >>> h, c = cell(tg.ones(2, 3))
        >>> h.shape, c.shape
        (tapegrad.Size([2, 4]), tapegrad.Size([2, 4]))
    """
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        input, (h, c), unbatched = self._batched(input, [h0, c0])
        h, c = _lstm_step(input, h, c, *self._weights())
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


# ---------------------------------------------------------------------------------------------
# Sequence layers
# ---------------------------------------------------------------------------------------------


class RNNBase(Module):
    """The base class of ``RNN``, ``GRU`` and ``LSTM``, as PyTorch's: stacked (and optionally
    bidirectional) recurrent layers over a sequence of kind ``mode`` (``"RNN_TANH"``,
    ``"RNN_RELU"``, ``"GRU"``, ``"LSTM"``), parameters ``weight_ih_l{k}``,
    ``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}`` (``_reverse`` for the backward
    direction), dropout between layers while training.  ``proj_size`` must be 0.

    Example:
        >>> isinstance(nn.LSTM(3, 4), nn.RNNBase)
        True
        >>> [name for name, _ in nn.RNNBase("GRU", 3, 4, bias=False).named_parameters()]
        ['weight_ih_l0', 'weight_hh_l0']
    """

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) \
                or not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                "dropout expects num_layers greater than 1, but got "
                f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        if proj_size:
            raise NotImplementedError(f"{type(self).__name__}: proj_size is not supported")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = 0
        directions = 2 if bidirectional else 1
        rows = _GATES[mode] * hidden_size
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                setattr(self, f"weight_ih_l{layer}{suffix}",
                        Parameter(tg.empty(rows, layer_input, dtype=dtype)))
                setattr(self, f"weight_hh_l{layer}{suffix}",
                        Parameter(tg.empty(rows, hidden_size, dtype=dtype)))
                if bias:
                    setattr(self, f"bias_ih_l{layer}{suffix}", Parameter(tg.empty(rows,
                                                                                  dtype=dtype)))
                    setattr(self, f"bias_hh_l{layer}{suffix}", Parameter(tg.empty(rows,
                                                                                  dtype=dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        _init_uniform(self, self.hidden_size)

    def extra_repr(self):
        text = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        if self.batch_first is not False:
            text += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            text += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            text += f", bidirectional={self.bidirectional}"
        return text

    def _layer_weights(self, layer, suffix):
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return [getattr(self, f"{n}_l{layer}{suffix}") if self.bias or n.startswith("weight")
                else None for n in names]

    def _step(self, x, state, weights):
        if self.mode == "LSTM":
            return _lstm_step(x, state[0], state[1], *weights)
        if self.mode == "GRU":
            return _gru_step(x, state, *weights)
        return _rnn_step(x, state, *weights, self.mode == "RNN_RELU")

    def _run(self, input, states):
        """``input`` ``(L, N, H_in)``; ``states[k]`` the initial state of layer-direction
        ``k`` (a tensor, or a pair for LSTM). Returns the last layer's outputs and the final
        state of each layer-direction."""
        directions = 2 if self.bidirectional else 1
        finals = []
        steps = input.shape[0]
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                weights = self._layer_weights(layer, suffix)
                state = states[layer * directions + direction]
                hidden = [None] * steps
                order = range(steps) if direction == 0 else range(steps - 1, -1, -1)
                for t in order:
                    state = self._step(input[t], state, weights)
                    hidden[t] = state[0] if self.mode == "LSTM" else state
                outputs.append(tg.stack(hidden))
                finals.append(state)
            input = outputs[0] if directions == 1 else tg.cat(outputs, 2)
            if self.dropout and self.training and layer < self.num_layers - 1:
                input = F.dropout(input, self.dropout, True)
        return input, finals

    def _run_packed(self, data, sizes, states):
        """The packed form of ``_run``: ``data`` ``(sum(sizes), H_in)`` holds step ``t`` of
        the ``sizes[t]`` sequences still running (longest first).  Every step runs on that
        shrinking batch, so a sequence's final state is the one after its own last step, and
        the reverse direction starts each sequence at its own end."""
        directions = 2 if self.bidirectional else 1
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size)
        lstm = self.mode == "LSTM"

        def rows(state, start, stop):
            return tuple(s[start:stop] for s in state) if lstm else state[start:stop]

        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                weights = self._layer_weights(layer, suffix)
                initial = states[layer * directions + direction]
                hidden = [None] * len(sizes)
                if direction == 0:
                    state, done = rows(initial, 0, sizes[0]), []
                    for t, size in enumerate(sizes):
                        running = sizes[t - 1] if t else size
                        if size < running:     # sequences size.. ended at step t - 1
                            done.append(rows(state, size, running))
                            state = rows(state, 0, size)
                        state = self._step(data[offsets[t]:offsets[t + 1]], state, weights)
                        hidden[t] = state[0] if lstm else state
                    # the last-ended sequences sit at the end: the pieces in reverse order
                    pieces = [state] + done[::-1]
                    if len(pieces) > 1:
                        state = tuple(tg.cat(part) for part in zip(*pieces)) if lstm \
                            else tg.cat(pieces)
                else:
                    state = None
                    for t in range(len(sizes) - 1, -1, -1):
                        start = 0 if state is None else sizes[t + 1]
                        if start < sizes[t]:   # sequences start.. begin (at their end) here
                            fresh = rows(initial, start, sizes[t])
                            state = fresh if state is None else (
                                tuple(tg.cat(p) for p in zip(state, fresh)) if lstm
                                else tg.cat([state, fresh]))
                        state = self._step(data[offsets[t]:offsets[t + 1]], state, weights)
                        hidden[t] = state[0] if lstm else state
                outputs.append(tg.cat(hidden))
                finals.append(state)
            data = outputs[0] if directions == 1 else tg.cat(outputs, 1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                data = F.dropout(data, self.dropout, True)
        return data, finals

    def _forward_packed(self, packed, hx):
        """A ``PackedSequence`` in, one out, as PyTorch: the initial states are taken in the
        packed (sorted) order and the final ones handed back in the original order."""
        from .rnn_utils import PackedSequence
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.ndim != 2:
            raise RuntimeError(f"input must have 2 dimensions, got {data.ndim}")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        sizes = [int(v) for v in batch_sizes.tolist()]
        batch = sizes[0]

        def permute(h, indices):
            return h if indices is None else h.index_select(1, indices)

        if self.mode == "LSTM":
            h0, c0 = (None, None) if hx is None else \
                (permute(hx[0], sorted_indices), permute(hx[1], sorted_indices))
            h0 = self._initial(h0, batch, False, "hidden[0]")
            c0 = self._initial(c0, batch, False, "hidden[1]")
            states = [(h0[k], c0[k]) for k in range(h0.shape[0])]
        else:
            h0 = self._initial(None if hx is None else permute(hx, sorted_indices), batch,
                               False, "hidden")
            states = [h0[k] for k in range(h0.shape[0])]
        output, finals = self._run_packed(data, sizes, states)
        if self.mode == "LSTM":
            final = (permute(tg.stack([h for h, _ in finals]), unsorted_indices),
                     permute(tg.stack([c for _, c in finals]), unsorted_indices))
        else:
            final = permute(tg.stack(finals), unsorted_indices)
        return PackedSequence(output, batch_sizes, sorted_indices, unsorted_indices), final

    def _check_input(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.ndim}D input instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def _initial(self, hx, batch, unbatched, name):
        """The initial states as ``(layers * directions, N, hidden)``, zeros when absent."""
        layers = self.num_layers * (2 if self.bidirectional else 1)
        if hx is None:
            return tg.zeros(layers, batch, self.hidden_size)
        if unbatched:
            if hx.ndim != 2:
                raise RuntimeError(f"For unbatched 2-D input, {name} should also be 2-D but "
                                   f"got {hx.ndim}-D tensor")
            hx = hx.unsqueeze(1)
        expected = (layers, batch, self.hidden_size)
        if tuple(hx.shape) != expected:
            raise RuntimeError(f"Expected {name} size {expected}, got {list(hx.shape)}")
        return hx

    def forward(self, input, hx=None):
        from .rnn_utils import PackedSequence
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        self._check_input(input)
        unbatched = input.ndim == 2
        if unbatched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        batch = input.shape[1]
        if self.mode == "LSTM":
            h0, c0 = (None, None) if hx is None else hx
            h0 = self._initial(h0, batch, unbatched, "hidden[0]")
            c0 = self._initial(c0, batch, unbatched, "hidden[1]")
            states = [(h0[k], c0[k]) for k in range(h0.shape[0])]
        else:
            h0 = self._initial(hx, batch, unbatched, "hidden")
            states = [h0[k] for k in range(h0.shape[0])]
        output, finals = self._run(input, states)
        if self.mode == "LSTM":
            final = (tg.stack([h for h, _ in finals]), tg.stack([c for _, c in finals]))
        else:
            final = tg.stack(finals)
        if unbatched:
            output = output.squeeze(1)
            final = tuple(f.squeeze(1) for f in final) if self.mode == "LSTM" \
                else final.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, final


class RNN(RNNBase):
    """Stacked Elman layers over a sequence (``nonlinearity`` "tanh" or "relu"); returns the
    last layer's outputs at every step and the final hidden state of every layer.

    Shape: input ``(L, N, input_size)`` (``(N, L, input_size)`` with ``batch_first``, or
    ``(L, input_size)``), h0 ``(num_layers * D, N, hidden_size)`` -> output
    ``(L, N, D * hidden_size)`` and h_n like h0, with ``D`` 2 if bidirectional else 1.

    Example:
        >>> rnn = nn.RNN(3, 4, num_layers=2, batch_first=True)
        >>> rnn
        RNN(3, 4, num_layers=2, batch_first=True)
        >>> out, h = rnn(tg.ones(5, 7, 3))
        >>> out.shape, h.shape
        (tapegrad.Size([5, 7, 4]), tapegrad.Size([2, 5, 4]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class GRU(RNNBase):
    """Stacked GRU layers over a sequence; see ``RNN`` for shapes.

    Example:
        >>> out, h = nn.GRU(3, 4, bidirectional=True)(tg.ones(7, 2, 3))
        >>> out.shape, h.shape
        (tapegrad.Size([7, 2, 8]), tapegrad.Size([2, 2, 4]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


class LSTM(RNNBase):
    """Stacked LSTM layers over a sequence; returns the outputs and ``(h_n, c_n)``; see
    ``RNN`` for shapes (``proj_size`` is not supported).

    Example:
        >>> out, (h, c) = nn.LSTM(3, 4)(tg.ones(7, 2, 3))
        >>> out.shape, h.shape, c.shape
        (tapegrad.Size([7, 2, 4]), tapegrad.Size([1, 2, 4]), tapegrad.Size([1, 2, 4]))
    """

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        if proj_size:
            raise NotImplementedError("LSTM: proj_size is not supported")
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype)


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
