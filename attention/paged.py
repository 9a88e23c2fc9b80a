r"""A paged key/value cache: fixed-size blocks from one pool, found through block tables.

A server holds many sequences of different lengths that start and end at different times. A
contiguous cache (:class:`attention.KVCache`) must reserve ``max_len`` positions for each of
them; a paged cache (PagedAttention, :cite:t:`kwon2023`) takes one block of ``block_size``
positions at a time from a shared pool, and each sequence keeps a *block table*, the list of
its blocks in order. A sequence then wastes less than one block, and sequences that share a
prompt can share its blocks (counted by reference, copied when one of them writes to a shared
block).
"""

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import Tensor

from ._checks import check_int
from .cache import KVCache
from .state import DecodingState

__all__ = ["PagedKVCache"]


class PagedKVCache(KVCache):
    r"""Every layer's keys and values in a pool of fixed-size blocks, with a block table per
    sequence, shared blocks counted by reference and copied on write.

    The pool of each layer holds ``num_blocks`` blocks of :math:`(H_{kv}, B, D)` keys and as
    many of values, allocated once; :attr:`nbytes` is the whole pool. A sequence is known by an
    integer id: :meth:`add` starts one, :meth:`fork` starts one that shares another's blocks,
    :meth:`free` returns its blocks to the free list once no other sequence holds them.

    A model call reads and writes the rows named by :meth:`select`: sequence ``seqs[i]`` is row
    ``i`` and takes ``lengths[i]`` new tokens, the first of row ``i`` of the model's input
    :math:`(N, L)` with :math:`L = \max_i` ``lengths[i]`` (the rest is padding, never written).
    Each row's token :math:`t` goes to slot ``t % B`` of block ``table[t // B]``; a row whose
    last block is shared first copies it to a block of its own. The layers read each row's
    keys and values through its block table (gathered, padded to the longest row) and
    :meth:`positions` tells them where each row's queries sit, so each row sees exactly its own
    past: attention over the pages equals attention over a contiguous cache.

    Args:
        num_layers (int): number of attention layers.
        num_blocks (int): blocks in the pool.
        block_size (int): positions per block :math:`B`.
        num_kv_heads (int): key/value heads per layer :math:`H_{kv}`.
        head_dim (int): head dimension :math:`D`.
        max_len (int): the longest sequence (the model's context).
        device (torch.device, optional): where to allocate. Default: ``None`` (CPU).
        dtype (torch.dtype, optional): element type. Default: ``None`` (the default dtype).

    Shape:
        - keys and values of one layer: :math:`(\text{num\_blocks}, H_{kv}, B, D)`

    Examples::

        >>> cache = PagedKVCache(1, num_blocks=4, block_size=2, num_kv_heads=1, head_dim=1,
        ...                      max_len=8)
        >>> cache.add(7)
        >>> cache.select([7], [3])
        >>> with cache.step(1, 3):
        ...     keys, _ = cache.update(0, torch.ones(1, 1, 3, 1), torch.ones(1, 1, 3, 1))
        >>> cache.lengths[7], cache.tables[7], cache.free_blocks  # 3 tokens in 2 blocks
        (3, [0, 1], 2)
        >>> cache.fork(7, 8); cache.refs[:2].tolist()  # the fork shares both blocks
        [2, 2]
    """

    def __init__(
        self,
        num_layers: int,
        *,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        max_len: int,
        device=None,
        dtype=None,
    ):
        DecodingState.__init__(self, num_layers, batch_size=1, max_len=max_len)
        for value, name in ((num_blocks, "num_blocks"), (block_size, "block_size")):
            check_int(value, name, minimum=1)
        check_int(num_kv_heads, "num_kv_heads", minimum=1)
        check_int(head_dim, "head_dim", minimum=1)
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.num_blocks, self.block_size = num_blocks, block_size
        shape = (num_layers, num_blocks, num_kv_heads, block_size, head_dim)
        # One (num_blocks, H_kv, B, D) pool of keys and one of values per layer, stacked.
        self.keys = self._allocate(shape, device=device, dtype=dtype)
        self.values = self._allocate(shape, device=device, dtype=dtype)
        self.free_list: list[int] = list(range(num_blocks - 1, -1, -1))  # taken from the end
        self.refs = torch.zeros(num_blocks, dtype=torch.int64)  # sequences holding each block
        self.tables: dict[int, list[int]] = {}  # each sequence's blocks, in order
        self.lengths: dict[int, int] = {}  # each sequence's tokens
        self.freed: set[int] = set()
        self._rows: list[int] | None = None  # the sequences of the next call
        self._new: list[int] = []  # and their new tokens
        self._plan: tuple[Tensor, ...] = ()  # where the call writes and reads

    @classmethod
    def for_model(cls, model, *, num_blocks: int, block_size: int) -> "PagedKVCache":
        """An empty pool for ``model`` (an :class:`attention.DecoderLM` of
        :class:`attention.CausalSelfAttention` layers): its layers, key/value heads, head
        dimension, context, dtype and device."""
        attn, weight = model.blocks[0].self_attn, model.head.weight
        return cls(
            len(model.blocks), num_blocks=num_blocks, block_size=block_size,
            num_kv_heads=attn.num_kv_heads, head_dim=attn.head_dim, max_len=model.max_len,
            device=weight.device, dtype=weight.dtype,
        )  # fmt: skip

    # -- sequences -------------------------------------------------------------------------

    @property
    def free_blocks(self) -> int:
        """Blocks on the free list."""
        return len(self.free_list)

    @property
    def used_blocks(self) -> int:
        """Blocks held by at least one sequence."""
        return self.num_blocks - len(self.free_list)

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block: its keys and values in every layer."""
        per_layer = self.num_kv_heads * self.block_size * self.head_dim * self.keys.element_size()
        return 2 * self.num_layers * per_layer

    def blocks_for(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` positions: :math:`\\lceil \\text{tokens} / B \\rceil`."""
        return -(-tokens // self.block_size)

    def _check_seq(self, seq, name: str = "seq") -> None:
        check_int(seq, name, minimum=0)
        if seq in self.freed:
            raise ValueError(f"sequence {seq} was freed; a new sequence needs a new id")
        if seq not in self.tables:
            raise ValueError(f"unknown sequence {seq}: add() it first; the cache holds "
                             f"{sorted(self.tables)}")  # fmt: skip

    def _check_new_id(self, seq, name: str) -> None:
        check_int(seq, name, minimum=0)
        if seq in self.tables or seq in self.freed:
            raise ValueError(f"{name}: sequence {seq} already exists or was freed; ids are "
                             "used once")  # fmt: skip

    def add(self, seq: int) -> None:
        """Start an empty sequence ``seq`` (it takes blocks as it is written).

        Args:
            seq (int): a new id, never used before in this cache.

        Returns:
            None
        """
        self._check_new_id(seq, "seq")
        self.tables[seq], self.lengths[seq] = [], 0

    def fork(self, parent: int, child: int) -> None:
        """Start ``child`` as a copy of ``parent`` that shares all its blocks (their reference
        counts grow by one); whichever writes first to a shared block copies it.

        Args:
            parent (int): a live sequence.
            child (int): a new id.

        Returns:
            None
        """
        self._check_seq(parent, "parent")
        self._check_new_id(child, "child")
        self.tables[child], self.lengths[child] = list(self.tables[parent]), self.lengths[parent]
        self.refs[self.tables[child]] += 1

    def free(self, seq: int) -> None:
        """End ``seq``: each of its blocks loses a reference, and returns to the free list when
        no sequence holds it.

        Args:
            seq (int): a live sequence.

        Returns:
            None
        """
        self._check_seq(seq)
        for block in self.tables.pop(seq):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free_list.append(block)
        del self.lengths[seq]
        self.freed.add(seq)

    def blocks_needed(self, seq: int, new: int) -> int:
        """Blocks ``seq`` must take from the pool to append ``new`` tokens: the new blocks, and
        a copy of its last block if that is shared and not full."""
        self._check_seq(seq)
        length, table = self.lengths[seq], self.tables[seq]
        grow = self.blocks_for(length + new) - len(table)
        shared_tail = new > 0 and length % self.block_size and self.refs[table[-1]] > 1
        return grow + int(bool(shared_tail))

    def select(self, seqs: Sequence[int], lengths: Sequence[int]) -> None:
        """Name the rows of the next model call: row ``i`` is ``seqs[i]`` with ``lengths[i]``
        new tokens.

        Args:
            seqs (Sequence[int]): distinct live sequences.
            lengths (Sequence[int]): new tokens of each, at least 1.

        Returns:
            None
        """
        seqs, lengths = list(seqs), list(lengths)
        if not seqs or len(seqs) != len(lengths):
            raise ValueError(f"seqs and lengths must be non-empty and as long; got "
                             f"{len(seqs)} and {len(lengths)}")  # fmt: skip
        if len(set(seqs)) != len(seqs):
            raise ValueError(f"seqs must be distinct; got {seqs}")
        for seq, new in zip(seqs, lengths, strict=True):
            self._check_seq(seq, "seqs")
            check_int(new, "lengths", minimum=1)
        self._rows, self._new, self.batch_size = seqs, lengths, len(seqs)

    # -- the decoding-state contract ----------------------------------------------------------

    def positions(self, length: int) -> Tensor:
        """Each row's new tokens at its own positions, the padding at the row's last one.

        Shape:
            - Output: :math:`(N, L)` int64
        """
        if self._rows is None or length != max(self._new):
            raise ValueError(f"select() the rows of this call first; a call of {length} "
                             "positions needs rows whose longest takes as many")  # fmt: skip
        held = torch.tensor([self.lengths[s] for s in self._rows])[:, None]  # (N, 1)
        new = torch.tensor(self._new)[:, None]  # (N, 1)
        step = torch.minimum(torch.arange(length), new - 1)  # (N, L): padding repeats the last
        return (held + step).to(self.device)  # (N, L)

    def check_append(self, layer, batch_size, length, *, dtype=None, device=None) -> None:
        """As :meth:`attention.state.DecodingState.check_append`, for the selected rows: each
        must stay within ``max_len``, and the pool must hold the blocks they take."""
        if self._rows is None:
            raise ValueError("select() the rows of the call first: a PagedKVCache writes the "
                             "sequences named by select(seqs, lengths)")  # fmt: skip
        if length != max(self._new):
            raise ValueError(f"the selected rows take at most {max(self._new)} new tokens, "
                             f"so the call has L={max(self._new)}; got {length}")  # fmt: skip
        for seq, new in zip(self._rows, self._new, strict=True):
            if self.lengths[seq] + new > self.max_len:
                raise ValueError(f"sequence {seq} holds {self.lengths[seq]} positions; {new} "
                                 f"more exceed max_len={self.max_len}")  # fmt: skip
        needed = sum(self.blocks_needed(s, n) for s, n in zip(self._rows, self._new, strict=True))
        if needed > self.free_blocks:
            raise ValueError(f"the pool is full: the call needs {needed} blocks and "
                             f"{self.free_blocks} of {self.num_blocks} are free; free() "
                             "finished sequences or make a larger pool")  # fmt: skip
        super().check_append(layer, batch_size, length, dtype=dtype, device=device)

    @contextlib.contextmanager
    def step(self, batch_size: int, length: int, *, dtype=None, device=None) -> Iterator[None]:
        """One model call over the selected rows: checked first, then the blocks taken (and
        shared ones copied); a call that raises gives them back and leaves every sequence as
        it was."""
        saved = ({s: list(t) for s, t in self.tables.items()}, self.refs.clone(),
                 list(self.free_list))  # fmt: skip
        try:
            with super().step(batch_size, length, dtype=dtype, device=device):
                self._plan = self._reserve()
                yield
        except BaseException:
            self.tables, self.refs, self.free_list = saved
            raise
        finally:
            self._rows, self._new, self._plan = None, [], ()

    def _take(self) -> int:
        block = self.free_list.pop()
        self.refs[block] = 1
        return block

    def _reserve(self) -> tuple[Tensor, ...]:
        """Take the blocks of the call, copy shared blocks it writes to, and return where each
        new token goes (block, slot) and each row's gather table."""
        write_blocks, write_slots, rows, steps = [], [], [], []
        for i, (seq, new) in enumerate(zip(self._rows, self._new, strict=True)):
            table, length = self.tables[seq], self.lengths[seq]
            last = len(table) - 1
            if length % self.block_size and self.refs[table[last]] > 1:  # copy on write
                copy = self._take()
                for pool in (self.keys, self.values):  # (layers, num_blocks, H_kv, B, D)
                    pool[:, copy] = pool[:, table[last]]
                self.refs[table[last]] -= 1
                table[last] = copy
            while len(table) < self.blocks_for(length + new):
                table.append(self._take())
            t = torch.arange(length, length + new)  # the new tokens' positions
            write_blocks.append(torch.tensor(table)[t // self.block_size])
            write_slots.append(t % self.block_size)
            rows.append(torch.full((new,), i))
            steps.append(torch.arange(new))
        width = max(len(self.tables[s]) for s in self._rows)
        gather = torch.zeros(len(self._rows), width, dtype=torch.int64)  # padded with block 0
        for i, seq in enumerate(self._rows):
            gather[i, : len(self.tables[seq])] = torch.tensor(self.tables[seq])
        S = max(self.lengths[s] + n for s, n in zip(self._rows, self._new, strict=True))
        plan = (torch.cat(write_blocks), torch.cat(write_slots), torch.cat(rows),
                torch.cat(steps), gather)  # fmt: skip
        return tuple(x.to(self.device) for x in plan) + (S,)

    def _advance(self, length: int) -> int:
        for seq, new in zip(self._rows, self._new, strict=True):
            self.lengths[seq] += new
        return self.length

    def write(self, layer: int, new: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        """Write each row's new keys and values into its blocks; return every row's keys and
        values, read through its block table and padded to the longest row.

        Shape:
            - new: keys and values :math:`(N, H_{kv}, L, D)`
            - Output: :math:`(N, H_{kv}, S, D)`, :math:`S` the longest row after the call
        """
        if self._call is None:
            raise ValueError("a PagedKVCache is written inside a model call: select() the "
                             "rows, then call the model (or use step())")  # fmt: skip
        key = new[0]
        self._begin_write(layer, key.shape[0], key.shape[2], dtype=key.dtype, device=key.device)
        blocks, slots, rows, steps, gather, S = self._plan
        held = []
        for pool, x in zip((self.keys[layer], self.values[layer]), new, strict=True):
            pool[blocks, :, slots] = x[rows, :, steps]  # (T, H_kv, D): the real new tokens
            pages = pool[gather]  # (N, blocks, H_kv, B, D)
            N, W, H_kv, B, D = pages.shape
            pages = pages.transpose(1, 2).reshape(N, H_kv, W * B, D)  # (N, H_kv, W B, D)
            held.append(pages[:, :, :S])  # (N, H_kv, S, D)
        self._end_write(layer, key.shape[2])
        return tuple(held)

    def reorder(self, rows: Tensor) -> None:
        """Refused: a paged cache keeps sequences by id; :meth:`fork` and :meth:`free` do
        what reordering a contiguous cache does (beam search), sharing blocks instead of
        copying them."""
        raise TypeError("PagedKVCache keeps sequences by id: fork(parent, child) and "
                        "free(seq) instead of reorder(rows)")  # fmt: skip

    def crop(self, length: int) -> None:
        """Refused: free() a sequence instead; a paged cache has no common length to crop."""
        raise TypeError("PagedKVCache has no common length to crop; free(seq) a sequence")

    def reset(self) -> None:
        """Free every sequence."""
        for seq in list(self.tables):
            self.free(seq)

    def __repr__(self) -> str:
        return (
            f"PagedKVCache(num_layers={self.num_layers}, num_blocks={self.num_blocks}, "
            f"block_size={self.block_size}, num_kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, max_len={self.max_len}, sequences={len(self.tables)}, "
            f"free_blocks={self.free_blocks}, dtype={self.dtype})"
        )
