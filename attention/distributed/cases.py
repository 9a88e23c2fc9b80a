r"""Runs of the strategies, checked and measured: what the tests, the tutorial, the benchmarks and
``python -m attention.distributed`` share.

A *case* is a dict that names a strategy, a layout, a mask and the shape of the whole sequence.
:func:`run_cases` runs a list of them on every rank of a group (inside :func:`spawn`, or under
``torchrun``) and returns, for each, what this rank measured: the bytes it sent and the FLOPs it
computed (:func:`count_work`), the time, the extra peak memory
(:func:`attention.measure.peak_memory`) and the largest difference from
``F.scaled_dot_product_attention`` over the whole sequence in one process.
:func:`command_worker` is the command's worker: one case, built from its options, run by the
same function.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..measure import peak_memory
from .all_gather import all_gather_attention
from .cost import count_work, nbytes
from .layout import gather_sequence, positions, shard_sequence
from .ring import ring_attention
from .ulysses import ulysses_attention

__all__ = ["STRATEGIES", "run_cases", "command_worker"]

#: The strategies by name, as cases, :func:`bytes_formula` and the command name them.
STRATEGIES = {
    "ring": ring_attention,
    "all_gather": all_gather_attention,
    "ulysses": ulysses_attention,
}

ROWS = 512  # query rows per reference call when only the output is checked


def run_cases(rank: int, world_size: int, cases: list[dict], seed: int = 0) -> list:
    """Worker: run each case on this rank, check it and measure it.

    A case is a dict: ``strategy``, ``causal``, ``zigzag``, ``shape`` (N, H, L, D of the whole
    sequence); optional ``group_size`` (the first ``group_size`` ranks take part; default all),
    ``dtype`` (default ``"float64"``), ``device`` (default ``"cpu"``), ``check`` (compare the
    output and, after a backward pass with a random output gradient, the gradients with
    single-process ``F.scaled_dot_product_attention``; default ``True``),
    ``check_gradients`` (with ``check``: the gradients too; default ``True``), ``backward``
    (run the backward pass even without checking it; default ``False``) and ``memory``
    (measure the extra peak memory of the timed passes; default ``False``). Every rank of the
    group must run the same cases.

    Args:
        rank (int): this process's rank (passed by :func:`spawn`).
        world_size (int): the number of processes (passed by :func:`spawn`).
        cases (list[dict]): the cases, the same on every rank.
        seed (int): seeds the inputs. Default: ``0``.

    Returns:
        list: one dict per case (``None`` on ranks outside its group) with ``shard_bytes``,
        ``seconds`` and ``bytes_forward`` (the forward pass), ``flops``; after a backward pass
        ``seconds_backward`` and ``bytes_backward``; with ``memory``, ``peak_bytes``; with
        ``check``, ``error_out``, and with the gradients ``error_gathered`` and ``error_grad``.

    Examples::

        >>> from attention.distributed import run_cases, spawn
        >>> case = {"strategy": "ulysses", "causal": False, "zigzag": False,
        ...         "shape": (1, 2, 8, 4), "group_size": 1}
        >>> first, second = spawn(run_cases, [case], nproc=2)
        >>> first[0]["error_out"] < 1e-12, second
        (True, [None])
    """
    groups = {}
    for size in sorted({case.get("group_size", world_size) for case in cases}):
        groups[size] = None if size == world_size else dist.new_group(list(range(size)))
    results = []
    for case in cases:
        size = case.get("group_size", world_size)
        if rank >= size:
            results.append(None)
            continue
        results.append(_run_case(rank, size, groups[size], case, seed))
    return results


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _run_case(rank: int, world_size: int, group, case: dict, seed: int) -> dict:
    """One case on this rank: make the inputs, run the strategy (timed, counted), check it."""
    fn = STRATEGIES[case["strategy"]]
    causal, zigzag = case["causal"], case["zigzag"]
    N, H, L, D = case["shape"]
    dtype = getattr(torch, case.get("dtype", "float64"))
    device = torch.device(case.get("device", "cpu"))
    check = case.get("check", True)
    gradients = check and case.get("check_gradients", True)
    backward = gradients or case.get("backward", False)
    kwargs = {"causal": causal, "zigzag": zigzag, "group": group}

    def shard(x):
        return shard_sequence(x, rank=rank, world_size=world_size, zigzag=zigzag)

    generator = torch.Generator().manual_seed(seed)
    if check:  # the whole sequence, the same on every rank, for the reference
        whole = [torch.randn(N, H, L, D, generator=generator, dtype=dtype) for _ in "qkvg"]
        local = [shard(x) for x in whole]  # (N, H, L/P, D) each
    else:  # only this rank's rows
        generator.manual_seed(seed + rank)
        shape = (N, H, L // world_size, D)
        local = [torch.randn(shape, generator=generator, dtype=dtype) for _ in "qkvg"]
    *local, grad_out = (x.to(device) for x in local)
    local = [x.requires_grad_(backward) for x in local]
    result = {"shard_bytes": nbytes(local[1])}

    with torch.no_grad():  # a first call sets up the connections and their buffers
        fn(*local, **kwargs)
    dist.barrier(group=group)
    outputs = []

    def timed():
        start = time.perf_counter()
        with count_work() as forward:
            out = fn(*local, **kwargs)
        _synchronize(device)
        result.update(seconds=time.perf_counter() - start)
        result.update(bytes_forward=forward["bytes"], flops=forward["flops"])
        if backward:
            start = time.perf_counter()
            with count_work() as back:
                out.backward(grad_out)
            _synchronize(device)
            result.update(seconds_backward=time.perf_counter() - start)
            result.update(bytes_backward=back["bytes"])
        outputs.append(out.detach())

    if case.get("memory", False):
        result["peak_bytes"] = peak_memory(timed, device=device)
    else:
        timed()
    (out,) = outputs
    if gradients:
        ref = [x.to(device).requires_grad_() for x in whole[:3]]
        expected = F.scaled_dot_product_attention(*ref, is_causal=causal)  # (N, H, L, D)
        expected.backward(whole[3].to(device))
        result["error_out"] = (out - shard(expected)).abs().max().item()
        gathered = gather_sequence(out, zigzag=zigzag, group=group)  # (N, H, L, D)
        result["error_gathered"] = (gathered - expected).abs().max().item()
        result["error_grad"] = max(
            (mine.grad - shard(theirs.grad)).abs().max().item()
            for mine, theirs in zip(local, ref, strict=True)
        )
    elif check:
        q_pos = positions(rank, world_size, L // world_size, zigzag).to(device)
        keys, values = whole[1].to(device), whole[2].to(device)
        result["error_out"] = _error_by_rows(out, local[0].detach(), keys, values, q_pos, causal)
    return result


def _error_by_rows(out, query, key, value, q_pos, causal) -> float:
    """The largest difference of this rank's output from single-process attention of its
    queries over the whole sequence, computed ``ROWS`` queries at a time."""
    L = key.shape[-2]
    error = 0.0
    with torch.no_grad():
        for start in range(0, query.shape[-2], ROWS):
            rows = slice(start, start + ROWS)
            mask = torch.arange(L, device=key.device) <= q_pos[rows, None] if causal else None
            expected = F.scaled_dot_product_attention(
                query[..., rows, :], key, value, attn_mask=mask
            )  # (N, H, ROWS, D) against all L keys
            error = max(error, (out[..., rows, :] - expected).abs().max().item())
    return error


# ---------------------------------------------------------------------------------------------
# The command's worker


def _fits_in_memory(nbytes: int, device: torch.device, world_size: int) -> bool:
    """Whether ``nbytes`` more can be held comfortably (a quarter of what is free)."""
    if device.type == "cuda":
        return nbytes < torch.cuda.mem_get_info(device)[0] / 4
    try:
        text = Path("/proc/meminfo").read_text()
        free = int(re.search(r"^MemAvailable:\s+(\d+) kB", text, re.MULTILINE).group(1)) * 1024
    except (OSError, AttributeError):
        return False
    return nbytes < free / 4 / world_size


def command_worker(rank: int, world_size: int, options: dict) -> dict:
    """Worker of ``python -m attention.distributed``: its one case on this rank.

    The output is checked when the whole sequence fits in memory on every rank, the forward
    pass (and the backward pass with ``--backward``) is timed, counted and its peak memory
    measured, by the function :func:`run_cases` runs each case with.

    Args:
        rank (int): this process's rank.
        world_size (int): the number of processes.
        options (dict): the command's options (``strategy``, ``seq_len``, ``heads``,
            ``head_dim``, ``batch``, ``causal``, ``zigzag``, ``backward``, ``dtype``,
            ``check``, ``seed``) and the ``device``.

    Returns:
        dict: what this rank measured, as a result of :func:`run_cases`.

    Examples::

        >>> from attention.distributed import spawn
        >>> options = {"strategy": "ring", "seq_len": 64, "heads": 2, "head_dim": 8,
        ...            "batch": 1, "causal": True, "zigzag": True, "backward": False,
        ...            "dtype": "float64", "check": True, "seed": 0, "device": "cpu"}
        >>> first, _ = spawn(command_worker, options, nproc=2)  # doctest: +SKIP
        >>> first["error_out"] < 1e-12  # doctest: +SKIP
        True
    """
    N, H, L, D = options["batch"], options["heads"], options["seq_len"], options["head_dim"]
    itemsize = torch.empty((), dtype=getattr(torch, options["dtype"])).element_size()
    # The check holds the whole sequence's q, k, v and output gradient on every rank, and the
    # reference builds the scores of ROWS of this rank's queries at a time against all L keys.
    whole_bytes = 4 * N * H * L * D * itemsize
    scores_bytes = 3 * N * H * min(ROWS, L // world_size) * L * itemsize
    device = torch.device(options["device"])
    check = options["check"] and _fits_in_memory(whole_bytes + scores_bytes, device, world_size)
    case = {
        "strategy": options["strategy"],
        "causal": options["causal"],
        "zigzag": options["zigzag"],
        "shape": (N, H, L, D),
        "dtype": options["dtype"],
        "device": options["device"],
        "check": check,
        "check_gradients": False,
        "backward": options["backward"],
        "memory": True,
    }
    run = _run_case(rank, world_size, None, case, options["seed"])
    return {
        "rank": rank,
        "seconds": run["seconds"] + run.get("seconds_backward", 0.0),
        "bytes": run["bytes_forward"] + run.get("bytes_backward", 0),
        "flops": run["flops"],
        "peak_bytes": run["peak_bytes"],
        "shard_bytes": run["shard_bytes"],
        "error": run.get("error_out"),
    }
