"""Timing and memory benchmarks of the attention package: ``python -m benchmarks`` (``make bench``).

- :mod:`benchmarks.cpu`: the modules against ``nn.MultiheadAttention`` and a matmul, and
  ``tiled_attention`` against ``F.scaled_dot_product_attention``, on the CPU;
- :mod:`benchmarks.gpu`: attention in bf16 and fp16 up to L = 16384 on a CUDA GPU;
- :mod:`benchmarks.timing`: how code is timed and its FLOPs counted;
- :mod:`benchmarks.memory`: peak memory of one call, in a fresh process;
- results, with their provenance, in ``benchmarks/results/``.

Benchmarks measure; the test suite never asserts a timing.
"""
