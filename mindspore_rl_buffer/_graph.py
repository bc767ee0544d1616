"""Telling a direct call from a call compiled into a graph, and the bare-call guard."""
from __future__ import annotations

import sys
import threading

from mindspore import nn, ops

from mindspore_rl_buffer import _errors


def _marker() -> int:
    return 0


@ops.constexpr(check=False)
def _is_none(obj):
    # Compiled, a Python function reaches a constexpr as None; run directly, as itself.
    return obj is None


def in_graph():
    """True while MindSpore compiles the caller into a graph, False when Python runs it.

    Buffer methods branch on it: compiled into a user's ``construct`` they emit graph ops;
    called directly they check their input on the host and launch a compiled graph. The
    condition is a compile-time constant, so only one branch reaches the graph.
    """
    return _is_none(_marker)


# MindSpore's compile and launch are not thread-safe (a data-pipeline thread and the main
# thread calling compiled graphs at once corrupt compilation): every direct call of a
# buffer's compiled graphs holds this lock.
DIRECT_CALLS = threading.RLock()

# MindSpore runs the assignment that its parser adds to a bare ``self.x.insert(...)``
# statement through this function of its JIT fallback (mindspore/graph/_utils).
_FALLBACK_SETATTR = "_jit_fallback_set_attr"


def check_not_rebound(prefix: str, methods: tuple[str, ...]) -> None:
    """Raise the bare-call error if a graph is assigning a buffer back to its attribute.

    Called from ``update_parameters_name``, which ``Cell.__setattr__`` calls on the value
    assigned; a buffer is assigned from inside a running graph only by the statement that
    MindSpore's parser makes of a bare ``self.<attr>.insert(...)`` (or ``.clear(...)``).
    """
    frame = sys._getframe(1)
    for _ in range(12):
        if frame is None:
            return
        if frame.f_code.co_name == _FALLBACK_SETATTR:
            attr = prefix.rstrip(".") or "buffer"
            raise TypeError(_errors.BARE_CALL.format(method="/".join(methods), attr=attr))
        frame = frame.f_back


class BufferCell(nn.Cell):
    """Base of the buffer Cells: refuses the rebinding MindSpore makes of a bare call.

    Methods named like list methods (``insert``, ``clear``) return the buffer itself inside a
    graph, so that MindSpore's parser, which turns a bare ``self.buf.insert(...)`` statement
    into ``self.buf = self.buf.insert(...)``, assigns the buffer back; that assignment runs
    through ``Cell.__setattr__`` and ``update_parameters_name``, where it is caught.
    """

    # Public methods whose names MindSpore's parser takes for list methods.
    _LIST_NAMED: tuple[str, ...] = ()

    def update_parameters_name(self, prefix="", recurse=True):
        """See ``mindspore.nn.Cell``; also refuses a graph's rebinding of the buffer."""
        check_not_rebound(prefix, self._LIST_NAMED)
        return super().update_parameters_name(prefix, recurse)

    def save(self, path):
        """Write the buffer (every column, both cursors, its specs) to ``path``, atomically.

        ``path`` ends in ``.safetensors`` (recommended: streamed) or ``.ckpt``.

        See :func:`mindspore_rl_buffer.save_checkpoint`.
        """
        from mindspore_rl_buffer.checkpoint import save_checkpoint

        return save_checkpoint(self, path)

    def load(self, path):
        """Restore the buffer from ``path`` in place; refuses a checkpoint of another type,
        capacity, shape or dtype and then leaves the buffer unchanged.

        See :func:`mindspore_rl_buffer.load_checkpoint`.
        """
        from mindspore_rl_buffer.checkpoint import load_checkpoint

        load_checkpoint(path, self)
