"""A page's example as a head view: every layer and head of a trained model's weights.

A page draws one example's attention weights as a figure. On the site, under that figure, a
head view shows the same example's weights in every layer and head: the reader picks a layer
and a head and focuses a token to see where its query looks. A hidden line of the page hands
the example to :func:`save_head_view`; the build (``docs/_ext/attention_headviews.py``) writes
it as a small JSON that the site's script reads, with no model and no runtime in the browser.
Run as a script or a notebook, the page only keeps the example in :data:`HEAD_VIEWS`.
"""

import re

from .viz import _check_labels, _to_array

__all__ = ["HEAD_VIEWS", "head_view_data", "save_head_view"]

#: The examples the pages saved in this process, by name: what :func:`head_view_data` returns.
HEAD_VIEWS: dict[str, dict] = {}
#: Weights are kept to this many decimals, which the view shows at most.
DECIMALS = 4
#: How far outside [0, 1] a weight may be (a float32 softmax's rounding) before it is refused.
TOLERANCE = 1e-6
#: The most query or key positions a view holds, so that its JSON stays a few kilobytes.
MAX_TOKENS = 64
#: A view's name, in its file name and the page's directive: lower-case words and hyphens.
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def head_view_data(tokens, weights, *, key_tokens=None) -> dict:
    r"""One example's attention weights in every layer and head, ready for a head view.

    Each weight is rounded to 4 decimals; each row of weights drops its trailing zeros (a
    causal row stops at the query's own position), which the view reads as zeros.

    Args:
        tokens (list[str]): the label of each query position, :math:`L` of them.
        weights (Tensor or array, or a list of them): :math:`(\text{layers}, H, L, S)`, or
            one :math:`(H, L, S)` tensor per layer (a model's ``need_weights=True`` output for
            one example), values in [0, 1].
        key_tokens (list[str], optional): the label of each key position, :math:`S` of them.
            Default: ``None`` (``tokens``: self-attention).

    Shape:
        - weights: :math:`(\text{layers}, H, L, S)`, at most 64 queries and 64 keys.

    Returns:
        dict: ``layers``, ``heads``, ``queries`` (the :math:`L` labels), ``keys`` (the
        :math:`S` labels) and ``weights``, nested lists ``[layer][head][query]``, each row the
        key weights up to its last nonzero one.

    Examples::

        >>> import torch
        >>> weights = torch.tensor([[[[1.0, 0.0], [0.123456, 0.876544]]]])  # (1, 1, 2, 2)
        >>> data = head_view_data(["a", "b"], weights)
        >>> data["layers"], data["heads"], data["weights"]
        (1, 1, [[[[1.0], [0.1235, 0.8765]]]])
    """
    import torch

    if isinstance(weights, (list, tuple)) and weights and isinstance(weights[0], torch.Tensor):
        shapes = {tuple(w.shape) for w in weights}
        if len(shapes) > 1:
            raise ValueError(f"weights must be layers of one (H, L, S) shape; got {sorted(shapes)}")
        weights = torch.stack([w.detach().cpu() for w in weights])  # (layers, H, L, S)
    array = _to_array(weights, "weights", (4,))  # (layers, H, L, S)
    layers, H, L, S = array.shape
    if array.min() < -TOLERANCE or array.max() > 1 + TOLERANCE:  # float32 rounding passes
        raise ValueError(
            f"weights must lie in [0, 1]; got values from {array.min():.4g} to {array.max():.4g}"
        )
    if max(L, S) > MAX_TOKENS:
        raise ValueError(
            f"weights must have at most {MAX_TOKENS} queries and keys, to keep the view small; "
            f"got L = {L}, S = {S}"
        )
    _check_labels(tokens, "tokens", L)
    if key_tokens is None and S != L:
        raise ValueError(f"key_tokens must label the S = {S} keys when S != L = {L}; got None")
    keys = tokens if key_tokens is None else key_tokens
    _check_labels(keys, "key_tokens", S)
    for name, labels in (("tokens", tokens), ("key_tokens", keys)):
        if not all(isinstance(label, str) for label in labels):
            kinds = sorted({type(label).__name__ for label in labels} - {"str"})
            raise TypeError(f"{name} must be str labels; got {', '.join(kinds)} - use str()")
    rounded = [
        [[_row(array[layer, head, i]) for i in range(L)] for head in range(H)]
        for layer in range(layers)
    ]  # [layer][head][query] -> weights up to the last nonzero key
    return {
        "layers": layers,
        "heads": H,
        "queries": list(tokens),
        "keys": list(keys),
        "weights": rounded,
    }


def save_head_view(name: str, tokens, weights, *, key_tokens=None) -> None:
    r"""Keep one example of a page as the head view ``name`` (see :func:`head_view_data`).

    The page's ``.. head-view:: name`` directive shows it under the figure; the build writes
    it to ``_static/head-views/name.json``. Saving a name again replaces its example.

    Args:
        name (str): lower-case words joined by hyphens, unique on the site (``"11-sentiment"``).
        tokens (list[str]): the label of each query position.
        weights (Tensor or array, or a list of them): the example's weights in every layer.
        key_tokens (list[str], optional): the label of each key position.
            Default: ``None`` (``tokens``).

    Shape:
        - weights: :math:`(\text{layers}, H, L, S)`, at most 64 queries and 64 keys.

    Returns:
        None: the example is in :data:`HEAD_VIEWS` under ``name``.

    Examples::

        >>> import torch
        >>> save_head_view("doc-example", ["a", "b"], torch.full((1, 1, 2, 2), 0.5))
        >>> HEAD_VIEWS["doc-example"]["queries"]
        ['a', 'b']
        >>> del HEAD_VIEWS["doc-example"]
    """
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise ValueError(f"name must be lower-case words joined by '-'; got {name!r}")
    HEAD_VIEWS[name] = head_view_data(tokens, weights, key_tokens=key_tokens)


def _row(values) -> list[float]:
    """A row of weights rounded to :data:`DECIMALS`, without its trailing zeros."""
    row = [round(float(v), DECIMALS) for v in values]
    while row and row[-1] == 0:
        row.pop()
    return row
