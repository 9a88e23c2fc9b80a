"""Training and evaluating: one training loop for every model of the pages, and what measures them.

- :func:`train` is the loop: AdamW, a one-cycle learning rate, one step per batch; what a batch
  is and what its loss is are the caller's. :func:`train_classifier` runs it over epochs of a
  labelled data set, :func:`train_lm` over random batches of sequences for next-token
  prediction.
- :func:`accuracy`, :func:`token_losses`, :func:`next_token_losses` and
  :func:`count_parameters` measure a model.
- :func:`format_history` turns a history into the progress lines a page prints.

The pages' fixed recipes, which call these, are in :mod:`attention.recipes`.
"""

import time
from collections.abc import Callable, Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ._checks import check_float, check_int, check_positive, check_tensor, check_tokens
from .repro import num_threads

__all__ = [
    "train",
    "train_classifier",
    "train_lm",
    "accuracy",
    "token_losses",
    "next_token_losses",
    "count_parameters",
    "format_history",
]


def count_parameters(module: nn.Module) -> int:
    """The number of parameters of ``module`` (every weight and bias, counted once).

    Args:
        module (nn.Module): the model or layer.

    Returns:
        int: the total number of parameter entries.

    Examples::

        >>> count_parameters(nn.Linear(4, 3))  # a (3, 4) weight and a (3,) bias
        15
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"module must be an nn.Module; got {type(module).__name__}")
    return sum(p.numel() for p in module.parameters())


def train(
    model: nn.Module,
    batches: Iterable,
    loss_fn: Callable[[nn.Module, object], tuple[Tensor, dict]],
    *,
    steps: int,
    lr: float,
    weight_decay: float = 0.01,
    threads: int | None = 1,
    after_step: Callable[[dict], None] | None = None,
) -> list[dict]:
    """The training loop: AdamW with a one-cycle learning rate, one step per batch.

    Each step computes ``loss, measured = loss_fn(model, batch)``, takes one optimiser step on
    ``loss`` and records ``{"step", "loss", **measured, "seconds"}``. The learning rate warms up
    to ``lr`` and decays on a cosine over ``steps`` steps. By default the loop runs on one
    thread (restored afterwards): the models of the pages are small, one thread is as fast, and
    the trained model then does not depend on the machine's core count.

    Args:
        model (nn.Module): the model, put in training mode.
        batches (Iterable): at least ``steps`` batches (fewer is a ``ValueError``), in the
            form ``loss_fn`` takes.
        loss_fn (Callable): ``(model, batch) -> (loss, measured)``, ``measured`` a dict of
            numbers to record for the step.
        steps (int): the number of steps.
        lr (float): the peak learning rate.
        weight_decay (float): AdamW's weight decay, at least 0. Default: ``0.01``.
        threads (int, optional): CPU threads while training. Default: ``1`` (``None`` keeps the
            current count).
        after_step (Callable, optional): called with each step's record, to log or evaluate
            (restore the training mode if it changes it). Default: ``None``.

    Returns:
        list[dict]: one record per step.

    Examples::

        >>> model = nn.Linear(2, 1)
        >>> data = [(torch.randn(8, 2), torch.randn(8, 1)) for _ in range(3)]
        >>> def loss_fn(model, batch):
        ...     x, y = batch
        ...     return F.mse_loss(model(x), y), {}
        >>> [row["step"] for row in train(model, data, loss_fn, steps=3, lr=0.1)]
        [1, 2, 3]
    """
    _check_train(model, batches, loss_fn, steps, lr, weight_decay, threads, after_step)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps)
    history, start, was_training = [], time.perf_counter(), model.training
    with num_threads(threads or torch.get_num_threads()):
        model.train()
        try:
            for step, batch in zip(range(1, steps + 1), batches, strict=False):
                loss, measured = loss_fn(model, batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
                row = {"step": step, "loss": loss.item(), **measured}
                row["seconds"] = time.perf_counter() - start
                history.append(row)
                if after_step is not None:
                    after_step(row)
        except BaseException:  # a refused batch (bad ids): the mode is restored
            model.train(was_training)
            raise
    if len(history) < steps:
        raise ValueError(f"batches ran out after {len(history)} of steps={steps} steps")
    return history


def _check_train(model, batches, loss_fn, steps, lr, weight_decay, threads, after_step) -> None:
    """The checks of :func:`train`, before any step."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module; got {type(model).__name__}")
    if not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable of batches; got {type(batches).__name__}")
    after = callable if after_step is None else after_step  # None: nothing to call
    for name, f in (("loss_fn", loss_fn), ("after_step", after)):
        if not callable(f):
            raise TypeError(f"{name} must be callable; got {type(f).__name__}")
    check_int(steps, "steps")
    check_positive(lr, "lr")
    check_float(weight_decay, "weight_decay")
    if weight_decay < 0 or lr > torch.finfo(torch.float32).max:  # AdamW's step would overflow
        raise ValueError("weight_decay must be non-negative and lr fit in float32; got "
                         f"weight_decay={weight_decay!r}, lr={lr!r}")  # fmt: skip
    check_int(1 if threads is None else threads, "threads")  # None: the current count
    if hasattr(batches, "__len__") and len(batches) < steps:
        raise ValueError(f"batches must hold at least steps={steps} batches; got {len(batches)}")


def _check_examples(tokens, labels) -> None:
    """At least one example, and one label per example."""
    for name, x in (("tokens", tokens), ("labels", labels)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor; got {type(x).__name__}")
    if labels.dim() != 1 or len(labels) != len(tokens):
        raise ValueError(f"labels must be 1-D with one label per sequence of tokens "
                         f"({len(tokens)}); got shape {tuple(labels.shape)}")  # fmt: skip
    if labels.device != tokens.device:
        raise ValueError(f"labels must be on tokens' device ({tokens.device}); got {labels.device}")
    if len(tokens) == 0:
        raise ValueError("tokens must hold at least one sequence; got 0")


@torch.no_grad()
def accuracy(model: nn.Module, tokens: Tensor, labels: Tensor) -> float:
    """Fraction of ``tokens`` that ``model`` classifies as ``labels``, measured in eval mode.

    Args:
        model (nn.Module): returns ``(logits, anything)`` for ``tokens``.
        tokens (Tensor): :math:`(N, L)` token ids.
        labels (Tensor): :math:`(N)` class indices.

    Returns:
        float: the accuracy in [0, 1]; the model's training flag is restored, also when the
        model raises.

    Examples::

        >>> model = AttentionClassifier(20, 2, embed_dim=8, num_heads=2, num_layers=1, max_len=4)
        >>> 0.0 <= accuracy(model, torch.ones(5, 4, dtype=torch.long), torch.zeros(5).long()) <= 1
        True
    """
    _check_examples(tokens, labels)
    was_training = model.training
    model.eval()
    try:
        logits, _ = model(tokens)  # (N, C)
    finally:
        model.train(was_training)
    return (logits.argmax(dim=-1) == labels).float().mean().item()


def train_classifier(
    model: nn.Module,
    tokens: Tensor,
    labels: Tensor,
    *,
    epochs: int = 10,
    batch_size: int = 64,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    val: tuple[Tensor, Tensor] | None = None,
    seed: int = 0,
) -> list[dict]:
    """Train a classifier with cross-entropy, one epoch after another, with :func:`train`.

    Every epoch visits the examples once, shuffled, ``batch_size`` at a time.

    Args:
        model (nn.Module): returns ``(logits, anything)`` for ``tokens``.
        tokens (Tensor): :math:`(N, L)` token ids.
        labels (Tensor): :math:`(N)` class indices.
        epochs (int): passes over the data. Default: ``10``.
        batch_size (int): sentences per step. Default: ``64``.
        lr (float): peak learning rate. Default: ``3e-3``.
        weight_decay (float): AdamW's weight decay. Default: ``0.01``.
        val (tuple, optional): held-out ``(tokens, labels)`` measured after each epoch.
            Default: ``None``.
        seed (int): seed for the shuffling. Default: ``0``.

    Returns:
        list[dict]: per epoch, ``epoch``, ``loss`` (mean training loss), ``train_acc`` (running
        accuracy while training), ``val_acc`` (if ``val``) and ``seconds`` since the start.

    Examples::

        >>> from attention.data import VOCAB, make_dataset
        >>> model = AttentionClassifier(len(VOCAB), 2, embed_dim=8, num_heads=2, num_layers=1,
        ...                             max_len=12)
        >>> history = train_classifier(model, *make_dataset(64), epochs=2)
        >>> [row["epoch"] for row in history]
        [1, 2]
    """
    _check_examples(tokens, labels)
    if val is not None:
        if not (isinstance(val, (tuple, list)) and len(val) == 2):
            raise TypeError(f"val must be a pair (tokens, labels) or None; got {val!r:.60}")
        _check_examples(*val)
    check_int(epochs, "epochs")
    check_int(batch_size, "batch_size")
    check_int(seed, "seed", minimum=0)
    g = torch.Generator().manual_seed(seed)
    per_epoch = -(-len(tokens) // batch_size)

    def batches():
        for _ in range(epochs):
            yield from torch.randperm(len(tokens), generator=g).split(batch_size)

    def loss_fn(model, batch):
        logits, _ = model(tokens[batch])  # (B, C)
        correct = (logits.argmax(-1) == labels[batch]).sum().item()
        return F.cross_entropy(logits, labels[batch]), {"size": len(batch), "correct": correct}

    epochs_done = []

    def after_step(row):
        if row["step"] % per_epoch == 0:  # the end of an epoch
            epochs_done.append({"val_acc": accuracy(model, *val)} if val is not None else {})

    steps = train(
        model, batches(), loss_fn, steps=epochs * per_epoch, lr=lr, weight_decay=weight_decay,
        threads=None, after_step=after_step,
    )  # fmt: skip
    history = []
    for epoch, measured in enumerate(epochs_done, 1):
        rows = steps[(epoch - 1) * per_epoch : epoch * per_epoch]
        loss = sum(r["loss"] * r["size"] for r in rows) / len(tokens)
        correct = sum(r["correct"] for r in rows) / len(tokens)
        history.append({"epoch": epoch, "loss": loss, "train_acc": correct, **measured,
                        "seconds": rows[-1]["seconds"]})  # fmt: skip
    return history


def token_losses(logits: Tensor, tokens: Tensor) -> Tensor:
    """Per-token cross-entropy of the logits at positions 0..L-2 against tokens 1..L-1.

    Every target must be an id in :math:`[0, V)`: cross-entropy's ``ignore_index`` (-100)
    would score 0 silently, so it is refused like any other id outside the vocabulary.

    Args:
        logits (Tensor): the predictions at every position.
        tokens (Tensor): the token ids; position :math:`t + 1` is the target of position
            :math:`t`.

    Shape:
        - logits: :math:`(N, L, V)`; tokens: :math:`(N, L)`
        - Output: :math:`(N, L - 1)`

    Returns:
        Tensor: the loss of every prediction.

    Examples::

        >>> token_losses(torch.zeros(1, 3, 4), torch.tensor([[0, 1, 2]]))  # uniform: log 4
        tensor([[1.3863, 1.3863]])
    """
    check_tensor(logits, "logits", ndim=3)
    N, L, V = logits.shape
    check_tokens(tokens, V, L, device=logits.device)
    if tokens.shape != (N, L) or L < 2:
        raise ValueError(f"tokens must be (N, L) = {(N, L)} as logits, L >= 2 (a prediction "
                         f"and its target); got {tuple(tokens.shape)}")  # fmt: skip
    predicted = logits[:, :-1].reshape(-1, V)  # (N (L - 1), V)
    losses = F.cross_entropy(predicted, tokens[:, 1:].reshape(-1), reduction="none")
    return losses.view(N, L - 1)  # (N, L - 1)


def next_token_losses(model: nn.Module, tokens: Tensor) -> Tensor:
    """The cross-entropy of predicting each next token, per target position, in eval mode.

    Position :math:`t` of the result is the loss of predicting ``tokens[:, t + 1]`` from
    ``tokens[:, :t + 1]``, averaged over the sequences (teacher forcing: the model reads the
    true tokens, never its own predictions).

    Args:
        model (nn.Module): returns ``(logits (N, L, V), anything)`` for ``tokens``.
        tokens (Tensor): :math:`(N, L)` token ids.

    Shape:
        - Output: :math:`(L - 1)`

    Returns:
        Tensor: the mean loss per target position; the model's training flag is restored.

    Examples::

        >>> from attention.data import make_repeated_sequences
        >>> model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
        >>> next_token_losses(model, make_repeated_sequences(4, length=4, vocab_size=8)).shape
        torch.Size([7])
    """
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits, _ = model(tokens)  # (N, L, V)
    finally:
        model.train(was_training)
    return token_losses(logits, tokens).mean(dim=0)  # (L - 1,)


def train_lm(
    model: nn.Module,
    tokens: Tensor,
    *,
    steps: int = 300,
    batch_size: int = 32,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    seed: int = 0,
) -> list[dict]:
    """Train a language model on next-token prediction with :func:`train`.

    Each step draws ``batch_size`` sequences of ``tokens`` at random and minimises the mean
    cross-entropy of every next token, read with teacher forcing (the model sees the true
    prefix at every position). The loss is also split by halves of the sequence: targets
    ``1 .. T - 1`` (the first half, ``T = L // 2``) and ``T + 1 .. L - 1`` (the second half
    after its first token), which on :func:`attention.data.make_repeated_sequences` separates
    what cannot be predicted from what can be copied (target ``T``, the first of the repeat, is
    copyable only when the repeat distance is fixed, so it is in neither).

    Args:
        model (nn.Module): returns ``(logits (N, L, V), anything)`` for ``tokens``.
        tokens (Tensor): :math:`(N, L)` training sequences.
        steps (int): optimiser steps. Default: ``300``.
        batch_size (int): sequences per step. Default: ``32``.
        lr (float): peak learning rate. Default: ``3e-3``.
        weight_decay (float): AdamW's weight decay. Default: ``0.01``.
        seed (int): seed for drawing the batches. Default: ``0``.

    Shape:
        - tokens: :math:`(N, L)`, :math:`L` even for the halves to be the two copies

    Returns:
        list[dict]: per step, ``step``, ``loss`` (the batch's mean), ``first_half`` and
        ``second_half`` (means over targets ``1 .. T - 1`` and ``T + 1 .. L - 1``, when
        ``L >= 4``) and ``seconds`` since the start. The model is left in training mode.

    Examples::

        >>> from attention.data import make_repeated_sequences
        >>> model = DecoderLM(8, embed_dim=16, num_heads=2, num_layers=1, max_len=8)
        >>> data = make_repeated_sequences(64, length=4, vocab_size=8)
        >>> history = train_lm(model, data, steps=3)
        >>> [row["step"] for row in history], sorted(history[0])
        ([1, 2, 3], ['first_half', 'loss', 'second_half', 'seconds', 'step'])
    """
    if not isinstance(tokens, Tensor) or tokens.dim() != 2:
        raise TypeError("tokens must be a 2-D (N, L) tensor of token ids")
    if tokens.shape[0] == 0 or tokens.shape[1] < 2:
        raise ValueError("tokens must hold at least one sequence of at least 2 tokens (a "
                         f"prediction and its target); got {tuple(tokens.shape)}")  # fmt: skip
    check_int(batch_size, "batch_size")
    check_int(seed, "seed", minimum=0)
    g = torch.Generator().manual_seed(seed)
    half = tokens.shape[1] // 2

    def batches():
        while True:
            yield tokens[torch.randint(len(tokens), (batch_size,), generator=g)]  # (B, L)

    def loss_fn(model, batch):
        logits, _ = model(batch)  # (B, L, V)
        losses = token_losses(logits, batch)  # (B, L - 1)
        halves = {
            "first_half": losses[:, : half - 1].mean().item(),
            "second_half": losses[:, half:].mean().item(),
        }
        return losses.mean(), (halves if half >= 2 else {})  # L < 4: a half would be empty

    return train(model, batches(), loss_fn, steps=steps, lr=lr, weight_decay=weight_decay)


def format_history(history: list[dict], *, every: int = 1, keys: tuple[str, ...] = ()) -> str:
    """The progress lines of a training history: one per ``every`` records, and the last.

    Each line shows the record's step (or epoch), loss, ``keys`` and seconds since the start.

    Args:
        history (list[dict]): from :func:`train`, :func:`train_lm` or :func:`train_classifier`.
        every (int): print one record in ``every``. Default: ``1``.
        keys (tuple[str, ...]): more numbers of each record to print. Default: ``()``.

    Returns:
        str: the lines.

    Examples::

        >>> history = [{"step": s, "loss": 1.0 / s, "seconds": 0.1 * s} for s in (1, 2, 3)]
        >>> print(format_history(history, every=2))
        step    2  loss 0.5000  (0.2 s)
        step    3  loss 0.3333  (0.3 s)
    """
    check_int(every, "every")
    if not isinstance(keys, (tuple, list)) or not all(isinstance(k, str) for k in keys):
        raise TypeError(f"keys must be a tuple of str; got {keys!r:.60}")
    for i, row in enumerate(history if isinstance(history, list) else [history], 1):
        printed = not i % every or i == len(history)  # a printed record needs the keys too
        if not (isinstance(row, dict) and {"loss", "seconds", *(keys if printed else ())}
                <= row.keys() and row.keys() & {"step", "epoch"}):  # fmt: skip
            raise ValueError("history must be a list of records with step or epoch, loss, "
                             f"seconds (and {keys} where printed); got {row!r:.60}")  # fmt: skip
    lines = []
    for i, row in enumerate(history, 1):
        if i % every and i != len(history):
            continue
        unit = "epoch" if "epoch" in row else "step"
        parts = [f"{unit} {row[unit]:4d}", f"loss {row['loss']:.4f}"]
        parts += [f"{key.replace('_', ' ')} {row[key]:.4f}" for key in keys]
        lines.append("  ".join(parts) + f"  ({row['seconds']:.1f} s)")
    return "\n".join(lines)
