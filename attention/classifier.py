"""A small attention classifier for token sequences."""

import torch
from torch import Tensor, nn

from ._checks import check_embed, check_int, reads_values
from .block import TransformerBlock
from .positions import PositionalEncoding

__all__ = ["AttentionClassifier"]


class AttentionClassifier(nn.Module):
    r"""Classify token sequences: embedding, positions, Transformer blocks, pooling, linear head.

    The blocks are pre-LN (:class:`attention.TransformerBlock` with ``norm_first=True``) and
    followed by a final LayerNorm. Padding tokens are never attended to, and the pooling
    averages the *real* tokens only, so a sentence's prediction does not depend on how much
    padding follows it.

    Args:
        vocab_size (int): number of token ids.
        num_classes (int): number of classes :math:`C`.
        embed_dim (int): model dimension :math:`E`.
        num_heads (int): heads per block.
        num_layers (int): number of blocks.
        max_len (int): longest sequence accepted.
        dropout (float): dropout in every block. Default: ``0.1``.
        pad_id (int): the padding token id. Default: ``0``.

    Shape:
        - tokens: :math:`(N, L)` integer ids
        - Output: logits :math:`(N, C)` and a list of ``num_layers`` weights
          :math:`(N, H, L, L)`, or ``None``

    Examples::

        >>> model = AttentionClassifier(20, 2, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
        >>> logits, weights = model(torch.tensor([[5, 6, 7, 0]]), need_weights=True)
        >>> logits.shape, len(weights), weights[0].shape
        (torch.Size([1, 2]), 1, torch.Size([1, 2, 4, 4]))
    """

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        *,
        embed_dim: int,
        num_heads: int,
        num_layers: int,
        max_len: int,
        dropout: float = 0.1,
        pad_id: int = 0,
    ):
        super().__init__()
        check_embed(embed_dim, num_heads)
        for name, value in (("vocab_size", vocab_size), ("num_classes", num_classes),
                            ("num_layers", num_layers), ("max_len", max_len)):  # fmt: skip
            check_int(value, name)
        check_int(pad_id, "pad_id", minimum=0)
        if pad_id >= vocab_size:
            raise ValueError(f"pad_id must be in [0, vocab_size={vocab_size}); got {pad_id}")
        self.vocab_size, self.max_len, self.pad_id = vocab_size, max_len, pad_id
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=pad_id)
        self.positions = PositionalEncoding(embed_dim, max_len, dropout=dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(
                embed_dim, num_heads, ffn_dim=4 * embed_dim, dropout=dropout, norm_first=True
            )
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def _check_tokens(self, tokens) -> None:
        if not isinstance(tokens, Tensor):
            raise TypeError(f"tokens must be a torch.Tensor of ids; got {type(tokens).__name__}")
        if tokens.dtype not in (torch.int64, torch.int32):  # what nn.Embedding takes
            raise TypeError(
                f"tokens must be an integer tensor (int64 or int32); got {tokens.dtype} - "
                "use tokens.long()"
            )
        if tokens.device != self.embedding.weight.device:
            raise ValueError(
                f"tokens must be on the model's device ({self.embedding.weight.device}); "
                f"got {tokens.device}"
            )
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be 2-D (N, L); got shape {tuple(tokens.shape)}")
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"tokens: sequence length {tokens.shape[1]} is longer than max_len={self.max_len}"
            )
        if (
            reads_values()
            and tokens.numel()
            and (tokens.min() < 0 or tokens.max() >= self.vocab_size)
        ):
            raise ValueError(
                f"tokens: token ids must lie in [0, vocab_size={self.vocab_size}); "
                f"got min {int(tokens.min())}, max {int(tokens.max())}"
            )

    def forward(self, tokens: Tensor, *, need_weights: bool = False):
        """Classify each sequence of ``tokens`` :math:`(N, L)`.

        Args:
            tokens (Tensor): integer ids, padded with ``pad_id``.
            need_weights (bool): also return every block's attention weights. Default: ``False``.

        Returns:
            tuple[Tensor, list[Tensor] | None]: logits :math:`(N, C)` and, per block, the
            weights :math:`(N, H, L, L)` (or ``None``).
        """
        self._check_tokens(tokens)
        real = tokens != self.pad_id  # (N, L)
        mask = real[:, None, None, :]  # keys that may be attended to  (N, 1, 1, L)
        x = self.positions(self.embedding(tokens))  # (N, L) -> (N, L, E)
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, mask, need_weights=need_weights)  # (N, L, E)
            all_weights.append(weights)
        x = self.norm(x)  # (N, L, E)
        counts = real.sum(dim=1, keepdim=True).clamp(min=1)  # (N, 1)
        pooled = (x * real[..., None]).sum(dim=1) / counts  # (N, L, E) -> (N, E)
        logits = self.head(pooled)  # (N, E) -> (N, C)
        return logits, (all_weights if need_weights else None)
