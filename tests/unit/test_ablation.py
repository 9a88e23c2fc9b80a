"""attention.ablation: switching a head off, with zeros or with its mean output."""

import pytest
import torch

from attention import CausalSelfAttention, DecoderLM, MultiHeadAttention
from attention.ablation import head_ablated, mean_head_outputs

from .helpers import assert_close, randn


@pytest.mark.parametrize("head", [0, 2])
def test_zero_ablation_removes_exactly_one_heads_columns(head):
    attn = MultiHeadAttention(12, 3, dtype=torch.float64).eval()
    x = randn(2, 5, 12)
    captured = []
    attn.out_proj.register_forward_hook(lambda m, args, out: captured.append(args[0]))
    full, _ = attn(x)
    with head_ablated(attn, head):
        without, _ = attn(x)
    merged = captured[0].clone()
    merged[..., 4 * head : 4 * (head + 1)] = 0
    assert_close(without, attn.out_proj(merged))
    assert_close(attn(x)[0], full)  # the hook is gone


def test_mean_ablation_puts_the_heads_mean_output_in_its_place():
    model = DecoderLM(10, embed_dim=8, num_heads=2, num_layers=1, max_len=6).double()
    attn = model.blocks[0].self_attn
    tokens = torch.randint(10, (4, 6))
    means = mean_head_outputs(model, attn, tokens)
    assert means.shape == (2, 4) and model.training
    captured = []
    handle = attn.out_proj.register_forward_pre_hook(lambda m, args: captured.append(args[0]))
    model.eval()(tokens)
    handle.remove()
    assert_close(means, captured[0].reshape(-1, 8).mean(0).view(2, 4))
    seen = []  # what out_proj reads, after the ablation's pre-hook
    handle = attn.out_proj.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    with head_ablated(attn, 1, replacement=means[1]):
        model(tokens)
    handle.remove()
    assert_close(seen[0][..., 4:], means[1].expand(4, 6, 4))
    assert_close(seen[0][..., :4], captured[0][..., :4])


def test_the_hook_is_removed_when_the_block_raises():
    attn = CausalSelfAttention(8, 2)
    with pytest.raises(ZeroDivisionError), head_ablated(attn, 0):
        raise ZeroDivisionError
    assert not attn.out_proj._forward_pre_hooks


@pytest.mark.parametrize(
    "attn, head, kwargs, error, message",
    [
        ("mha", 3, {}, ValueError, r"head must be in \[0, num_heads=3\); got 3"),
        ("mha", -1, {}, ValueError, r"head must be non-negative; got -1"),
        ("mha", 1.0, {}, TypeError, r"head must be an int; got float"),
        ("mha", 0, {"replacement": torch.zeros(5)}, ValueError, r"replacement must have D=4"),
        ("linear", 0, {}, TypeError, r"attn must be an attention module with an out_proj"),
    ],
)
def test_bad_ablations_are_refused(attn, head, kwargs, error, message):
    module = MultiHeadAttention(12, 3) if attn == "mha" else torch.nn.Linear(2, 2)
    with pytest.raises(error, match=message), head_ablated(module, head, **kwargs):
        pass


def test_mean_head_outputs_refuses_an_attention_the_model_does_not_run():
    # An attention of another model failed inside torch.cat, on an empty list of outputs.
    model = DecoderLM(10, embed_dim=8, num_heads=2, num_layers=1, max_len=4).train()
    other = DecoderLM(10, embed_dim=8, num_heads=2, num_layers=1, max_len=4)
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match=r"attn must be a module of model"):
        mean_head_outputs(model, other.blocks[0].self_attn, tokens)
    with pytest.raises(TypeError, match=r"model must be an nn.Module; got function"):
        mean_head_outputs(lambda t: t, model.blocks[0].self_attn, tokens)
    # A module of the model that this call does not reach.
    model.spare = CausalSelfAttention(8, 2)
    with pytest.raises(ValueError, match=r"attn did not run during model\(\*inputs\)"):
        mean_head_outputs(model, model.spare, tokens)
    assert model.training
