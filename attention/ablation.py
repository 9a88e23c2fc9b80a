"""Switching heads off: what a trained model loses without one head.

An attention module's heads meet in the input of its ``out_proj``: the :math:`(N, L, E)` concat
of the heads, head :math:`h` in the columns :math:`hD` to :math:`(h+1)D - 1`. Replacing those
columns removes head :math:`h`'s contribution and leaves the other heads untouched.
:func:`head_ablated` replaces them with zeros (zero-ablation) or with the head's mean output
(mean-ablation, which keeps the average signal the next layers expect and removes only what
depends on the input); :func:`mean_head_outputs` measures those means.
"""

import contextlib

import torch
from torch import Tensor, nn

from ._checks import check_int, check_tensor

__all__ = ["head_ablated", "mean_head_outputs"]


def _check_attention(attn) -> None:
    out_proj = getattr(attn, "out_proj", None)
    if not isinstance(attn, nn.Module) or not isinstance(out_proj, nn.Linear):
        kind = type(attn).__name__
        raise TypeError(f"attn must be an attention module with an out_proj nn.Linear; got {kind}")
    for name in ("num_heads", "head_dim"):
        check_int(getattr(attn, name, None), f"attn.{name}")


def _check_head(attn, head, replacement) -> None:
    """The checks of :func:`head_ablated`'s arguments."""
    _check_attention(attn)
    check_int(head, "head", minimum=0)
    if head >= attn.num_heads:
        raise ValueError(f"head must be in [0, num_heads={attn.num_heads}); got {head}")
    if replacement is not None:
        check_tensor(replacement, "replacement", ndim=1)
        if replacement.shape[0] != attn.head_dim:
            raise ValueError(
                f"replacement must have D={attn.head_dim} entries; got {replacement.shape[0]}"
            )


@contextlib.contextmanager
def head_ablated(attn: nn.Module, head: int, *, replacement: Tensor | None = None):
    """Switch off one head of ``attn`` while the block runs.

    A forward pre-hook on ``attn.out_proj`` (PyTorch calls it with the module's input just
    before ``forward`` and uses what it returns instead) replaces the head's columns of the
    concatenated heads with zeros, or with ``replacement``; the hook is removed on leaving.

    Args:
        attn (nn.Module): an attention module with ``out_proj``, ``num_heads`` and
            ``head_dim``, such as :class:`attention.MultiHeadAttention` or
            :class:`attention.CausalSelfAttention`.
        head (int): the head, in ``[0, num_heads)``.
        replacement (Tensor, optional): what the head outputs instead, :math:`(D)`, for
            instance its mean from :func:`mean_head_outputs`. Default: ``None`` (zeros).

    Returns:
        contextlib.AbstractContextManager: removes the hook on leaving.

    Examples::

        >>> attn = CausalSelfAttention(8, 2)
        >>> x = torch.randn(1, 3, 8)
        >>> with head_ablated(attn, 0):
        ...     without = attn(x)[0]
        >>> torch.equal(without, attn(x)[0])
        False
    """
    _check_head(attn, head, replacement)
    D = attn.head_dim

    def replace_head(module, args):
        merged = args[0].clone()  # (N, L, E)
        columns = slice(head * D, (head + 1) * D)  # head `head` sits in these columns
        merged[..., columns] = 0 if replacement is None else replacement.to(merged)
        return (merged, *args[1:])

    handle = attn.out_proj.register_forward_pre_hook(replace_head)
    try:
        yield
    finally:
        handle.remove()


@torch.no_grad()
def mean_head_outputs(model: nn.Module, attn: nn.Module, *inputs) -> Tensor:
    """Each head's output of ``attn`` averaged over every sequence and position of a run of
    ``model(*inputs)`` in eval mode (the training flag is restored).

    Args:
        model (nn.Module): the model that contains ``attn``.
        attn (nn.Module): the attention module, as in :func:`head_ablated`.
        *inputs: what ``model`` is called with.

    Shape:
        - Output: :math:`(H, D)`

    Returns:
        Tensor: row :math:`h` is head :math:`h`'s mean output.

    Examples::

        >>> model = DecoderLM(10, embed_dim=8, num_heads=2, num_layers=1, max_len=4)
        >>> attn = model.blocks[0].self_attn
        >>> mean_head_outputs(model, attn, torch.tensor([[1, 2, 3]])).shape
        torch.Size([2, 4])
    """
    _check_attention(attn)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    if not any(module is attn for module in model.modules()):
        raise ValueError("attn must be a module of model (one of model.modules()); got an "
                         f"{type(attn).__name__} that model does not contain")  # fmt: skip
    captured = []
    handle = attn.out_proj.register_forward_pre_hook(lambda m, args: captured.append(args[0]))
    was_training = model.training
    model.eval()
    try:
        model(*inputs)
    finally:
        handle.remove()
        model.train(was_training)
    if not captured:
        raise ValueError("attn did not run during model(*inputs): no output to average")
    merged = torch.cat([c.reshape(-1, c.shape[-1]) for c in captured])  # (N L, E)
    return merged.mean(dim=0).view(attn.num_heads, attn.head_dim)  # (H, D)
