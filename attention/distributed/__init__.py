"""Context parallelism: attention over a sequence split across processes.

Each process (rank ``r`` of ``P``) holds one shard of the sequence: local ``query``, ``key`` and
``value`` of shape (N, H, L/P, D). Three strategies give every rank the attention output of its
own queries over the whole sequence, each computing it with the package's one kernel
(:func:`attention.functional.attention_block`, :func:`~attention.functional.merge_blocks`,
:func:`~attention.functional.attention_block_backward`):

- :func:`ring_attention` (``ring.py``) passes the key/value shards around a ring of processes
  and merges each block into the running output, the step of :func:`attention.tiled_attention`
  :cite:p:`liu2023`.
- :func:`all_gather_attention` (``all_gather.py``) gathers every key and value, then attends
  locally (the context parallelism of Llama 3, Llama Team, 2024).
- :func:`ulysses_attention` (``ulysses.py``) trades the sequence split for a head split with an
  all-to-all, attends over the whole sequence for H/P heads, and trades back
  :cite:p:`jacobs2023`.

The layout (``layout.py``) is contiguous (rank ``r`` holds chunk ``r``) or zigzag (the sequence
cut into ``2P`` chunks, rank ``r`` holds chunks ``r`` and ``2P - 1 - r``, which balances causal
work); :func:`shard_sequence` and :func:`gather_sequence` convert. :func:`count_work` and
:func:`bytes_formula` (``cost.py``) count the bytes sent and the FLOPs computed. The collectives
run on whatever backend the process group has: gloo for CPU tensors, NCCL for CUDA ones.
:func:`spawn` (``launch.py``) starts local gloo processes, :func:`run_cases` (``cases.py``) runs
checked and measured cases on them, and ``python -m attention.distributed`` (``__main__.py``)
runs a strategy from the command line, on local processes or under ``torchrun``.
"""

from .all_gather import all_gather_attention
from .cases import STRATEGIES, run_cases
from .cost import bytes_formula, count_work
from .launch import spawn
from .layout import gather_sequence, shard_sequence
from .ring import ring_attention
from .ulysses import ulysses_attention

__all__ = [
    "ring_attention",
    "all_gather_attention",
    "ulysses_attention",
    "shard_sequence",
    "gather_sequence",
    "count_work",
    "bytes_formula",
    "spawn",
    "run_cases",
    "STRATEGIES",
]
