"""head_view_data: one example's weights in every layer and head, rounded, for the site's view."""

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention import causal_mask, scaled_dot_product_attention
from attention.head_view import DECIMALS, HEAD_VIEWS, MAX_TOKENS, head_view_data, save_head_view


def _weights(layers, H, L, S, *, causal=False, seed=0):
    """Softmax weights (layers, H, L, S) of random scores, causal or not."""
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(layers, H, L, 4, generator=generator)  # (layers, H, L, D)
    k = torch.randn(layers, H, S, 4, generator=generator)  # (layers, H, S, D)
    mask = causal_mask(L, S) if causal else None
    return scaled_dot_product_attention(q, k, k, mask)[1]  # (layers, H, L, S)


def _padded(data):
    """The JSON's weights with each row's dropped trailing zeros put back: (layers, H, L, S)."""
    S = len(data["keys"])
    return torch.tensor(
        [
            [[row + [0.0] * (S - len(row)) for row in head] for head in layer]
            for layer in data["weights"]
        ],
        dtype=torch.float64,
    )


def test_sizes_labels_and_every_weight_to_four_decimals():
    weights = _weights(2, 3, 4, 5)
    data = head_view_data(list("abcd"), weights, key_tokens=list("vwxyz"))
    assert (data["layers"], data["heads"]) == (2, 3)
    assert data["queries"] == list("abcd") and data["keys"] == list("vwxyz")
    padded = _padded(data)
    assert padded.shape == (2, 3, 4, 5)
    assert (padded - weights).abs().max() <= 0.5 * 10**-DECIMALS + 1e-7
    grid = padded * 10**DECIMALS  # whole numbers: every weight has at most 4 decimals
    assert (grid - grid.round()).abs().max() <= 1e-6


def test_a_causal_row_stops_at_its_own_position():
    data = head_view_data(list("abcde"), _weights(1, 2, 5, 5, causal=True))
    assert [len(row) for row in data["weights"][0][1]] == [1, 2, 3, 4, 5]


def test_a_list_of_layers_as_a_model_returns_them_and_self_attention_keys():
    per_layer = list(_weights(3, 2, 4, 4))  # 3 x (H, L, S)
    data = head_view_data(["w", "x", "y", "z"], per_layer)
    assert data["layers"] == 3 and data["keys"] == ["w", "x", "y", "z"]
    assert torch.allclose(_padded(data), torch.stack(per_layer).double(), atol=0.5e-4)


def test_arrays_are_read_and_the_data_is_json():
    weights = _weights(1, 1, 3, 3).numpy()
    data = head_view_data(["a", "b", "c"], weights)
    assert json.loads(json.dumps(data)) == data
    assert isinstance(data["weights"][0][0][0][0], float)


@settings(max_examples=30, deadline=None)
@given(
    layers=st.integers(1, 3),
    H=st.integers(1, 4),
    L=st.integers(1, 9),
    S=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_rows_sum_to_one_within_the_rounding(layers, H, L, S, seed):
    causal = L <= S and seed % 2 == 0
    data = head_view_data(
        [f"q{i}" for i in range(L)],
        _weights(layers, H, L, S, causal=causal, seed=seed),
        key_tokens=[f"k{j}" for j in range(S)],
    )
    sums = _padded(data).sum(-1)  # (layers, H, L)
    assert (sums - 1).abs().max() <= S * 0.5 * 10**-DECIMALS + 1e-6


def test_save_keeps_the_example_by_name_and_replaces_it():
    try:
        save_head_view("test-view", ["a", "b"], torch.full((1, 1, 2, 2), 0.5))
        save_head_view("test-view", ["c", "d"], torch.full((1, 1, 2, 2), 0.5))
        assert HEAD_VIEWS["test-view"]["queries"] == ["c", "d"]
    finally:
        HEAD_VIEWS.pop("test-view", None)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (
            {"weights": torch.rand(2, 2, 2)},
            ValueError,
            ["weights", "(layers, H, L, S)", "(2, 2, 2)"],
        ),
        ({"weights": torch.zeros(1, 1, 0, 2)}, ValueError, ["weights", "nothing"]),
        ({"weights": torch.full((1, 1, 2, 2), 1.5)}, ValueError, ["weights", "[0, 1]", "1.5"]),
        ({"weights": torch.full((1, 1, 2, 2), float("nan"))}, ValueError, ["weights", "finite"]),
        ({"weights": torch.rand(1, 1, 2, 2, dtype=torch.cfloat)}, TypeError, ["weights", "real"]),
        ({"weights": "0.5"}, TypeError, ["weights", "numbers", "str"]),
        (
            {"weights": [torch.rand(1, 2, 2), torch.rand(2, 2, 2)]},
            ValueError,
            ["weights", "(1, 2, 2)"],
        ),
        ({"tokens": ["a"]}, ValueError, ["tokens", "2 labels", "got 1"]),
        ({"tokens": "ab"}, TypeError, ["tokens", "sequence", "str"]),
        ({"tokens": [1, 2]}, TypeError, ["tokens", "str labels", "int"]),
        ({"key_tokens": ["a", "b", "c"]}, ValueError, ["key_tokens", "2 labels", "got 3"]),
        ({"key_tokens": [0, 1]}, TypeError, ["key_tokens", "str labels", "int"]),
        ({"weights": torch.rand(1, 1, 2, 3)}, ValueError, ["key_tokens", "S = 3", "None"]),
        (
            {
                "weights": torch.rand(1, 1, 2, MAX_TOKENS + 1),
                "key_tokens": ["k"] * (MAX_TOKENS + 1),
            },
            ValueError,
            ["weights", f"at most {MAX_TOKENS}", f"S = {MAX_TOKENS + 1}"],
        ),
    ],
)
def test_bad_input_names_the_argument_what_was_expected_and_what_came(kwargs, error, words):
    arguments = {"tokens": ["a", "b"], "weights": torch.full((1, 1, 2, 2), 0.5)} | kwargs
    with pytest.raises(error) as raised:
        head_view_data(**arguments)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


@pytest.mark.parametrize("name", ["", "Page 11", "11_sentiment", "-x", None, 11])
def test_a_name_that_cannot_be_a_file_name_is_refused(name):
    with pytest.raises(ValueError, match="name must be lower-case words"):
        save_head_view(name, ["a"], torch.ones(1, 1, 1, 1))
    assert name not in HEAD_VIEWS


def test_an_array_of_labels_is_read():
    data = head_view_data(np.array(["a", "b"]), torch.full((1, 1, 2, 2), 0.5))
    assert data["queries"] == ["a", "b"]
