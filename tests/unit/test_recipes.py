"""The pages' fixed recipes (attention.recipes): they learn, and they train once per process."""

import pytest
import torch
from torch import nn

from attention import recipes
from attention.data import make_repeated_sequences
from attention.recipes import fit_repeat_model, fit_sentiment_classifier, trained_once
from attention.training import accuracy


def test_the_classifier_learns_the_task():
    # The tutorials' recipe: a few seconds of CPU training, then held-out data it never saw.
    model, history, held_out = fit_sentiment_classifier()
    assert not model.training
    assert accuracy(model, *held_out) >= 0.95
    assert history[-1]["val_acc"] >= 0.95


def test_a_recipe_trains_once_and_leaves_the_callers_random_numbers_alone():
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    first = fit_sentiment_classifier(seed=3, epochs=1)  # trains
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(5)
    second = fit_sentiment_classifier(seed=3, epochs=1)  # from the cache
    assert torch.equal(torch.rand(3), expected)
    assert second[0] is not first[0] and second[1] == first[1]
    for a, b in zip(first[0].parameters(), second[0].parameters(), strict=True):
        assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()
    with torch.no_grad():  # a caller's change to its copy reaches no other copy
        next(first[0].parameters()).zero_()
    third = fit_sentiment_classifier(seed=3, epochs=1)
    assert torch.equal(next(third[0].parameters()), next(second[0].parameters()))


def test_trained_once_keys_on_every_argument_with_its_default():
    calls = []

    @trained_once
    def fit(*, seed=0, steps=2):
        calls.append((seed, steps))
        return nn.Linear(1, 1), [{"step": 1}], torch.zeros(2)

    fit(), fit(seed=0), fit(steps=2), fit(seed=1)
    assert calls == [(0, 2), (1, 2)]
    assert any(key[1].endswith("fit") for key in recipes.TRAINED)
    with pytest.raises(TypeError):
        fit(1)  # keywords only


def test_fit_repeat_model_trains_on_the_period_asked_for():
    model, history, held_out = fit_repeat_model(steps=2, batch_size=4)
    assert len(history) == 2 and not model.training
    assert held_out.shape == (512, 32) and torch.equal(held_out[:, :16], held_out[:, 16:])
    _, history, varied = fit_repeat_model(steps=1, batch_size=4, min_period=8, lr=1e-3)
    assert varied.shape == (512, 32) and len(history) == 1
    assert torch.equal(
        varied, make_repeated_sequences(512, length=16, vocab_size=32, seed=2, min_period=8)
    )
    assert not torch.equal(varied[:, :16], varied[:, 16:])
    with pytest.raises(ValueError, match=r"min_period must lie in \[2, length=16\].*got 17"):
        fit_repeat_model(min_period=17)
    with pytest.raises(ValueError, match=r"lr must be a positive finite number; got 0"):
        fit_repeat_model(lr=0)
    with pytest.raises(TypeError, match=r"batch_size must be an int; got float"):
        fit_repeat_model(batch_size=4.0)
