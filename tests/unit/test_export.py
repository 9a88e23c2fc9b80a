"""attention.export: the models that read token ids, and the encoder-decoder, as ONNX files that
ONNX Runtime runs with the same numbers; the checks that read values skip only while a model is
traced."""

import pytest
import torch

from attention import AttentionClassifier, DecoderLM, Seq2SeqTransformer
from attention._checks import reads_values
from attention.export import SEQ2SEQ_OUTPUTS, check_onnx, export_onnx

pytest.importorskip("onnxruntime", reason="attention.export needs onnxruntime (requirements.txt)")


def _models():
    torch.manual_seed(0)
    lm = DecoderLM(13, embed_dim=16, num_heads=4, num_layers=2, max_len=24, positions="rotary")
    classifier = AttentionClassifier(13, 3, embed_dim=16, num_heads=2, num_layers=2, max_len=24)
    seq2seq = Seq2SeqTransformer(17, 11, embed_dim=16, num_heads=2, num_encoder_layers=1,
                                 num_decoder_layers=2, ffn_dim=32, max_len=24)  # fmt: skip
    return {"DecoderLM": lm, "AttentionClassifier": classifier, "Seq2SeqTransformer": seq2seq}


@pytest.mark.parametrize("name", ["DecoderLM", "AttentionClassifier"])
def test_the_exported_model_gives_pytorch_numbers_at_every_length(tmp_path, name):
    model = _models()[name].train()
    path = export_onnx(model, tmp_path / f"{name}.onnx")
    assert model.training  # restored
    for length in (1, 5, 24):  # the length is free, up to max_len
        tokens = torch.randint(13, (1, length))
        assert check_onnx(path, model, tokens) <= 1e-4


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory):
    """The small encoder-decoder, exported once in training mode, and its file."""
    model = _models()["Seq2SeqTransformer"].train()
    path = export_onnx(model, tmp_path_factory.mktemp("export") / "seq2seq.onnx")
    assert model.training  # restored
    return model.eval(), path  # its dropout off, for the tests' own eager calls


def test_the_exported_encoder_decoder_gives_pytorch_numbers_at_every_pair_of_lengths(seq2seq):
    model, path = seq2seq
    for S, T in ((1, 1), (5, 3), (3, 5), (24, 24), (24, 1)):  # each length free, up to max_len
        src, tgt = torch.randint(1, 17, (1, S)), torch.randint(11, (1, T))
        assert check_onnx(path, model, (src, tgt)) <= 1e-4
    with_padding = torch.tensor([[3, 4, 5, 0, 0]])  # the padding is masked in the graph too
    assert check_onnx(path, model, (with_padding, torch.tensor([[1, 4]]))) <= 1e-4


def test_the_encoder_decoder_in_float64_is_the_same_function(tmp_path):
    """In float64 the graph agrees to about 3e-9 (a few of its constants, such as the scale,
    are float32 numbers, with relative errors near 1e-8), a thousand times closer than float32
    rounding allows and far from any real difference in the computation."""
    model = _models()["Seq2SeqTransformer"].double()
    path = export_onnx(model, tmp_path / "seq2seq64.onnx")
    src, tgt = torch.randint(1, 17, (1, 7)), torch.randint(11, (1, 4))
    assert check_onnx(path, model, (src, tgt), atol=1e-7) <= 1e-7


def test_greedy_decoding_over_the_graph_writes_what_generate_writes(seq2seq):
    """The graph run once per output token, as the browser runs it, each time on the target so
    far, picks the tokens of :meth:`Seq2SeqTransformer.generate`; its cross-attention rows are
    those of the model read with teacher forcing on its own output."""
    import onnxruntime

    model, path = seq2seq
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    bos, eos = 1, 2
    for src in (torch.tensor([[3, 9, 4, 16, 5]]), torch.tensor([[7]])):
        expected = model.generate(src, 9, bos_id=bos, eos_id=eos)[0].tolist()
        tokens = [bos]
        while len(tokens) < 10 and tokens[-1] != eos:
            feed = {"src": src.numpy(), "tgt": torch.tensor([tokens]).numpy()}
            logits, *_, cross = session.run(list(SEQ2SEQ_OUTPUTS), feed)
            scores = torch.from_numpy(logits[0, -1])
            scores[model.pad_id] = -torch.inf  # generate never writes the padding
            tokens.append(int(scores.argmax()))
        assert tokens == expected[: len(tokens)] and len(tokens) == len(expected)
        with torch.no_grad():
            _, weights = model(src, torch.tensor([tokens[:-1]]), need_weights=True)
        assert torch.allclose(torch.from_numpy(cross[0]),  # the last run read all but eos
                              torch.stack(weights.cross, dim=1)[0], atol=1e-5)  # fmt: skip


def test_the_value_checks_still_fire_in_eager_calls():
    assert reads_values()
    lm, classifier, seq2seq = _models().values()
    with pytest.raises(ValueError, match=r"src ids must lie in \[0, vocab_size=17\)"):
        seq2seq(torch.tensor([[1, 17]]), torch.tensor([[1]]))
    with pytest.raises(ValueError, match=r"tgt ids must lie in \[0, vocab_size=11\)"):
        seq2seq(torch.tensor([[1, 2]]), torch.tensor([[-1]]))
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
    expected = r"model must be a DecoderLM, an AttentionClassifier or a Seq2SeqTransformer"
    with pytest.raises(TypeError, match=expected):
        export_onnx(torch.nn.Linear(2, 2), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match=r"example_length must be at most max_len=24; got 25"):
        export_onnx(lm, tmp_path / "x.onnx", example_length=25)
    with pytest.raises(ValueError, match=r"example_length must be at least 2"):
        export_onnx(lm, tmp_path / "x.onnx", example_length=1)
    with pytest.raises(ValueError, match=r"tokens must hold one sequence"):
        check_onnx(tmp_path / "x.onnx", lm, torch.zeros(2, 3, dtype=torch.long))
    seq2seq = _models()["Seq2SeqTransformer"]
    with pytest.raises(ValueError, match=r"example_length must be at least 3"):
        export_onnx(seq2seq, tmp_path / "x.onnx", example_length=2)
    src, tgt = torch.tensor([[3, 4]]), torch.tensor([[1]])
    with pytest.raises(TypeError, match=r"tokens must be the pair \(src, tgt\)"):
        check_onnx(tmp_path / "x.onnx", seq2seq, src)
    with pytest.raises(ValueError, match=r"tgt must hold one sequence"):
        check_onnx(tmp_path / "x.onnx", seq2seq, (src, torch.ones(2, 1, dtype=torch.long)))
    with pytest.raises(ValueError, match=r"src length 25 is longer than max_len=24"):
        check_onnx(tmp_path / "x.onnx", seq2seq, (torch.ones(1, 25, dtype=torch.long), tgt))
    with pytest.raises(ValueError, match=r"tgt ids must lie in \[0, vocab_size=11\)"):
        check_onnx(tmp_path / "x.onnx", seq2seq, (src, torch.tensor([[11]])))
    with pytest.raises(ValueError, match=r"atol must be"):
        check_onnx(tmp_path / "x.onnx", seq2seq, (src, tgt), atol=-1.0)


def test_a_size_traced_by_torch_export_passes_the_int_checks():
    """The masks' size checks take the symbolic sizes of ``torch.export``, so the encoder-decoder
    exports without falling back to another tracer; a float is still refused."""
    from attention import causal_mask

    class Mask(torch.nn.Module):
        def forward(self, x):
            return causal_mask(x.shape[1])

    program = torch.export.export(Mask(), (torch.zeros(1, 5),), strict=False,
                                  dynamic_shapes=({1: torch.export.Dim("L", max=32)},))  # fmt: skip
    assert torch.equal(program.module()(torch.zeros(1, 7)), causal_mask(7))
    with pytest.raises(TypeError, match=r"L must be an int; got float"):
        causal_mask(3.0)
