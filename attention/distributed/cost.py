r"""What context parallelism costs: the bytes each rank sends and the attention it computes.

:func:`count_work` counts, on this rank, while the strategies run. The bytes come from the
tensors each strategy hands to a collective, by one rule per kind of collective
(:func:`count_sent`); the FLOPs from the tiles of scores the forward pass computes
(:func:`count_flops`). :func:`bytes_formula` is the same count worked out on paper for one call
of a strategy: the tests, the tutorial, the benchmarks and ``python -m attention.distributed``
compare what was counted with it.
"""

from __future__ import annotations

import contextlib

from torch import Tensor

from .._checks import check_choice, check_int

__all__ = ["count_work", "bytes_formula"]

#: The counters of the count_work blocks in progress (they may nest).
_COUNTERS: list[dict] = []


@contextlib.contextmanager
def count_work():
    r"""Count, on this rank, the bytes it sends and the attention FLOPs of the forward pass.

    Bytes are counted from the tensors passed to the collectives, by the rules that
    :func:`bytes_formula` adds up. FLOPs are :math:`2 N H R C (D + D_v)` for every tile of
    :math:`R` query rows and :math:`C` key columns that the forward pass computes
    (:math:`QK^\top` and the product with :math:`V`, a multiply and an add each); under a
    causal mask a tile wholly in the future is skipped and the others are trimmed.

    Yields:
        dict: ``{"bytes": int, "flops": int}``, filled in as the calls inside run.

    Examples::

        >>> from attention.distributed import count_work
        >>> with count_work() as work:
        ...     pass  # calls of ring_attention etc.
        >>> work
        {'bytes': 0, 'flops': 0}
    """
    counter = {"bytes": 0, "flops": 0}
    _COUNTERS.append(counter)
    try:
        yield counter
    finally:
        _COUNTERS.remove(counter)


def _count(key: str, amount: int) -> None:
    for counter in _COUNTERS:
        counter[key] += int(amount)


def nbytes(x: Tensor) -> int:
    """The bytes of a tensor's elements."""
    return x.numel() * x.element_size()


#: Bytes a rank sends when it passes a tensor of ``b`` bytes to each kind of collective, among
#: ``P`` ranks: a send moves it once; an all-gather sends it to the ``P - 1`` others; an
#: all-to-all keeps the ``1 / P`` that is its own and sends the rest.
_SENT = {
    "send": lambda b, P: b,
    "all_gather": lambda b, P: (P - 1) * b,
    "all_to_all": lambda b, P: (P - 1) * b // P,
}


def count_sent(collective: str, x: Tensor, world_size: int) -> None:
    """Count the bytes this rank sends when it passes ``x`` to ``collective``."""
    _count("bytes", _SENT[collective](nbytes(x), world_size))


def count_flops(tile_list: list, batch: int, head_dim: int, value_dim: int) -> None:
    """Count the forward FLOPs of the tiles ``(rows, cols, allowed)`` for ``batch`` = N H."""
    pairs = sum((r.stop - r.start) * (c.stop - c.start) for r, c, _ in tile_list)
    _count("flops", 2 * batch * pairs * (head_dim + value_dim))


def _ring(P: int, b: int) -> tuple[int, int]:
    # K and V are sent P - 1 times; backward once more, and their gradients P times (with
    # them round the ring and then home), none of it when the ring has one rank.
    send = _SENT["send"](b, P)
    return 2 * (P - 1) * send, (2 * (P - 1) * send + 2 * P * send) if P > 1 else 0


def _all_gather(P: int, b: int) -> tuple[int, int]:
    # K and V gathered; backward: their gradients reduce-scattered, as an all-to-all of the
    # P shards of the gathered gradient (P b bytes each).
    return 2 * _SENT["all_gather"](b, P), 2 * _SENT["all_to_all"](P * b, P)


def _ulysses(P: int, b: int) -> tuple[int, int]:
    # Q, K and V to head shards and the output back; backward, their gradients the same way.
    return _SENT["all_to_all"](4 * b, P), _SENT["all_to_all"](4 * b, P)


_FORMULAS = {"ring": _ring, "all_gather": _all_gather, "ulysses": _ulysses}


def bytes_formula(strategy: str, world_size: int, shard_bytes: int) -> tuple[int, int]:
    r"""Bytes one rank sends in the forward and in the backward pass of a strategy.

    With ``b`` the bytes of one local shard of K (the same for Q, V and the output) and ``P``
    ranks:

    - ring: forward :math:`2(P-1)b` (K and V move ``P - 1`` times); backward :math:`2(P-1)b`
      for K and V plus :math:`2Pb` for their gradients, which travel with them and then home.
    - all-gather: forward :math:`2(P-1)b` (K and V to every other rank); backward the same, a
      reduce-scatter of the gradients of the gathered K and V.
    - Ulysses: forward :math:`4 \frac{P-1}{P} b` (all-to-all of Q, K, V and of the output);
      backward the same for their gradients.

    Args:
        strategy (str): ``"ring"``, ``"all_gather"`` or ``"ulysses"``.
        world_size (int): ``P``, at least 1.
        shard_bytes (int): ``b``, at least 0.

    Returns:
        tuple[int, int]: bytes sent in the forward and in the backward pass.

    Examples::

        >>> from attention.distributed import bytes_formula
        >>> bytes_formula("ring", 4, 1000)
        (6000, 14000)
        >>> bytes_formula("ulysses", 4, 1000)
        (3000, 3000)
    """
    check_choice(strategy, "strategy", _FORMULAS)
    check_int(world_size, "world_size")
    check_int(shard_bytes, "shard_bytes", minimum=0)
    return _FORMULAS[strategy](world_size, shard_bytes)
