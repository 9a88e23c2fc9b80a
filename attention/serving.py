r"""Serving many requests with one model: continuous batching over a paged cache, the static
batcher it replaces, and samples that share their prompt's blocks.

- :func:`serve` runs a list of :class:`Request` s greedily through one
  :class:`attention.paged.PagedKVCache`. ``policy="continuous"`` schedules every step (Orca's
  iteration-level scheduling, :cite:t:`yu2022`): one forward call for every running request,
  its whole prompt for a request just admitted and its last token for the others; requests
  join when the pool has room and leave when done. ``policy="static"`` is the baseline: a
  batch of requests starts together, padded to its longest prompt, and runs until its
  longest output is done, in memory for that rectangle.
- :func:`sample_many`: ``n`` samples of one prompt, the prompt's blocks shared or copied.
"""

import dataclasses
from collections.abc import Sequence

import torch
from torch import Tensor

from ._checks import check_bool, check_choice, check_int, check_positive, check_tokens
from .language_model import sampling_distribution
from .paged import PagedKVCache

__all__ = [
    "Request", "ServeStats", "serve", "sample_many", "forward_rows", "request_mix", "memory_use",
]  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Request:
    """One request: a prompt and how many tokens to generate after it.

    Args:
        prompt (Tensor): :math:`(P)` token ids, :math:`P \\ge 1`.
        max_new_tokens (int): tokens to generate, at least 1.

    Examples::

        >>> Request(torch.tensor([5, 6, 7]), 4).total  # positions held at the end
        7
    """

    prompt: Tensor
    max_new_tokens: int

    def __post_init__(self):
        if not isinstance(self.prompt, Tensor) or self.prompt.dim() != 1 or not len(self.prompt):
            raise ValueError("prompt must be a non-empty 1-D tensor of token ids")
        check_int(self.max_new_tokens, "max_new_tokens", minimum=1)

    @property
    def total(self) -> int:
        """Positions the request holds at its end: prompt and generated tokens."""
        return len(self.prompt) + self.max_new_tokens


@dataclasses.dataclass
class ServeStats:
    """What :func:`serve` counted.

    Args:
        steps (int): forward calls of the model. Default: ``0``.
        positions (int): token positions computed, padding included (a row that is done but
            still in its batch counts too). Default: ``0``.
        generated (int): tokens generated for the requests. Default: ``0``.
        peak_blocks (int): most blocks held at once. Default: ``0``.
        peak_reserved (int): most blocks promised to running requests at once (their whole
            prompt and output, or a static batch's rectangle). Default: ``0``.
        held (list[tuple[int, int, int, int]]): after every step, the running requests, the
            tokens they hold, the blocks they hold, and the blocks promised to them.
            Default: ``[]``.
        trace (list[list[int]]): with ``trace=True``, after every step, the request holding
            each block (``-1``: free); a block shared by several shows the lowest.
            Default: ``[]``.

    Examples::

        >>> ServeStats().steps
        0
    """

    steps: int = 0
    positions: int = 0
    generated: int = 0
    peak_blocks: int = 0
    peak_reserved: int = 0
    held: list = dataclasses.field(default_factory=list)
    trace: list = dataclasses.field(default_factory=list)


def request_mix(
    text: Tensor,
    n: int,
    *,
    max_len: int,
    prompt_median: float = 12.0,
    output_median: float = 8.0,
    sigma: float = 1.0,
    seed: int = 0,
) -> list[Request]:
    """``n`` requests with long-tailed lengths: prompts cut from ``text`` at random places,
    prompt and output lengths drawn from log-normal distributions (most short, a few long),
    each request within ``max_len``; the same for the same ``seed`` on every machine.

    Args:
        text (Tensor): :math:`(T)` token ids to cut prompts from.
        n (int): requests.
        max_len (int): the longest request, prompt and output.
        prompt_median (float): the median prompt length. Default: ``12.0``.
        output_median (float): the median output length. Default: ``8.0``.
        sigma (float): the spread of the lengths' logarithms. Default: ``1.0``.
        seed (int): the draw. Default: ``0``.

    Shape:
        - text: :math:`(T)`, :math:`T >` ``max_len``

    Returns:
        list[Request]: the requests, in arrival order.

    Examples::

        >>> mix = request_mix(torch.arange(100) % 7, 3, max_len=32)
        >>> [(len(r.prompt), r.max_new_tokens) for r in mix]
        [(31, 1), (1, 14), (4, 2)]
    """
    check_int(n, "n")
    check_int(max_len, "max_len", minimum=2)
    check_int(seed, "seed", minimum=0)
    for value, name in ((prompt_median, "prompt_median"), (output_median, "output_median"),
                        (sigma, "sigma")):  # fmt: skip
        check_positive(value, name)
    if not isinstance(text, Tensor) or text.dim() != 1 or len(text) <= max_len:
        raise ValueError(f"text must be a 1-D tensor of more than max_len={max_len} ids")
    g = torch.Generator().manual_seed(seed)
    normal = torch.randn(n, 2, generator=g, dtype=torch.float64)  # (n, 2)
    medians = torch.tensor([prompt_median, output_median], dtype=torch.float64)
    lengths = (medians * (sigma * normal).exp()).round().clamp(1, max_len)  # (n, 2), finite
    starts = torch.randint(0, len(text) - max_len, (n,), generator=g).tolist()
    requests = []
    for (p, t), start in zip(lengths.long().tolist(), starts, strict=True):
        p = min(p, max_len - 1)
        requests.append(Request(text[start : start + p], min(t, max_len - p)))
    return requests


def forward_rows(model, cache: PagedKVCache, seqs: Sequence[int], feeds: Sequence[Tensor]):
    """One forward call of ``model`` over the rows ``seqs`` of ``cache``, row ``i`` taking the
    tokens ``feeds[i]``; the logits after each row's last token.

    Args:
        model (DecoderLM): the model, of :class:`attention.CausalSelfAttention` layers.
        cache (PagedKVCache): its pool, holding every sequence of ``seqs``.
        seqs (Sequence[int]): the rows' sequences.
        feeds (Sequence[Tensor]): the rows' new tokens.

    Shape:
        - feeds: each :math:`(L_i)`
        - Output: :math:`(N, V)`

    Returns:
        Tensor: the logits of each row's next token.

    Examples::

        >>> from attention import DecoderLM, PagedKVCache
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=1, max_len=8).eval()
        >>> cache = PagedKVCache.for_model(model, num_blocks=4, block_size=2)
        >>> cache.add(0); cache.add(1)
        >>> feeds = [torch.tensor([1, 2, 3]), torch.tensor([4])]  # a prompt; one token
        >>> with torch.no_grad():
        ...     logits = forward_rows(model, cache, [0, 1], feeds)
        >>> logits.shape, cache.lengths
        (torch.Size([2, 10]), {0: 3, 1: 1})
    """
    lengths = [len(f) for f in feeds]
    tokens = torch.zeros(len(feeds), max(lengths), dtype=torch.int64)  # (N, L), right-padded
    for i, f in enumerate(feeds):
        tokens[i, : len(f)] = f
    cache.select(seqs, lengths)
    device = model.head.weight.device
    logits, _ = model(tokens.to(device), cache=cache)  # (N, L, V)
    last = torch.tensor(lengths, device=device) - 1  # (N,)
    return logits[torch.arange(len(feeds), device=device), last]  # (N, V)


def _check_requests(requests, cache: PagedKVCache, vocab_size: int) -> None:
    if not isinstance(requests, Sequence) or not all(isinstance(r, Request) for r in requests):
        raise TypeError("requests must be a sequence of Request")
    for i, r in enumerate(requests):
        check_tokens(r.prompt[None], vocab_size, cache.max_len, name=f"requests[{i}].prompt")
        blocks = cache.blocks_for(r.total)
        if r.total > cache.max_len or blocks > cache.num_blocks:
            raise ValueError(
                f"requests[{i}] holds {r.total} positions ({blocks} blocks): more than "
                f"max_len={cache.max_len} or the pool's {cache.num_blocks} blocks"
            )


@torch.no_grad()
def serve(
    model,
    requests: Sequence[Request],
    *,
    num_blocks: int,
    block_size: int,
    policy: str = "continuous",
    trace: bool = False,
) -> tuple[list[Tensor], ServeStats]:
    """Generate every request's tokens greedily, through one paged cache of ``num_blocks``
    blocks, scheduled by ``policy``.

    ``"continuous"``: before every step, waiting requests join in order while the blocks
    promised to the running ones leave room for a request's whole prompt and output (so no
    request is ever evicted); each step is one forward call of every running request; a request
    that has its tokens leaves and its blocks return to the pool. ``"static"``: requests are
    taken in order into a batch while the batch's rectangle, rows times its longest prompt plus
    its longest output, fits in the pool and in the context; the batch runs, every row in every
    call, until its longest output is done, and only then does the next one start.

    Args:
        model (DecoderLM): the model, of :class:`attention.CausalSelfAttention` layers.
        requests (Sequence[Request]): in arrival order.
        num_blocks (int): the pool's blocks: the memory budget.
        block_size (int): positions per block.
        policy (str): ``"continuous"`` or ``"static"``. Default: ``"continuous"``.
        trace (bool): record which request holds each block after every step.
            Default: ``False``.

    Shape:
        - Output: each request's tokens :math:`(T_i)`, ``T_i = max_new_tokens``

    Returns:
        tuple[list[Tensor], ServeStats]: each request's generated tokens, in the order given
        (each equals the request run alone), and the counts.

    Examples::

        >>> from attention import DecoderLM
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=1, max_len=8)
        >>> requests = [Request(torch.tensor([1, 2, 3]), 1), Request(torch.tensor([4]), 3)]
        >>> outs, stats = serve(model, requests, num_blocks=4, block_size=2)
        >>> [len(o) for o in outs], stats.steps, stats.generated
        ([1, 3], 3, 4)
    """
    check_choice(policy, "policy", ("continuous", "static"))
    check_bool(trace, "trace")
    cache = PagedKVCache.for_model(model, num_blocks=num_blocks, block_size=block_size)
    _check_requests(requests, cache, model.vocab_size)
    was_training = model.training
    model.eval()
    try:
        return _serve(model, cache, list(requests), policy, trace)
    finally:
        model.train(was_training)


def _serve(model, cache, requests, policy, trace):
    stats, out = ServeStats(), [[] for _ in requests]
    waiting, running, reserved = list(range(len(requests))), [], {}

    def fits(batch):  # a static batch's rectangle: rows x (longest prompt + longest output)
        long = max(len(requests[i].prompt) for i in batch) + max(
            requests[i].max_new_tokens for i in batch
        )
        return long <= cache.max_len and len(batch) * cache.blocks_for(long) <= cache.num_blocks

    while waiting or running:
        if policy == "continuous":
            while waiting:
                need = cache.blocks_for(requests[waiting[0]].total)
                if sum(reserved.values()) + need > cache.num_blocks:
                    break
                reserved[waiting[0]] = need
                running.append(waiting.pop(0))
                cache.add(running[-1])
        elif not running:  # a static batch starts only when the last one is done
            batch = [waiting.pop(0)]
            while waiting and fits(batch + waiting[:1]):
                batch.append(waiting.pop(0))
            long = max(len(requests[i].prompt) for i in batch) + max(
                requests[i].max_new_tokens for i in batch
            )
            reserved = dict.fromkeys(batch, cache.blocks_for(long))
            running = batch
            for i in running:
                cache.add(i)
        stats.peak_reserved = max(stats.peak_reserved, sum(reserved.values()))
        feeds = [requests[i].prompt if not cache.lengths[i] else out[i][-1:] for i in running]
        feeds = [f if isinstance(f, Tensor) else torch.tensor(f) for f in feeds]
        nxt = forward_rows(model, cache, running, feeds).argmax(dim=-1).tolist()  # (N,)
        stats.steps += 1
        stats.positions += len(running) * max(len(f) for f in feeds)
        stats.peak_blocks = max(stats.peak_blocks, cache.used_blocks)
        for i, token in zip(running, nxt, strict=True):
            if len(out[i]) < requests[i].max_new_tokens:
                out[i].append(token)
                stats.generated += 1
        tokens = sum(cache.lengths.values())
        stats.held.append((len(running), tokens, cache.used_blocks, sum(reserved.values())))
        if trace:
            stats.trace.append(_owners(cache))
        done = [i for i in running if len(out[i]) == requests[i].max_new_tokens]
        if policy == "static" and len(done) < len(running):
            continue  # the batch waits for its slowest row
        for i in done:
            cache.free(i)
            running.remove(i)
            reserved.pop(i)
    return [torch.tensor(o) for o in out], stats


def memory_use(stats: ServeStats, *, block_size: int, max_len: int) -> dict[str, float]:
    """What a run's cache held against what it reserved, in positions, averaged over its
    steps: the tokens; the blocks held (``paged``); ``max_len`` for every running request
    (``preallocated``, a contiguous cache); and the most unused positions of the paged cache
    per running request at any step (``waste``, below ``block_size``).

    Args:
        stats (ServeStats): from :func:`serve`.
        block_size (int): the run's positions per block.
        max_len (int): what a contiguous cache reserves for each request.

    Returns:
        dict[str, float]: ``tokens``, ``paged``, ``preallocated`` and ``waste``.

    Examples::

        >>> stats = ServeStats(held=[(2, 5, 2, 4), (1, 3, 1, 2)])  # (requests, tokens, blocks)
        >>> memory_use(stats, block_size=4, max_len=16)
        {'tokens': 4.0, 'paged': 6.0, 'preallocated': 24.0, 'waste': 1.5}
    """
    check_int(block_size, "block_size")
    check_int(max_len, "max_len")
    steps = max(len(stats.held), 1)
    return {
        "tokens": sum(t for _, t, _, _ in stats.held) / steps,
        "paged": sum(b for _, _, b, _ in stats.held) * block_size / steps,
        "preallocated": sum(n for n, _, _, _ in stats.held) * max_len / steps,
        "waste": max(((b * block_size - t) / n for n, t, b, _ in stats.held), default=0.0),
    }


def _owners(cache: PagedKVCache) -> list[int]:
    owner = [-1] * cache.num_blocks
    for seq in sorted(cache.tables, reverse=True):
        for block in cache.tables[seq]:
            owner[block] = seq
    return owner


@torch.no_grad()
def sample_many(
    model,
    prompt: Tensor,
    n: int,
    max_new_tokens: int,
    *,
    block_size: int,
    share: bool = True,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> tuple[Tensor, int]:
    """Draw ``n`` continuations of one ``prompt``: its blocks written once and shared by every
    sample (``share=True``: the prompt's forward call has one row, and ``n - 1`` forks), or
    written once per sample (``share=False``: ``n`` rows of the same prompt).

    Args:
        model (DecoderLM): the model.
        prompt (Tensor): :math:`(P)` token ids.
        n (int): samples.
        max_new_tokens (int): tokens per sample.
        block_size (int): positions per block.
        share (bool): share the prompt's blocks. Default: ``True``.
        temperature (float): of :func:`attention.language_model.sampling_distribution`.
            Default: ``1.0``.
        generator (torch.Generator, optional): the random numbers of sampling. Default: ``None``.

    Shape:
        - prompt: :math:`(P)`
        - Output: samples :math:`(n, T)`, ``T = max_new_tokens``

    Returns:
        tuple[Tensor, int]: the samples and the blocks they hold at the end.

    Examples::

        >>> from attention import DecoderLM
        >>> model = DecoderLM(10, embed_dim=16, num_heads=4, num_layers=1, max_len=8)
        >>> prompt = torch.tensor([1, 2, 3, 4, 5])  # 2 full blocks of 2, and one position
        >>> [sample_many(model, prompt, 3, 2, block_size=2, share=s)[1] for s in (True, False)]
        [5, 9]
    """
    check_int(n, "n")
    check_bool(share, "share")
    request = Request(prompt, max_new_tokens)
    check_int(block_size, "block_size")
    blocks = n * (-(-request.total // block_size))  # enough for n samples that share nothing
    cache = PagedKVCache.for_model(model, num_blocks=blocks, block_size=block_size)
    _check_requests([request], cache, model.vocab_size)
    was_training = model.training
    model.eval()
    try:
        seqs = list(range(n))
        for seq in seqs[: 1 if share else n]:
            cache.add(seq)
        logits = forward_rows(model, cache, seqs[: len(cache.tables)], [prompt] * len(cache.tables))
        for seq in seqs[1:] if share else ():
            cache.fork(0, seq)
        logits = logits.expand(n, -1)  # (n, V): one row, or n equal rows
        samples = []
        for step in range(max_new_tokens):
            probabilities = sampling_distribution(logits, temperature=temperature)  # (n, V)
            token = torch.multinomial(probabilities, 1, generator=generator)  # (n, 1)
            samples.append(token)
            if step + 1 < max_new_tokens:
                logits = forward_rows(model, cache, seqs, list(token))  # (n, V)
    finally:
        model.train(was_training)
    return torch.cat(samples, dim=1), cache.used_blocks  # (n, T)
