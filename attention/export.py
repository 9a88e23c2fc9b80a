r"""The course's trained models as ONNX files, for a runtime outside PyTorch (a reader's browser).

:func:`export_onnx` writes a model that reads token ids, :class:`attention.DecoderLM` or
:class:`attention.AttentionClassifier`, to an ONNX file through :func:`torch.onnx.export`
(``torch.export`` underneath), with the sequence length left free and every layer's attention
weights as a second output; an :class:`attention.Seq2SeqTransformer` becomes one graph from the
source and the target so far to the logits of every target position and the weights of its
three attentions, both lengths free, so that a runtime decodes greedily by running it once per
output token. :func:`check_onnx` runs the file in ONNX Runtime and compares it with the
PyTorch model. The package's checks that read a tensor's values (token ids in range)
are skipped while the model is traced (``attention._checks.reads_values``), and run in
every eager call.

This module needs ``onnx``, ``onnxscript`` and ``onnxruntime``; the rest of the package does not
import it.
"""

from pathlib import Path

import torch
from torch import Tensor, nn

from ._checks import check_bool, check_float, check_int, check_tokens
from .classifier import AttentionClassifier
from .language_model import DecoderLM
from .seq2seq import Seq2SeqTransformer

__all__ = ["export_onnx", "check_onnx"]

#: The names of the exported graph's input and outputs.
INPUT, OUTPUTS = "tokens", ("logits", "weights")
#: The same for a :class:`attention.Seq2SeqTransformer`: the source and the target so far in,
#: the logits and the weights of each attention (the fields of :class:`attention.Seq2SeqWeights`)
#: out.
SEQ2SEQ_INPUTS, SEQ2SEQ_OUTPUTS = ("src", "tgt"), ("logits", "encoder", "decoder", "cross")


class _WithWeights(nn.Module):
    """``model(tokens)`` as one graph: the logits and every layer's weights, stacked."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        logits, weights = self.model(tokens, need_weights=True)
        return logits, torch.stack(weights, dim=1)  # layers x (N, H, L, L) -> (N, layers, H, L, L)


class _Seq2SeqWithWeights(nn.Module):
    """``model(src, tgt)`` as one graph: the logits and each attention's weights, stacked."""

    def __init__(self, model: Seq2SeqTransformer):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, tgt: Tensor) -> tuple[Tensor, ...]:
        logits, weights = self.model(src, tgt, need_weights=True)
        # encoder: layers x (N, H, S, S), decoder: (N, H, T, T), cross: (N, H, T, S)
        return logits, *(torch.stack(w, dim=1) for w in weights)  # each (N, layers, H, ., .)


def _check_model(model) -> int:
    """The longest sequence ``model`` reads; a model that reads token ids only."""
    if not isinstance(model, (DecoderLM, AttentionClassifier, Seq2SeqTransformer)):
        raise TypeError(
            "model must be a DecoderLM, an AttentionClassifier or a Seq2SeqTransformer; "
            f"got {type(model).__name__}"
        )
    return model.max_len


def _graph(model: nn.Module) -> tuple[nn.Module, tuple[str, ...], tuple[str, ...]]:
    """The module exported for ``model``, its inputs' names and its outputs'."""
    if isinstance(model, Seq2SeqTransformer):
        return _Seq2SeqWithWeights(model), SEQ2SEQ_INPUTS, SEQ2SEQ_OUTPUTS
    return _WithWeights(model), (INPUT,), OUTPUTS


def _check_inputs(model: nn.Module, tokens) -> tuple[Tensor, ...]:
    """``tokens`` as the graph's inputs, each one sequence of ids that the model reads."""
    if isinstance(model, Seq2SeqTransformer):
        if not (isinstance(tokens, (tuple, list)) and len(tokens) == 2):
            raise TypeError(
                "tokens must be the pair (src, tgt) for a Seq2SeqTransformer; "
                f"got {type(tokens).__name__}"
            )
        names, vocab_sizes = SEQ2SEQ_INPUTS, (model.src_vocab_size, model.tgt_vocab_size)
    else:
        tokens, names, vocab_sizes = (tokens,), (INPUT,), (model.vocab_size,)
    device = next(model.parameters()).device
    for ids, name, vocab_size in zip(tokens, names, vocab_sizes, strict=True):
        check_tokens(ids, vocab_size, model.max_len, name=name, device=device)
        if ids.shape[0] != 1:
            raise ValueError(f"{name} must hold one sequence (1, L); got shape {tuple(ids.shape)}")
    return tuple(tokens)


def export_onnx(model: nn.Module, path, *, example_length: int = 8, verbose: bool = False) -> Path:
    r"""Write ``model`` to the ONNX file ``path``: token ids in, logits and weights out.

    For a :class:`attention.DecoderLM` or an :class:`attention.AttentionClassifier`, the graph
    reads ``tokens`` :math:`(1, L)` for any :math:`1 \le L \le` ``max_len`` and returns the
    logits (:math:`(1, L, V)` for a :class:`attention.DecoderLM`, :math:`(1, C)` for an
    :class:`attention.AttentionClassifier`) and the attention ``weights`` of every layer and
    head, :math:`(1, \text{layers}, H, L, L)`. For an :class:`attention.Seq2SeqTransformer` it
    reads ``src`` :math:`(1, S)` and ``tgt`` :math:`(1, T)`, each of any length from 1 to
    ``max_len``, and returns the ``logits`` :math:`(1, T, V)` of every next target token and
    the weights of the ``encoder`` :math:`(1, \text{layers}, H, S, S)`, of the ``decoder``'s
    self-attention :math:`(1, \text{layers}, H, T, T)` and of its ``cross``-attention
    :math:`(1, \text{layers}, H, T, S)`: greedy decoding runs it once per output token. The
    model is exported in eval mode, and its training mode is restored afterwards.

    Args:
        model (nn.Module): a :class:`attention.DecoderLM`, an
            :class:`attention.AttentionClassifier` or an :class:`attention.Seq2SeqTransformer`.
        path (str or Path): the file to write.
        example_length (int): the length of the example input traced, at least 2 (a length
            of 1 would be taken for a constant); for an :class:`attention.Seq2SeqTransformer`,
            of the example source, at least 3, whose target is traced one token shorter.
            Default: ``8``.
        verbose (bool): print the exporter's progress. Default: ``False``.

    Shape:
        - tokens (the graph's input): :math:`(1, L)` int64; or src :math:`(1, S)` and tgt
          :math:`(1, T)` int64
        - Output (the graph's): logits, and the weights above

    Returns:
        Path: ``path``.

    Examples::

        >>> from attention import DecoderLM
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> path = export_onnx(model, "lm.onnx")  # doctest: +SKIP
    """
    max_len = _check_model(model)
    graph, inputs, outputs = _graph(model)
    check_int(example_length, "example_length", minimum=1 + len(inputs))
    check_bool(verbose, "verbose")
    if example_length > max_len:
        raise ValueError(f"example_length must be at most max_len={max_len}; got {example_length}")
    path = Path(path)
    device = next(model.parameters()).device
    # The target is traced one token shorter than the source: two lengths equal in the example
    # would be taken for one length.
    examples = tuple(torch.zeros(1, example_length - i, dtype=torch.long, device=device)
                     for i in range(len(inputs)))  # fmt: skip
    lengths = [torch.export.Dim(f"{name}_length", min=1, max=max_len) for name in inputs]
    was_training = model.training
    model.eval()
    try:
        program = torch.onnx.export(
            graph.eval(), examples, dynamo=True, verbose=verbose,
            input_names=list(inputs), output_names=list(outputs),
            dynamic_shapes=tuple({1: length} for length in lengths),
        )  # fmt: skip
    finally:
        model.train(was_training)
    program.save(str(path))
    return path


def check_onnx(path, model: nn.Module, tokens, *, atol: float = 1e-4) -> float:
    r"""Run the ONNX file ``path`` in ONNX Runtime on ``tokens`` and compare it with ``model``.

    Args:
        path (str or Path): a file written by :func:`export_onnx` from ``model``.
        model (nn.Module): the PyTorch model, run in eval mode.
        tokens (Tensor or tuple): token ids, one sequence; for an
            :class:`attention.Seq2SeqTransformer`, the pair ``(src, tgt)``.
        atol (float): the largest absolute difference allowed in the logits and in every
            output's weights. Default: ``1e-4``.

    Shape:
        - tokens: :math:`(1, L)` integer ids; or src :math:`(1, S)` and tgt :math:`(1, T)`

    Returns:
        float: the largest absolute difference found; raises ``AssertionError`` above ``atol``.

    Examples::

        >>> check_onnx("lm.onnx", model, torch.tensor([[1, 2, 3]]))  # doctest: +SKIP
        4.76837158203125e-07
    """
    import onnxruntime

    _check_model(model)
    inputs = _check_inputs(model, tokens)
    check_float(atol, "atol", positive=True)
    graph, names, outputs = _graph(model)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feed = {name: ids.cpu().long().numpy() for name, ids in zip(names, inputs, strict=True)}
    got = session.run(list(outputs), feed)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            expected = graph(*inputs)
    finally:
        model.train(was_training)
    difference = 0.0
    for name, a, b in zip(outputs, got, expected, strict=True):
        if a.shape != tuple(b.shape):
            raise AssertionError(f"{path}: ONNX Runtime's {name} is {a.shape}, PyTorch's "
                                 f"{tuple(b.shape)}")  # fmt: skip
        error = (torch.from_numpy(a).double() - b.cpu().double()).abs().max().item()
        difference = max(difference, error)
    if not difference <= atol:
        raise AssertionError(f"{path}: ONNX Runtime differs from PyTorch by {difference:.3g}")
    return difference
