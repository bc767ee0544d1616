"""The error vocabulary of the library, in one place.

Messages follow MindSpore's phrasing ("For 'insert', the shape of column 'state' must be
(n, 4), but got (n, 5)."): the operation, the argument or column, what was expected and
what came. ``TypeError`` for a wrong type, ``ValueError`` for a wrong value, ``IndexError``
for an index out of range.
"""
from __future__ import annotations

import difflib
import reprlib
from collections.abc import Callable, Iterable


# How a message quotes a value it refuses: a few items of each list and the first characters of a
# long string or number, never the whole of a value built to be huge (a YAML alias bomb's lists).
class _Quote(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        # Python refuses to write an int of more than 4,300 digits (about 14,000 bits): its size instead.
        return f"<an int of {x.bit_length():,} bits>" if x.bit_length() > 14_000 else super().repr_int(x, level)


#: The characters of a string a message quotes whole; a longer one is cut short.
QUOTED_CHARACTERS = 60
_QUOTE = _Quote()
_QUOTE.maxlevel, _QUOTE.maxlist, _QUOTE.maxtuple, _QUOTE.maxdict = 2, 6, 6, 6
_QUOTE.maxstring, _QUOTE.maxlong, _QUOTE.maxother = QUOTED_CHARACTERS, 40, 60


def shown(value: object) -> str:
    """``repr(value)`` cut short for a message: at most 2 levels deep, 6 items a level, 60 characters a string.

    Examples:
        >>> from mindspore_rl_buffer._errors import shown
        >>> shown([[[1, 2]]] * 100)
        '[[[...]], [[...]], [[...]], [[...]], [[...]], [[...]], ...]'
        >>> shown(2**200)
        '160693804425899027...2993782792835301376'
    """
    return _QUOTE.repr(value)

# Shown when a bare ``self.buffer.insert(...)`` statement inside a compiled ``construct`` is
# rewritten by MindSpore's parser into ``self.buffer = self.buffer.insert(...)``.
BARE_CALL = (
    "For '{method}', a bare statement `self.{attr}.{method}(...)` inside a compiled construct "
    "is rewritten by MindSpore's graph parser into `self.{attr} = self.{attr}.{method}(...)` "
    "(it treats '{method}' as a list method), which would rebind the buffer and make later "
    "calls on it read stale data. Write `_ = self.{attr}.{method}(...)` instead."
)


# Shown when a buffer method is run by MindSpore's JIT fallback from inside a running graph:
# after `b = self.buffer` and a bare `b.insert(...)`, the parser rebinds `b` to the result.
FALLBACK_CALL = (
    "For '{method}', the buffer was called through MindSpore's Python fallback from inside a running "
    "graph, where it cannot launch its own: this happens after a local alias `b = self.buffer` and a bare "
    "statement `b.insert(...)` (or `b.clear(...)`), which MindSpore's parser rewrites into "
    "`b = b.insert(...)`, turning `b` into a Python object. Write `_ = b.insert(...)`, or call "
    "`self.buffer.insert(...)` directly."
)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``'; did you mean X?'`` for the closest of ``choices``, or ``''``."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _written(value: object, write: Callable[[object], str]) -> str:
    """``write(value)``; :func:`shown` for an int (its first and last digits past 40) or for a value holding
    an int Python refuses to write (past 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return shown(value)
    try:
        return write(value)
    except ValueError:
        return shown(value)


def type_error(op: str, arg: str, expected: str, got: object, type_name: str | None = None) -> TypeError:
    """A wrong type: ``For 'op', 'arg' must be expected, but got T.`` (``T`` is ``type_name`` if given)."""
    return TypeError(f"For '{op}', '{arg}' must be {expected}, but got {type_name or type(got).__name__}.")


def variable_error(op: str, arg: str, expected: str, fixes: str, type_name: str) -> TypeError:
    """A graph variable (a ``mindspore.mutable``) where a graph needs a Python constant, as it fixes ``fixes``."""
    return TypeError(f"For '{op}', '{arg}' must be a Python constant ({expected}) inside a graph, since it fixes "
                     f"{fixes}, but got a graph variable of type {type_name} (a mindspore.mutable, say), whose "
                     f"value is known only when the graph runs.")


def value_error(op: str, arg: str, expected: str, got: object) -> ValueError:
    """A wrong value: ``For 'op', 'arg' must be expected, but got V.``"""
    return ValueError(f"For '{op}', '{arg}' must be {expected}, but got {_written(got, repr)}.")


def column_error(op: str, column: str, what: str, expected: object, got: object) -> ValueError:
    """A column of the wrong shape or dtype."""
    got = _written(got, str)
    return ValueError(f"For '{op}', the {what} of column '{column}' must be {expected}, but got {got}.")


def leaf_error(op: str, leaf: str, what: str, expected: object, got: object) -> ValueError:
    """A leaf of a nest (``items[1][0] 'lidar'``), or a column (``column 'state'``), of the wrong shape or dtype."""
    return ValueError(f"For '{op}', the {what} of {leaf} must be {expected}, but got {_written(got, str)}.")


def leaf_unknown_in_graph_error(op: str, leaf: str) -> TypeError:
    """A leaf whose shape and dtype a graph does not know when it compiles (a host object's)."""
    return TypeError(f"For '{op}', {leaf} must be tensors of known shape and dtype when the graph compiles, "
                     f"but got a value MindSpore builds on the host (a namedtuple made inside the graph is one): "
                     f"pass a plain tuple or dict, or make the namedtuple outside the graph and pass it in.")


def not_an_array_error(op: str, names: tuple[str, ...], i: int, got: object) -> TypeError:
    """Column ``i`` of a transition is neither a tensor nor a numpy array."""
    column = names[i] if i < len(names) else f"#{i}"
    return leaf_not_an_array_error(op, f"column '{column}'", got)


def leaf_not_an_array_error(op: str, leaf: str, got: object) -> TypeError:
    """A column or leaf (named as ``leaf``) that is neither a tensor nor a numpy array."""
    return TypeError(f"For '{op}', {leaf} must be a mindspore.Tensor or a numpy array, but got {type(got).__name__}.")


def index_error(op: str, index: object, size: int) -> IndexError:
    """An index outside ``[-size, size)`` (none fits an empty buffer)."""
    if size == 0:
        return IndexError(f"For '{op}', the buffer is empty (holding 0 items): no 'index' fits, "
                          f"but got {_written(index, str)}.")
    return IndexError(
        f"For '{op}', 'index' must be in [-{size}, {size}) for a buffer holding {size} items, "
        f"but got {_written(index, str)}."
    )


def empty_error(op: str) -> ValueError:
    """Sampling or reading an empty buffer."""
    return ValueError(f"For '{op}', the buffer is empty: insert at least one item first.")


def not_enough_error(op: str, sample_size: int, size: int) -> ValueError:
    """Sampling without replacement more items than are stored."""
    return ValueError(
        f"For '{op}' without replacement, 'sample_size' ({sample_size}) must not exceed the "
        f"number of stored items, but the buffer holds {size}."
    )


def world_size_error(op: str, path: str, saved: int, current: int) -> ValueError:
    """A sharded checkpoint written by a job of another size."""
    return ValueError(
        f"For '{op}', the checkpoint '{path}' was saved by a job of {saved} ranks, but this job has "
        f"{current}: a sharded buffer must be loaded with the world size it was saved with."
    )


def checkpoint_error(op: str, path: str, what: str, expected: object, got: object) -> ValueError:
    """A checkpoint whose metadata does not match the buffer loading it."""
    return ValueError(f"For '{op}', the {what} in '{path}' must be {expected} to match this buffer, "
                      f"but got {got}.")


def missing_shard_error(op: str, path: str) -> FileNotFoundError:
    """No checkpoint file for this rank."""
    return FileNotFoundError(f"For '{op}', no checkpoint file for this rank at '{path}'.")


def empty_shard_error(op: str, rank: int) -> ValueError:
    """Sampling locally from an empty shard."""
    return ValueError(f"For '{op}' with sampling='local', the shard of rank {rank} is empty: insert at least "
                      f"one item on this rank first, or sample with sampling='global'.")


def unmovable_dtype_error(op: str, column: str, dtype: object) -> ValueError:
    """A column that a global sample cannot move between ranks exactly."""
    return ValueError(
        f"For '{op}' with sampling='global', the dtype of column '{column}' must be one that travels exactly "
        f"between ranks (not float64 or uint64), but got {dtype}: MindSpore 2.10's CPU AllGather rounds "
        f"64-bit values to 32 bits, and without a bitcast operator float64 and uint64 have no exact 32-bit form. "
        f"Use float32 (or int64), or sampling='local'."
    )


def slot_error(op: str, slot: object, size: int) -> IndexError:
    """A physical slot outside the stored items ``[0, size)`` (prioritized replay)."""
    return IndexError(
        f"For '{op}', 'indices' must be physical slots of stored items, in [0, {size}) for a buffer "
        f"holding {size} items, but got {slot}."
    )


def not_offered_error(op: str, cls: str, instead: str) -> TypeError:
    """A method of the uniform buffer that another buffer type does not offer."""
    return TypeError(f"For '{op}', {cls} does not offer this method: use {instead}.")


def flagged_final_row_error(op: str, env: int, step: int, terminated: object, truncated: object) -> ValueError:
    """A transition buffer's final row (the one after an episode's end) that carries a flag."""
    return ValueError(
        f"For '{op}', the row after an episode's end carries that episode's final observation, so its "
        f"'terminated' and 'truncated' must be 0 (as gymnasium's next-step autoreset gives them), but "
        f"environment {env} has terminated={terminated}, truncated={truncated} at step {step} of the batch."
    )


def no_valid_start_error(op: str, stored: int, num_envs: int, stack_size: int, n_step: int) -> ValueError:
    """Sampling a transition buffer that holds no complete transition yet."""
    return ValueError(
        f"For '{op}', the buffer holds no valid start yet ({stored} time steps of {num_envs} environments "
        f"stored): a start needs stack_size={stack_size} steps stored before it and n_step={n_step} after it, "
        f"and must not be the final observation of an episode."
    )
