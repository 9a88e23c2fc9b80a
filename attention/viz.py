"""Attention heatmaps with matplotlib (imported only when a picture is drawn)."""

__all__ = ["plot_attention"]


def plot_attention(weights, *, x_tokens=None, y_tokens=None, ax=None, title=None, vmax=None):
    r"""Draw attention weights as a heatmap: queries down the side, keys along the top.

    One :math:`(L, S)` matrix draws one heatmap; an :math:`(H, L, S)` stack draws a grid with one
    titled panel per head and a shared colour scale.

    Args:
        weights (Tensor or array): :math:`(L, S)` or :math:`(H, L, S)`, values in [0, 1].
        x_tokens (list[str], optional): labels of the :math:`S` keys. Default: ``None``.
        y_tokens (list[str], optional): labels of the :math:`L` queries. Default: ``None``
            (``x_tokens`` when it has :math:`L` entries).
        ax (matplotlib.axes.Axes, optional): draw a single heatmap into this axes.
            Default: ``None`` (a new figure).
        title (str, optional): the figure's title, wrapped to the figure's width.
            Default: ``None``.
        vmax (float, optional): the weight drawn brightest, to compare several figures on one
            scale (e.g. ``1.0``). Default: ``None`` (the largest weight drawn).

    Returns:
        matplotlib.figure.Figure: the figure drawn on.

    Examples::

        >>> fig = plot_attention(torch.eye(3), x_tokens=["a", "b", "c"], title="identity")
        >>> len(fig.axes)  # the heatmap and its colour bar
        2
    """
    import textwrap

    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    if isinstance(weights, torch.Tensor):
        weights = weights.detach().cpu().double().numpy()
    weights = np.asarray(weights, dtype=float)
    if weights.ndim not in (2, 3):
        raise ValueError(f"weights must be (L, S) or (H, L, S); got shape {weights.shape}")
    L, S = weights.shape[-2:]
    if y_tokens is None and x_tokens is not None and len(x_tokens) == L:
        y_tokens = x_tokens
    for name, tokens, n in (("x_tokens", x_tokens, S), ("y_tokens", y_tokens, L)):
        if tokens is not None and len(tokens) != n:
            raise ValueError(f"{name} must have {n} labels; got {len(tokens)}")
    if weights.ndim == 3 and ax is not None:
        raise ValueError("ax draws one heatmap; pass (L, S) weights or leave ax=None for a grid")

    panels = weights[None] if weights.ndim == 2 else weights  # (H, L, S)
    H = len(panels)
    if ax is not None:
        fig, axes = ax.figure, [ax]
    else:
        cols = min(H, 4)
        rows = -(-H // cols)
        cell = max(3.2, 0.32 * max(L, S))
        fig, grid = plt.subplots(
            rows, cols, figsize=(cell * cols + 1.2, cell * rows + 0.4), squeeze=False,
            layout="constrained",
        )  # fmt: skip
        axes = list(grid.flat)
        for extra in axes[H:]:
            extra.set_visible(False)
    top = float(weights.max()) if vmax is None else float(vmax)
    for h, (panel, axis) in enumerate(zip(panels, axes, strict=False)):
        image = axis.imshow(panel, vmin=0.0, vmax=max(1e-12, top), cmap="viridis")
        if x_tokens is not None:
            axis.set_xticks(range(S), x_tokens, rotation=90)
        if y_tokens is not None:
            axis.set_yticks(range(L), y_tokens)
        axis.set_xlabel("key")
        axis.set_ylabel("query")
        if H > 1:
            axis.set_title(f"head {h}")
    fig.colorbar(image, ax=axes[:H], shrink=0.8, label="attention weight")
    if title is not None:
        width = max(20, int(8 * fig.get_figwidth()))
        title = "\n".join(textwrap.fill(line, width) for line in title.splitlines())
        if H > 1:
            fig.suptitle(title)
        else:
            axes[0].set_title(title)
    return fig
