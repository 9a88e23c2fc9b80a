"""AttentionClassifier: padding never attended to, weights per layer, the padding embedding."""

import torch

from attention import AttentionClassifier
from attention.data import CLASSES, PAD_ID, VOCAB, encode, make_dataset

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
