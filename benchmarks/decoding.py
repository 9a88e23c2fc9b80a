"""One decoding step against the context length, for every attention variant's decoding state.

A 2-layer :class:`attention.DecoderLM` (float32, one sequence) holds a context of S tokens in its
state, then writes one more: the time of that one step, and the state's bytes from
:attr:`attention.DecodingState.nbytes`, for multi-head attention, grouped-query attention with
2 and 1 key/value heads, multi-head latent attention and linear attention. A step of softmax
attention reads every cached position, so its time grows with S; linear attention's reads a
fixed-size sum, so its time stays flat. The bytes per token are checked against their formulas
before timing (counted, exact); the times are reported, never judged.
"""

from __future__ import annotations

import torch

import attention
from attention.measure import compare

from .report import timing_cells

CASE = ((256, 1024, 4096), 128, 8, 2)  # (context lengths S, E, H, layers)
QUICK_CASE = ((16, 64), 32, 4, 1)
VOCAB = 256
#: name: (the model's arguments, elements per token and layer as a function of E, H)
VARIANTS = {
    "multi-head": (dict(num_kv_heads=None), lambda E, H: 2 * E),
    "grouped-query 2": (dict(num_kv_heads=2), lambda E, H: 2 * 2 * (E // H)),
    "grouped-query 1": (dict(num_kv_heads=1), lambda E, H: 2 * (E // H)),
    "latent": (dict(attention="latent"), lambda E, H: 4 * (E // H) + (E // H) // 2),
    "linear": (dict(attention="linear", positions="none"), None),
}
COLUMNS = [
    ("case", "case"),
    ("impl", "attention"),
    ("S", "context S"),
    ("median_ms", "step ms"),
    ("state_bytes", "state bytes"),
    ("bytes_per_token", "bytes / token"),
]
FIELDS = ["state_bytes", "bytes_per_token"]


def models(E: int, H: int, layers: int, max_len: int) -> dict[str, attention.DecoderLM]:
    """One model per variant, seeded alike, in eval mode."""
    built = {}
    for name, (options, _) in VARIANTS.items():
        torch.manual_seed(0)
        # A step of linear attention cannot be undone (its sum keeps no positions), so each
        # timed step adds one: its model, without positions, has room for any number.
        room = 10**9 if name == "linear" else max_len
        built[name] = attention.DecoderLM(
            VOCAB, embed_dim=E, num_heads=H, num_layers=layers, max_len=room,
            **{"positions": "rotary", **options},
        ).eval()  # fmt: skip
    return built


def check_bytes(model: attention.DecoderLM, name: str, E: int, H: int, layers: int) -> int:
    """The state's bytes for one token of context, checked against the formula: 4 bytes times
    the elements per token and layer (DeepSeek-V2's Table 1), or, for linear attention, a
    constant :math:`(D^2 + D) H` per layer whatever the length."""
    per_layer = VARIANTS[name][1]
    short, long = model.new_cache(1, max_len=16).nbytes, model.new_cache(1, max_len=32).nbytes
    if per_layer is None:
        D = E // H
        assert short == long == (D * D + D) * H * layers * 4, (name, short, long)
        return 0
    assert short == per_layer(E, H) * layers * 16 * 4, (name, short)
    assert long == 2 * short, (name, long)
    return short // 16


def run_decoding(case, *, rounds: int, min_run_time: float, log=print) -> list[dict]:
    """One row per (variant, S): the median time of one decoding step after S tokens."""
    lengths, E, H, layers = case
    built = models(E, H, layers, max(lengths) + 1)
    per_token = {name: check_bytes(m, name, E, H, layers) for name, m in built.items()}
    token = torch.zeros(1, 1, dtype=torch.long)
    rows = []
    for S in lengths:
        context = torch.randint(VOCAB, (1, S), generator=torch.Generator().manual_seed(S))
        steps, states = {}, {}
        for name, model in built.items():
            state = states[name] = model.new_cache(1, max_len=S + 1)
            with torch.no_grad():
                model(context, cache=state)

            def step(model=model, state=state, S=S):
                if state.positional:
                    state.crop(S)  # the same step again: back to S held positions
                with torch.no_grad():
                    model(token, cache=state)

            steps[name] = step
        timings = compare(steps, rounds=rounds, min_run_time=min_run_time)
        for name, timing in timings.items():
            rows.append(
                {
                    "suite": "decoding",
                    "case": f"E={E} H={H} layers={layers}",
                    "impl": name,
                    "mode": "inference",
                    "dtype": "float32",
                    **dict(N=1, L=1, S=S, E=E, H=H, D=E // H),
                    **timing_cells(timing),
                    "state_bytes": states[name].nbytes,
                    "bytes_per_token": per_token[name] or "",
                }
            )
        log(f"  timed a decoding step after S={S}")
    return rows


def section(rows: list[dict]) -> list[str]:
    """The Markdown section of the decoding rows."""
    from .report import table

    return [
        "## A decoding step against the context length",
        "",
        "One new token after S tokens held in the model's decoding state (float32, one "
        "sequence); `state bytes`: the state allocated for S + 1 positions, from nbytes; "
        "`bytes / token`: counted, and checked against the formula before timing (empty for "
        "linear attention, whose state does not grow). Softmax attention's step reads every "
        "held position; linear attention's reads a fixed-size sum.",
        "",
        table(rows, COLUMNS, markdown=True),
        "",
    ]
