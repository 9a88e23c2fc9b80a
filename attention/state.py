r"""The decoding-state contract: what an attention layer keeps between calls to continue a
sequence.

A decoder that writes one token at a time keeps, for every attention layer, what that layer
needs of the earlier positions: their keys and values (:class:`attention.KVCache`), one small
latent per position (multi-head latent attention), or a fixed-size sum (linear attention).
:class:`DecodingState` is the one interface the models and the searches use for all of them:

- the model opens every forward call with :meth:`DecodingState.step`, which checks the whole call
  (batch, dtype, device, room) *before* any layer writes, and on leaving checks that every layer
  wrote exactly once; only then does :attr:`~DecodingState.length` advance. A layer that ignores
  its state is an error, never silently wrong tokens;
- each layer writes its own part through its state's ``update`` (whose arguments are the
  layer's business) and reads back what it needs;
- :meth:`~DecodingState.reorder` (beam search), :meth:`~DecodingState.crop`,
  :meth:`~DecodingState.reset` and :attr:`~DecodingState.nbytes` work the same on every state.

A state with positions (``positional = True``) keeps one slot per position in each store, along
the store's ``position_axis``; with ``window`` set it rolls, keeping the first ``sinks``
positions and the most recent ones. A state without positions (a recurrent sum) has no slots:
it cannot be cropped, and it never fills.
"""

import abc
import contextlib
from collections.abc import Iterator

import torch
from torch import Tensor

from ._checks import check_factory, check_int

__all__ = ["DecodingState"]


class DecodingState(abc.ABC):
    r"""The base of every decoding state: one per model, holding every layer's part.

    A subclass allocates its stores (each of shape ``(num_layers, N, ...)``) and says which of
    them hold positions; this class keeps the length, the rolling window, the per-call checks,
    and the operations every state shares.

    Args:
        num_layers (int): number of attention layers.
        batch_size (int): number of sequences :math:`N`.
        max_len (int, optional): most positions held. Default: ``None`` (none: a state without
            positions, or ``sinks + window``).
        window (int, optional): keep only the ``window`` most recent positions after the sinks
            (``max_len = sinks + window``). Default: ``None``.
        sinks (int): with ``window``, the first positions that are always kept. Default: ``0``.

    Examples::

        >>> from attention import DecoderLM
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> state = model.new_cache(1)  # made by the layers' attention: here a KVCache
        >>> isinstance(state, DecodingState), state.length
        (True, 0)
        >>> with torch.no_grad():
        ...     _ = model(torch.tensor([[1, 2, 3]]), cache=state)
        >>> state.length  # every layer wrote, so the call advanced it
        3
    """

    #: Whether the stores hold one slot per position (keys, latents) or a fixed-size sum.
    positional: bool = True
    #: The axis of a layer's store (the layer axis removed) that holds the positions.
    position_axis: int = 1

    def __init__(
        self,
        num_layers: int,
        *,
        batch_size: int,
        max_len: int | None = None,
        window: int | None = None,
        sinks: int = 0,
    ):
        check_int(num_layers, "num_layers", minimum=1)
        check_int(batch_size, "batch_size", minimum=1)
        check_int(sinks, "sinks", minimum=0)
        if not self.positional:
            if window is not None or sinks:
                raise ValueError(
                    f"{type(self).__name__} holds no positions, so it has no window or sinks; "
                    f"got window={window}, sinks={sinks}"
                )
        elif window is None:
            if max_len is None:
                raise TypeError("max_len is required for a cache without a window")
            if sinks:
                raise ValueError(f"sinks are kept by a rolling cache: give window too; got {sinks}")
        else:
            check_int(window, "window", minimum=1)
            if max_len is not None and max_len != sinks + window:
                raise ValueError(
                    f"a rolling cache holds max_len = sinks + window = {sinks + window} "
                    f"positions; got max_len={max_len}"
                )
            max_len = sinks + window
        if max_len is not None:
            check_int(max_len, "max_len", minimum=1)
        self.num_layers, self.batch_size, self.max_len = num_layers, batch_size, max_len
        self.window, self.sinks = window, sinks
        self.length = 0
        self._call: int | None = None  # the new positions of the call under way
        self._written: set[int] = set()  # the layers that wrote during it

    @abc.abstractmethod
    def stores(self) -> tuple[Tensor, ...]:
        """Every tensor of the state, each ``(num_layers, N, ...)``."""

    @staticmethod
    def _allocate(shape, *, device=None, dtype=None) -> Tensor:
        """A zero store, after checking ``device`` and ``dtype`` (floating point)."""
        check_factory(device, dtype)
        return torch.zeros(shape, device=device, dtype=dtype)

    @property
    def dtype(self) -> torch.dtype:
        """The element type of the stores."""
        return self.stores()[0].dtype

    @property
    def device(self) -> torch.device:
        """Where the stores live."""
        return self.stores()[0].device

    @property
    def nbytes(self) -> int:
        """Bytes allocated for every store of every layer."""
        return sum(store.nbytes for store in self.stores())

    def dropped(self, length: int) -> int:
        """How many held positions writing ``length`` more drops (0 unless rolling)."""
        if self.window is None:
            return 0
        return max(0, min(self.length - self.sinks, self.length + length - self.max_len))

    def offset(self, length: int) -> int:
        """The position (slot) at which ``length`` new positions will be written."""
        return self.length - self.dropped(length)

    def positions(self, length: int) -> Tensor | None:
        """The position of every new token of the call under way, row by row, when the rows
        have lengths of their own (:class:`attention.paged.PagedKVCache`); ``None`` when every
        row's ``length`` new tokens sit at :meth:`offset` onwards, as here.

        A layer given per-row positions rotates (or biases) each query by its own position and
        lets it see the keys at slots up to it; the model adds learned or sinusoidal positions
        by them.

        Args:
            length (int): the number of new positions :math:`L` of the call.

        Shape:
            - Output: :math:`(N, L)` int64, or ``None``

        Returns:
            Tensor | None: ``None`` for a state whose rows all hold the same positions.
        """
        return None

    def check_append(
        self, layer: int, batch_size: int, length: int, *, dtype=None, device=None
    ) -> None:
        """Check, before any arithmetic, that ``length`` new positions of ``batch_size``
        sequences can be written to ``layer``.

        Args:
            layer (int): the layer index, in ``[0, num_layers)``.
            batch_size (int): the number of sequences :math:`N` being appended.
            length (int): the number of new positions :math:`L`.
            dtype (torch.dtype, optional): the dtype of what will be written. Default: ``None``
                (not checked).
            device (torch.device, optional): where it lives. Default: ``None`` (not checked).

        Returns:
            None: raises ``ValueError`` (or ``TypeError``) if the write is impossible.
        """
        check_int(layer, "layer", minimum=0)
        if layer >= self.num_layers:
            raise ValueError(f"layer must be in [0, {self.num_layers}); got {layer}")
        check_int(batch_size, "batch_size", minimum=0)
        check_int(length, "length", minimum=0)
        name = type(self).__name__
        if batch_size != self.batch_size:
            raise ValueError(
                f"the cache holds batch_size={self.batch_size} sequences; got a batch of "
                f"{batch_size}"
            )
        if dtype is not None and dtype != self.dtype:
            raise TypeError(
                f"the cache holds {self.dtype}; got {dtype} - make the cache with dtype={dtype}"
            )
        if device is not None and torch.device(device) != self.device:
            raise ValueError(f"the cache lives on {self.device}; got inputs on {device}")
        if not self.positional:
            return
        if self.window is not None:
            if length > self.window:
                raise ValueError(
                    f"a rolling cache takes at most window={self.window} new positions at "
                    f"once; got {length}"
                )
        elif self.length + length > self.max_len:
            raise ValueError(
                f"{name} is full: it holds {self.length} of max_len={self.max_len} positions "
                f"and cannot take {length} more; make a cache with a larger max_len, or "
                "crop() or reset() this one"
            )

    @contextlib.contextmanager
    def step(self, batch_size: int, length: int, *, dtype=None, device=None) -> Iterator[None]:
        """One forward call of a model: checked before any layer writes, and, when the call
        ends, every layer must have written its ``length`` new positions exactly once; only
        then does :attr:`length` advance. A call that raises leaves :attr:`length` as it was.

        Args:
            batch_size (int): the number of sequences :math:`N` of the call.
            length (int): the number of new positions :math:`L`.
            dtype (torch.dtype, optional): the dtype the layers will write. Default: ``None``.
            device (torch.device, optional): where they compute. Default: ``None``.

        Examples::

            >>> from attention import KVCache
            >>> cache = KVCache(2, batch_size=1, num_kv_heads=1, head_dim=2, max_len=4)
            >>> with cache.step(1, 3):
            ...     _ = cache.update(0, torch.ones(1, 1, 3, 2), torch.ones(1, 1, 3, 2))
            Traceback (most recent call last):
            ...
            ValueError: layer 1 of 2 did not write to the KVCache during this call ...
        """
        if self._call is not None:
            raise RuntimeError(f"the {type(self).__name__} is already inside a call")
        for layer in range(self.num_layers):
            self.check_append(layer, batch_size, length, dtype=dtype, device=device)
        self._call, self._written = length, set()
        try:
            yield
            missing = sorted(set(range(self.num_layers)) - self._written)
            if missing:
                raise ValueError(
                    f"layer {missing[0]} of {self.num_layers} did not write to the "
                    f"{type(self).__name__} during this call (layers not written: {missing}): "
                    "an attention layer given a state must append its new positions to it, "
                    "or the next call would attend to a stale past"
                )
            self.length = self._advance(length)
        finally:
            self._call, self._written = None, set()

    def _advance(self, length: int) -> int:
        """The length after a call of ``length`` new positions."""
        if not self.positional:
            return self.length + length
        return self.offset(length) + length

    def _begin_write(self, layer: int, batch_size: int, length: int, *, dtype, device) -> None:
        """Called by a subclass's ``update`` before it writes ``layer``."""
        if self._call is None:  # a layer used on its own: check this write alone
            self.check_append(layer, batch_size, length, dtype=dtype, device=device)
            return
        check_int(layer, "layer", minimum=0)
        if layer >= self.num_layers:
            raise ValueError(f"layer must be in [0, {self.num_layers}); got {layer}")
        if layer in self._written:
            raise ValueError(f"layer {layer} already wrote during this call")
        if length != self._call or batch_size != self.batch_size:
            raise ValueError(
                f"this call writes {self._call} positions of {self.batch_size} sequences; "
                f"layer {layer} wrote {length} of {batch_size}"
            )
        self._written.add(layer)

    def _end_write(self, layer: int, length: int) -> None:
        """Called by a subclass's ``update`` after it wrote ``layer``: outside a model's call,
        the last layer's write advances the length."""
        if self._call is None and layer == self.num_layers - 1:
            self.length = self._advance(length)

    def write(self, layer: int, new: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Write ``layer``'s new positions after the held ones, in the positional stores in
        order, rolling if needed; return views of everything held, the new positions last.

        Args:
            layer (int): the layer index.
            new (tuple[Tensor, ...]): one tensor per store, shaped as a layer's store with
                :math:`L` positions along ``position_axis``.

        Returns:
            tuple[Tensor, ...]: each store's first :math:`S` = ``offset(L) + L`` positions.
        """
        axis = self.position_axis
        L = new[0].shape[axis]
        stores = self.stores()
        self._begin_write(layer, new[0].shape[0], L, dtype=new[0].dtype, device=new[0].device)
        dropped = self.dropped(L)
        start = self.length - dropped
        held = []
        for store, x in zip(stores, new, strict=True):
            slots = store[layer].movedim(axis, 0)  # (max_len, N, ...): a view, positions first
            if dropped:  # move the most recent positions down over the oldest after the sinks
                kept = self.length - self.sinks - dropped
                moved = slots[self.sinks + dropped : self.length].clone()  # (kept, N, ...)
                slots[self.sinks : self.sinks + kept] = moved
            slots[start : start + L] = x.movedim(axis, 0)  # (L, N, ...)
            held.append(slots[: start + L].movedim(0, axis))  # as the store: S positions
        self._end_write(layer, L)
        return tuple(held)

    def reorder(self, rows: Tensor) -> None:
        """Make sequence ``i`` of every layer a copy of sequence ``rows[i]``: beam search moves
        each hypothesis's state with it when it re-ranks them.

        Args:
            rows (Tensor): for each of the ``batch_size`` sequences, the one it continues.

        Shape:
            - rows: :math:`(N)` integer indices in ``[0, N)``

        Returns:
            None
        """
        if not isinstance(rows, Tensor) or rows.dtype not in (torch.int64, torch.int32):
            raise TypeError("rows must be an int64 or int32 tensor of sequence indices")
        if rows.shape != (self.batch_size,):
            raise ValueError(f"rows must have shape ({self.batch_size},); got {tuple(rows.shape)}")
        if rows.device.type == "meta":
            raise ValueError("rows must hold values: got a tensor on the meta device")
        if len(rows) and (rows.min() < 0 or rows.max() >= self.batch_size):
            raise ValueError(f"rows must lie in [0, {self.batch_size}); got {rows.tolist()}")
        rows = rows.to(self.device)
        for store in self.stores():  # (layers, N, ...)
            store.copy_(store[:, rows])

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` positions (to rewind generation).

        Args:
            length (int): positions to keep, in ``[0, self.length]``.

        Returns:
            None
        """
        check_int(length, "length", minimum=0)
        if length > self.length:
            raise ValueError(
                f"length must be at most the cache's length {self.length}; got {length}"
            )
        if not self.positional and length not in (0, self.length):
            raise ValueError(
                f"{type(self).__name__} keeps a sum over its positions and cannot forget some "
                f"of them; crop(0) (reset) or crop({self.length}) only; got {length}"
            )
        if not self.positional and length == 0:
            self.reset()
        self.length = length

    def reset(self) -> None:
        """Empty the state (its memory stays allocated).

        Returns:
            None
        """
        if not self.positional:
            for store in self.stores():
                store.zero_()
        self.length = 0
