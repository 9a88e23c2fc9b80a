r"""Real text for a language model: Python's own reference documentation, one character a token.

Every Python installation carries the reference documentation that ``help()`` prints, in the
standard library's :mod:`pydoc_data.topics`: about half a million characters of English prose
with code in it, generated when the Python release was made. It is the same text on every
machine with the same Python release, and nothing has to be downloaded:

- :func:`python_docs`: the corpus, one string.
- :class:`CharTokenizer`: a fixed vocabulary of the corpus's characters, and an id for the
  characters outside it.
- :func:`split_by_position`: training and validation text, the validation part taken from the
  end, so the model is measured on passages it never read.
- :func:`random_windows` and :func:`windows`: contiguous windows of the token ids, drawn at
  random for training or laid end to end for measuring.
"""

from collections.abc import Iterator

import torch
from torch import Tensor

from ._checks import check_float, check_int, check_int_tensor

__all__ = ["python_docs", "CharTokenizer", "split_by_position", "random_windows", "windows"]


def python_docs() -> str:
    """The reference documentation of this Python, from :mod:`pydoc_data.topics`, as one string.

    The topics (``"assert"``, ``"assignment"``, ...) in alphabetical order, separated by a blank
    line. The text is fixed when a Python release is made, so every machine with the same
    release reads the same characters; another release (3.10, 3.12, ...) documents a different
    language and reads a slightly different text.

    Returns:
        str: the corpus (about 465,000 characters in Python 3.11).

    Raises:
        ImportError: if this Python installation was stripped of :mod:`pydoc_data`.

    Examples::

        >>> text = python_docs()
        >>> len(text) > 400_000, text[:22]
        (True, 'The "assert" statement')
    """
    try:
        from pydoc_data.topics import topics
    except ImportError:
        raise ImportError(
            "the corpus is Python's reference documentation, pydoc_data.topics, which this "
            "Python installation lacks (some minimal installations strip it); install the full "
            "standard library"
        ) from None
    return "\n".join(topics[name] for name in sorted(topics))


class CharTokenizer:
    r"""A character-level tokenizer: one id per character of a vocabulary built from a text.

    The vocabulary is fixed when the tokenizer is made: id 0 is :attr:`UNKNOWN` (the Unicode
    replacement character ``"\ufffd"``), then every distinct character of ``text``, sorted by
    code point. :meth:`encode` gives a character outside the vocabulary the id 0 (or, with
    ``errors="strict"``, refuses it), and :meth:`decode` writes id 0 as ``"\ufffd"``, as Python's
    own ``bytes.decode(errors="replace")`` does.

    Args:
        text (str): the characters of the vocabulary (usually the whole corpus).

    Examples::

        >>> tokenizer = CharTokenizer("hello world")
        >>> len(tokenizer), tokenizer.vocab[1:4]  # id 0 is UNKNOWN
        (9, (' ', 'd', 'e'))
        >>> ids = tokenizer.encode("hello!")
        >>> ids
        tensor([4, 3, 5, 5, 6, 0])
        >>> tokenizer.decode(ids) == "hello" + CharTokenizer.UNKNOWN
        True
    """

    #: The character that stands for every character outside the vocabulary (id 0).
    UNKNOWN = "\ufffd"

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        if not text:
            raise ValueError("text must hold at least one character to build a vocabulary from")
        self.vocab: tuple[str, ...] = (self.UNKNOWN, *sorted(set(text) - {self.UNKNOWN}))
        self._ids = {char: i for i, char in enumerate(self.vocab)}

    def __len__(self) -> int:
        """The vocabulary size :math:`V`, the unknown id included."""
        return len(self.vocab)

    def encode(self, text: str, *, errors: str = "replace") -> Tensor:
        r"""The ids of the characters of ``text``.

        Args:
            text (str): the text.
            errors (str): ``"replace"`` gives every character outside the vocabulary the id 0
                (:attr:`UNKNOWN`); ``"strict"`` raises a ``ValueError`` naming them.
                Default: ``"replace"``.

        Shape:
            - Output: :math:`(L)`, ``L = len(text)``

        Returns:
            Tensor: int64 ids in :math:`[0, V)`.

        Examples::

            >>> CharTokenizer("abc").encode("cab")
            tensor([3, 1, 2])
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        if errors not in ("replace", "strict"):
            raise ValueError(f"errors must be 'replace' or 'strict'; got {errors!r}")
        ids = [self._ids.get(char, 0) for char in text]
        if errors == "strict":
            unknown = sorted({char for char in text if char not in self._ids})
            if unknown:
                raise ValueError(
                    f"characters outside the vocabulary: {unknown[:10]}"
                    + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else "")
                    + "; use errors='replace' to encode them as id 0"
                )
        return torch.tensor(ids, dtype=torch.long)  # (L,)

    def decode(self, ids) -> str:
        """The text of ``ids``; id 0 becomes :attr:`UNKNOWN`.

        Args:
            ids (Tensor or list[int]): 1-D ids in :math:`[0, V)`.

        Shape:
            - ids: :math:`(L)`

        Returns:
            str: ``L`` characters.

        Examples::

            >>> tokenizer = CharTokenizer("abc")
            >>> tokenizer.decode(tokenizer.encode("cab"))
            'cab'
        """
        ids = check_int_tensor(ids, "ids", ndims=(1,))
        if ids.numel() and (ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(
                f"ids must lie in [0, V={len(self)}); got min {int(ids.min())}, "
                f"max {int(ids.max())}"
            )
        return "".join(self.vocab[i] for i in ids.tolist())

    def __repr__(self) -> str:
        return f"CharTokenizer(V={len(self)})"


def _check_ids(tokens, name: str = "tokens") -> Tensor:
    """A 1-D int64 or int32 tensor of token ids (the whole text)."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a 1-D tensor of token ids; got {type(tokens).__name__}")
    return check_int_tensor(tokens, name, lists=False, ndims=(1,))


def split_by_position(tokens: Tensor, *, val_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """Split a text into training and validation parts: the validation part is its end.

    A split by position, not by random characters: a character drawn at random for
    validation would sit between training characters, and the model would be measured on
    passages it had read around it.

    Args:
        tokens (Tensor): the token ids of the whole text.
        val_fraction (float): the share of the text, from the end, kept for validation,
            in :math:`(0, 1)`. Default: ``0.1``.

    Shape:
        - tokens: :math:`(L)`
        - Output: :math:`(L - L_{val})` and :math:`(L_{val})`,
          :math:`L_{val} = \\lfloor \\text{val\\_fraction} \\cdot L \\rfloor`

    Returns:
        tuple[Tensor, Tensor]: the training and the validation ids (views of ``tokens``).

    Examples::

        >>> train, val = split_by_position(torch.arange(10), val_fraction=0.2)
        >>> train.tolist(), val.tolist()
        ([0, 1, 2, 3, 4, 5, 6, 7], [8, 9])
    """
    tokens = _check_ids(tokens)
    check_float(val_fraction, "val_fraction", positive=True)
    if not val_fraction < 1:
        raise ValueError(f"val_fraction must lie in (0, 1); got {val_fraction!r}")
    n_val = int(val_fraction * len(tokens))
    if n_val == 0 or n_val == len(tokens):
        raise ValueError(
            f"val_fraction={val_fraction} of {len(tokens)} tokens leaves "
            f"{'no validation' if n_val == 0 else 'no training'} tokens"
        )
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val :]


def random_windows(
    tokens: Tensor, length: int, *, batch_size: int, seed: int = 0
) -> Iterator[Tensor]:
    """Batches of contiguous windows of ``tokens``, each starting at a random position, forever.

    The usual way to train a language model on one long text: each step reads ``batch_size``
    passages of ``length`` tokens, from starts drawn uniformly over the text (every window lies
    wholly inside it). A model trained on them predicts tokens 1 to ``length - 1`` of each
    window from the ones before (:func:`attention.training.token_losses`).

    Args:
        tokens (Tensor): the token ids of the text, at least ``length`` of them.
        length (int): tokens per window (the model's context).
        batch_size (int): windows per batch :math:`N`.
        seed (int): seed of the starts; the same seed gives the same batches. Default: ``0``.

    Shape:
        - tokens: :math:`(T)`
        - Output: each batch :math:`(N, \\text{length})`

    Returns:
        Iterator[Tensor]: an endless iterator of batches (stop it after the steps you need,
        as :func:`attention.training.train` does).

    Examples::

        >>> batches = random_windows(torch.arange(100), 5, batch_size=2, seed=1)
        >>> batch = next(batches)
        >>> batch.shape, bool((batch.diff(dim=1) == 1).all())  # contiguous
        (torch.Size([2, 5]), True)
    """
    tokens = _check_ids(tokens)
    check_int(length, "length")
    check_int(batch_size, "batch_size")
    check_int(seed, "seed", minimum=0)
    if len(tokens) < length:
        raise ValueError(
            f"tokens holds {len(tokens)} ids, fewer than one window of length={length}"
        )
    g = torch.Generator().manual_seed(seed)
    offsets = torch.arange(length, device=tokens.device)  # (length,)

    def batches():
        while True:
            starts = torch.randint(len(tokens) - length + 1, (batch_size, 1), generator=g)
            yield tokens[starts.to(tokens.device) + offsets]  # (N, 1) + (length,) -> (N, length)

    return batches()


def windows(tokens: Tensor, length: int, *, step: int | None = None) -> Tensor:
    """Windows of ``length`` tokens, ``step`` apart, from the start of ``tokens``; a remainder
    too short for a window is left out.

    With the default ``step = length`` the windows lie end to end and cover the text once: the
    way to measure a model on a whole validation text.

    Args:
        tokens (Tensor): the token ids of the text.
        length (int): tokens per window.
        step (int, optional): distance between the starts of consecutive windows.
            Default: ``None`` (``length``).

    Shape:
        - tokens: :math:`(T)`
        - Output: :math:`(\\lfloor (T - \\text{length}) / \\text{step} \\rfloor + 1,
          \\text{length})`

    Returns:
        Tensor: the windows (a view of ``tokens``).

    Examples::

        >>> windows(torch.arange(7), 3)
        tensor([[0, 1, 2],
                [3, 4, 5]])
    """
    tokens = _check_ids(tokens)
    check_int(length, "length")
    step = length if step is None else step
    check_int(step, "step")
    if len(tokens) < length:
        raise ValueError(
            f"tokens holds {len(tokens)} ids, fewer than one window of length={length}"
        )
    return tokens.unfold(0, length, step)  # (num_windows, length)
