"""The Q-network, the host-side copy of its weights into the target network, and its checkpoint."""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import mindspore as ms
import numpy as np
from mindspore import nn

from mindspore_rl_buffer.apps.dqn.cartpole import NUM_ACTIONS, OBSERVATION_SIZE
from mindspore_rl_buffer.apps.dqn.primitives import RELU, Dense
from mindspore_rl_buffer.checkpoint_files import read_tensors
from mindspore_rl_buffer.files import FORMATS


class QNetwork(nn.Cell):
    """A multilayer perceptron from observations to one Q-value per action.

    Args:
        observation_size (int): Inputs.
        num_actions (int): Outputs.
        hidden_sizes (Sequence[int]): Widths of the ReLU hidden layers. Default: ``(128, 128)``.

    Inputs:
        - **observation** (Tensor) - float32, ``(n, observation_size)``.

    Outputs:
        Tensor, float32, ``(n, num_actions)``.

    Supported Platforms:
        ``GPU`` ``CPU``

    Examples:
        >>> import numpy as np
        >>> import mindspore as ms
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork
        >>> q_net = QNetwork(4, 2, hidden_sizes=(8,))
        >>> q_net(ms.Tensor(np.zeros((3, 4), np.float32))).shape
        (3, 2)
    """

    def __init__(self, observation_size: int, num_actions: int, hidden_sizes: Sequence[int] = (128, 128)) -> None:
        super().__init__()
        layers: list[nn.Cell] = []
        width = observation_size
        for hidden in hidden_sizes:
            layers += [Dense(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(Dense(width, num_actions))
        self.layers = nn.SequentialCell(layers)
        self.depth = len(hidden_sizes)

    def construct(self, observation):
        # The Dense layers and the ReLU primitive called here, not nn.SequentialCell's construct over its
        # nn.ReLU Cells: each Cell call is a function graph to compile (docs/platforms.md).
        h = observation
        for i in range(self.depth):
            h = RELU(self.layers[2 * i](h))
        return self.layers[2 * self.depth](h)


def copy_weights(source: nn.Cell, target: nn.Cell) -> None:
    """Copy ``source``'s parameters into ``target``'s, in place (host side, before compiling).

    Examples:
        >>> import numpy as np
        >>> from mindspore_rl_buffer.apps.dqn.networks import QNetwork, copy_weights
        >>> online, target = QNetwork(4, 2, (8,)), QNetwork(4, 2, (8,))
        >>> copy_weights(online, target)
        >>> all(np.array_equal(a.asnumpy(), b.asnumpy())
        ...     for a, b in zip(online.get_parameters(), target.get_parameters()))
        True
    """
    for src, dst in zip(source.get_parameters(), target.get_parameters()):
        dst.set_data(src.data.copy())


# A parameter's name ends in ``layers.<i>.weight`` or ``layers.<i>.bias`` whatever Cells hold the
# network (MindSpore prefixes it with the path of the last parent Cell it was assigned to).
_LAYER = re.compile(r"(?:^|\.)(layers\.\d+\.(?:weight|bias))$")


def save_q_network(q_net: QNetwork, path: str | Path) -> None:
    """Write ``q_net``'s weights to a MindSpore checkpoint under names of its own (``layers.0.weight``, ...)."""
    entries = []
    for parameter in q_net.get_parameters():
        match = _LAYER.search(parameter.name)
        entries.append({"name": match.group(1) if match else parameter.name, "data": parameter})
    ms.save_checkpoint(entries, str(path))


# The most parameters an error lists of a checkpoint that is not a Q-network's.
_LISTED = 8


def _holdings(parameters: dict) -> str:
    """What a checkpoint holds, as an error names it: its first parameters' names and shapes."""
    if not parameters:
        return "no parameters"
    shown = [f"{name!r} {tuple(parameter.shape)}" for name, parameter in list(parameters.items())[:_LISTED]]
    more = len(parameters) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more else "")


def _has_safetensors_header(path: Path) -> bool:
    """Whether ``path`` starts as a safetensors file does: a little-endian 8-byte length, then a JSON object
    of that length (checked here: MindSpore leaves the file open when it cannot parse it)."""
    with path.open("rb") as file:
        length = int.from_bytes(file.read(8), "little")
        if not 2 <= length <= path.stat().st_size - 8:
            return False
        try:
            return isinstance(json.loads(file.read(length)), dict)
        except ValueError:  # not JSON, or not UTF-8
            return False


def _read(path: str | Path) -> dict:
    """The parameters of a MindSpore checkpoint, or a ValueError naming the path and what it must be."""
    suffix = Path(path).suffix
    if suffix not in FORMATS:
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must be a MindSpore checkpoint ending in .ckpt "
                         f"(as train writes dqn_cartpole.ckpt) or .safetensors, but got "
                         f"{f'a {suffix!r} file' if suffix else 'a file without a suffix'}.")
    if Path(path).stat().st_size == 0:  # MindSpore's own message would be about 'filter_prefix'
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold a Q-network's weights, but the "
                         f"file is empty.")
    if suffix == ".safetensors" and not _has_safetensors_header(Path(path)):
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must be a MindSpore {suffix} file (train writes "
                         f"dqn_cartpole.ckpt), but it does not start with a safetensors header (8 bytes of length, "
                         f"then a JSON object).")
    try:  # each tensor checked against its bytes: MindSpore's own .ckpt reader trusts the declared dims
        entries = read_tensors("evaluate", Path(path), FORMATS[suffix], lambda name: True)
    except ValueError as error:  # not a checkpoint of its suffix's format: text, an image, ...
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must be a MindSpore {suffix} file (train writes "
                         f"dqn_cartpole.ckpt), but it could not be read: {error}") from None
    return {name: value for name, value in entries.items() if not isinstance(value, str)}  # append_dict text


def load_q_network(path: str | Path) -> QNetwork:
    """A :class:`QNetwork` with the weights of a checkpoint :func:`save_q_network` (or ``train``) wrote.

    The layer sizes are read from the weights' shapes. The file is a ``.ckpt``, as ``train``
    writes it, or a ``.safetensors`` file holding the same names.

    Raises:
        ValueError: If the file does not end in ``.ckpt`` or ``.safetensors``, is empty, is not a
            checkpoint of that format, holds no Q-network weights (``layers.<i>.weight`` and
            ``.bias``; the message names what it holds), or holds a network that does not map
            CartPole's 4 observations to its 2 actions through layers whose sizes chain (each
            weight ``(out, in)`` with its bias ``(out,)``), holds several networks' weights (a
            training Cell's file), holds weights that are not floating-point, or holds a NaN or an
            infinity.
    """
    parameters = _read(path)
    weights, sources = {}, {}
    for name, parameter in parameters.items():
        match = _LAYER.search(name)
        if match:
            if match.group(1) in weights:  # a whole training Cell's file: the target network, Adam's moments...
                raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold one Q-network, but "
                                 f"'{sources[match.group(1)]}' and '{name}' are both its '{match.group(1)}'; save the "
                                 f"network alone (train writes dqn_cartpole.ckpt so).")
            weights[match.group(1)], sources[match.group(1)] = parameter.asnumpy(), name
    layers = sorted({int(name.split(".")[1]) for name in weights})
    if not layers or any(f"layers.{i}.{part}" not in weights for i in layers for part in ("weight", "bias")):
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold a Q-network's weights "
                         f"('layers.<i>.weight' and '.bias'), but it holds {_holdings(parameters)}.")
    shapes = [weights[f"layers.{i}.weight"].shape for i in layers]  # (out, in) per Dense layer
    for name, value in weights.items():
        if value.dtype.kind != "f":  # an integer or bool file is no trained network, whatever it would play
            raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold floating-point weights, but its "
                             f"'{sources[name]}' is {value.dtype}.")
        if not np.isfinite(value).all():  # a corrupt or diverged file would play arbitrary actions
            raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold finite weights, but its "
                             f"'{sources[name]}' holds {int(np.isnan(value).sum())} NaN and "
                             f"{int(np.isinf(value).sum())} infinite values.")
    _check_shapes(path, shapes, [weights[f"layers.{i}.bias"].shape for i in layers])
    q_net = QNetwork(shapes[0][1], shapes[-1][0], [shape[0] for shape in shapes[:-1]])
    # The file's layers in the order of their numbers, whatever the numbers (QNetwork's Dense layers are
    # 0, 2, 4, ... between its ReLUs; another network's may be 0, 1, 2, ...).
    own = sorted({int(_LAYER.search(parameter.name).group(1).split(".")[1]) for parameter in q_net.get_parameters()})
    number = dict(zip(own, layers))
    for parameter in q_net.get_parameters():
        _, i, part = _LAYER.search(parameter.name).group(1).split(".")
        parameter.set_data(ms.Tensor(weights[f"layers.{number[int(i)]}.{part}"]))
    return q_net


def _check_shapes(path: str | Path, shapes: list[tuple[int, ...]], bias_shapes: list[tuple[int, ...]]) -> None:
    """The Dense layers of a checkpoint take CartPole's observations to its actions, each feeding the next."""
    got = f"weights {[tuple(shape) for shape in shapes]} and biases {[tuple(shape) for shape in bias_shapes]}"
    chained = (all(len(shape) == 2 and min(shape) >= 1 for shape in shapes)
               and all(bias == (shape[0],) for shape, bias in zip(shapes, bias_shapes))
               and all(shapes[i + 1][1] == shapes[i][0] for i in range(len(shapes) - 1)))
    if not chained:
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold Dense layers whose sizes chain "
                         f"(each weight (out, in) with a bias (out,), each layer's in the previous layer's out), "
                         f"but got {got}.")
    if shapes[0][1] != OBSERVATION_SIZE or shapes[-1][0] != NUM_ACTIONS:
        raise ValueError(f"For 'evaluate', the checkpoint '{path}' must hold a Q-network from CartPole's "
                         f"{OBSERVATION_SIZE} observations to its {NUM_ACTIONS} actions, but its first layer "
                         f"takes {shapes[0][1]} inputs and its last gives {shapes[-1][0]} outputs ({got}).")
