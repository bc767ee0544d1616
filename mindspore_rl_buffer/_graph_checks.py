"""Compile-time checks of the Python constants a ``construct`` passes to a buffer (``ordered``, a
sample's size, ``beta``, a constant index): :func:`graph_check` runs them when the graph compiles,
as ``ops.constexpr`` does, and leaves nothing in the graph; unlike ``ops.constexpr``, it tells a
graph variable (a ``mindspore.mutable`` scalar, a tensor), which such a check receives as a
:class:`Variable`, from the constant ``None``.
"""
from __future__ import annotations

from typing import Any

from mindspore import Tensor, ops
from mindspore.common import dtype as mstype

from mindspore_rl_buffer import _errors
from mindspore_rl_buffer._validation import check_exponent, check_optional_size, check_ordered


class Variable:
    """What a :func:`graph_check` receives for an argument whose value a graph knows only when it
    runs (a ``mindspore.mutable`` scalar, a tensor), where ``ops.constexpr`` would pass ``None``,
    as it passes for the constant ``None``: with its type, the check can tell them apart."""

    __slots__ = ("dtype",)

    def __init__(self, dtype: Any) -> None:
        self.dtype = dtype

    @property
    def type_name(self) -> str:
        """The Python type of the value, as a direct call's message names it (``'Tensor'`` for a tensor)."""
        kinds = ((mstype.TensorType, "Tensor"), (mstype.Bool, "bool"), (mstype.Int, "int"), (mstype.Float, "float"))
        return next((name for kind, name in kinds if isinstance(self.dtype, kind)), str(self.dtype))

    def __repr__(self) -> str:
        return f"Variable({self.dtype})"


def graph_check(fn: Any) -> Any:
    """``ops.constexpr(fn)``, except that an argument the graph holds as a variable reaches ``fn`` as a
    :class:`Variable`, not as ``None``.

    Like any constexpr, it runs when the graph compiles and leaves nothing in the graph: its
    result is a constant. Called directly (on the host), it is ``fn``.
    """
    base = ops.constexpr(fn, get_instance=False)

    class GraphCheck(base):
        def __infer__(self, *args):
            return super().__infer__(*({**arg, "value": Variable(arg["dtype"])}
                                       if arg["value"] is None and arg["dtype"] is not None else arg
                                       for arg in args))

    return GraphCheck()


# What a Python constant a graph needs fixes there, for the message refusing a graph variable in its place.
CONTROL_FLOW = "the graph's control flow"
SAMPLE_SHAPE = "the shape of the sample"


def refuse_variable(op: str, arg: str, value: Any, expected: str, fixes: str) -> None:
    """In a :func:`graph_check`: refuse a graph variable given as ``arg``, which must be a Python constant
    (``expected``, as the direct call words it) because it fixes ``fixes``; a tensor is refused as a
    direct call refuses it."""
    if isinstance(value, Variable):
        if value.type_name == "Tensor":
            raise _errors.type_error(op, arg, expected, value, "Tensor")
        raise _errors.variable_error(op, arg, expected, fixes, value.type_name)


@graph_check
def check_ordered_graph(op: str, ordered: Any, default: bool) -> bool:
    """:func:`check_ordered` when a graph compiles: ``ordered`` must be a Python constant there."""
    refuse_variable(op, "ordered", ordered, "a bool or None", CONTROL_FLOW)
    return check_ordered(op, ordered, default)


@graph_check
def check_optional_size_graph(op: str, arg: str, value: Any, minimum: int = 1) -> int | None:
    """:func:`check_optional_size` when a graph compiles: ``value`` must be a Python constant there."""
    refuse_variable(op, arg, value, "an int or None", SAMPLE_SHAPE)
    return check_optional_size(op, arg, value, minimum)


@graph_check
def check_beta_graph(op: str, beta: Any) -> Any:
    """A ``beta`` that is not a tensor, when a graph compiles: a Python constant is checked as
    :func:`check_exponent` checks it (and returned as it is); a number known only when the graph
    runs (a ``mindspore.mutable``) is left unchecked, as a tensor is, and ``None`` returned."""
    if isinstance(beta, Variable):
        if beta.type_name not in ("int", "float"):
            raise _errors.type_error(op, "beta", "a float", beta, beta.type_name)
        return None
    check_exponent(op, "beta", beta)
    return beta


def checked_beta(op: str, beta: Any) -> Any:
    """Graph code: ``beta``, a Python constant checked through :func:`check_beta_graph` when the graph
    compiles; a tensor is used as it is (nothing is added to the graph: a constant comes back as it
    was, a variable is used as it is)."""
    if isinstance(beta, Tensor):
        return beta
    constant = check_beta_graph(op, beta)
    return beta if constant is None else constant
