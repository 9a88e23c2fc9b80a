"""The training loop and the measures of a model (attention.training)."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attention import AttentionClassifier, DecoderLM
from attention.data import CLASSES, VOCAB, make_dataset, make_repeated_sequences
from attention.training import (
    accuracy,
    count_parameters,
    format_history,
    next_token_losses,
    token_losses,
    train,
    train_classifier,
    train_lm,
)


class _Fixed(nn.Module):
    """Predicts class ``tokens[:, 0] % 2``."""

    def forward(self, tokens):
        logits = nn.functional.one_hot(tokens[:, 0] % 2, 2).float()
        return logits, None


def _classifier():
    return AttentionClassifier(
        len(VOCAB), len(CLASSES), embed_dim=8, num_heads=2, num_layers=1, max_len=12, dropout=0.0
    )


def test_accuracy_counts_correct_predictions_and_restores_the_mode():
    model = _Fixed().train()
    tokens = torch.tensor([[0], [1], [2], [3]])
    assert accuracy(model, tokens, torch.tensor([0, 1, 1, 1])) == 0.75
    assert model.training


def test_train_takes_one_adamw_step_per_batch_on_one_thread():
    threads = torch.get_num_threads()
    seen = []

    def loss_fn(model, batch):
        seen.append(torch.get_num_threads())
        x, y = batch
        return F.mse_loss(model(x), y), {"size": len(x)}

    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    before = model.weight.detach().clone()
    data = [(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(5)]
    rows = []
    history = train(model, iter(data), loss_fn, steps=3, lr=0.1, after_step=rows.append)
    assert [r["step"] for r in history] == [1, 2, 3] and rows == history
    assert set(history[0]) == {"step", "loss", "size", "seconds"}
    assert seen == [1, 1, 1] and torch.get_num_threads() == threads
    assert not torch.equal(model.weight, before) and model.training


def test_train_classifier_reports_each_epoch_and_is_reproducible():
    data, held_out = make_dataset(256, seed=1), make_dataset(64, seed=2)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        runs.append(train_classifier(_classifier(), *data, epochs=2, val=held_out))
    history = runs[0]
    assert [row["epoch"] for row in history] == [1, 2]
    assert set(history[0]) == {"epoch", "loss", "train_acc", "val_acc", "seconds"}
    assert [r["loss"] for r in runs[0]] == [r["loss"] for r in runs[1]]
    assert 0 <= history[-1]["val_acc"] <= 1 and history[0]["seconds"] <= history[1]["seconds"]


def test_train_classifier_loss_is_the_mean_over_the_epoch():
    data = make_dataset(100, seed=1)
    torch.manual_seed(0)
    model = _classifier()
    history = train_classifier(model, *data, epochs=1, batch_size=32, lr=1e-9)
    # With a negligible learning rate the epoch's mean loss is the untrained model's loss.
    logits, _ = model(data[0])
    assert math.isclose(history[0]["loss"], F.cross_entropy(logits, data[1]).item(), rel_tol=1e-4)


def test_train_lm_reports_both_halves_and_restores_the_threads():
    threads = torch.get_num_threads()
    data = make_repeated_sequences(64, length=4, vocab_size=8, seed=0)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
        runs.append(train_lm(model, data, steps=4, batch_size=8))
    history = runs[0]
    assert [row["step"] for row in history] == [1, 2, 3, 4]
    assert [r["loss"] for r in runs[0]] == [r["loss"] for r in runs[1]]
    assert torch.get_num_threads() == threads
    # Of the 7 targets, the halves hold targets 1-3 and 5-7: target 4, the repeat's first token,
    # is copyable only at a fixed period. Replay step 1's batch to check both means.
    torch.manual_seed(0)
    model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
    g = torch.Generator().manual_seed(0)
    batch = data[torch.randint(len(data), (8,), generator=g)]
    logits, _ = model(batch)
    losses = F.cross_entropy(logits[:, :-1].transpose(1, 2), batch[:, 1:], reduction="none")
    row = history[0]
    assert math.isclose(row["loss"], losses.mean().item(), rel_tol=1e-6)  # float32 means
    assert math.isclose(row["first_half"], losses[:, :3].mean().item(), rel_tol=1e-6)
    assert math.isclose(row["second_half"], losses[:, 4:].mean().item(), rel_tol=1e-6)
    losses = next_token_losses(model, data)
    assert losses.shape == (7,) and model.training


def test_token_losses_are_the_cross_entropy_of_each_next_token():
    logits = torch.randn(2, 5, 7)
    tokens = torch.randint(7, (2, 5))
    losses = token_losses(logits, tokens)
    for n in range(2):
        for t in range(4):
            expected = -logits[n, t].log_softmax(-1)[tokens[n, t + 1]]
            assert math.isclose(losses[n, t].item(), expected.item(), rel_tol=1e-5)


def test_format_history_prints_every_nth_row_and_the_last():
    history = [{"step": s, "loss": 1.0 / s, "acc": 0.5, "seconds": s / 10} for s in range(1, 6)]
    lines = format_history(history, every=2, keys=("acc",)).splitlines()
    assert [line.split()[1] for line in lines] == ["2", "4", "5"]
    assert "acc 0.5000" in lines[0] and lines[-1].endswith("(0.5 s)")
    epochs = [{"epoch": 1, "loss": 0.5, "seconds": 1.0}]
    assert format_history(epochs).startswith("epoch    1  loss 0.5000")


def test_count_parameters():
    assert count_parameters(nn.Linear(4, 3)) == 15
    with pytest.raises(TypeError, match=r"module must be an nn.Module; got int"):
        count_parameters(3)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"epochs": 0}, ValueError, r"epochs must be at least 1; got 0"),
        ({"batch_size": 2.5}, TypeError, r"batch_size must be an int; got float"),
        ({"lr": float("nan")}, ValueError, r"lr must be a positive finite number"),
        ({"seed": -1}, ValueError, r"seed must be non-negative; got -1"),
    ],
)
def test_train_classifier_refuses_bad_settings(kwargs, error, message):
    with pytest.raises(error, match=message):
        train_classifier(_classifier(), *make_dataset(8), **kwargs)


def _linear_loss(model, batch):
    x, y = batch
    return F.mse_loss(model(x), y), {}


@pytest.mark.parametrize(
    "val, error, message",
    [
        ("short labels", ValueError, r"labels must be 1-D with one label per sequence"),
        (5, TypeError, r"val must be a pair \(tokens, labels\) or None; got 5"),
    ],
)
def test_train_classifier_checks_val_before_any_update(val, error, message):
    # Both were found only after the first epoch had updated the weights.
    tokens, labels = make_dataset(8)
    if val == "short labels":
        val = (tokens, labels[:5])
    model = _classifier()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(error, match=message):
        train_classifier(model, tokens, labels, val=val)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_train_refuses_fewer_batches_than_steps():
    # 3 batches for 10 steps ran 3 steps without a word.
    data = [(torch.randn(4, 2), torch.randn(4, 1)) for _ in range(3)]
    model = nn.Linear(2, 1)
    before = model.weight.detach().clone()
    with pytest.raises(ValueError, match=r"batches must hold at least steps=10 batches; got 3"):
        train(model, data, _linear_loss, steps=10, lr=0.1)
    assert torch.equal(model.weight, before)  # a list has a length: refused before any step
    with pytest.raises(ValueError, match=r"batches ran out after 3 of steps=10 steps"):
        train(model, iter(data), _linear_loss, steps=10, lr=0.1)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"threads": -1}, ValueError, r"threads must be at least 1; got -1"),
        ({"threads": 1.5}, TypeError, r"threads must be an int"),
        ({"weight_decay": "x"}, TypeError, r"weight_decay must be a float; got str"),
        ({"weight_decay": -0.1}, ValueError, r"weight_decay must be non-negative"),
        ({"weight_decay": math.inf}, ValueError, r"weight_decay must be finite"),
        ({"loss_fn": None}, TypeError, r"loss_fn must be callable; got NoneType"),
        ({"after_step": 0}, TypeError, r"after_step must be callable; got int"),
        ({"model": "model"}, TypeError, r"model must be an nn.Module; got str"),
        ({"batches": 3}, TypeError, r"batches must be an iterable of batches; got int"),
    ],
)
def test_train_names_each_bad_argument(kwargs, error, message):
    # threads=-1 was reported as "n", weight_decay='x' failed in a comparison inside AdamW.
    model = nn.Linear(2, 1)
    arguments = {"model": model, "batches": [(torch.randn(4, 2), torch.randn(4, 1))],
                 "loss_fn": _linear_loss, **kwargs}  # fmt: skip
    with pytest.raises(error, match=message):
        train(**arguments, steps=1, lr=0.1)


@pytest.mark.parametrize("shape", [(0, 8), (4, 1)])
def test_train_lm_refuses_sequences_with_nothing_to_predict(shape):
    # L = 1 logged loss NaN (no target); N = 0 raised a raw RuntimeError from randint.
    model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
    with pytest.raises(ValueError, match=r"at least one sequence of at least 2 tokens"):
        train_lm(model, torch.zeros(shape, dtype=torch.long), steps=2)


@pytest.mark.parametrize("L", [2, 3, 4])
def test_train_lm_records_the_halves_only_when_both_hold_targets(L):
    # L = 2 recorded NaN for both halves (each an empty mean).
    model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
    history = train_lm(model, torch.randint(8, (16, L)), steps=2, batch_size=4)
    for row in history:
        assert math.isfinite(row["loss"])
        assert ("first_half" in row) == (L >= 4)
        assert all(math.isfinite(v) for v in row.values())


@pytest.mark.parametrize(
    "logits, tokens, error, message",
    [
        # -100 is cross-entropy's ignore index: its loss was a silent 0.
        (torch.zeros(1, 3, 4), torch.tensor([[0, -100, 2]]), ValueError, r"ids must lie in"),
        (torch.zeros(1, 3, 4), torch.tensor([[0, 4, 2]]), ValueError, r"ids must lie in"),
        # 2-D logits failed with "not enough values to unpack".
        (torch.zeros(3, 4), torch.tensor([[0, 1, 2]]), ValueError, r"logits must be 3-D"),
        (torch.zeros(1, 3, 4), torch.tensor([[0.0, 1, 2]]), TypeError, r"tokens must be an int"),
        (torch.zeros(1, 3, 4), torch.tensor([[0, 1]]), ValueError, r"tokens must be \(N, L\)"),
        (torch.zeros(1, 1, 4), torch.tensor([[0]]), ValueError, r"L >= 2"),
        (torch.zeros(1, 3, 4).long(), torch.tensor([[0, 1, 2]]), TypeError, r"logits must be"),
    ],
)
def test_token_losses_refuses_what_cross_entropy_would_mis_score(logits, tokens, error, message):
    with pytest.raises(error, match=message):
        token_losses(logits, tokens)


def test_format_history_needs_the_keys_only_in_the_records_it_prints():
    # A recipe measures val_loss every few steps: the other records lack it and are not printed.
    history = [{"step": s, "loss": 1.0, "seconds": 0.1} for s in (1, 2, 3, 4)]
    history[1]["val_loss"] = history[3]["val_loss"] = 2.0
    assert len(format_history(history, every=2, keys=("val_loss",)).splitlines()) == 2
    with pytest.raises(ValueError, match=r"history must be a list of records"):
        format_history(history, every=1, keys=("val_loss",))
    with pytest.raises(ValueError, match=r"history must be a list of records"):
        format_history([1.5])
    with pytest.raises(TypeError, match=r"keys must be a tuple of str"):
        format_history(history, keys="val_loss")
