"""The tasks the pages train on: the sentiment sentences and the repeated sequences."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention.data import (
    CLASSES,
    NEGATIVE,
    PAD_ID,
    POSITIVE,
    decode,
    encode,
    make_dataset,
    make_repeated_sequences,
)


def test_dataset_is_determined_by_its_seed():
    a, b, c = make_dataset(200, seed=3), make_dataset(200, seed=3), make_dataset(200, seed=4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


@pytest.mark.parametrize("min_len, max_len", [(5, 12), (3, 3), (6, 16)])
def test_dataset_layout(min_len, max_len):
    tokens, labels = make_dataset(300, seed=0, min_len=min_len, max_len=max_len)
    assert tokens.shape == (300, max_len) and labels.shape == (300,)
    assert tokens.dtype == labels.dtype == torch.long
    real = tokens != PAD_ID
    lengths = real.sum(dim=1)
    assert ((min_len <= lengths) & (lengths <= max_len)).all()
    # Real tokens first, then padding only.
    assert torch.equal(real, torch.arange(max_len) < lengths[:, None])
    assert set(labels.tolist()) <= set(range(len(CLASSES)))


def _rule(words):
    """The task's label, from the words: the signal's sentiment, flipped by an adjacent "not"."""
    (at,) = [i for i, w in enumerate(words) if w in POSITIVE + NEGATIVE]
    negated = at > 0 and words[at - 1] == "not"
    return int((words[at] in POSITIVE) != negated), negated


def test_labels_follow_the_rule():
    tokens, labels = make_dataset(2000, seed=5)
    seen = {"negated": 0, "distant not": 0}
    for row, label in zip(tokens, labels.tolist(), strict=True):
        words = decode(row)
        expected, negated = _rule(words)
        assert label == expected, " ".join(words)
        seen["negated"] += negated
        seen["distant not"] += words.count("not") > int(negated)
    # Both kinds of "not" are common, so the rule above was really exercised.
    assert 800 < seen["negated"] < 1200 and seen["distant not"] > 500
    assert 0.4 < labels.float().mean() < 0.6


def test_label_examples_from_the_task_description():
    assert _rule("the movie was not good and the music".split()) == (
        CLASSES.index("negative"),
        True,
    )
    assert _rule("not the movie was good".split()) == (CLASSES.index("positive"), False)


def test_encode_decode_round_trip():
    tokens, _ = make_dataset(100, seed=7)
    for row in tokens:
        assert torch.equal(encode(decode(row), length=tokens.shape[1]), row)
    assert decode(encode("the film was not dull")) == "the film was not dull".split()
    assert torch.equal(encode("not good"), encode(["not", "good"]))


def test_encode_always_gives_integer_ids():
    for sentence in ["good", "", []]:
        assert encode(sentence).dtype == torch.long
        assert encode(sentence, length=3).dtype == torch.long


def test_encode_rejects_unknown_words_and_overlong_sentences():
    with pytest.raises(ValueError, match=r"words not in the vocabulary: \['brilliant'\]"):
        encode("a brilliant film")
    with pytest.raises(ValueError, match=r"sentence has 3 words, more than length=2"):
        encode("a good film", length=2)


@pytest.mark.parametrize("min_len, max_len", [(2, 8), (9, 8)])
def test_make_dataset_rejects_bad_lengths(min_len, max_len):
    with pytest.raises(ValueError, match=r"need 3 <= min_len <= max_len"):
        make_dataset(4, min_len=min_len, max_len=max_len)


# --- repeated sequences ------------------------------------------------------------


def test_repeated_sequences_repeat_distinct_tokens_and_follow_the_seed():
    tokens = make_repeated_sequences(200, length=6, vocab_size=9, seed=3)
    assert tokens.shape == (200, 12) and tokens.dtype == torch.long
    assert torch.equal(tokens[:, :6], tokens[:, 6:])
    assert all(len(set(row.tolist())) == 6 for row in tokens[:, :6])
    assert 0 <= tokens.min() and tokens.max() < 9
    assert torch.equal(tokens, make_repeated_sequences(200, length=6, vocab_size=9, seed=3))
    assert not torch.equal(tokens, make_repeated_sequences(200, length=6, vocab_size=9, seed=4))
    with pytest.raises(ValueError, match=r"length must be at most vocab_size.*=10, .*=9"):
        make_repeated_sequences(2, length=10, vocab_size=9)
    with pytest.raises(TypeError, match=r"length must be an int; got float"):
        make_repeated_sequences(2, length=2.0, vocab_size=9)


@given(
    length=st.integers(2, 12),
    extra=st.integers(0, 4),
    min_period=st.integers(2, 12),
    seed=st.integers(0, 100),
)
def test_repeated_sequences_with_a_varying_period_continue_the_last_d_tokens(
    length, extra, min_period, seed
):
    min_period = min(min_period, length)
    tokens = make_repeated_sequences(
        40, length=length, vocab_size=length + extra, seed=seed, min_period=min_period
    )
    assert tokens.shape == (40, 2 * length)
    assert all(len(set(row.tolist())) == length for row in tokens[:, :length])
    for row in tokens.tolist():
        # The period: the distance back to the first token of the second half.
        d = length - row[:length].index(row[length])
        assert min_period <= d <= length
        assert all(row[t] == row[t - d] for t in range(length, 2 * length))
    again = make_repeated_sequences(
        40, length=length, vocab_size=length + extra, seed=seed, min_period=min_period
    )
    assert torch.equal(tokens, again)


def test_repeated_sequences_draw_every_period_and_refuse_bad_ones():
    tokens = make_repeated_sequences(400, length=6, vocab_size=9, seed=0, min_period=3)
    d = 6 - (tokens[:, :6] == tokens[:, 6:7]).int().argmax(dim=1)  # (N,)
    assert sorted(set(d.tolist())) == [3, 4, 5, 6]
    # With min_period=length every sequence repeats at distance length, as by default.
    fixed = make_repeated_sequences(5, length=6, vocab_size=9, seed=0, min_period=6)
    assert torch.equal(fixed[:, :6], fixed[:, 6:])
    for bad in (1, 7):
        with pytest.raises(ValueError, match=rf"min_period must lie in \[2, length=6\].*got {bad}"):
            make_repeated_sequences(2, length=6, vocab_size=9, min_period=bad)
    with pytest.raises(TypeError, match=r"min_period must be an int; got float"):
        make_repeated_sequences(2, length=6, vocab_size=9, min_period=3.0)
