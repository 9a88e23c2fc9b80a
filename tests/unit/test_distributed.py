"""Context parallelism on real local processes: every strategy against single-process attention.

Each world size is one spawn of gloo processes (127.0.0.1 only) that runs every case, because
starting the processes costs far more than the cases: the three strategies, in the contiguous
and the zigzag layout, causal and not, forward and backward, in float64.
"""

import time

import pytest
import torch
import torch.distributed as dist

from attention.distributed import (
    STRATEGIES,
    _fail_on_rank,
    all_gather_attention,
    bytes_formula,
    gather_sequence,
    ring_attention,
    run_cases,
    shard_sequence,
    spawn,
    ulysses_attention,
)
from attention.functional import online_softmax_merge, tiled_attention

SHAPE = (2, 4, 24, 8)  # (N, H, L, D): L divides by 2P for P = 2 and 4 (zigzag)
CASES = [
    {"strategy": s, "causal": c, "zigzag": z, "shape": SHAPE}
    for s in STRATEGIES
    for c in (False, True)
    for z in (False, True)
]
IDS = [
    "-".join(
        [c["strategy"], "causal" if c["causal"] else "full", "zigzag" * c["zigzag"] or "contiguous"]
    )
    for c in CASES
]
TIMEOUT = 240  # seconds for one spawn; process start-up dominates, more so on a loaded machine


def cases_and_errors(rank, world_size):
    """Worker: every case, then the errors that need a process group of ``world_size``."""
    results = run_cases(rank, world_size, CASES)
    q = torch.randn(1, world_size + 1, 4, 8, dtype=torch.float64)  # heads not divisible by P
    try:
        ulysses_attention(q, q, q)
    except ValueError as error:
        heads_error = str(error)
    else:
        heads_error = None
    return results, heads_error


@pytest.fixture(scope="module", params=[2, 4], ids=["P=2", "P=4"])
def spawned(request):
    """Per world size: each rank's results for every case, and the error Ulysses raised."""
    world_size = request.param
    return world_size, spawn(cases_and_errors, nproc=world_size, timeout=TIMEOUT)


def per_rank(spawned, case):
    _, results = spawned
    return [results_of_rank[0][CASES.index(case)] for results_of_rank in results]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_output_and_gradients_equal_single_process_attention(spawned, case):
    for rank, result in enumerate(per_rank(spawned, case)):
        assert result["error_out"] < 1e-12, f"rank {rank}: output off by {result['error_out']}"
        assert result["error_gathered"] < 1e-12, f"rank {rank}: gather_sequence"
        assert result["error_grad"] < 1e-12, f"rank {rank}: gradients off by {result['error_grad']}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_bytes_sent_match_the_formula(spawned, case):
    world_size, _ = spawned
    for result in per_rank(spawned, case):
        forward, backward = bytes_formula(case["strategy"], world_size, result["shard_bytes"])
        assert (result["bytes_forward"], result["bytes_backward"]) == (forward, backward)


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_zigzag_balances_causal_work(spawned, strategy):
    world_size, _ = spawned
    N, H, L, D = SHAPE
    full = 4 * N * H * L * L * D  # FLOPs of non-causal attention, over all ranks
    flops = {
        zigzag: [
            r["flops"]
            for r in per_rank(
                spawned, {"strategy": strategy, "causal": True, "zigzag": zigzag, "shape": SHAPE}
            )
        ]
        for zigzag in (False, True)
    }
    assert len(set(flops[True])) == 1  # every rank the same work
    # Zigzag moves work between ranks without changing the total, which lies between half the
    # full work (the exact causal count) and the full work: only what lies wholly above the
    # diagonal is skipped.
    assert sum(flops[True]) == sum(flops[False])
    assert full / 2 < sum(flops[True]) < full
    if strategy == "ulysses":
        assert len(set(flops[False])) == 1  # every rank has all positions of its heads
    else:
        assert flops[False] == sorted(flops[False]) and flops[False][0] < flops[False][-1]


def test_ulysses_needs_heads_divisible_by_the_world_size(spawned):
    world_size, results = spawned
    for _, heads_error in results:
        assert "number of heads" in heads_error and f"= {world_size}" in heads_error


def test_a_failing_rank_ends_the_run_with_its_traceback():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 1 of 2 failed") as raised:
        spawn(_fail_on_rank, 1, nproc=2, timeout=TIMEOUT)
    assert "Traceback" in str(raised.value) and "raises on purpose" in str(raised.value)
    assert time.monotonic() - start < TIMEOUT  # rank 0, stuck in a barrier, was ended


def test_spawn_checks_nproc():
    with pytest.raises(TypeError, match="nproc must be an int"):
        spawn(_fail_on_rank, 0, nproc=2.0)
    with pytest.raises(ValueError, match="nproc must be at least 1"):
        spawn(_fail_on_rank, 0, nproc=0)


@pytest.mark.parametrize("fn", list(STRATEGIES.values()))
def test_a_group_that_was_not_initialised_is_a_clear_error(fn):
    assert not dist.is_initialized()
    q = torch.randn(1, 2, 4, 8)
    with pytest.raises(RuntimeError, match="not initialised: call torch.distributed.init"):
        fn(q, q, q)
    with pytest.raises(RuntimeError, match="not initialised"):
        gather_sequence(q)


@pytest.mark.parametrize("fn", [ring_attention, all_gather_attention, ulysses_attention])
def test_bad_shards_are_refused_before_any_communication(fn):
    q = torch.randn(1, 2, 5, 8)
    with pytest.raises(ValueError, match="must be 4-D"):
        fn(q[0], q[0], q[0])
    with pytest.raises(ValueError, match="query and key shards must have the same shape"):
        fn(q, q[..., :4], q)
    with pytest.raises(ValueError, match="key and value shards"):
        fn(q, q, q[:, :, :4])
    with pytest.raises(TypeError, match="causal must be a bool"):
        fn(q, q, q, causal=1)
    with pytest.raises(TypeError, match="zigzag must be a bool"):
        fn(q, q, q, zigzag="yes")
    with pytest.raises(ValueError, match=r"local length \(query.shape\[-2\]\) must be divisible"):
        fn(q, q, q, zigzag=True)  # 5 rows cannot be two halves
    with pytest.raises(TypeError, match="must be a floating-point tensor"):
        fn(q.long(), q, q)


def test_shard_sequence_splits_contiguous_and_zigzag():
    x = torch.arange(12.0)[:, None]  # (L, 1): each row is its position
    contiguous = [shard_sequence(x, rank=r, world_size=3).flatten().tolist() for r in range(3)]
    assert contiguous == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    zigzag = [shard_sequence(x, rank=r, world_size=3, zigzag=True).flatten() for r in range(3)]
    assert [z.tolist() for z in zigzag] == [[0, 1, 10, 11], [2, 3, 8, 9], [4, 5, 6, 7]]
    assert [float(z.sum()) for z in zigzag] == [22.0] * 3  # positions balanced between ranks


def test_shard_sequence_refuses_lengths_that_do_not_divide():
    x = torch.randn(2, 10, 4)
    with pytest.raises(ValueError, match=r"sequence length \(x.shape\[-2\]\) must be divisible by"):
        shard_sequence(x, rank=0, world_size=3)
    assert shard_sequence(x, rank=0, world_size=5, zigzag=True).shape == (2, 2, 4)  # 10 chunks
    with pytest.raises(ValueError, match="divisible by the number of chunks = 8; got 10"):
        shard_sequence(x, rank=0, world_size=4, zigzag=True)
    with pytest.raises(ValueError, match="rank must be in"):
        shard_sequence(x, rank=2, world_size=2)
    with pytest.raises(ValueError, match="world_size must be at least 1"):
        shard_sequence(x, rank=0, world_size=0)
    with pytest.raises(TypeError, match="rank must be an int"):
        shard_sequence(x, rank=0.0, world_size=2)
    with pytest.raises(TypeError, match="zigzag must be a bool"):
        shard_sequence(x, rank=0, world_size=2, zigzag=1)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        shard_sequence([1.0], rank=0, world_size=1)


def test_online_softmax_merge_is_attention_over_both_blocks():
    s = torch.randn(3, 5, 10, dtype=torch.float64)  # (*, L, S) scores
    v = torch.randn(3, 10, 4, dtype=torch.float64)  # (*, S, Dv)

    def partial(s, v):
        m = s.amax(-1, keepdim=True)
        p = (s - m).exp()
        return m, p.sum(-1, keepdim=True), p @ v

    nothing = (torch.full((3, 5, 1), -torch.inf, dtype=torch.float64),) + (
        torch.zeros(3, 5, 1, dtype=torch.float64),
        torch.zeros(3, 5, 4, dtype=torch.float64),
    )
    state = online_softmax_merge(*nothing, *partial(s[..., :3], v[:, :3]))
    m, l, acc = online_softmax_merge(*state, *partial(s[..., 3:], v[:, 3:]))  # noqa: E741
    torch.testing.assert_close(acc / l, s.softmax(-1) @ v, atol=1e-12, rtol=0)
    torch.testing.assert_close(m, s.amax(-1, keepdim=True))
    # tiled_attention is that merge, block after block
    q, k = torch.randn(2, 7, 4, dtype=torch.float64), torch.randn(2, 9, 4, dtype=torch.float64)
    expected = torch.softmax(q @ k.mT / 2, dim=-1) @ k
    torch.testing.assert_close(tiled_attention(q, k, k, block_size=2), expected)
