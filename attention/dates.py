r"""Dates written many ways, and the one ISO 8601 form they all mean: a task for an encoder-decoder.

People write the same day as ``3 March 2021``, ``March 3rd, 21``, ``Wed 03/03/2021`` or
``2021 mar 3``; ISO 8601 writes it ``2021-03-03``. Turning the first into the second, one
character at a time, is a small translation task that needs *alignment*: to write the year's
digits, the model must find the year in the source, wherever the format put it, and likewise
the month (a name or a number) and the day. Everything is made here from a seed with Python's
:mod:`datetime` and :mod:`random`; nothing is downloaded.

- :data:`FORMATS`: the ten ways of writing a date, as :meth:`str.format` templates over the
  fields of :func:`write_date`.
- :func:`write_date`: one date in one format, with the span of characters that spells each
  field (year, month, day, weekday), for reading attention as an alignment.
- :func:`split_dates`: every day from 1950 to 2049, split into training and held-out days, so
  that the held-out dates are dates the model never saw, in any format.
- :func:`make_dates`: ``n`` examples of one split, each a random day in a random format.
- :func:`encode_sources`, :func:`encode_targets` and :func:`decode_target`: characters to
  token ids and back (:data:`SOURCE_VOCAB`, :data:`TARGET_VOCAB`).

Month and weekday names are spelled here in English, not read from :mod:`calendar`, whose names
follow the locale (a program that calls :func:`locale.setlocale`, as Sphinx does, would get
another language's names).
"""

import datetime
import functools
import random
import string
from typing import NamedTuple

import torch
from torch import Tensor

from ._checks import check_has_values, check_int

__all__ = [
    "FORMATS",
    "FIELDS",
    "SOURCE_VOCAB",
    "TARGET_VOCAB",
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "FIRST_DAY",
    "LAST_DAY",
    "DateExample",
    "write_date",
    "split_dates",
    "make_dates",
    "encode_sources",
    "encode_targets",
    "decode_target",
]

#: The ways of writing a date: :meth:`str.format` templates over the fields of
#: :func:`write_date`. Each one is unambiguous: a day and a month written as numbers come in
#: one order only (day first), and a four-digit year tells a year-first format apart.
FORMATS = (
    "{d} {Month} {yyyy}",  # 3 March 2021
    "{Month} {dth}, {yy}",  # March 3rd, 21
    "{Wkd} {dd}/{mm}/{yyyy}",  # Wed 03/03/2021
    "{yyyy} {mon} {d}",  # 2021 mar 3
    "{Weekday}, {Month} {d}, {yyyy}",  # Wednesday, March 3, 2021
    "{dd}.{mm}.{yy}",  # 03.03.21
    "{d}-{Mon}-{yyyy}",  # 3-Mar-2021
    "{yyyy}/{m}/{d}",  # 2021/3/3
    "{MONTH} {d} {yyyy}",  # MARCH 3 2021
    "the {dth} of {Month} {yyyy}",  # the 3rd of March 2021
)

#: Each field of a template, and which part of the date it spells.
FIELDS = {
    "yyyy": "year", "yy": "year",
    "Month": "month", "MONTH": "month", "Mon": "month", "mon": "month", "mm": "month",
    "m": "month",
    "dd": "day", "d": "day", "dth": "day",
    "Weekday": "weekday", "Wkd": "weekday",
}  # fmt: skip

_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

#: The first and the last day of the task: a two-digit year ``yy`` means 20yy below 50, else
#: 19yy.
FIRST_DAY, LAST_DAY = datetime.date(1950, 1, 1), datetime.date(2049, 12, 31)

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
#: The source's tokens: padding, then one per character a format may write.
SOURCE_VOCAB = ("<pad>", *(" ,-./" + string.digits + string.ascii_letters))
#: The target's tokens: padding, begin and end of sequence, then the characters of ISO 8601.
TARGET_VOCAB = ("<pad>", "<bos>", "<eos>", "-", *string.digits)
_SOURCE_ID = {c: i for i, c in enumerate(SOURCE_VOCAB) if i != PAD_ID}
_TARGET_ID = {c: i for i, c in enumerate(TARGET_VOCAB) if i > EOS_ID}
_SOURCE_CHARS, _TARGET_CHARS = frozenset(_SOURCE_ID), frozenset(_TARGET_ID)


class DateExample(NamedTuple):
    """One example of the task: a date, how it was written, and its ISO 8601 form.

    ``spans`` maps each part of the date that the source spells (``"year"``, ``"month"``,
    ``"day"`` and, in some formats, ``"weekday"``) to its characters ``source[start:end]``.

    Examples::

        >>> example = make_dates(1, seed=3)[0]
        >>> example.target == example.date.isoformat()
        True
    """

    date: datetime.date
    format: str
    source: str
    target: str
    spans: dict[str, tuple[int, int]]


def _ordinal(day: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ..., ``11th``, ``12th``, ``13th``, ..., ``21st``."""
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


@functools.cache
def _template(format: str) -> tuple[tuple[str, str | None], ...]:
    """The ``(literal text, field)`` pieces of a template, its fields checked."""
    pieces = []
    for literal, field, spec, conversion in string.Formatter().parse(format):
        if field is not None and (field not in FIELDS or spec or conversion):
            raise ValueError(
                f"format fields must be one of {sorted(FIELDS)}, without a format spec; got "
                f"{{{field}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
                f" in {format!r}"
            )
        pieces.append((literal, field))
    return tuple(pieces)


def write_date(date: datetime.date, format: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """Write ``date`` in ``format`` and say where each of its parts stands.

    The template's fields: ``d`` (3), ``dd`` (03), ``dth`` (3rd), ``m`` (3), ``mm`` (03),
    ``Month`` (March), ``MONTH`` (MARCH), ``Mon`` (Mar), ``mon`` (mar), ``yyyy`` (2021),
    ``yy`` (21), ``Weekday`` (Wednesday) and ``Wkd`` (Wed); everything else is copied.

    Args:
        date (datetime.date): the day, of a four-digit year (the task's days run from
            :data:`FIRST_DAY` to :data:`LAST_DAY`, where a two-digit year is unambiguous).
        format (str): a template such as those of :data:`FORMATS`.

    Returns:
        tuple[str, dict[str, tuple[int, int]]]: the text, and for each part of the date that
        it spells (``"year"``, ``"month"``, ``"day"``, ``"weekday"``) the ``(start, end)`` of its
        characters (the last field of a part when a template writes it twice).

    Examples::

        >>> import datetime
        >>> text, spans = write_date(datetime.date(2021, 3, 3), "{Wkd} {dd}/{mm}/{yyyy}")
        >>> text, spans["year"], text[slice(*spans["month"])]
        ('Wed 03/03/2021', (10, 14), '03')
        >>> write_date(datetime.date(1999, 12, 22), "the {dth} of {Month} {yy}")[0]
        'the 22nd of December 99'
    """
    if not isinstance(date, datetime.date):
        raise TypeError(f"date must be a datetime.date; got {type(date).__name__}")
    if not 1000 <= date.year <= 9999:
        raise ValueError(f"date must have a four-digit year; got {date}")
    if not isinstance(format, str):
        raise TypeError(f"format must be a str; got {type(format).__name__}")
    month, weekday = _MONTHS[date.month - 1], _WEEKDAYS[date.weekday()]
    values = {
        "d": str(date.day), "dd": f"{date.day:02d}", "dth": _ordinal(date.day),
        "m": str(date.month), "mm": f"{date.month:02d}", "Month": month,
        "MONTH": month.upper(), "Mon": month[:3], "mon": month[:3].lower(),
        "yyyy": str(date.year), "yy": f"{date.year % 100:02d}", "Weekday": weekday,
        "Wkd": weekday[:3],
    }  # fmt: skip
    text, spans = "", {}
    for literal, field in _template(format):
        text += literal
        if field is not None:
            spans[FIELDS[field]] = (len(text), len(text) + len(values[field]))
            text += values[field]
    if not _SOURCE_CHARS.issuperset(text):
        unknown = sorted(set(text) - _SOURCE_CHARS)
        raise ValueError(f"format writes characters outside SOURCE_VOCAB: {unknown}")
    return text, spans


def split_dates(
    *, held_out: float = 0.1, seed: int = 0
) -> tuple[tuple[datetime.date, ...], tuple[datetime.date, ...]]:
    """Every day from :data:`FIRST_DAY` to :data:`LAST_DAY`, split at random into training and
    held-out days.

    Args:
        held_out (float): the share of the days held out, in (0, 1), leaving at least one day
            in each split. Default: ``0.1``.
        seed (int): seed of the split; the same seed gives the same split. Default: ``0``.

    Returns:
        tuple[tuple[datetime.date, ...], tuple[datetime.date, ...]]: the training days and the
        held-out days, each in calendar order; no day is in both.

    Examples::

        >>> train, held_out = split_dates()
        >>> len(train), len(held_out), set(train).isdisjoint(held_out)
        (32873, 3652, True)
    """
    check_int(seed, "seed", minimum=0)
    if isinstance(held_out, bool) or not isinstance(held_out, float) or not 0 < held_out < 1:
        raise ValueError(f"held_out must be a float in (0, 1); got {held_out!r}")
    days = (LAST_DAY - FIRST_DAY).days + 1
    if not 0 < round(held_out * days) < days:  # each split must hold a day
        raise ValueError(f"held_out={held_out!r} holds out {round(held_out * days)} of the "
                         f"{days} days; both splits must hold at least one")  # fmt: skip
    return _split(held_out, seed)


@functools.cache
def _split(held_out: float, seed: int):
    days = (LAST_DAY - FIRST_DAY).days + 1
    chosen = set(random.Random(seed).sample(range(days), round(held_out * days)))
    train, held = [], []
    for i in range(days):
        (held if i in chosen else train).append(FIRST_DAY + datetime.timedelta(days=i))
    return tuple(train), tuple(held)


def make_dates(
    n: int, *, split: str = "train", seed: int = 0, formats: tuple[str, ...] = FORMATS
) -> list[DateExample]:
    """``n`` examples of one split: each a random day of the split in a random format.

    The days come from :func:`split_dates` (its default split), so a held-out example is a date
    that no training example shows, in any format.

    Args:
        n (int): number of examples.
        split (str): ``"train"`` or ``"held_out"``. Default: ``"train"``.
        seed (int): seed of the draws; the same seed gives the same examples. Default: ``0``.
        formats (tuple[str, ...]): the templates to draw from, uniformly, each checked.
            Default: ``FORMATS``.

    Returns:
        list[DateExample]: the examples.

    Examples::

        >>> [(e.source, e.target) for e in make_dates(2, seed=1)]  # doctest: +SKIP
        [('27-Jul-1969', '1969-07-27'), ('FEBRUARY 9 2037', '2037-02-09')]
    """
    check_int(n, "n", minimum=0)
    check_int(seed, "seed", minimum=0)
    if split not in ("train", "held_out"):
        raise ValueError(f"split must be 'train' or 'held_out'; got {split!r}")
    if not isinstance(formats, (tuple, list)) or not formats:
        raise ValueError(f"formats must be a non-empty sequence of templates; got {formats!r}")
    for format in formats:  # every one, not only those drawn
        write_date(FIRST_DAY, format)
    days = split_dates()[split == "held_out"]
    rng = random.Random(seed)
    examples = []
    for _ in range(n):
        day, format = rng.choice(days), rng.choice(formats)
        source, spans = write_date(day, format)
        examples.append(DateExample(day, format, source, day.isoformat(), spans))
    return examples


def encode_sources(texts: list[str], length: int | None = None) -> Tensor:
    """Turn written dates into source token ids, one per character, padded with ``PAD_ID``.

    Args:
        texts (list[str]): the sources, characters of :data:`SOURCE_VOCAB`.
        length (int, optional): pad to this many ids. Default: ``None`` (the longest text).

    Shape:
        - Output: :math:`(N, S)` int64

    Returns:
        Tensor: the ids; ``SOURCE_VOCAB[i]`` is the character of id ``i``.

    Examples::

        >>> encode_sources(["3 May 21", "2021/5/3"]).shape
        torch.Size([2, 8])
    """
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"texts must be a list of str (one source per example); got {texts!r:.40}")
    longest = max((len(t) for t in texts), default=0)
    length = longest if length is None else length
    check_int(length, "length", minimum=0)
    if longest > length:
        raise ValueError(f"a text has {longest} characters, more than length={length}")
    unknown = sorted(set().union(*texts) - _SOURCE_CHARS)
    if unknown:
        raise ValueError(f"characters outside SOURCE_VOCAB in texts: {unknown}")
    rows = [[_SOURCE_ID[c] for c in text] + [PAD_ID] * (length - len(text)) for text in texts]
    return torch.tensor(rows, dtype=torch.long).reshape(len(texts), length)


def encode_targets(texts: list[str]) -> Tensor:
    """Turn ISO 8601 dates into target token ids: ``BOS_ID``, one id per character, ``EOS_ID``.

    Args:
        texts (list[str]): the targets, all of the same length (``"2021-03-03"``).

    Shape:
        - Output: :math:`(N, T + 2)` int64, :math:`T` characters per target

    Returns:
        Tensor: the ids; ``TARGET_VOCAB[i]`` is the character of id ``i``.

    Examples::

        >>> encode_targets(["2021-03-03"])[0].tolist()
        [1, 6, 4, 6, 5, 3, 4, 7, 3, 4, 7, 2]
    """
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"texts must be a list of str (one target per example); got {texts!r:.40}")
    if len({len(t) for t in texts}) > 1:
        raise ValueError(f"texts must all have one length; got {sorted({len(t) for t in texts})}")
    rows = []
    for text in texts:
        unknown = sorted(set(text) - _TARGET_CHARS)
        if unknown:
            raise ValueError(f"texts hold characters outside TARGET_VOCAB in {text!r}: {unknown}")
        rows.append([BOS_ID, *(_TARGET_ID[c] for c in text), EOS_ID])
    width = len(texts[0]) + 2 if texts else 2
    return torch.tensor(rows, dtype=torch.long).reshape(len(texts), width)


def decode_target(ids) -> str:
    """Turn target token ids back into text: BOS and padding dropped, stopped at EOS.

    Args:
        ids (Tensor or list[int]): 1-D target ids, each in ``[0, len(TARGET_VOCAB))``.

    Returns:
        str: the characters (``"2021-03-03"`` for a well-formed output).

    Examples::

        >>> decode_target(torch.tensor([1, 6, 4, 6, 5, 3, 4, 7, 3, 4, 7, 2, 0]))
        '2021-03-03'
    """
    if isinstance(ids, Tensor):
        if ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
            raise TypeError(f"ids must be a 1-D integer tensor; got {ids.dtype}, {ids.dim()}-D")
        check_has_values(ids, "ids")
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise TypeError(f"ids must be a 1-D integer tensor or a list of ints; got {ids!r}")
    bad = [i for i in ids if not 0 <= i < len(TARGET_VOCAB)]
    if bad:
        raise ValueError(f"ids must lie in [0, len(TARGET_VOCAB)={len(TARGET_VOCAB)}); got {bad}")
    text = []
    for i in ids:
        if i == EOS_ID:
            break
        if i > EOS_ID:
            text.append(TARGET_VOCAB[i])
    return "".join(text)
