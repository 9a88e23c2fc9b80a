r"""Decoding a sequence from a model of the next token: greedy search and beam search.

Both functions take ``next_log_probs(tokens) -> log_probs``, the model's log-probabilities of
the token after each row of ``tokens`` (with its encoder output and any cache closed over), so
they serve any decoder. An output :math:`y` of :math:`|y|` generated tokens (the end-of-sequence
token included, the first one not) scores, as in fairseq :cite:p:`ott2019`,

.. math::
    \text{score}(y) = \frac{1}{|y|^{\alpha}} \sum_{t=1}^{|y|} \log p(y_t \mid y_{<t})

with :math:`\alpha` the length penalty (0: the sum, which favours short outputs; 1: the mean).
An :math:`\alpha` so far from 0 that a score leaves its dtype's range (infinite, or 0 from a
non-zero sum, and the ranking lost) is refused with a ``ValueError``.
"""

import math
from collections.abc import Callable

import torch
from torch import Tensor

from ._checks import check_float, check_int, check_tensor

__all__ = ["greedy_search", "beam_search"]

NextLogProbs = Callable[[Tensor], Tensor]


def _check_search(next_log_probs, batch_size, beam_size, max_new_tokens, ids, length_penalty):
    """Check the arguments both searches share, before the model is called."""
    if not callable(next_log_probs):
        raise TypeError(f"next_log_probs must be callable; got {type(next_log_probs).__name__}")
    check_int(batch_size, "batch_size")
    check_int(beam_size, "beam_size")
    check_int(max_new_tokens, "max_new_tokens")
    for name, value in ids.items():
        check_int(value, name, minimum=0)
    check_float(length_penalty, "length_penalty")


def _check_log_probs(log_probs, rows: int) -> None:
    """Check what ``next_log_probs`` returned: a float tensor of one row per hypothesis."""
    check_tensor(log_probs, "next_log_probs(tokens)", ndim=2)
    if log_probs.shape[0] != rows or log_probs.shape[1] == 0:
        raise ValueError(f"next_log_probs(tokens) must be ({rows}, V), V > 0, one row per "
                         f"row of tokens; got shape {tuple(log_probs.shape)}")  # fmt: skip


def _penalised(sums: Tensor, lengths, length_penalty: float) -> Tensor:
    """The score ``sums / lengths ** length_penalty``, refused where a finite, non-zero sum's
    score is not: a large ``|length_penalty|`` makes the penalty or the score overflow (or
    vanish), and the scores would be infinite or 0, their ranking lost."""
    if isinstance(lengths, Tensor):
        penalty = lengths.to(sums.dtype) ** length_penalty
    else:
        try:
            penalty = lengths**length_penalty
        except OverflowError:  # a Python float has no room for it either
            penalty = math.inf
    score = sums / penalty
    lost = sums.isfinite() & (sums != 0) & ~(score.isfinite() & (score != 0))
    if lost.any():
        sum_, length = sums[lost][0].item(), lengths if isinstance(lengths, int) else None
        length = int(lengths[lost][0]) if length is None else length
        raise ValueError(
            f"length_penalty={length_penalty!r} takes a score out of {sums.dtype}'s range (the "
            f"sum {sum_:.4g} of {length} tokens divided by {length}**{length_penalty!r}); use "
            "a length_penalty nearer 0, such as 1.0"
        )
    return score


def greedy_search(
    next_log_probs: NextLogProbs,
    batch_size: int,
    *,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    length_penalty: float = 1.0,
    device=None,
) -> tuple[Tensor, Tensor]:
    r"""Write each output by taking the most likely token at every step.

    Args:
        next_log_probs (Callable): ``(N, t)`` tokens so far to ``(N, V)`` log-probabilities of
            the next token.
        batch_size (int): the number of outputs :math:`N`.
        max_new_tokens (int): most tokens to generate after the first.
        bos_id (int): the first token of every output.
        eos_id (int): the token that ends an output.
        pad_id (int): written after an output has ended.
        length_penalty (float): :math:`\alpha` of the score. Default: ``1.0``.
        device (torch.device, optional): where the model reads its tokens. Default: ``None``.

    Shape:
        - Output: tokens :math:`(N, T)`, :math:`T \le 1 +` ``max_new_tokens``, and scores
          :math:`(N)`

    Returns:
        tuple[Tensor, Tensor]: the outputs and their scores.

    Examples::

        >>> log_probs = torch.log(torch.tensor([0.1, 0.2, 0.7]))  # token 2 is always likeliest
        >>> tokens, scores = greedy_search(lambda t: log_probs.expand(len(t), 3), 1,
        ...                                max_new_tokens=3, bos_id=0, eos_id=1, pad_id=0)
        >>> tokens.tolist()
        [[0, 2, 2, 2]]
    """
    ids = {"bos_id": bos_id, "eos_id": eos_id, "pad_id": pad_id}
    _check_search(next_log_probs, batch_size, 1, max_new_tokens, ids, length_penalty)
    tokens = torch.full((batch_size, 1), bos_id, device=device)  # (N, 1)
    log_probs = next_log_probs(tokens)  # (N, V)
    _check_log_probs(log_probs, batch_size)
    dtype = log_probs.dtype
    sums = torch.zeros(batch_size, device=device, dtype=dtype)  # (N,) log-probability so far
    lengths = torch.zeros(batch_size, dtype=torch.long, device=device)  # tokens, EOS included
    ended = torch.zeros(batch_size, dtype=torch.bool, device=device)  # (N,)
    for step in range(max_new_tokens):
        if step:
            log_probs = next_log_probs(tokens)  # (N, V)
        best, token = log_probs.max(dim=-1)  # (N,)
        token = token.masked_fill(ended, pad_id)  # (N,)
        sums += best.masked_fill(ended, 0.0)
        lengths += ~ended
        ended |= token == eos_id
        tokens = torch.cat([tokens, token[:, None]], dim=1)  # (N, t + 1)
        if ended.all():
            break
    return tokens, _penalised(sums, lengths, length_penalty)


def beam_search(
    next_log_probs: NextLogProbs,
    batch_size: int,
    beam_size: int,
    *,
    max_new_tokens: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    length_penalty: float = 1.0,
    reorder: Callable[[Tensor], None] | None = None,
    device=None,
) -> tuple[Tensor, Tensor]:
    r"""Write each output by keeping the ``beam_size`` most likely hypotheses at every step.

    The hypotheses of each source are extended by every token; the :math:`2B` candidates of
    highest summed log-probability are ranked. As in fairseq, an end-of-sequence token among
    the :math:`B` best ends a hypothesis (recorded with its score), the :math:`B` best without
    it go on, a source stops when :math:`B` hypotheses have ended, and its output is the ended
    hypothesis of best score. With :math:`B = 1` it is greedy search. A wider beam is not
    guaranteed to score better (it can drop the prefix that greedy search completes); a beam
    that keeps every hypothesis finds the best output.

    Args:
        next_log_probs (Callable): ``(N B, t)`` tokens so far to ``(N B, V)`` log-probabilities
            of the next token; rows ``n B .. n B + B - 1`` are the beams of source :math:`n`.
        batch_size (int): the number of sources :math:`N`.
        beam_size (int): hypotheses kept per source :math:`B`.
        max_new_tokens (int): most tokens to generate after the first.
        bos_id (int): the first token of every output.
        eos_id (int): the token that ends an output.
        pad_id (int): written after an output has ended.
        length_penalty (float): :math:`\alpha` of the score. Default: ``1.0``.
        reorder (Callable, optional): called with the row each new row continues, ``(N B)``
            indices, after every step, for the caller to reorder its cache. Default: ``None``.
        device (torch.device, optional): where the model reads its tokens. Default: ``None``.

    Shape:
        - Output: tokens :math:`(N, T)`, :math:`T \le 1 +` ``max_new_tokens``, and scores
          :math:`(N)`

    Returns:
        tuple[Tensor, Tensor]: each source's best output and its score.

    Examples::

        >>> log_probs = torch.log(torch.tensor([0.1, 0.2, 0.7]))
        >>> tokens, _ = beam_search(lambda t: log_probs.expand(len(t), 3), 1, 2,
        ...                         max_new_tokens=3, bos_id=0, eos_id=1, pad_id=0)
        >>> tokens.tolist()  # [0, 1] and [0, 2, 1] ended first (2 beams): the better is kept
        [[0, 2, 1]]
    """
    ids = {"bos_id": bos_id, "eos_id": eos_id, "pad_id": pad_id}
    _check_search(next_log_probs, batch_size, beam_size, max_new_tokens, ids, length_penalty)
    if reorder is not None and not callable(reorder):
        raise TypeError(f"reorder must be callable or None; got {type(reorder).__name__}")
    N, B = batch_size, beam_size
    tokens = torch.full((N * B, 1), bos_id, device=device)  # (N B, 1)
    log_probs = next_log_probs(tokens)  # (N B, V)
    _check_log_probs(log_probs, N * B)
    dtype, V = log_probs.dtype, log_probs.shape[-1]
    sums = torch.full((N, B), -math.inf, device=device, dtype=dtype)  # (N, B)
    sums[:, 0] = 0.0  # one live hypothesis at first: the others would repeat it
    best = torch.full((N, 1 + max_new_tokens), pad_id, device=device)  # the best ended
    best[:, 0] = bos_id
    best_scores = torch.full((N,), -math.inf, device=device, dtype=dtype)  # (N,)
    best_lengths = torch.zeros(N, dtype=torch.long, device=device)  # (N,)
    ended = torch.zeros(N, dtype=torch.long, device=device)  # hypotheses ended, per source
    first = torch.arange(N, device=device)[:, None] * B  # each source's first row  (N, 1)

    def record(score: Tensor, hypotheses: Tensor) -> None:  # (N,), (N, t + 1)
        better = score > best_scores  # (N,)
        best[better, : hypotheses.shape[1]] = hypotheses[better]
        best_scores[better], best_lengths[better] = score[better], hypotheses.shape[1] - 1

    for t in range(1, max_new_tokens + 1):
        if t > 1:
            log_probs = next_log_probs(tokens)  # (N B, V)
        candidates = sums.view(N * B, 1) + log_probs  # (N B, 1) + (N B, V) -> (N B, V)
        candidates = candidates.view(N, B * V)  # (N, B V)
        top, index = candidates.topk(min(2 * B, B * V), dim=1)  # (N, K), best first
        rows, token = first + index // V, index % V  # (N, K): the row each extends, its token
        # An EOS among the B best candidates ends a hypothesis, until B have ended (fairseq).
        ends = (token[:, :B] == eos_id) & top[:, :B].isfinite()  # (N, B)
        ends &= ends.cumsum(dim=1) <= (B - ended)[:, None]
        ended += ends.sum(dim=1)
        ended_scores = _penalised(top[:, :B].masked_fill(~ends, -math.inf), t, length_penalty)
        score, which = ended_scores.max(dim=1)  # (N,)
        row = rows.gather(1, which[:, None])[:, 0]  # (N,)
        record(score, torch.cat([tokens[row], torch.full_like(row[:, None], eos_id)], 1))
        # The B best candidates without EOS go on, with their rows of tokens (and cache).
        live = (token == eos_id).int().argsort(dim=1, stable=True)[:, :B]  # (N, B)
        kept = token.gather(1, live)  # (N, B)
        sums = top.gather(1, live).masked_fill(kept == eos_id, -math.inf)  # (N, B)
        rows = rows.gather(1, live).view(N * B)  # (N B,)
        tokens = torch.cat([tokens[rows], kept.view(N * B, 1)], dim=1)  # (N B, t + 1)
        if reorder is not None:
            reorder(rows)
        if (ended >= B).all():
            break
    else:  # the sources still searching end their live hypotheses here, without EOS
        score, which = _penalised(sums, max_new_tokens, length_penalty).max(dim=1)  # (N,)
        record(score.masked_fill(ended >= B, -math.inf), tokens[first[:, 0] + which])
    return best[:, : 1 + int(best_lengths.max())], best_scores
