"""The seam between direct calls and graphs: one mechanism for every buffer method.

Every public buffer method has two parts, written once each:

* a **graph body**, ``body(self, *args, check)``, built from graph operators: it is what
  the method becomes when MindSpore compiles a user's ``construct`` (or ``@jit`` function)
  that calls it, with ``check=True`` (the documented runtime guards); and
* a **host check**, ``host(self, *args, **kwargs)``, which validates a direct call's input
  in Python and says what to launch (:class:`Launch`): the body's arguments, and
  optionally a host function applied to the outputs.

:func:`buffer_method` joins them into the public method. Compiled into a graph, the method
is the body. Called directly, it takes the lock :data:`DIRECT_CALLS`, runs the host check
(whose reads of the cursors then hold until the launch: no other thread's call can come
between), and launches the body compiled with ``check=False`` (the host check made the
guards redundant, and a graph whose guard fails cannot run again). The compiled twin is a
``@jit`` closure over the buffer, one per combination of the call's static arguments
(Python ints, bools, strings, None): such constants are part of the graph, and a closure
keyed on them is measurably cheaper to launch than a method taking them as arguments.
Tensor arguments, and lists or tuples of tensors, are passed to the twin flat.

``in_graph()`` is tested here and nowhere else.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mindspore import Tensor, jit, nn, ops

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer.nest import rebuild, structure, template
from mindspore_rl_buffer.ops._common import draws
from mindspore_rl_buffer.specs import check_prefixed_names

# MindSpore's compile and launch are not thread-safe (a data-pipeline thread and the main
# thread calling compiled graphs at once corrupt compilation): every direct call of a
# buffer holds this lock, from its host check to the end of its launch.
DIRECT_CALLS = threading.RLock()

# MindSpore runs the assignment that its parser adds to a bare ``self.x.insert(...)``
# statement through this function of its JIT fallback (mindspore/graph/_utils).
_FALLBACK_SETATTR = "_jit_fallback_set_attr"


def _marker() -> int:
    return 0


@ops.constexpr(check=False)
def _is_none(obj):
    # Compiled, a Python function reaches a constexpr as None; run directly, as itself.
    return obj is None


def in_graph():
    """True while MindSpore compiles the caller into a graph, False when Python runs it.

    A compile-time constant, so only one branch of a test on it reaches the graph. Used by
    :func:`buffer_method`, :func:`plain_in_graph` and :func:`graph_nest` only.
    """
    return _is_none(_marker)


def plain_in_graph(record_type: Callable[..., Any], *fields: Any) -> Any:
    """``record_type(*fields)`` (a namedtuple) on the host; inside a graph the plain tuple ``fields``.

    MindSpore builds a namedtuple inside a graph only through its JIT fallback, a host step
    in the graph: items returned beside one lost their dicts (``items['obs']`` failed to
    compile), two draws in one graph failed (``Failed to infer for primitive:Assert``). The
    plain tuple unpacks as the namedtuple does, so ``ids, probabilities = info`` reads the
    same in both places; attribute access works on the host only.
    """
    if in_graph():
        return fields
    return record_type(*fields)


def graph_nest(template: Any, leaves: Any) -> Any:
    """Inside a graph, the nest of ``template`` rebuilt from ``leaves``; on the host, ``leaves`` as they are.

    A body whose result is a nest (a dict, say) returns its flat leaves instead, and its
    direct call's ``finish`` rebuilds the nest on the host: a graph that returns a dict
    builds it through host steps (``PyExecute``), so a direct call's twin must not. The
    public method then passes the body's result through here, which rebuilds the nest inside
    a user's graph (a dict is native there) and leaves the direct call's alone.
    """
    if in_graph():
        return rebuild(template, leaves)
    return leaves


class Launch:
    """What a host check decides for a direct call: launch the body with ``args``.

    Args:
        *args: The body's arguments (without ``check``).
        finish (Callable): Applied, on the host and still under the lock, to the launch's
            outputs; its result is the method's. Default: ``None`` (the outputs as they are).
        pieces (Sequence[tuple]): The arguments of more launches of the body, made in order after
            the first, under the same lock (a batch split by :func:`insert_plan`). Default: ``()``.
    """

    __slots__ = ("args", "finish", "pieces")

    def __init__(self, *args: Any, finish: Callable[[Any], Any] | None = None, pieces: Sequence[tuple] = ()) -> None:
        self.args = args
        self.pieces = pieces
        self.finish = finish


# Batch sizes a buffer compiles a direct insert of their own for. A batch of another size then goes in
# as pieces of the powers of two its binary digits give, a launch each (about 0.1 ms): a new size
# costs a compilation (about 0.35 s and 3 MB here), so inserting episodes of many lengths would
# otherwise compile without end. At most EXACT_INSERT_SIZES + log2(n) + 1 graphs of batches up to n.
EXACT_INSERT_SIZES = 8


def insert_plan(buffer: Any, tensors: Sequence[Any], batch_size: int) -> Launch | None:
    """The direct insert of ``tensors`` (checked, ``batch_size`` rows): one launch of a size this buffer
    has compiled (or may still compile, see :data:`EXACT_INSERT_SIZES`), or launches of its power-of-two
    pieces in order, as one batch would go in (the body's own launches: a subclass's ``insert`` is not
    called again). The caller holds :data:`DIRECT_CALLS`."""
    if not batch_size:
        return None
    sizes = buffer.__dict__.setdefault("_insert_sizes", set())
    if batch_size in sizes or len(sizes) < EXACT_INSERT_SIZES or batch_size & (batch_size - 1) == 0:
        sizes.add(batch_size)
        return Launch(tensors)
    arrays, pieces, start = [tensor.asnumpy() for tensor in tensors], [], 0  # a Tensor slice is an op of its own
    for bit in reversed(range(batch_size.bit_length())):
        if batch_size >> bit & 1:
            pieces.append(([Tensor(np.ascontiguousarray(array[start:start + (1 << bit)])) for array in arrays],))
            start += 1 << bit
    return Launch(*pieces[0], pieces=pieces[1:])


def destroy(buffer: Any) -> None:
    """Empty ``buffer``, release its direct-call graphs (and those of the buffers it holds, such as
    its ``storage``), and refuse every later direct call, ``destroy()`` included.

    MindSpore Reinforcement's ``destroy()`` freed a native buffer; here the device memory of
    the columns is returned when the buffer and the graphs compiled with it are collected."""
    with DIRECT_CALLS:
        refuse_destroyed("destroy", buffer)
        buffer.reset()
        for cell in (buffer, *buffer.cells()):
            cell.__dict__.pop("_direct_twins", None)
            cell.__dict__.pop("_insert_sizes", None)
            cell.__dict__["_destroyed"] = True


def refuse_destroyed(op: str, buffer: Any) -> None:
    """Raise the ``RuntimeError`` of a direct call (``save`` and ``load`` included) on a destroyed buffer."""
    if getattr(buffer, "__dict__", {}).get("_destroyed"):
        raise RuntimeError(f"For '{op}', the buffer was destroyed: destroy() emptied it and released its "
                           f"compiled graphs; build a new buffer.")


def discard(_: Any) -> None:
    """A :class:`Launch` ``finish`` for methods that return nothing when called directly."""
    return None


def _split(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[Tensor]]:
    """The static layout of ``args`` and their tensors, flat.

    The layout has one entry per argument: ``("tensor",)``, ``("tensors", n)`` for a list or
    tuple of ``n`` tensors, ``("nest", treespec)`` for a dict, namedtuple or nested tuple
    of tensors, or ``("static", value)`` for anything else, which the compiled twin takes as
    a constant. The layout is hashable: it keys the twins.
    """
    layout: list[Any] = []
    flat: list[Tensor] = []
    for arg in args:
        if isinstance(arg, Tensor):
            layout.append(("tensor",))
            flat.append(arg)
        elif isinstance(arg, (list, tuple)) and arg and all(isinstance(x, Tensor) for x in arg) \
                and not hasattr(arg, "_fields"):
            layout.append(("tensors", len(arg)))
            flat.extend(arg)
        else:
            leaves, treespec = structure(arg)
            if leaves and all(isinstance(x, Tensor) for x in leaves):
                layout.append(("nest", treespec))
                flat.extend(leaves)
            else:
                layout.append(("static", arg))
    return tuple(layout), flat


def _spans(layout: tuple[Any, ...]) -> tuple[tuple[int, int, int, Any], ...]:
    """``(kind, start, stop, value)`` per argument: where the twin finds it among the flat tensors
    (kind 0: one tensor, 1: a tuple of them, 2: a nest rebuilt from ``value``, 3: the constant ``value``)."""
    spans, start = [], 0
    for entry in layout:
        if entry[0] == "tensor":
            spans.append((0, start, start + 1, None))
            start += 1
        elif entry[0] == "tensors":
            spans.append((1, start, start + entry[1], None))
            start += entry[1]
        elif entry[0] == "nest":
            count = entry[1].num_leaves
            spans.append((2, start, start + count, template(entry[1])))
            start += count
        else:
            spans.append((3, start, start, entry[1]))
    return tuple(spans)


def _argument(flat, kind, start, stop, value):
    if kind == 0:
        return flat[start]
    if kind == 1:
        return flat[start:stop]
    if kind == 2:
        return rebuild(value, flat[start:stop])
    return value


_TWIN_NUMBERS = itertools.count()


class _TwinCell(nn.Cell):
    """A direct call's graph as a Cell, for buffers whose graphs hold collectives (``_collective_twins``):
    with ``AllGather`` inside, a ``jit`` function launched in 16-35 ms a call here, the same graph as a
    Cell in about 2 ms (``python -m benchmarks.sharded_sample`` under msrun). ``auto_prefix=False``
    leaves the buffer's Parameter names alone."""

    def __init__(self, buffer: Any, body: Callable[..., Any], spans: tuple[Any, ...]) -> None:
        super().__init__(auto_prefix=False)
        self.buffer, self.body, self.spans = buffer, body, spans

    def construct(self, *flat):
        return self.body(self.buffer, *[_argument(flat, kind, start, stop, value)
                                        for kind, start, stop, value in self.spans], check=False)


def _make_twin(buffer: Any, body: Callable[..., Any], layout: tuple[Any, ...]) -> Callable[..., Any]:
    spans = _spans(layout)
    if buffer.__dict__.get("_collective_twins"):
        return _TwinCell(buffer, body, spans)

    def twin(*flat):
        return body(buffer, *[_argument(flat, kind, start, stop, value) for kind, start, stop, value in spans],
                    check=False)

    # A name of its own: MindSpore warns that a function "has been compiled again" when a new jit
    # object of a name it has compiled before compiles, which every twin after the first would be.
    twin.__name__ = twin.__qualname__ = f"_direct_{body.__name__}_{next(_TWIN_NUMBERS)}"
    return jit(twin)


def launch(buffer: Any, body: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Run ``body`` compiled (``check=False``) with ``args``; the caller holds :data:`DIRECT_CALLS`."""
    layout, flat = _split(args)
    twins = buffer.__dict__.setdefault("_direct_twins", {})
    key = (body.__qualname__, layout)
    twin = twins.get(key) or _make_twin(buffer, body, layout)
    outputs = twin(*flat)
    twins[key] = twin  # once its first call ran: a twin that fails to compile is not kept
    return outputs


# A method's signature, read once: a direct call of a method without a host check binds to it.
_signature = functools.cache(inspect.signature)


@functools.cache
def _takes_arguments(body: Callable[..., Any]) -> bool:
    """Whether the method ``body`` defines takes arguments besides ``self`` and ``check``."""
    return len(_signature(body).parameters) > 2


def _bound(body: Callable[..., Any], buffer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """The arguments of a direct call of the method ``body`` defines, by position; a ``TypeError`` naming
    the method (not the helper that was called) if they do not bind to it, its ``check`` aside."""
    signature = _signature(body)
    try:
        bound = signature.bind(buffer, *args, **kwargs)
        if bound.kwargs:  # `check`: the direct path checks on the host, always
            raise TypeError(f"got an unexpected keyword argument {next(iter(bound.kwargs))!r}")
    except TypeError as error:
        public = [parameter for name, parameter in signature.parameters.items() if name not in ("self", "check")]
        name = body.__name__.lstrip("_")
        raise TypeError(f"For '{name}', {error} (the call is {name}{signature.replace(parameters=public)}).") from None
    return bound.args[1:]


def _plan(body: Callable[..., Any], host: Callable[..., Any] | None, buffer: Any, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Any:
    """What a direct call of ``body``'s method runs: its host check's plan, or a launch of its arguments.

    A function of its own: MindSpore's graph parser, which reads the method, refuses a ``try``.
    """
    if host is None:  # bound only when there is something to bind: size() and the like are called often
        return Launch(*(_bound(body, buffer, args, kwargs) if args or kwargs or _takes_arguments(body) else ()))
    try:
        return host(buffer, *args, **kwargs)
    except TypeError as error:
        if error.__traceback__.tb_next is None:  # the arguments did not bind to the host check
            _bound(body, buffer, args, kwargs)
        raise


def buffer_method(host: Callable[..., Any] | None = None, *, returns_self: bool = False) -> Callable[..., Any]:
    """Make a buffer method from its graph body and its host check (see the module docstring).

    Args:
        host (Callable): ``host(self, *args, **kwargs)`` checks a direct call and returns a
            :class:`Launch`, or any other value to return it without launching. ``None``
            launches the body with the call's positional arguments. Default: ``None``.
        returns_self (bool): For methods whose names MindSpore's parser takes for list
            methods (``insert``, ``clear``): inside a graph the method returns the buffer
            itself, so the rebinding the parser makes of a bare ``self.buf.insert(...)``
            statement is caught (see :class:`BufferCell`); called directly, ``None``.
            Default: ``False``.

    Returns:
        A decorator for ``body(self, *args, check)``.
    """

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        def method(self, *args, **kwargs):
            if in_graph():
                if returns_self:
                    # A statement, not an assignment: MindSpore keeps a statement's side effects,
                    # but drops a call whose assigned result is never used.
                    body(self, *args, check=True, **kwargs)
                    return self
                return body(self, *args, check=True, **kwargs)
            if called_by_graph_fallback():
                raise TypeError(_errors.FALLBACK_CALL.format(method=body.__name__.lstrip("_")))
            with DIRECT_CALLS:  # checked under the lock: a call that waited on destroy() is refused
                refuse_destroyed(body.__name__.lstrip("_"), self)
                plan = _plan(body, host, self, args, kwargs)
                if not isinstance(plan, Launch):
                    return plan
                outputs = launch(self, body, plan.args)
                for args in plan.pieces:
                    outputs = launch(self, body, args)
                if plan.finish is not None:
                    return plan.finish(outputs)
            return None if returns_self else outputs

        # Not functools.wraps: MindSpore's parser would follow __wrapped__ to the body's source.
        method.__name__ = body.__name__
        method.__qualname__ = body.__qualname__
        method.__doc__ = body.__doc__
        method.returns_self = returns_self
        # Compiled once per call site: two samples in one graph draw apart (see ops._common.draws).
        draws(body)
        return draws(method)

    return decorate


# The function of MindSpore's parser that runs Python code for a graph that is running (its
# JIT fallback), where a buffer's direct path would start a nested graph.
_FALLBACK_EVAL = "eval_script"


def called_by_graph_fallback() -> bool:
    """Whether MindSpore's JIT fallback is running this call from inside a running graph."""
    frame = sys._getframe(2)
    for _ in range(6):
        if frame is None:
            return False
        if frame.f_code.co_name == _FALLBACK_EVAL and "mindspore" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


# Method names that MindSpore's parser treats as list methods in a bare statement.
_LIST_METHOD_NAMES = ("append", "clear", "extend", "insert", "pop", "remove", "reverse", "update")


def check_not_rebound(prefix: str, cls: type) -> None:
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
            methods = [name for name in _LIST_METHOD_NAMES if getattr(getattr(cls, name, None), "returns_self", False)]
            raise TypeError(_errors.BARE_CALL.format(method="/".join(methods), attr=attr))
        frame = frame.f_back


class BufferCell(nn.Cell):
    """Base of the buffer Cells: refuses the rebinding MindSpore makes of a bare call.

    Methods made with ``buffer_method(returns_self=True)`` (``insert``, ``clear``) return the
    buffer itself inside a graph, so that MindSpore's parser, which turns a bare
    ``self.buf.insert(...)`` statement into ``self.buf = self.buf.insert(...)``, assigns
    the buffer back; that assignment runs through ``Cell.__setattr__`` and
    ``update_parameters_name``, where it is caught and raised with the fix.
    """

    def update_parameters_name(self, prefix="", recurse=True):
        """See ``mindspore.nn.Cell``; also refuses a graph's rebinding of the buffer, and a prefix that
        would make a Parameter's name too long for MindSpore, before any Parameter is renamed."""
        check_not_rebound(prefix, type(self))
        check_prefixed_names(type(self).__name__, prefix, [n for n, _ in self.parameters_and_names(expand=recurse)])
        return super().update_parameters_name(prefix, recurse)
