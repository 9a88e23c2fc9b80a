"""attention.export: the models that read token ids, as ONNX files that ONNX Runtime runs with
the same numbers; the checks that read values skip only while a model is traced."""

import pytest
import torch

from attention import AttentionClassifier, DecoderLM
from attention._checks import reads_values
from attention.export import check_onnx, export_onnx

pytest.importorskip("onnxruntime", reason="attention.export needs onnxruntime (requirements.txt)")


def _models():
    torch.manual_seed(0)
    lm = DecoderLM(13, embed_dim=16, num_heads=4, num_layers=2, max_len=24, positions="rotary")
    classifier = AttentionClassifier(13, 3, embed_dim=16, num_heads=2, num_layers=2, max_len=24)
    return {"DecoderLM": lm, "AttentionClassifier": classifier}


@pytest.mark.parametrize("name", ["DecoderLM", "AttentionClassifier"])
def test_the_exported_model_gives_pytorch_numbers_at_every_length(tmp_path, name):
    model = _models()[name].train()
    path = export_onnx(model, tmp_path / f"{name}.onnx")
    assert model.training  # restored
    for length in (1, 5, 24):  # the length is free, up to max_len
        tokens = torch.randint(13, (1, length))
        assert check_onnx(path, model, tokens) <= 1e-4


def test_the_value_checks_still_fire_in_eager_calls():
    assert reads_values()
    lm, classifier = _models().values()
    with pytest.raises(ValueError, match=r"tokens ids must lie in \[0, vocab_size=13\)"):
        lm(torch.tensor([[1, 13]]))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, vocab_size=13\)"):
        classifier(torch.tensor([[-1, 2]]))


def test_values_are_not_read_while_tracing():
    seen = []

    def probe(x):
        seen.append(reads_values())
        return x + 1

    torch.compile(probe, backend="eager", fullgraph=True)(torch.zeros(2))
    assert seen == [False]


def test_bad_arguments_are_refused(tmp_path):
    lm = _models()["DecoderLM"]
    with pytest.raises(TypeError, match=r"model must be a DecoderLM or an AttentionClassifier"):
        export_onnx(torch.nn.Linear(2, 2), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match=r"example_length must be at most max_len=24; got 25"):
        export_onnx(lm, tmp_path / "x.onnx", example_length=25)
    with pytest.raises(ValueError, match=r"example_length must be at least 2"):
        export_onnx(lm, tmp_path / "x.onnx", example_length=1)
    with pytest.raises(ValueError, match=r"tokens must hold one sequence"):
        check_onnx(tmp_path / "x.onnx", lm, torch.zeros(2, 3, dtype=torch.long))
