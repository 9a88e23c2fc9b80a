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

from ._checks import check_int

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
    words = sentence.split() if isinstance(sentence, str) else list(sentence)
    unknown = [w for w in words if w not in _ID]
    if unknown:
        raise ValueError(f"words not in the vocabulary: {unknown}; the vocabulary is {VOCAB}")
    length = len(words) if length is None else length
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


def make_repeated_sequences(num: int, *, length: int, vocab_size: int, seed: int = 0) -> Tensor:
    r"""Generate ``num`` sequences of ``length`` random tokens followed by the same tokens again.

    The task of a language model that learns *induction heads* :cite:p:`olsson2022`: the first
    half cannot be predicted, the second half can, by finding where the current token occurred
    before and copying the token that followed it. Within the first half every token is
    different (drawn without replacement), so the token to copy is never ambiguous. The best
    possible loss on the first half's targets is therefore the entropy of a uniform draw among
    the tokens not yet seen, :math:`\ln(V - t)` for target :math:`t = 1, \dots, T - 1`, just
    below :math:`\ln V`; on the second half it is 0.

    Args:
        num (int): number of sequences :math:`N`.
        length (int): tokens in each half :math:`T`, at most ``vocab_size``.
        vocab_size (int): number of token ids :math:`V`.
        seed (int): seed of the generator; the same seed gives the same data. Default: ``0``.

    Shape:
        - Output: :math:`(N, 2T)` int64

    Returns:
        Tensor: the sequences; ``out[:, T:]`` equals ``out[:, :T]``.

    Examples::

        >>> tokens = make_repeated_sequences(3, length=4, vocab_size=10, seed=1)
        >>> tokens.shape, torch.equal(tokens[:, :4], tokens[:, 4:])
        (torch.Size([3, 8]), True)
    """
    for name, value in (("num", num), ("length", length), ("vocab_size", vocab_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {type(value).__name__}")
        if value < (0 if name == "num" else 1):
            raise ValueError(f"{name} must be positive; got {value}")
    if length > vocab_size:
        raise ValueError(
            f"length must be at most vocab_size, so that the first half's tokens are all "
            f"different; got length={length}, vocab_size={vocab_size}"
        )
    g = torch.Generator().manual_seed(seed)
    # Random keys, sorted: each row's first `length` indices are a draw without replacement.
    first = torch.rand(num, vocab_size, generator=g).argsort(dim=1)[:, :length]  # (N, T)
    return torch.cat([first, first], dim=1)  # (N, 2T)
