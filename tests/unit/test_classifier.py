"""The classifier, the synthetic task it learns (attention.data) and the training loop."""

import pytest
import torch
from torch import nn

from attention import AttentionClassifier
from attention.data import (
    CLASSES,
    NEGATIVE,
    PAD_ID,
    POSITIVE,
    VOCAB,
    decode,
    encode,
    make_dataset,
)
from attention.training import accuracy, fit_sentiment_classifier, train_classifier

from .helpers import assert_close


def _model(**kwargs):
    options = {"embed_dim": 16, "num_heads": 4, "num_layers": 2, "max_len": 12, "dropout": 0.0}
    return AttentionClassifier(len(VOCAB), len(CLASSES), **(options | kwargs))


# --- the model -----------------------------------------------------------------------------


def test_padding_does_not_change_the_prediction():
    model = _model().double().eval()
    sentences = ["the movie was not good", "it was a superb film and the music", "dull"]
    short = torch.stack([encode(s, length=8) for s in sentences])
    long = torch.stack([encode(s, length=12) for s in sentences])
    assert_close(model(long)[0], model(short)[0])


def test_attention_weights_per_layer_and_padding_never_attended_to():
    model = _model().eval()
    tokens = torch.stack([encode("the plot was good", length=6), encode("bad", length=6)])
    logits, weights = model(tokens, need_weights=True)
    assert logits.shape == (2, len(CLASSES))
    assert len(weights) == 2 and all(w.shape == (2, 4, 6, 6) for w in weights)
    for w in weights:
        assert torch.equal(w[0, ..., 4:], torch.zeros(4, 6, 2))
        assert torch.equal(w[1, ..., 1:], torch.zeros(4, 6, 5))
        assert torch.allclose(w.sum(-1), torch.ones(2, 4, 6))
    assert model(tokens)[1] is None


def test_masking_does_not_depend_on_training_mode():
    model = _model(dropout=0.0)
    tokens = torch.stack([encode("the plot was good", length=6), encode("bad", length=6)])
    assert_close(model.train()(tokens)[0], model.eval()(tokens)[0])


def test_the_padding_embedding_is_never_trained():
    model = _model()
    logits, _ = model(make_dataset(8, seed=0)[0])
    logits.sum().backward()
    assert torch.equal(model.embedding.weight.grad[PAD_ID], torch.zeros(16))


# --- the data ------------------------------------------------------------------------------


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


# --- training ------------------------------------------------------------------------------


class _Fixed(nn.Module):
    """Predicts class ``tokens[:, 0] % 2``."""

    def forward(self, tokens):
        logits = nn.functional.one_hot(tokens[:, 0] % 2, 2).float()
        return logits, None


def test_accuracy_counts_correct_predictions_and_restores_the_mode():
    model = _Fixed().train()
    tokens = torch.tensor([[0], [1], [2], [3]])
    assert accuracy(model, tokens, torch.tensor([0, 1, 1, 1])) == 0.75
    assert model.training


def test_train_classifier_reports_each_epoch_and_is_reproducible():
    data, held_out = make_dataset(256, seed=1), make_dataset(64, seed=2)
    runs, lines = [], []
    for _ in range(2):
        torch.manual_seed(0)
        model = _model(embed_dim=8, num_heads=2, num_layers=1)
        runs.append(train_classifier(model, *data, epochs=2, val=held_out, log=lines.append))
    history = runs[0]
    assert [row["epoch"] for row in history] == [1, 2]
    assert set(history[0]) == {"epoch", "loss", "train_acc", "val_acc", "seconds"}
    assert len(lines) == 4 and lines[0].startswith("epoch  1")
    assert [r["loss"] for r in runs[0]] == [r["loss"] for r in runs[1]]


def test_the_classifier_learns_the_task():
    # The tutorials' recipe: a few seconds of CPU training, then held-out data it never saw.
    model, history, held_out = fit_sentiment_classifier(log=None)
    assert not model.training
    assert accuracy(model, *held_out) >= 0.95
    assert history[-1]["val_acc"] >= 0.95


def test_fit_sentiment_classifier_trains_once_per_seed_and_replays_its_lines():
    first_lines, second_lines = [], []
    first = fit_sentiment_classifier(seed=3, epochs=1, log=first_lines.append)
    after_training = torch.rand(3)
    second = fit_sentiment_classifier(seed=3, epochs=1, log=second_lines.append)
    assert torch.equal(torch.rand(3), after_training)  # the random state training left
    assert second_lines == first_lines and len(first_lines) == 1
    assert second[0] is not first[0] and second[1] == first[1]
    for a, b in zip(first[0].parameters(), second[0].parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
