#!/usr/bin/env python3
"""sgemm_peak.py - the machine's measured sgemm peak, the yardstick for
bench/train's "share of the BLAS peak": f32 2048 x 2048 matmuls through
numpy's BLAS with THREADS threads (set before numpy loads), best of 5 after a
warm-up. Prints "SGEMM gflops=<x> threads=<n> blas=<name> kernel=<core>"
(kernel: openblas_get_corename() of the OpenBLAS numpy loaded, "unknown"
for another BLAS; numpy's OpenBLAS is not always tpx-train's, and a
fallback kernel would understate the peak: bench/README.md).
usage: sgemm_peak.py THREADS"""
import os
import sys

threads = sys.argv[1] if len(sys.argv) > 1 else "1"
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = threads

import time  # noqa: E402

import numpy as np  # noqa: E402


def blas_name():
    try:
        cfg = np.show_config(mode="dicts")
        return cfg["Build Dependencies"]["blas"]["name"]
    except Exception:  # older numpy: no dict mode
        return "unknown"


def blas_kernel():
    """openblas_get_corename() of the OpenBLAS loaded into this process
    (numpy's wheel prefixes its symbols: scipy_openblas_...)."""
    try:
        import ctypes
        with open("/proc/self/maps") as f:
            libs = {ln.split()[-1] for ln in f if "openblas" in ln.lower()
                    and ln.split()[-1].startswith("/")}
        for path in sorted(libs):
            lib = ctypes.CDLL(path)
            for sym in ("openblas_get_corename", "scipy_openblas_get_corename",
                        "scipy_openblas_get_corename64_"):
                fn = getattr(lib, sym, None)
                if fn:
                    fn.restype = ctypes.c_char_p
                    return fn().decode()
    except Exception:  # not Linux, not OpenBLAS
        pass
    return "unknown"


n = 2048
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
a @ b  # warm-up: thread pool, page faults
best = float("inf")
for _ in range(5):
    t0 = time.perf_counter()
    a @ b
    best = min(best, time.perf_counter() - t0)
print(f"SGEMM gflops={2 * n ** 3 / best / 1e9:.1f} threads={threads} "
      f"blas={blas_name()} kernel={blas_kernel()}")
