"""Timing and memory benchmarks of the attention package: ``python -m benchmarks`` (``make bench``).

- :mod:`benchmarks.cpu`: the modules against ``nn.MultiheadAttention`` and a matmul, and
  ``tiled_attention`` against ``F.scaled_dot_product_attention`` (inference and training), on
  the CPU;
- :mod:`benchmarks.gpu`: attention in bf16 and fp16 up to L = 16384 on a CUDA GPU;
- :mod:`benchmarks.workload`: FLOP counts, the matmul roof, one step of a module or of attention;
- :mod:`benchmarks.memory`: peak memory of one call, in a fresh process;
- time and memory are measured with :mod:`attention.measure`, the package's one timer and meter;
- results, with their provenance, in ``benchmarks/results/``.

Benchmarks measure; the test suite never asserts a timing.
"""
