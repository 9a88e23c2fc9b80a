"""attention.search: greedy and beam search over any model of the next token."""

import itertools
import math

import pytest
import torch

from attention.search import beam_search, greedy_search

V, BOS, EOS, PAD = 5, 0, 1, 4


def _table_model(seed):
    """log p(next | last token): a fixed random table, so every output's score is known."""
    table = torch.randn(V, V, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    table[:, PAD] = -math.inf  # padding is never generated
    log_probs = table.log_softmax(-1)

    def next_log_probs(tokens):
        return log_probs[tokens[:, -1]]

    return next_log_probs, log_probs


def _score(log_probs, output, alpha=1.0):
    body = output[1:]
    total = sum(log_probs[a, b].item() for a, b in itertools.pairwise([BOS, *body]))
    return total / len(body) ** alpha


@pytest.mark.parametrize("seed", range(5))
def test_greedy_takes_the_most_likely_token_and_stops_at_eos(seed):
    next_log_probs, log_probs = _table_model(seed)
    tokens, scores = greedy_search(next_log_probs, 3, max_new_tokens=6, bos_id=BOS, eos_id=EOS,
                                   pad_id=PAD)  # fmt: skip
    for row, score in zip(tokens.tolist(), scores.tolist(), strict=True):
        body = row[1 : (row.index(EOS) + 1) if EOS in row else None]
        expected = [BOS]
        for _ in range(6):
            expected.append(int(log_probs[expected[-1]].argmax()))
            if expected[-1] == EOS:
                break
        assert [BOS, *body] == expected
        assert math.isclose(score, _score(log_probs, expected), rel_tol=1e-12)
        assert all(t == PAD for t in row[len(expected) :])


@pytest.mark.parametrize("seed", range(5))
def test_a_beam_as_wide_as_every_hypothesis_finds_the_best_output(seed):
    next_log_probs, log_probs = _table_model(seed)
    T = 3
    words = [t for t in range(V) if t not in (EOS, PAD)]
    # Every output: BOS, a body of words, then EOS; or T words without EOS.
    outputs = [[BOS, *body, EOS] for n in range(T) for body in itertools.product(words, repeat=n)]
    outputs += [[BOS, *body] for body in itertools.product(words, repeat=T)]
    best = max(outputs, key=lambda o: _score(log_probs, o))
    tokens, scores = beam_search(next_log_probs, 1, 64, max_new_tokens=T, bos_id=BOS,
                                 eos_id=EOS, pad_id=PAD)  # fmt: skip
    assert math.isclose(scores.item(), _score(log_probs, best), rel_tol=1e-12)
    row = tokens[0].tolist()
    assert row[: len(best)] == best


def test_beam_search_asks_its_caller_to_reorder_the_rows():
    next_log_probs, _ = _table_model(0)
    calls = []
    beam_search(next_log_probs, 2, 3, max_new_tokens=4, bos_id=BOS, eos_id=EOS, pad_id=PAD,
                reorder=calls.append)  # fmt: skip
    assert calls and all(r.shape == (6,) for r in calls)
    # Each source's beams continue rows of the same source.
    assert all(((r // 3) == torch.arange(6) // 3).all() for r in calls)


SEARCHES = {
    "greedy": lambda f, n, **kw: greedy_search(f, n, **kw),
    "beam": lambda f, n, **kw: beam_search(f, n, 2, **kw),
}
GOOD = {"max_new_tokens": 4, "bos_id": BOS, "eos_id": EOS, "pad_id": PAD}
BAD_ARGUMENTS = {
    # Each of these returned something (NaN or -inf scores, float tokens, a silent output) or
    # failed inside torch before it was checked.
    "max_new_tokens 0": ({"max_new_tokens": 0}, ValueError, "max_new_tokens"),
    "bos_id float": ({"bos_id": 0.5}, TypeError, "bos_id"),
    "eos_id negative": ({"eos_id": -1}, ValueError, "eos_id"),
    "pad_id bool": ({"pad_id": True}, TypeError, "pad_id"),
    "length_penalty nan": ({"length_penalty": math.nan}, ValueError, "length_penalty"),
    "length_penalty str": ({"length_penalty": "1"}, TypeError, "length_penalty"),
}


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("case", BAD_ARGUMENTS, ids=list(BAD_ARGUMENTS))
def test_bad_search_arguments_are_refused_before_the_model_is_called(search, case):
    changes, error, match = BAD_ARGUMENTS[case]
    calls = []
    with pytest.raises(error, match=match):
        SEARCHES[search](calls.append, 2, **{**GOOD, **changes})
    assert not calls


def test_bad_sizes_and_callables_are_refused_before_the_model_is_called():
    calls = []
    for call, error, match in [
        (lambda: greedy_search(calls.append, 0, **GOOD), ValueError, "batch_size"),
        (lambda: beam_search(calls.append, 0, 2, **GOOD), ValueError, "batch_size"),
        (lambda: beam_search(calls.append, 2, 0, **GOOD), ValueError, "beam_size"),
        (lambda: beam_search(calls.append, 2, 1.5, **GOOD), TypeError, "beam_size"),
        (lambda: greedy_search("model", 2, **GOOD), TypeError, "next_log_probs"),
        (lambda: beam_search(calls.append, 2, 2, reorder=3, **GOOD), TypeError, "reorder"),
    ]:
        with pytest.raises(error, match=match):
            call()
    assert not calls


@pytest.mark.parametrize("search", SEARCHES)
def test_log_probs_of_the_wrong_shape_are_refused(search):
    for log_probs in [torch.zeros(3, V), torch.zeros(4), torch.zeros(4, 0)]:
        with pytest.raises(ValueError, match="next_log_probs"):
            SEARCHES[search](lambda t, lp=log_probs: lp, 2, **GOOD)


@pytest.mark.parametrize("search", SEARCHES)
@pytest.mark.parametrize("alpha", [-50.0, 1000.0])
def test_a_length_penalty_whose_scores_leave_the_dtype_is_refused(search, alpha):
    # -50: 6**-50 underflowed, the scores became -inf and beam search returned BOS alone;
    # 1000: Python's 6 ** 1000 raised OverflowError (beam) or every score became -0 (greedy).
    next_log_probs, _ = _table_model(0)

    def never_ends(tokens):
        log_probs = next_log_probs(tokens).float()
        log_probs[:, EOS] = -math.inf
        return log_probs

    with pytest.raises(ValueError, match="length_penalty"):
        SEARCHES[search](never_ends, 2, **{**GOOD, "max_new_tokens": 6, "length_penalty": alpha})
