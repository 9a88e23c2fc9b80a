r"""Local processes for context parallelism: :func:`spawn` starts a gloo group on this machine.

The processes start with :mod:`torch.multiprocessing`'s ``spawn`` method, find each other through
a file (no port to choose) and talk over 127.0.0.1 only, so a test, a tutorial or the command
``python -m attention.distributed`` runs the strategies on real processes on one CPU. A rank that
raises ends the run with its traceback, and a run that takes too long is ended: nothing hangs.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue as queue_module
import sys
import tempfile
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

from .._checks import check_int, check_positive

__all__ = ["spawn"]


@contextlib.contextmanager
def _without_main_script():
    """Spawned processes re-run the caller's script unless it is hidden from them.

    The workers are functions of importable modules, so a child needs nothing from
    ``__main__``; hiding its file keeps a tutorial or a test script from running again (and
    spawning again) in every child.
    """
    main = sys.modules.get("__main__")
    saved = main.__dict__.pop("__file__", None) if main is not None else None
    try:
        yield
    finally:
        if saved is not None:
            main.__file__ = saved


def _entry(rank, world_size, store_path, timeout_s, fn, args, results):
    """A spawned process: join the gloo group through a file, run ``fn``, report back."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # talk over 127.0.0.1 only
    torch.set_num_threads(1)  # the processes share the machine's cores
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{store_path}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        # Gloo connects the ranks pair by pair, and a rank whose own side is done may return
        # while a peer is still connecting to it; closing its sockets then fails the peer
        # ("Connection closed by peer"). One barrier before and one after ``fn`` keep every
        # rank in the group until all of them have joined, and until all have finished.
        dist.barrier()
        value = fn(rank, world_size, *args)
        dist.barrier()
        # Pickled here, by value: the queue of torch.multiprocessing would share a tensor's
        # memory with the parent instead, memory that is gone once this process has ended.
        results.put((rank, None, pickle.dumps(value)))
    except BaseException:
        results.put((rank, traceback.format_exc(), None))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def spawn(fn, *args, nproc: int, timeout: float = 120.0) -> list:
    r"""Run ``fn(rank, nproc, *args)`` on ``nproc`` local processes joined in a gloo group.

    The processes start with :mod:`torch.multiprocessing`'s ``spawn`` method, find each other
    through a file (no port to choose), and talk over 127.0.0.1. ``fn`` must be importable (a
    function of a module, not of a script), and its return value picklable (tensors come back
    by value). If a rank raises, the others are ended and the rank's traceback is raised here;
    if the run takes longer than ``timeout`` seconds, every process is ended and
    ``TimeoutError`` is raised. Nothing hangs.

    Args:
        fn (callable): the worker, called as ``fn(rank, world_size, *args)``.
        *args: more arguments for ``fn`` (picklable).
        nproc (int): number of processes.
        timeout (float): seconds for the whole run. Default: ``120.0``.

    Returns:
        list: ``fn``'s return value on each rank, in rank order.

    Examples::

        >>> from attention.distributed import run_cases, spawn
        >>> case = {"strategy": "ring", "causal": True, "zigzag": True, "shape": (1, 2, 8, 4)}
        >>> per_rank = spawn(run_cases, [case], nproc=2)  # each rank: one result per case
        >>> [(r[0]["error_out"] < 1e-12, r[0]["error_grad"] < 1e-12) for r in per_rank]
        [(True, True), (True, True)]
    """
    check_int(nproc, "nproc")
    check_positive(timeout, "timeout")
    if not callable(fn):
        raise TypeError(f"fn must be a function of an importable module; got {type(fn).__name__}")
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    results = context.Queue()
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="attention-spawn-") as folder:
        store = os.path.join(folder, "store")
        processes = [
            context.Process(
                target=_entry,
                args=(rank, nproc, store, timeout, fn, args, results),
                daemon=True,
            )
            for rank in range(nproc)
        ]
        with _without_main_script():
            for process in processes:
                process.start()
        done: dict[int, object] = {}
        try:
            while len(done) < nproc:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = sorted(set(range(nproc)) - set(done))
                    raise TimeoutError(
                        f"ranks {missing} of {nproc} did not finish within {timeout:.0f} s"
                    )
                try:
                    rank, error, value = results.get(timeout=min(left, 0.5))
                except queue_module.Empty:
                    for rank, process in enumerate(processes):
                        if rank not in done and process.exitcode is not None:
                            time.sleep(0.5)  # its report may still be in the pipe
                            if results.empty():
                                raise RuntimeError(
                                    f"rank {rank} of {nproc} exited with code "
                                    f"{process.exitcode} without reporting a result"
                                ) from None
                    continue
                if error is not None:
                    raise RuntimeError(f"rank {rank} of {nproc} failed:\n{error}")
                done[rank] = pickle.loads(value)
        finally:
            for process in processes:
                process.join(timeout=max(0.0, min(10.0, deadline - time.monotonic())))
            for process in processes:
                if process.is_alive():
                    process.kill()
                    process.join(timeout=10)
            results.close()
    return [done[rank] for rank in range(nproc)]
