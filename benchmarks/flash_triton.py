"""The Triton kernel rows: attention.flash_triton against SDPA's flash backend and the package's
plain-PyTorch tiled_attention, on a GPU.

    python -m benchmarks --triton              # on a CUDA GPU: writes triton-<date>.csv
    python -m benchmarks --triton --quick      # the same loops on the CPU, through Triton's
                                               # interpreter, at tiny sizes (a dry run)

For bfloat16 and float16, head dims 64 and 128, causal or not, L = S from 1024 to 16384 with
N * L = 16384 tokens and H * D = 2048 (the GPU suite's shapes): forward (``fwd``) and forward +
backward (``fwd+bwd``) of ``triton`` (:func:`attention.flash_triton.flash_attention`),
``flash`` (``F.scaled_dot_product_attention`` restricted to its flash backend) and ``tiled``
(:func:`attention.tiled_attention`), timed with CUDA events (:class:`benchmarks.gpu.Runner`).
TFLOP/s use FlashAttention-2's count (forward ``4 N H L S D``, halved when causal; forward +
backward 3.5 times that); ``frac_matmul`` reads them against an 8192^3 matmul of the same dtype
measured in the run, ``frac_peak`` against the GPU's dense peak for the dtype from its maker's
data sheet (:data:`PEAK_TFLOPS`; empty for a GPU not listed). The three paths are checked equal
on the first case of each dtype before anything is timed. Rows are written as they are
measured; a case that cannot run is recorded with its status, as in the GPU suite.
"""

from __future__ import annotations

import torch

from .gpu import MATMUL_N, TOKENS, WIDTH, Runner
from .paths import attention_path, qkv
from .report import timing_cells
from .workload import attention_flops, attention_step, matmul_case

DTYPES = ("bfloat16", "float16")
HEAD_DIMS = (64, 128)
LENGTHS = (1024, 2048, 4096, 8192, 16384)
PATHS = ("triton", "flash", "tiled")  # most useful first: a short budget drops tiled's rows
QUICK = {"lengths": (32, 48), "head_dims": (16,), "tokens": 64, "width": 32, "matmul_n": 64}

# Dense (no sparsity) bfloat16 / float16 tensor-core peaks, TFLOP/s, from NVIDIA's data sheets;
# the first name contained in torch.cuda.get_device_name() wins.
PEAK_TFLOPS = {
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "H100": 989.4,  # SXM5
    "H200": 989.4,
    "A100": 312.0,
    "L40S": 362.1,
}

FIELDS = [
    "suite", "case", "impl", "mode", "dtype", *"NLSEHD", "causal", "status", "median_ms",
    "iqr_ms", "runs", "tflop", "tflops", "matmul_tflops", "frac_matmul", "peak_tflops",
    "frac_peak", "peak_extra_mib", "max_error",
]  # fmt: skip
SUMMARY_COLUMNS = [
    ("case", "case"),
    ("impl", "path"),
    ("mode", "mode"),
    ("dtype", "dtype"),
    ("median_ms", "ms"),
    ("tflops", "TFLOP/s"),
    ("frac_matmul", "of matmul"),
    ("frac_peak", "of peak"),
    ("peak_extra_mib", "extra MiB"),
]


def peak_tflops(device: torch.device) -> float | None:
    """The GPU's dense bfloat16/float16 peak from :data:`PEAK_TFLOPS`, or ``None``."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_TFLOPS.items() if key in name), None)


def path(name: str, *, causal: bool):
    """``triton``, or one of :mod:`benchmarks.paths` (``flash``, ``tiled``), as fn(q, k, v)."""
    if name == "triton":
        from attention.flash_triton import flash_attention

        return lambda q, k, v: flash_attention(q, k, v, causal=causal)
    return attention_path(name, causal=causal)


def check_equal(device: torch.device, dtype: torch.dtype, D: int, L: int) -> float:
    """The largest difference of ``triton`` and ``tiled`` from ``flash`` on one causal case."""
    q, k, v = qkv(1, 2, L, L, D, device=device, dtype=dtype)
    expected = path("flash", causal=True)(q, k, v).float()
    return max(
        (path(name, causal=True)(q, k, v).float() - expected).abs().max().item()
        for name in ("triton", "tiled")
    )


def run_triton(device: torch.device, *, budget_s: float, quick: bool, write, log=print) -> None:
    """Measure every row on ``device`` and ``write`` each as it comes."""
    from attention.flash_triton import INTERPRETED

    lengths, head_dims = (QUICK["lengths"], QUICK["head_dims"]) if quick else (LENGTHS, HEAD_DIMS)
    tokens, width = (QUICK["tokens"], QUICK["width"]) if quick else (TOKENS, WIDTH)
    matmul_n = QUICK["matmul_n"] if quick else MATMUL_N
    peak, errors = peak_tflops(device), {}

    def complete(row: dict) -> None:  # the peak's columns and the check's error, then write
        tflops = row.get("tflops")
        frac_peak = tflops / peak if peak and tflops else None
        write({**row, "peak_tflops": peak, "frac_peak": frac_peak,
               "max_error": errors.get(row["dtype"])})  # fmt: skip

    runner = Runner(device, budget_s, complete, log)
    dtypes = [d for d in DTYPES if not (INTERPRETED and d == "bfloat16")]
    if len(dtypes) < len(DTYPES):  # the interpreter refuses bfloat16 (TypeError)
        log("  bfloat16: not run; Triton's interpreter multiplies its blocks wrongly")
    for dtype_name in dtypes:  # the roof and the check first
        dtype = getattr(torch, dtype_name)
        fn, flops = matmul_case(matmul_n, device=device, dtype=dtype)
        t = runner.time(fn)
        runner.roofs[dtype_name] = flops / t.median / 1e12
        complete({"suite": "matmul", "case": f"{matmul_n}^3", "impl": "matmul", "mode": "fwd",
                  "dtype": dtype_name, "status": "ok", **timing_cells(t), "tflop": flops / 1e12,
                  "tflops": runner.roofs[dtype_name]})  # fmt: skip
        errors[dtype_name] = check_equal(device, dtype, head_dims[0], lengths[0] + 5)
        log(f"  {dtype_name}: triton and tiled within {errors[dtype_name]:.1e} of flash")
    for name in PATHS:  # the kernel and torch's in both dtypes before tiled_attention
        for dtype_name in dtypes:
            for mode in ("fwd", "fwd+bwd"):
                for D in head_dims:
                    for causal in (False, True):
                        for L in lengths:
                            case(runner, name, mode, dtype_name, D, causal, L, tokens, width)
            log(f"  {name} {dtype_name} done")


def versions() -> dict[str, str]:
    """The Triton version and the NVIDIA driver's (``nvidia-smi``; empty without one): the
    provenance these rows add to the suite's."""
    import subprocess

    import triton

    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        ).stdout.split("\n")[0].strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        driver = ""
    return {"triton": triton.__version__, "driver": driver}


def case(runner, name, mode, dtype_name, D, causal, L, tokens, width) -> None:
    """One row: ``name`` on (N, H, L, L, D) with N * L = tokens and H * D = width, measured by
    the GPU suite's runner (which keeps to the budget and records the status)."""
    N, H = max(1, tokens // L), max(1, width // D)
    row = {
        "suite": "triton",
        "case": f"N={N} H={H} L={L} D={D}" + (" causal" if causal else ""),
        "impl": name,
        "mode": mode,
        "dtype": dtype_name,
        **dict(N=N, L=L, S=L, E=H * D, H=H, D=D),
        "causal": causal,
    }
    q, k, v = qkv(N, H, L, L, D, device=runner.device, dtype=getattr(torch, dtype_name))
    step = attention_step(path(name, causal=causal), q, k, v,
                          "inference" if mode == "fwd" else "training")  # fmt: skip
    flops = attention_flops(N, H, L, L, D, causal=causal) * (1 if mode == "fwd" else 3.5)
    runner.measure(row, step, flops, runner.roofs[dtype_name])
