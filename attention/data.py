"""A small synthetic text task that needs attention: sentiment with negation.

Each sentence holds filler words, exactly one *signal* word and, sometimes, the word ``not``.
The label is the signal word's sentiment, flipped when ``not`` stands *right before* it::

    the movie was not good and the music  ->  negative
    not the movie was good                ->  positive   ("not" is not adjacent)

Solving it needs two things a bag of words cannot do: find the one informative word among
fillers of random length, and look at the word just before it. Everything is generated in
code from a seed; nothing is downloaded.
"""

import torch
from torch import Tensor

from ._checks import check_has_values, check_int

__all__ = [
    "VOCAB",
    "PAD_ID",
    "CLASSES",
    "POSITIVE",
    "NEGATIVE",
    "make_dataset",
    "encode",
    "decode",
    "make_repeated_sequences",
]

PAD_ID = 0
POSITIVE = ("good", "great", "superb")
NEGATIVE = ("bad", "awful", "dull")
FILLER = (
    "the", "movie", "was", "a", "plot", "actor", "film", "it", "story",
    "and", "this", "scene", "with", "music", "very", "ending",
)  # fmt: skip
VOCAB = ("<pad>", "not", *POSITIVE, *NEGATIVE, *FILLER)
CLASSES = ("negative", "positive")
_ID = {word: i for i, word in enumerate(VOCAB)}


def encode(sentence: str | list[str], length: int | None = None) -> Tensor:
    """Turn a sentence (a string or a list of words) into token ids, padded to ``length``.

    Args:
        sentence (str or list[str]): words from ``VOCAB``, separated by spaces in a string.
        length (int, optional): pad with ``PAD_ID`` to this many ids. Default: ``None``
            (no padding).

    Returns:
        Tensor: int64 ids of shape :math:`(\\text{length})`.

    Examples::

        >>> decode(encode("not good", length=4))
        ['not', 'good']
    """
    if not isinstance(sentence, (str, list, tuple)):
        raise TypeError(f"sentence must be a str or a list of words; got {type(sentence).__name__}")
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    unknown = [w for w in words if w not in _ID]
    if unknown:
        raise ValueError(f"sentence has words not in the vocabulary: {unknown}; the vocabulary "
                         f"is {VOCAB}")  # fmt: skip
    length = len(words) if length is None else length
    check_int(length, "length", minimum=0)
    if len(words) > length:
        raise ValueError(f"sentence has {len(words)} words, more than length={length}")
    ids = [_ID[w] for w in words] + [PAD_ID] * (length - len(words))
    return torch.tensor(ids, dtype=torch.long)


def decode(ids: Tensor) -> list[str]:
    """Turn token ids back into words, dropping padding.

    Args:
        ids (Tensor or list[int]): 1-D token ids, each in ``[0, len(VOCAB))``.

    Returns:
        list[str]: the words, without ``<pad>``.

    Examples::

        >>> decode(torch.tensor([1, 2, 0, 0]))
        ['not', 'good']
    """
    if isinstance(ids, Tensor) and not (ids.is_floating_point() or ids.dtype == torch.bool):
        check_has_values(ids, "ids")
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise TypeError(f"ids must be a 1-D integer tensor or a list of ints; got {ids!r}")
    bad = [i for i in ids if not 0 <= i < len(VOCAB)]
    if bad:
        raise ValueError(f"ids must lie in [0, len(VOCAB)={len(VOCAB)}); got {bad}")
    return [VOCAB[i] for i in ids if i != PAD_ID]


def make_dataset(
    n: int, *, seed: int = 0, min_len: int = 5, max_len: int = 12
) -> tuple[Tensor, Tensor]:
    """Generate ``n`` labelled sentences, padded with ``PAD_ID`` to ``max_len``.

    Half the sentences put ``not`` right before the signal word; independently, half add a
    distracting ``not`` somewhere else, which must not flip the label.

    Args:
        n (int): number of sentences.
        seed (int): seed of the generator; the same seed gives the same data. Default: ``0``.
        min_len (int): shortest sentence, in words (at least 3). Default: ``5``.
        max_len (int): longest sentence and padded length. Default: ``12``.

    Shape:
        - Output: tokens :math:`(n, \\text{max\\_len})` int64 and labels :math:`(n)` int64

    Returns:
        tuple[Tensor, Tensor]: the token ids and the labels (index into ``CLASSES``).

    Examples::

        >>> tokens, labels = make_dataset(4, seed=1)
        >>> tokens.shape, labels.shape
        (torch.Size([4, 12]), torch.Size([4]))
    """
    check_int(n, "n", minimum=0)
    check_int(seed, "seed", minimum=0)
    check_int(min_len, "min_len")
    check_int(max_len, "max_len")
    if not 3 <= min_len <= max_len:
        raise ValueError(f"need 3 <= min_len <= max_len; got min_len={min_len}, max_len={max_len}")
    g = torch.Generator().manual_seed(seed)

    def pick(k: int) -> int:
        return int(torch.randint(k, (), generator=g))

    tokens = torch.full((n, max_len), PAD_ID, dtype=torch.long)
    labels = torch.empty(n, dtype=torch.long)
    for i in range(n):
        length = min_len + pick(max_len - min_len + 1)
        words = [FILLER[pick(len(FILLER))] for _ in range(length)]
        positive = pick(2) == 1
        at = 1 + pick(length - 1)  # the signal word's position, with room for "not" before it
        words[at] = (POSITIVE if positive else NEGATIVE)[pick(3)]
        negated = pick(2) == 1
        if negated:
            words[at - 1] = "not"
        if pick(2) == 1:  # a distracting "not" anywhere but right before the signal
            spots = [j for j in range(length) if j not in (at - 1, at)]
            words[spots[pick(len(spots))]] = "not"
        tokens[i, :length] = encode(words)
        labels[i] = int(positive != negated)
    return tokens, labels


def make_repeated_sequences(
    num: int,
    *,
    length: int,
    vocab_size: int,
    seed: int = 0,
    min_period: int | None = None,
) -> Tensor:
    r"""Generate ``num`` sequences of ``length`` random tokens followed by a repeat of them.

    The task of a language model that learns *induction heads* :cite:p:`olsson2022`: the first
    half cannot be predicted, the second half can, by finding where the current token occurred
    before and copying the token that followed it. Within the first half every token is
    different (drawn without replacement), so the token to copy is never ambiguous. The best
    possible loss on the first half's targets is therefore the entropy of a uniform draw among
    the tokens not yet seen, :math:`\ln(V - t)` for target :math:`t = 1, \dots, T - 1`, just
    below :math:`\ln V`.

    By default the second half is the first half again: every token repeats :math:`T`
    positions later. With ``min_period`` the repeat distance varies: each sequence draws a
    period :math:`d` uniformly from ``min_period`` to :math:`T` and its second half continues
    the last :math:`d` tokens of the first, again and again,

    .. math::
        x_t = x_{t - d} \quad \text{for } t \ge T,

    so where the earlier occurrence of a token lies changes from sequence to sequence and only
    the tokens say it. The first token of the second half is then a guess among the possible
    periods; from the second on, every token is the one after the earlier occurrence of the
    token before it.

    Args:
        num (int): number of sequences :math:`N`.
        length (int): tokens in each half :math:`T`, at most ``vocab_size``.
        vocab_size (int): number of token ids :math:`V`.
        seed (int): seed of the generator; the same seed gives the same data. Default: ``0``.
        min_period (int, optional): the shortest repeat distance :math:`d`, from 2 to
            :math:`T`. Default: ``None`` (every sequence repeats with period :math:`T`).

    Shape:
        - Output: :math:`(N, 2T)` int64

    Returns:
        Tensor: the sequences; without ``min_period``, ``out[:, T:]`` equals ``out[:, :T]``.

    Examples::

        >>> tokens = make_repeated_sequences(3, length=4, vocab_size=10, seed=1)
        >>> tokens.shape, torch.equal(tokens[:, :4], tokens[:, 4:])
        (torch.Size([3, 8]), True)
        >>> make_repeated_sequences(1, length=5, vocab_size=9, seed=4, min_period=2)  # d = 3
        tensor([[4, 5, 2, 3, 1, 2, 3, 1, 2, 3]])
    """
    check_int(num, "num", minimum=0)
    check_int(length, "length")
    check_int(vocab_size, "vocab_size")
    check_int(seed, "seed", minimum=0)
    if length > vocab_size:
        raise ValueError(
            f"length must be at most vocab_size, so that the first half's tokens are all "
            f"different; got length={length}, vocab_size={vocab_size}"
        )
    if min_period is not None:
        check_int(min_period, "min_period")
        if not 2 <= min_period <= length:
            raise ValueError(
                f"min_period must lie in [2, length={length}], so that a token never follows "
                f"itself; got {min_period}"
            )
    g = torch.Generator().manual_seed(seed)
    # Random keys, sorted: each row's first `length` indices are a draw without replacement.
    first = torch.rand(num, vocab_size, generator=g).argsort(dim=1)[:, :length]  # (N, T)
    if min_period is None:
        return torch.cat([first, first], dim=1)  # (N, 2T)
    period = torch.randint(min_period, length + 1, (num, 1), generator=g)  # (N, 1)
    # Position T + j of the sequence copies position T - d + (j mod d) of the first half.
    j = torch.arange(length)  # (T,)
    source = length - period + j % period  # (N, T)
    return torch.cat([first, first.gather(1, source)], dim=1)  # (N, 2T)
