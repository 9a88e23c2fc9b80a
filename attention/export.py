r"""The course's trained models as ONNX files, for a runtime outside PyTorch (a reader's browser).

:func:`export_onnx` writes a model that reads token ids, :class:`attention.DecoderLM` or
:class:`attention.AttentionClassifier`, to an ONNX file through :func:`torch.onnx.export`
(``torch.export`` underneath), with the sequence length left free and every layer's attention
weights as a second output; :func:`check_onnx` runs the file in ONNX Runtime and compares it
with the PyTorch model. The package's checks that read a tensor's values (token ids in range)
are skipped while the model is traced (``attention._checks.reads_values``), and run in
every eager call.

This module needs ``onnx``, ``onnxscript`` and ``onnxruntime``; the rest of the package does not
import it.
"""

from pathlib import Path

import torch
from torch import Tensor, nn

from ._checks import check_bool, check_int, check_tokens
from .classifier import AttentionClassifier
from .language_model import DecoderLM

__all__ = ["export_onnx", "check_onnx"]

#: The names of the exported graph's input and outputs.
INPUT, OUTPUTS = "tokens", ("logits", "weights")


class _WithWeights(nn.Module):
    """``model(tokens)`` as one graph: the logits and every layer's weights, stacked."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        logits, weights = self.model(tokens, need_weights=True)
        return logits, torch.stack(weights, dim=1)  # layers x (N, H, L, L) -> (N, layers, H, L, L)


def _check_model(model) -> int:
    """The longest sequence ``model`` reads; a model that reads token ids only."""
    if not isinstance(model, (DecoderLM, AttentionClassifier)):
        raise TypeError(
            f"model must be a DecoderLM or an AttentionClassifier; got {type(model).__name__}"
        )
    return model.max_len


def export_onnx(model: nn.Module, path, *, example_length: int = 8, verbose: bool = False) -> Path:
    r"""Write ``model`` to the ONNX file ``path``: token ids in, logits and weights out.

    The graph reads ``tokens`` :math:`(1, L)` for any :math:`1 \le L \le` ``max_len`` and
    returns the logits (:math:`(1, L, V)` for a :class:`attention.DecoderLM`, :math:`(1, C)`
    for an :class:`attention.AttentionClassifier`) and the attention weights of every layer
    and head, :math:`(1, \text{layers}, H, L, L)`. The model is exported in eval mode, and its
    training mode is restored afterwards.

    Args:
        model (nn.Module): a :class:`attention.DecoderLM` or :class:`attention.AttentionClassifier`.
        path (str or Path): the file to write.
        example_length (int): the length of the example input traced, at least 2 (a length of 1
            would be taken for a constant). Default: ``8``.
        verbose (bool): print the exporter's progress. Default: ``False``.

    Shape:
        - tokens (the graph's input): :math:`(1, L)` int64
        - Output (the graph's): logits, and weights :math:`(1, \text{layers}, H, L, L)`

    Returns:
        Path: ``path``.

    Examples::

        >>> from attention import DecoderLM
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=2, max_len=8)
        >>> path = export_onnx(model, "lm.onnx")  # doctest: +SKIP
    """
    max_len = _check_model(model)
    check_int(example_length, "example_length", minimum=2)
    check_bool(verbose, "verbose")
    if example_length > max_len:
        raise ValueError(f"example_length must be at most max_len={max_len}; got {example_length}")
    path = Path(path)
    device = next(model.parameters()).device
    example = torch.zeros(1, example_length, dtype=torch.long, device=device)
    length = torch.export.Dim("L", min=1, max=max_len)
    was_training = model.training
    model.eval()
    try:
        program = torch.onnx.export(
            _WithWeights(model).eval(), (example,), dynamo=True, verbose=verbose,
            input_names=[INPUT], output_names=list(OUTPUTS),
            dynamic_shapes=({1: length},),
        )  # fmt: skip
    finally:
        model.train(was_training)
    program.save(str(path))
    return path


def check_onnx(path, model: nn.Module, tokens: Tensor, *, atol: float = 1e-4) -> float:
    r"""Run the ONNX file ``path`` in ONNX Runtime on ``tokens`` and compare it with ``model``.

    Args:
        path (str or Path): a file written by :func:`export_onnx` from ``model``.
        model (nn.Module): the PyTorch model, run in eval mode.
        tokens (Tensor): token ids, one sequence.
        atol (float): the largest absolute difference allowed in the logits and the weights.
            Default: ``1e-4``.

    Shape:
        - tokens: :math:`(1, L)` integer ids

    Returns:
        float: the largest absolute difference found; raises ``AssertionError`` above ``atol``.

    Examples::

        >>> check_onnx("lm.onnx", model, torch.tensor([[1, 2, 3]]))  # doctest: +SKIP
        4.76837158203125e-07
    """
    import onnxruntime

    max_len = _check_model(model)
    check_tokens(tokens, model.vocab_size, max_len, device=next(model.parameters()).device)
    if tokens.shape[0] != 1:
        raise ValueError(f"tokens must hold one sequence (1, L); got shape {tuple(tokens.shape)}")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(list(OUTPUTS), {INPUT: tokens.cpu().long().numpy()})
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            expected = _WithWeights(model)(tokens)
    finally:
        model.train(was_training)
    difference = max(
        (torch.from_numpy(a) - b.cpu().float()).abs().max().item()
        for a, b in zip(got, expected, strict=True)
    )
    if not difference <= atol:
        raise AssertionError(f"{path}: ONNX Runtime differs from PyTorch by {difference:.3g}")
    return difference
