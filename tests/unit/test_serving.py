"""Serving: continuous batching and the static batcher give every request the tokens it gets
alone, within their memory budget; samples sharing a prompt's blocks equal samples that do
not; and bad requests are refused."""

import pytest
import torch

from attention.serving import Request, memory_use, sample_many, serve

from .helpers import small_lm as _lm


def _requests(n=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, 7, (n, 2), generator=g).tolist()  # prompt and output, ragged
    return [Request(torch.randint(11, (p,), generator=g), t) for p, t in lengths]


@pytest.mark.parametrize("policy", ["continuous", "static"])
@pytest.mark.parametrize("positions", ["learned", "rotary", "alibi"])
def test_every_request_gets_its_tokens_alone(policy, positions):
    model = _lm(positions, 2)
    requests = _requests()
    outs, stats = serve(model, requests, num_blocks=8, block_size=2, policy=policy, trace=True)
    for out, r in zip(outs, requests, strict=True):
        alone = model.generate(r.prompt[None], r.max_new_tokens)[0, len(r.prompt) :]
        assert torch.equal(out, alone)
    assert stats.generated == sum(r.max_new_tokens for r in requests)
    assert stats.peak_blocks <= stats.peak_reserved <= 8
    assert len(stats.trace) == stats.steps and all(len(t) == 8 for t in stats.trace)


def test_continuous_batching_takes_fewer_steps_than_static():
    model = _lm("rotary", 1)
    requests = [Request(torch.tensor([1, 2]), t) for t in (10, 1, 1, 1, 1, 1)]
    # Blocks of 2: the long request holds 6 blocks, each short one 2; 12 blocks in all.
    outs, cont = serve(model, requests, num_blocks=12, block_size=2)
    _, static = serve(model, requests, num_blocks=12, block_size=2, policy="static")
    # Continuous: the long one and three short ones, then the other two as those three leave.
    assert cont.steps == 10 and cont.peak_reserved == 12
    assert cont.positions == 4 * 2 + 3 * 2 + 8 * 1  # padded to the longest row of each call
    # Static: a rectangle of 2 + 10 positions (6 blocks) a row holds 2 rows; then the 4 others.
    assert static.steps == 10 + 1 and static.peak_reserved == 12
    assert static.positions == 2 * 2 + 9 * 2 + 4 * 2  # the short row runs until the long one
    assert [len(o) for o in outs] == [10, 1, 1, 1, 1, 1]


def test_paging_reserves_less_than_one_block_more_per_request_than_its_tokens():
    model = _lm("rotary", 1)
    _, stats = serve(model, _requests(), num_blocks=8, block_size=3)
    for n, tokens, blocks, promised in stats.held:
        assert tokens <= 3 * blocks < tokens + 3 * n and blocks <= promised <= 8
    use = memory_use(stats, block_size=3, max_len=12)
    assert use["tokens"] <= use["paged"] < use["preallocated"] and 0 <= use["waste"] < 3
    assert use["preallocated"] == 12 * sum(n for n, *_ in stats.held) / stats.steps


def test_a_static_batch_waits_for_its_slowest_row():
    model = _lm("learned", 1)
    requests = [Request(torch.tensor([3]), 1), Request(torch.tensor([4, 5, 6]), 4)]
    _, stats = serve(model, requests, num_blocks=4, block_size=4, policy="static", trace=True)
    assert stats.steps == 4 and stats.positions == 2 * 3 + 3 * 2
    assert all(set(t) - {-1} == {0, 1} for t in stats.trace)  # the short row stays, and grows
    assert [sum(b != -1 for b in t) for t in stats.trace] == [2, 2, 3, 3]


@torch.no_grad()
def test_samples_sharing_a_prompt_equal_samples_that_do_not():
    model = _lm("rotary", 2)
    prompt = torch.tensor([1, 2, 3, 4, 5, 6, 7])
    runs = {}
    for share in (True, False):
        g = torch.Generator().manual_seed(0)
        runs[share] = sample_many(model, prompt, 4, 5, block_size=2, share=share, generator=g)
    assert torch.equal(runs[True][0], runs[False][0])
    # 7 + 4 written positions: 6 blocks each apart; shared, the prompt's 3 full blocks once.
    assert runs[False][1] == 4 * 6 and runs[True][1] == 3 + 4 * 3


def test_bad_requests_are_refused():
    model = _lm("rotary", 1)
    with pytest.raises(ValueError, match="prompt"):
        Request(torch.tensor([]), 1)
    with pytest.raises(ValueError, match="max_new_tokens"):
        Request(torch.tensor([1]), 0)
    with pytest.raises(ValueError, match="more than max_len=12 or the pool's 4 blocks"):
        serve(model, [Request(torch.tensor([1] * 8), 2)], num_blocks=4, block_size=2)
    with pytest.raises(ValueError, match="ids must lie"):
        serve(model, [Request(torch.tensor([11]), 2)], num_blocks=4, block_size=2)
    with pytest.raises(ValueError, match="policy"):
        serve(model, [Request(torch.tensor([1]), 2)], num_blocks=4, block_size=2, policy="x")
    with pytest.raises(TypeError, match="Request"):
        serve(model, [(torch.tensor([1]), 2)], num_blocks=4, block_size=2)
