"""The scipy drop-in's speed targets (issue 49), each beside scipy in this process: best and median
of REPEAT runs after a warm-up, as ratios scipy time / hetla time (> 1: hetla faster).

    python python/benchmarks/scipy_targets.py [--repeat 3] [--quick] [--match stack]

lu_factor n = 3000; qr(mode="economic") 4000 x 1000; solve n = 3000 with 10 right-hand sides;
lstsq of a rank-deficient 4000 x 1000 (rank 900) against scipy's gelsy; cho_factor n = 3000 in
C order; stacks of 200 matrices 64 x 64 (issue 73: lu_factor, lu_solve, solve, qr, lstsq, each
one call on the whole stack; and solve(assume_a="sym"), untargeted). scipy runs on the OpenBLAS its wheel bundles, with its default thread count (every
core); hetla on its default platform. Prints one line per target and a JSON object at the end.
``--quick`` runs every case at a tenth of each size (a check that the script runs, as CI does).
"""

import argparse
import json
import os
import platform

import numpy as np
import scipy
import scipy.linalg as sl

import hetla
# The same timing as the package's targets: warm-up, then hetla and scipy in turn each round.
from targets import alternated


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--match", default="", help="run only the cases whose name contains this")
    p.add_argument("--quick", action="store_true", help="every size a tenth (a check that it runs)")
    args = p.parse_args()
    scale = 10 if args.quick else 1
    n, m, k, r = 3000 // scale, 4000 // scale, 1000 // scale, 900 // scale
    rng = np.random.default_rng(49)
    a3000 = rng.standard_normal((n, n))
    tall = rng.standard_normal((m, k))
    deficient = rng.standard_normal((m, r)) @ rng.standard_normal((r, k))
    spd = a3000 @ a3000.T + n * np.eye(n)
    b10 = rng.standard_normal((n, 10))
    b_tall = rng.standard_normal((m, 1))
    cases = [
        ("lu_factor n=3000", lambda: hetla.lu_factor(a3000), lambda: sl.lu_factor(a3000)),
        (
            "qr economic 4000x1000",
            lambda: hetla.qr(tall, mode="economic"),
            lambda: sl.qr(tall, mode="economic"),
        ),
        ("solve n=3000 k=10", lambda: hetla.solve(a3000, b10), lambda: sl.solve(a3000, b10)),
        (
            "lstsq rank-deficient 4000x1000 (gelsy)",
            lambda: hetla.lstsq(deficient, b_tall, lapack_driver="gelsy"),
            lambda: sl.lstsq(deficient, b_tall, lapack_driver="gelsy"),
        ),
        ("cho_factor n=3000 C order", lambda: hetla.cho_factor(spd), lambda: sl.cho_factor(spd)),
    ]
    count = 200 // scale
    stack = rng.standard_normal((count, 64, 64))
    stack_b = rng.standard_normal((count, 64, 1))
    sym_stack = stack + np.swapaxes(stack, -1, -2)
    lu_stack, piv_stack = sl.lu_factor(stack)
    cases += [
        (f"stack {count}x64x64 lu_factor", lambda: hetla.lu_factor(stack), lambda: sl.lu_factor(stack)),
        (
            f"stack {count}x64x64 lu_solve",
            lambda: hetla.lu_solve((lu_stack, piv_stack), stack_b),
            lambda: sl.lu_solve((lu_stack, piv_stack), stack_b),
        ),
        (f"stack {count}x64x64 solve", lambda: hetla.solve(stack, stack_b), lambda: sl.solve(stack, stack_b)),
        (
            f"stack {count}x64x64 solve sym",
            lambda: hetla.solve(sym_stack, stack_b, assume_a="sym"),
            lambda: sl.solve(sym_stack, stack_b, assume_a="sym"),
        ),
        (f"stack {count}x64x64 qr", lambda: hetla.qr(stack), lambda: sl.qr(stack)),
        (
            f"stack {count}x64x64 lstsq (gelsy)",
            lambda: hetla.lstsq(stack, stack_b, lapack_driver="gelsy"),
            lambda: sl.lstsq(stack, stack_b, lapack_driver="gelsy"),
        ),
    ]
    rows = []
    for name, ours, theirs in cases:
        if args.match not in name:
            continue
        if args.quick:
            name += " (quick: a tenth)"
        times = alternated({"hetla": ours, "scipy": theirs}, args.repeat)
        h, s = times["hetla"], times["scipy"]
        rows.append({"case": name, "hetla_s": h, "scipy_s": s, "ratio_best": s[0] / h[0],
                     "ratio_median": s[1] / h[1]})
        print(f"{name:40s} hetla {h[0]:.4f} s (median {h[1]:.4f}), scipy {s[0]:.4f} s "
              f"(median {s[1]:.4f}): {s[0] / h[0]:.2f}x best, {s[1] / h[1]:.2f}x median", flush=True)
    print(json.dumps({"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                      "scipy": scipy.__version__, "numpy": np.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
