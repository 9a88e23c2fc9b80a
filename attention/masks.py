"""Mask builders and converters between mask polarities.

This package uses one convention everywhere: a **bool** mask where ``True`` means *may attend*,
the same as :func:`torch.nn.functional.scaled_dot_product_attention`. Masks broadcast to
``(N, H, L, S)``. :class:`torch.nn.MultiheadAttention` uses the opposite polarity (``True`` means
*blocked*) for both ``attn_mask`` and ``key_padding_mask``; converting happens here and only here.

Each structured mask is written once, as a *predicate* of query and key positions (integer
tensors in, bool out, broadcasting): the dense masks evaluate it on index grids, and
:mod:`attention.flex` wraps the same predicates as FlexAttention ``mask_mod`` functions.
"""

import torch
from torch import Tensor

from ._checks import (
    check_bool,
    check_factory,
    check_has_values,
    check_index,
    check_int_tensor,
    check_lengths,
    check_padding_lengths,
    check_required_mask,
    check_sizes,
)

__all__ = [
    "causal", "sliding_window", "document", "prefix_lm",  # predicates of positions
    "causal_mask", "sliding_window_mask", "document_mask", "prefix_lm_mask", "padding_mask",
    "to_torch_attn_mask", "to_torch_key_padding_mask", "from_torch_masks",  # converters
]  # fmt: skip


def causal(q: Tensor, k: Tensor) -> Tensor:
    r"""The predicate of :func:`causal_mask`: the query at position ``q`` sees keys ``k <= q``.

    Args:
        q (Tensor): query positions (integers).
        k (Tensor): key positions (integers), broadcastable with ``q``.

    Shape:
        - Output: the broadcast shape of ``q`` and ``k``, bool, ``True`` = may attend.

    Returns:
        Tensor: ``k <= q``.

    Examples::

        >>> causal(torch.tensor(1), torch.arange(3))  # query 1 against keys 0, 1, 2
        tensor([ True,  True, False])
    """
    return k <= q


def sliding_window(window: int):
    r"""The predicate of :func:`sliding_window_mask`: ``0 <= q - k < window``.

    Args:
        window (int): how many keys each query sees, its own included; at least 1.

    Shape:
        - Output: ``predicate(q, k)``, bool of the broadcast shape of ``q`` and ``k``.

    Returns:
        Callable: the predicate.

    Examples::

        >>> sliding_window(2)(torch.tensor(3), torch.arange(5))
        tensor([False, False,  True,  True, False])
    """
    check_index(window, "window", minimum=1)

    def sliding_window_predicate(q: Tensor, k: Tensor) -> Tensor:
        return (q - k >= 0) & (q - k < window)

    return sliding_window_predicate


def document(doc_ids: Tensor):
    r"""The predicate of :func:`document_mask`: ``q`` and ``k`` are in the same document.

    With one row of ``doc_ids`` per batch element the predicate takes the row ``b`` too. A
    position at or past ``doc_ids.shape[-1]`` is outside the table: it raises an ``IndexError``.

    Args:
        doc_ids (Tensor): the document of each position, :math:`(L)` or :math:`(N, L)` ints.

    Shape:
        - Output: ``predicate(q, k, b=None)``, bool of the broadcast shape of its arguments.

    Returns:
        Callable: the predicate.

    Examples::

        >>> document(torch.tensor([0, 0, 1]))(torch.tensor(1), torch.arange(3))
        tensor([ True,  True, False])
    """
    check_int_tensor(doc_ids, "doc_ids", lists=False, ndims=(1, 2), meta=True)
    return lambda q, k, b=None: _same_document(doc_ids, q, k, b)


def _same_document(doc_ids: Tensor, q: Tensor, k: Tensor, b: Tensor | None = None) -> Tensor:
    # The rule of document(), with the table an argument: a FlexAttention mask_mod must reach
    # its tensors itself, not through a nested closure (torch.compile fails on that on the CPU).
    if doc_ids.dim() == 1:
        return doc_ids[q] == doc_ids[k]
    if b is None:
        raise TypeError("b, the batch row, is needed for doc_ids of shape (N, L)")
    return doc_ids[b, q] == doc_ids[b, k]


def prefix_lm(prefix: int):
    r"""The predicate of :func:`prefix_lm_mask`: ``k <= q`` or ``k < prefix``.

    Args:
        prefix (int): number of leading tokens that every query sees.

    Shape:
        - Output: ``predicate(q, k)``, bool of the broadcast shape of ``q`` and ``k``.

    Returns:
        Callable: the predicate.

    Examples::

        >>> prefix_lm(2)(torch.tensor(0), torch.arange(3))
        tensor([ True,  True, False])
    """
    check_index(prefix, "prefix")
    return lambda q, k: causal(q, k) | (k < prefix)


def _grid(predicate, L: int, S: int, device) -> Tensor:
    """``predicate`` at every query and key: (L, S), the queries the last L of S positions."""
    check_sizes(device, L=L, S=S)
    query = torch.arange(S - L, S, device=device)[:, None]  # positions of the queries  (L, 1)
    key = torch.arange(S, device=device)  # (S,)
    return predicate(query, key)  # (L, 1) vs (S,) -> (L, S)


def causal_mask(L: int, S: int | None = None, *, device=None) -> Tensor:
    r"""Build a causal (look-ahead) mask: query ``i`` may attend to keys ``j <= i``.

    When ``S > L`` the queries are the *last* ``L`` positions of the sequence (bottom-right
    alignment), as in incremental decoding where ``L`` new tokens attend to ``S`` cached ones:
    query ``i`` may attend to key ``j`` when ``j <= i + (S - L)``.

    Args:
        L (int): number of queries.
        S (int, optional): number of keys. Default: ``None`` (``S = L``).
        device (torch.device, optional): where to build the mask. Default: ``None`` (CPU).

    Shape:
        - Output: :math:`(L, S)`, bool, ``True`` = may attend.

    Returns:
        Tensor: the lower-triangular bool mask.

    Examples::

        >>> causal_mask(3).int()
        tensor([[1, 0, 0],
                [1, 1, 0],
                [1, 1, 1]], dtype=torch.int32)
        >>> causal_mask(2, 4).int()  # two new queries after two cached keys
        tensor([[1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    return _grid(causal, L, L if S is None else S, device)  # (L, S)


def padding_mask(lengths, S: int) -> Tensor:
    r"""Build a key padding mask from sequence lengths: ``True`` for real tokens.

    Args:
        lengths (Tensor or sequence of int): the number of real tokens in each sequence.
        S (int): the padded length.

    Shape:
        - lengths: :math:`(N)`
        - Output: :math:`(N, 1, 1, S)`, bool, which broadcasts over heads and queries.

    Returns:
        Tensor: ``mask[n, 0, 0, j]`` is ``True`` when ``j < lengths[n]``.

    Examples::

        >>> padding_mask([3, 1], 4).int().squeeze(1).squeeze(1)
        tensor([[1, 1, 1, 0],
                [1, 0, 0, 0]], dtype=torch.int32)
    """
    check_index(S, "S")
    lengths = check_padding_lengths(lengths, S)  # (N,)
    positions = torch.arange(S, device=lengths.device)  # (S,)
    mask = positions < lengths[:, None]  # (N, 1) vs (S,) -> (N, S)
    return mask[:, None, None, :]  # (N, 1, 1, S)


def to_torch_attn_mask(mask: Tensor) -> Tensor:
    r"""Convert a mask of this package (``True`` = may attend) to ``nn.MultiheadAttention``'s
    ``attn_mask`` polarity (``True`` = blocked).

    Args:
        mask (Tensor): bool mask of shape :math:`(L, S)` (or :math:`(N \cdot H, L, S)`).

    Returns:
        Tensor: ``~mask``, same shape.

    Examples::

        >>> to_torch_attn_mask(causal_mask(2)).int()
        tensor([[0, 1],
                [0, 0]], dtype=torch.int32)
    """
    check_required_mask(mask)
    return ~mask


def to_torch_key_padding_mask(mask: Tensor) -> Tensor:
    r"""Convert a padding mask of this package to ``nn.MultiheadAttention``'s
    ``key_padding_mask`` (``True`` = padding, blocked).

    Args:
        mask (Tensor): bool mask of shape :math:`(N, 1, 1, S)` (from :func:`padding_mask`)
            or :math:`(N, S)`, ``True`` for real tokens.

    Shape:
        - Output: :math:`(N, S)`

    Returns:
        Tensor: ``True`` where the key is padding.

    Examples::

        >>> to_torch_key_padding_mask(padding_mask([1, 2], 2)).int()
        tensor([[0, 1],
                [0, 0]], dtype=torch.int32)
    """
    check_required_mask(mask)
    if mask.dim() == 4 and mask.shape[1] == 1 and mask.shape[2] == 1:
        mask = mask[:, 0, 0, :]  # (N, 1, 1, S) -> (N, S)
    if mask.dim() != 2:
        raise ValueError(
            f"mask must have shape (N, 1, 1, S) or (N, S) to become a key_padding_mask; "
            f"got {tuple(mask.shape)}"
        )
    return ~mask


def _check_torch_mask(torch_mask: Tensor, name: str, ndim: int | None) -> None:
    """A torch mask: bool, or additive float of ``0`` and ``-inf`` only."""
    if not isinstance(torch_mask, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor; got {type(torch_mask).__name__}")
    if ndim is not None and torch_mask.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D; got shape {tuple(torch_mask.shape)}")
    if torch_mask.dtype != torch.bool and not torch_mask.is_floating_point():
        raise TypeError(f"{name} must be a bool or floating-point tensor; got {torch_mask.dtype}")
    if torch_mask.is_floating_point():
        check_has_values(torch_mask, name)
        if not ((torch_mask == 0) | torch.isneginf(torch_mask)).all():
            raise ValueError(f"{name} must hold only 0 and -inf: an additive float mask that "
                             "biases scores has no bool equivalent")  # fmt: skip


def _allowed(torch_mask: Tensor, name: str, *, ndim: int | None = None) -> Tensor:
    """``True`` = may attend, from a torch mask that is bool (True = blocked) or additive float."""
    _check_torch_mask(torch_mask, name, ndim)
    if torch_mask.dtype == torch.bool:
        return ~torch_mask
    return torch_mask == 0  # 0 = may attend, -inf = blocked


def from_torch_masks(attn_mask: Tensor | None = None, key_padding_mask: Tensor | None = None):
    r"""Combine ``nn.MultiheadAttention``'s ``attn_mask`` and ``key_padding_mask`` into one
    mask of this package (``True`` = may attend).

    Either mask may be bool (``True`` = blocked) or an additive float mask of ``0`` and
    ``-inf``.

    Args:
        attn_mask (Tensor, optional): :math:`(L, S)` or :math:`(N \cdot H, L, S)`.
            Default: ``None``.
        key_padding_mask (Tensor, optional): :math:`(N, S)`. Default: ``None``.

    Shape:
        - Output: :math:`(L, S)`, :math:`(N, 1, 1, S)`, :math:`(N, 1, L, S)`, or
          :math:`(N \cdot H, L, S)` for a 3-D ``attn_mask`` alone; ``None`` if both are ``None``.

    Returns:
        Tensor or None: the combined bool mask.

    Examples::

        >>> blocked = torch.tensor([[False, True], [False, False]])
        >>> padding = torch.tensor([[False, True]])
        >>> from_torch_masks(blocked, padding).int()
        tensor([[[[1, 0],
                  [1, 0]]]], dtype=torch.int32)
    """
    mask = None
    if attn_mask is not None:
        mask = _allowed(attn_mask, "attn_mask")  # (L, S) or (N*H, L, S)
    if key_padding_mask is not None:
        keys = _allowed(key_padding_mask, "key_padding_mask", ndim=2)  # (N, S)
        if mask is not None and keys.device != mask.device:
            where = f"attn_mask's device ({mask.device}); got {keys.device}"
            raise ValueError(f"key_padding_mask must be on {where}")
        keys = keys[:, None, None, :]  # (N, 1, 1, S)
        if mask is not None and mask.dim() == 3:
            raise ValueError(
                "combine a 3-D (N*H, L, S) attn_mask with a key_padding_mask by reshaping the "
                "attn_mask to (N, H, L, S) first"
            )
        if mask is not None:
            try:
                torch.broadcast_shapes(mask.shape, keys.shape)
            except RuntimeError:
                raise ValueError(
                    f"attn_mask of shape {tuple(attn_mask.shape)} and key_padding_mask of shape "
                    f"{tuple(key_padding_mask.shape)} do not broadcast: expected (L, S) and "
                    "(N, S) with the same S"
                ) from None
        mask = keys if mask is None else mask & keys  # (N, 1, L, S)
    return mask


def sliding_window_mask(L: int, window: int, S: int | None = None, *, device=None) -> Tensor:
    r"""Build a causal sliding-window mask: each query sees its last ``window`` keys.

    Query ``i`` sits at position :math:`S - L + i` (bottom-right aligned, as
    :func:`causal_mask`) and may attend to key ``j`` when
    :math:`0 \le (S - L + i) - j < \text{window}`: to itself and the ``window - 1`` keys before
    it. With ``window >= S`` it is :func:`causal_mask`; with ``window = 1`` each query sees only
    itself. Each query attends to at most ``window`` keys, so the cost grows as
    :math:`L \cdot \text{window}` instead of :math:`L \cdot S` :cite:p:`beltagy2020,jiang2023`.

    Args:
        L (int): number of queries.
        window (int): how many keys each query sees, its own included; at least 1.
        S (int, optional): number of keys. Default: ``None`` (``S = L``).
        device (torch.device, optional): where to build the mask. Default: ``None`` (CPU).

    Shape:
        - Output: :math:`(L, S)`, bool, ``True`` = may attend.

    Returns:
        Tensor: a band of width ``window`` below and on the (bottom-right) diagonal.

    Examples::

        >>> sliding_window_mask(4, 2).int()
        tensor([[1, 0, 0, 0],
                [1, 1, 0, 0],
                [0, 1, 1, 0],
                [0, 0, 1, 1]], dtype=torch.int32)
    """
    return _grid(sliding_window(window), L, L if S is None else S, device)  # (L, S)


def document_mask(lengths, *, causal: bool = False, device=None) -> Tensor:
    r"""Build a block-diagonal mask for documents packed into one sequence.

    Documents of the given lengths lie one after another in a sequence of
    :math:`L = \sum_d \text{lengths}_d` tokens; a token may attend only to the tokens of its
    own document, so packing several short documents into one row changes nothing for any of
    them. With ``causal=True`` it is also causal inside each document (packed language-model
    training); by default the documents are bidirectional, and
    ``document_mask(lengths) & causal_mask(L)`` is the same as ``causal=True``.

    Args:
        lengths (Tensor or sequence of int): the length of each document, in order.
        causal (bool): also forbid later tokens of the same document. Default: ``False``.
        device (torch.device, optional): where to build the mask. Default: ``None`` (the device
            of ``lengths`` if it is a tensor, else CPU).

    Shape:
        - lengths: one entry per document
        - Output: :math:`(L, L)` with :math:`L` = ``sum(lengths)``, bool, ``True`` = may attend.

    Returns:
        Tensor: ``mask[i, j]`` is ``True`` when tokens ``i`` and ``j`` are in the same document
        (and ``j <= i`` if ``causal``).

    Examples::

        >>> document_mask([2, 3]).int()
        tensor([[1, 1, 0, 0, 0],
                [1, 1, 0, 0, 0],
                [0, 0, 1, 1, 1],
                [0, 0, 1, 1, 1],
                [0, 0, 1, 1, 1]], dtype=torch.int32)
        >>> document_mask([2, 3], causal=True).int()
        tensor([[1, 0, 0, 0, 0],
                [1, 1, 0, 0, 0],
                [0, 0, 1, 0, 0],
                [0, 0, 1, 1, 0],
                [0, 0, 1, 1, 1]], dtype=torch.int32)
    """
    doc_ids = _document_ids(lengths)  # (L,)
    check_bool(causal, "causal")
    check_factory(device, None)
    L = len(doc_ids)
    mask = _grid(document(doc_ids), L, L, doc_ids.device)  # (L, L)
    if causal:
        mask = mask & causal_mask(L, device=doc_ids.device)  # (L, L)
    return mask if device is None else mask.to(device)


def _document_ids(lengths) -> Tensor:
    """The document of each packed token (``0 0 1 1 1`` for lengths [2, 3]), where lengths are."""
    lengths = check_lengths(check_int_tensor(lengths, "lengths"))
    return torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)


def prefix_lm_mask(L: int, prefix: int, *, device=None) -> Tensor:
    r"""Build a prefix-LM mask: the first ``prefix`` tokens see each other, the rest is causal.

    Query ``i`` may attend to key ``j`` when :math:`j \le i` or :math:`j <` ``prefix``: the
    prefix (a prompt, an instruction, an image's patches) is encoded bidirectionally, and the
    tokens after it are generated causally, each seeing the whole prefix :cite:p:`raffel2020`.
    ``prefix = 0`` gives :func:`causal_mask`, ``prefix = L`` a full mask.

    Args:
        L (int): sequence length.
        prefix (int): number of leading tokens that attend bidirectionally; at most ``L``.
        device (torch.device, optional): where to build the mask. Default: ``None`` (CPU).

    Shape:
        - Output: :math:`(L, L)`, bool, ``True`` = may attend.

    Returns:
        Tensor: the causal mask with its top-left ``prefix`` x ``prefix`` block filled in.

    Examples::

        >>> prefix_lm_mask(4, 2).int()
        tensor([[1, 1, 0, 0],
                [1, 1, 0, 0],
                [1, 1, 1, 0],
                [1, 1, 1, 1]], dtype=torch.int32)
    """
    check_index(L, "L")
    allowed = prefix_lm(prefix)
    if prefix > L:
        raise ValueError(f"prefix must be at most L={L}; got {prefix}")
    return _grid(allowed, L, L, device)  # (L, L)
