"""Real text for the language model (attention.text): the corpus, the character tokenizer, the
split by position and the windows the model trains and is measured on."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention.text import CharTokenizer, python_docs, random_windows, split_by_position, windows


@pytest.fixture(scope="module")
def corpus():
    return python_docs()


@pytest.fixture(scope="module")
def tokenizer(corpus):
    return CharTokenizer(corpus)


# The corpus ------------------------------------------------------------------------------------


def test_the_corpus_is_pythons_own_documentation_in_a_fixed_order(corpus):
    from pydoc_data.topics import topics

    assert corpus == python_docs()  # the same text on every call
    assert len(corpus) > 400_000
    assert corpus.startswith('The "assert" statement\n')
    # Every topic, in alphabetical order, separated by one blank line.
    assert corpus == "\n".join(topics[name] for name in sorted(topics))
    assert corpus.count("\n\n") > len(topics)


def test_a_python_without_pydoc_data_gets_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pydoc_data.topics", None)  # as if it were stripped
    with pytest.raises(ImportError, match="pydoc_data.topics"):
        python_docs()


# The tokenizer ---------------------------------------------------------------------------------


def test_the_vocabulary_is_the_corpus_characters_sorted_after_the_unknown_id(corpus, tokenizer):
    assert tokenizer.vocab[0] == CharTokenizer.UNKNOWN
    assert list(tokenizer.vocab[1:]) == sorted(set(corpus))
    assert len(tokenizer) == len(set(corpus)) + 1
    assert CharTokenizer(corpus).vocab == tokenizer.vocab  # fixed by the text


def test_the_corpus_round_trips(corpus, tokenizer):
    ids = tokenizer.encode(corpus, errors="strict")
    assert ids.dtype == torch.long and ids.shape == (len(corpus),)
    assert int(ids.min()) >= 1 and int(ids.max()) == len(tokenizer) - 1  # no unknown id
    assert tokenizer.decode(ids) == corpus


@given(st.text(alphabet="abc xyz\n\u00e9\ufffd", max_size=40))
def test_unknown_characters_become_id_0_and_decode_as_the_replacement_character(text):
    tokenizer = CharTokenizer("abc xy\n")
    ids = tokenizer.encode(text)
    assert ids.shape == (len(text),)
    known = [char in "abc xy\n" for char in text]
    assert ids.eq(0).tolist() == [not k for k in known]
    replaced = (char if k else CharTokenizer.UNKNOWN for char, k in zip(text, known, strict=True))
    expected = "".join(replaced)
    assert tokenizer.decode(ids) == expected


def test_a_text_holding_the_replacement_character_keeps_one_unknown_id():
    tokenizer = CharTokenizer("a\ufffdb")
    assert tokenizer.vocab == ("\ufffd", "a", "b")
    assert tokenizer.encode("\ufffd").tolist() == [0]


def test_strict_encoding_names_the_unknown_characters():
    tokenizer = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"outside the vocabulary: \['!', 'z'\]"):
        tokenizer.encode("az!", errors="strict")
    with pytest.raises(ValueError, match="and 5 more"):
        tokenizer.encode("0123456789ABCDE", errors="strict")
    assert tokenizer.encode("", errors="strict").shape == (0,)


def test_decode_takes_a_tensor_or_a_list_of_ints(tokenizer):
    assert tokenizer.decode([]) == ""
    ids = tokenizer.encode("for x in y:")
    assert tokenizer.decode(ids.tolist()) == tokenizer.decode(ids.int()) == "for x in y:"


@pytest.mark.parametrize(
    "text, error, match",
    [
        (b"abc", TypeError, "text must be a str"),
        (["a", "b"], TypeError, "text must be a str"),
        ("", ValueError, "at least one character"),
    ],
)
def test_a_tokenizer_refuses_a_text_it_cannot_build_from(text, error, match):
    with pytest.raises(error, match=match):
        CharTokenizer(text)


def test_encode_refuses_bad_input():
    tokenizer = CharTokenizer("abc")
    with pytest.raises(TypeError, match="text must be a str"):
        tokenizer.encode(b"abc")
    with pytest.raises(ValueError, match="errors must be 'replace' or 'strict'"):
        tokenizer.encode("abc", errors="ignore")


@pytest.mark.parametrize(
    "ids, error, match",
    [
        (torch.tensor([1, 4]), ValueError, r"ids must lie in \[0, V=4\); got min 1, max 4"),
        ([-1], ValueError, r"must lie in \[0, V=4\)"),
        (torch.tensor([1.0, 2.0]), TypeError, "must hold integers"),
        ([True, False], TypeError, "not bools"),
        (torch.tensor([[1, 2]]), ValueError, r"must be \(L\)"),
        ("abc", TypeError, "ids must be"),
    ],
)
def test_decode_refuses_ids_outside_the_vocabulary(ids, error, match):
    with pytest.raises(error, match=match):
        CharTokenizer("abc").decode(ids)


def test_the_tokenizer_says_its_size():
    assert repr(CharTokenizer("hello")) == "CharTokenizer(V=5)"


# The split -------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, fraction", [(10, 0.1), (1000, 0.1), (7, 0.5), (3, 0.4)])
def test_the_split_keeps_the_end_for_validation(n, fraction):
    tokens = torch.arange(n)
    train, val = split_by_position(tokens, val_fraction=fraction)
    assert len(val) == int(fraction * n) and len(train) == n - len(val)
    assert torch.equal(torch.cat([train, val]), tokens)  # in order, nothing lost or repeated
    assert train.max() < val.min()  # every validation token comes after every training one


@pytest.mark.parametrize(
    "tokens, fraction, error, match",
    [
        (torch.arange(10), 0.0, ValueError, "must be positive"),
        (torch.arange(10), 1.0, ValueError, r"must lie in \(0, 1\)"),
        (torch.arange(10), 1.5, ValueError, r"must lie in \(0, 1\)"),
        (torch.arange(10), math.nan, ValueError, "must be finite"),
        (torch.arange(10), True, TypeError, "must be a float"),
        (torch.arange(10), 0.05, ValueError, "leaves no validation tokens"),
        (torch.arange(10).float(), 0.1, TypeError, "must hold integers"),
        (torch.arange(10).view(2, 5), 0.1, ValueError, r"must be \(L\)"),
        ([1, 2, 3], 0.5, TypeError, "tokens must be a 1-D tensor"),
    ],
)
def test_the_split_refuses_bad_input(tokens, fraction, error, match):
    with pytest.raises(error, match=match):
        split_by_position(tokens, val_fraction=fraction)


def test_the_corpus_split_holds_unseen_topics(corpus, tokenizer):
    from pydoc_data.topics import topics

    train, val = split_by_position(tokenizer.encode(corpus))
    train_text, val_text = tokenizer.decode(train), tokenizer.decode(val)
    assert len(val) == len(corpus) // 10 and train_text + val_text == corpus
    # The last topics of the corpus lie wholly in the validation text: the model is measured
    # on whole topics it never read.
    unseen = [name for name in sorted(topics) if topics[name] in val_text]
    assert len(unseen) >= 5 and unseen[-1] == max(topics)
    assert not any(topics[name] in train_text for name in unseen)
    # The model page prompts with the first words of one of them, "Methods" (typesmethods).
    assert "Methods are functions" in val_text and "Methods are functions" not in train_text


# The windows -----------------------------------------------------------------------------------


def test_random_windows_are_contiguous_passages_of_the_text():
    tokens = torch.arange(50) * 3  # ids whose position is easy to read back
    batches = random_windows(tokens, 8, batch_size=64, seed=2)
    starts = set()
    for _ in range(20):
        batch = next(batches)
        assert batch.shape == (64, 8) and batch.dtype == torch.long
        assert (batch.diff(dim=1) == 3).all()  # consecutive tokens of the text
        starts.update((batch[:, 0] // 3).tolist())
    # Every start from 0 to T - length is drawn, and none beyond (the windows fit).
    assert starts == set(range(50 - 8 + 1))


def test_random_windows_are_determined_by_their_seed():
    tokens = torch.arange(1000)
    a, b, c = (random_windows(tokens, 16, batch_size=4, seed=s) for s in (1, 1, 2))
    first = [next(a) for _ in range(3)]
    assert all(torch.equal(x, next(b)) for x in first)
    assert not torch.equal(first[0], next(c))
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)
    next(random_windows(tokens, 16, batch_size=4))  # its own generator: the global one untouched
    assert torch.equal(torch.rand(2), expected)


def test_a_window_as_long_as_the_text_is_the_text():
    tokens = torch.arange(5)
    assert torch.equal(next(random_windows(tokens, 5, batch_size=2)), torch.stack([tokens] * 2))


@pytest.mark.parametrize(
    "tokens, length, options, error, match",
    [
        (torch.arange(5), 6, {}, ValueError, "fewer than one window of length=6"),
        (torch.arange(5), 0, {}, ValueError, "length must be at least 1"),
        (torch.arange(5), 2.0, {}, TypeError, "length must be an int"),
        (torch.arange(5), 2, {"batch_size": 0}, ValueError, "batch_size must be at least 1"),
        (torch.arange(5), 2, {"seed": -1}, ValueError, "seed must be non-negative"),
        (torch.arange(5.0), 2, {}, TypeError, "must hold integers"),
        (torch.arange(6).view(2, 3), 2, {}, ValueError, r"must be \(L\)"),
    ],
)
def test_random_windows_refuse_bad_input_when_called(tokens, length, options, error, match):
    options = {"batch_size": 2, **options}
    with pytest.raises(error, match=match):
        random_windows(tokens, length, **options)  # before the first batch is asked for


@pytest.mark.parametrize("T, length, step", [(10, 3, None), (12, 4, None), (10, 4, 2), (5, 5, 1)])
def test_windows_lie_step_apart_from_the_start(T, length, step):
    tokens = torch.arange(T)
    out = windows(tokens, length, step=step)
    step = length if step is None else step
    assert out.shape == ((T - length) // step + 1, length)
    assert torch.equal(out[:, 0], torch.arange(0, len(out) * step, step))
    assert (out.diff(dim=1) == 1).all()
    if step == length:  # end to end: the text once, less a remainder shorter than a window
        assert torch.equal(out.flatten(), tokens[: out.numel()])


@pytest.mark.parametrize(
    "length, step, error, match",
    [
        (11, None, ValueError, "fewer than one window of length=11"),
        (0, None, ValueError, "length must be at least 1"),
        (3, 0, ValueError, "step must be at least 1"),
        (3, 1.5, TypeError, "step must be an int"),
    ],
)
def test_windows_refuse_bad_input(length, step, error, match):
    with pytest.raises(error, match=match):
        windows(torch.arange(10), length, step=step)


# The recipe that trains on it ------------------------------------------------------------------


def test_the_language_model_recipe_reads_this_text():
    # Two steps: the wiring, not the learning (the page's claims sweep checks the learning).
    from attention.recipes import fit_char_lm

    model, history, (train_ids, val_ids) = fit_char_lm(seed=1, steps=2, eval_every=1)
    text = python_docs()
    expected = split_by_position(CharTokenizer(text).encode(text))
    assert torch.equal(train_ids, expected[0]) and torch.equal(val_ids, expected[1])
    assert not model.training and model.vocab_size == len(CharTokenizer(text))
    assert model.max_len == 128 and model.positions == "rotary"
    assert [row["step"] for row in history] == [1, 2]
    assert all(math.isfinite(row["val_loss"]) for row in history)


def test_the_language_model_recipe_trains_another_attention():
    from attention import LinearAttention
    from attention.recipes import fit_char_lm

    options = dict(attention="linear", num_kv_heads=None, positions="none")
    model, history, _ = fit_char_lm(seed=1, steps=2, eval_every=1, **options)
    assert isinstance(model.blocks[0].self_attn, LinearAttention) and model.positions == "none"
    assert all(math.isfinite(row["val_loss"]) for row in history)


@pytest.mark.parametrize(
    "options, error",
    [({"steps": 0}, ValueError), ({"lr": 0.0}, ValueError), ({"eval_every": 1.5}, TypeError),
     ({"num_kv_heads": 0}, ValueError), ({"attention": "none"}, ValueError)],
)  # fmt: skip
def test_the_language_model_recipe_refuses_bad_options(options, error):
    from attention.recipes import fit_char_lm

    with pytest.raises(error):
        fit_char_lm(**options)
