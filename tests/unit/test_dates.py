"""The date-normalisation task (attention.dates): written dates, their spans, splits and ids."""

import datetime

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention.dates import (
    BOS_ID,
    EOS_ID,
    FIELDS,
    FIRST_DAY,
    FORMATS,
    LAST_DAY,
    PAD_ID,
    SOURCE_VOCAB,
    TARGET_VOCAB,
    decode_target,
    encode_sources,
    encode_targets,
    make_dates,
    split_dates,
    write_date,
)

MONTHS = (
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
)  # fmt: skip
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
days = st.dates(min_value=FIRST_DAY, max_value=LAST_DAY)


def _read(text: str, spans: dict) -> dict:
    """Read each part of a date back from the characters its span covers, independently of
    how write_date produced them."""
    parts = {name: text[start:end] for name, (start, end) in spans.items()}
    year = int(parts["year"])
    if len(parts["year"]) == 2:
        year += 2000 if year < 50 else 1900
    month_text = parts["month"].lower()
    if month_text.isdigit():
        month = int(month_text)
    else:
        (month,) = [i for i, name in enumerate(MONTHS, 1) if name.startswith(month_text)]
    read = {"date": datetime.date(year, month, int(parts["day"].rstrip("stndrh")))}
    if "weekday" in parts:
        (read["weekday"],) = [
            i for i, name in enumerate(WEEKDAYS) if name.startswith(parts["weekday"].lower())
        ]
    return read


@given(day=days, format=st.sampled_from(FORMATS))
def test_the_spans_spell_the_date_in_every_format(day, format):
    text, spans = write_date(day, format)
    assert {"year", "month", "day"} <= set(spans) <= {"year", "month", "day", "weekday"}
    read = _read(text, spans)
    assert read["date"] == day
    assert read.get("weekday", day.weekday()) == day.weekday()  # the weekday is the true one
    ranges = sorted(spans.values())
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert end <= start  # the spans do not overlap
    assert set(text) <= set(SOURCE_VOCAB[1:])


def test_the_examples_of_the_formats():
    day = datetime.date(2021, 3, 3)
    written = [write_date(day, format)[0] for format in FORMATS]
    assert written == [
        "3 March 2021", "March 3rd, 21", "Wed 03/03/2021", "2021 mar 3",
        "Wednesday, March 3, 2021", "03.03.21", "3-Mar-2021", "2021/3/3", "MARCH 3 2021",
        "the 3rd of March 2021",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "day, ordinal",
    [(1, "1st"), (2, "2nd"), (3, "3rd"), (4, "4th"), (11, "11th"), (12, "12th"),
     (13, "13th"), (21, "21st"), (22, "22nd"), (23, "23rd"), (30, "30th"), (31, "31st")],
)  # fmt: skip
def test_ordinal_days(day, ordinal):
    assert write_date(datetime.date(2001, 1, day), "{dth}") == (ordinal, {"day": (0, len(ordinal))})


def test_no_written_date_means_two_days():
    # The task is well posed: in every format, each source has one target (a day/month order
    # that differed between two formats, or a two-digit year that repeated inside the range,
    # would make some sources ambiguous). Every day of a leap year's calendar, in years at the
    # ends of the range, on both sides of the century and whose two digits could be a day or a
    # month.
    years = (1950, 1951, 1999, 2000, 2001, 2008, 2012, 2031, 2049)
    start = datetime.date(2000, 1, 1)
    calendar = [start + datetime.timedelta(days=i) for i in range(366)]
    meaning = {}
    for year in years:
        for day in calendar:
            if day.month == 2 and day.day == 29 and year % 4:
                continue
            day = day.replace(year=year)
            for format in FORMATS:
                text = write_date(day, format)[0]
                assert meaning.setdefault(text, day) == day, (text, meaning[text], day)
    two_digits = {year % 100 for year in range(FIRST_DAY.year, LAST_DAY.year + 1)}
    assert len(two_digits) == LAST_DAY.year - FIRST_DAY.year + 1  # yy names one year


def test_the_split_covers_every_day_once_and_follows_its_seed():
    train, held_out = split_dates()
    assert len(held_out) == round(0.1 * (len(train) + len(held_out)))
    assert set(train).isdisjoint(held_out)
    every = sorted([*train, *held_out])
    assert every[0] == FIRST_DAY and every[-1] == LAST_DAY
    assert len(every) == (LAST_DAY - FIRST_DAY).days + 1
    assert list(train) == sorted(train) and list(held_out) == sorted(held_out)
    assert split_dates(seed=0) == (train, held_out)
    assert split_dates(seed=1)[1] != held_out
    assert len(split_dates(held_out=0.5)[1]) == round(0.5 * len(every))


def test_examples_come_from_their_split_and_their_seed():
    train_days, held_out_days = map(set, split_dates())
    held_out = make_dates(500, split="held_out", seed=3)
    train = make_dates(500, seed=3)
    assert all(e.date in held_out_days for e in held_out)
    assert all(e.date in train_days for e in train)
    for e in held_out + train:
        assert e.target == e.date.isoformat()
        assert (e.source, e.spans) == write_date(e.date, e.format)
    assert make_dates(500, seed=3) == train and make_dates(500, seed=4) != train
    assert {e.format for e in train} == set(FORMATS)  # every format drawn
    two = FORMATS[:2]
    assert {e.format for e in make_dates(100, formats=two)} == set(two)
    assert make_dates(0) == []


def test_ids_round_trip():
    examples = make_dates(64, seed=5)
    sources = [e.source for e in examples]
    src = encode_sources(sources, 32)
    assert src.shape == (64, 32) and src.dtype == torch.long
    for row, text in zip(src.tolist(), sources, strict=True):
        assert "".join(SOURCE_VOCAB[i] for i in row if i != PAD_ID) == text
        assert row[len(text) :] == [PAD_ID] * (32 - len(text))  # padding at the end only
    assert encode_sources(sources).shape[1] == max(map(len, sources))
    tgt = encode_targets([e.target for e in examples])
    assert tgt.shape == (64, 12)
    assert (tgt[:, 0] == BOS_ID).all() and (tgt[:, -1] == EOS_ID).all()
    assert [decode_target(row) for row in tgt] == [e.target for e in examples]
    # decoding stops at the first EOS and drops the padding written after it
    assert decode_target([BOS_ID, 3, EOS_ID, 4, PAD_ID]) == "-"
    assert TARGET_VOCAB[PAD_ID] == "<pad>" and SOURCE_VOCAB[PAD_ID] == "<pad>"


def test_bad_input_is_refused_with_a_message():
    day = datetime.date(2021, 3, 3)
    with pytest.raises(ValueError, match=r"format fields must be one of .*got \{year\}"):
        write_date(day, "{year}")
    with pytest.raises(ValueError, match=r"without a format spec; got \{d:>3\}"):
        write_date(day, "{d:>3}")
    with pytest.raises(ValueError, match=r"outside SOURCE_VOCAB: \['é'\]"):
        write_date(day, "{d} é")
    with pytest.raises(ValueError, match="date must have a four-digit year; got 0999-01-01"):
        write_date(datetime.date(999, 1, 1), FORMATS[0])
    with pytest.raises(TypeError, match="date must be a datetime.date; got str"):
        write_date("2021-03-03", FORMATS[0])
    with pytest.raises(TypeError, match="format must be a str; got int"):
        write_date(day, 3)
    with pytest.raises(ValueError, match=r"split must be 'train' or 'held_out'; got 'test'"):
        make_dates(3, split="test")
    with pytest.raises(ValueError, match="formats must be a non-empty sequence"):
        make_dates(3, formats="{d}")
    with pytest.raises(ValueError, match=r"held_out must be a float in \(0, 1\); got 1.0"):
        split_dates(held_out=1.0)
    with pytest.raises(ValueError, match=r"more than length=4"):
        encode_sources(["2021/3/3"], 4)
    with pytest.raises(ValueError, match=r"outside SOURCE_VOCAB in texts: \['\?'\]"):
        encode_sources(["3?"])
    with pytest.raises(ValueError, match="texts must all have one length"):
        encode_targets(["2021-03-03", "2021-3-3"])
    with pytest.raises(ValueError, match=r"outside TARGET_VOCAB in '2021/03/03'"):
        encode_targets(["2021/03/03"])
    with pytest.raises(ValueError, match=r"ids must lie in \[0, len\(TARGET_VOCAB\)=14\)"):
        decode_target([1, 14])
    with pytest.raises(TypeError, match="ids must be a 1-D integer tensor"):
        decode_target(torch.zeros(3))


def test_fields_name_the_parts_of_a_date():
    assert set(FIELDS.values()) == {"year", "month", "day", "weekday"}
    for format in FORMATS:
        _, spans = write_date(datetime.date(1987, 11, 29), format)
        assert {"year", "month", "day"} <= set(spans)


@pytest.mark.parametrize(
    "call, error, message",
    [
        # A bad template was checked only if drawn: n = 0 returned [].
        (lambda: make_dates(0, formats=("{bogus}",)), ValueError, r"format fields must be"),
        (lambda: make_dates(5, formats=FORMATS + ("{d}%",)), ValueError, r"outside SOURCE_VOC"),
        (lambda: make_dates(0, formats=(3,)), TypeError, r"format must be a str; got int"),
        # 1e-9 held out 0 days, 0.9999999 left 0 training days.
        (lambda: split_dates(held_out=1e-9), ValueError, r"holds out 0 of the 36525 days"),
        (lambda: split_dates(held_out=0.9999999), ValueError, r"holds out 36525 of the"),
        # "'int' object is not iterable" and NotImplementedError from inside.
        (lambda: encode_sources(5), TypeError, r"texts must be a list of str"),
        (lambda: encode_targets(5), TypeError, r"texts must be a list of str"),
        (lambda: decode_target(torch.zeros(3, dtype=torch.long, device="meta")), ValueError,
         r"ids must hold values"),
    ],
)  # fmt: skip
def test_bad_input_found_by_probing_is_refused_by_name(call, error, message):
    with pytest.raises(error, match=message):
        call()
