"""The scipy drop-in's speed targets (issue 49), each beside scipy in this process: best and median
of REPEAT runs after a warm-up, as ratios scipy time / hetla time (> 1: hetla faster).

    python python/benchmarks/scipy_targets.py [--repeat 3]

lu_factor n = 3000; qr(mode="economic") 4000 x 1000; solve n = 3000 with 10 right-hand sides;
lstsq of a rank-deficient 4000 x 1000 (rank 900) against scipy's gelsy; cho_factor n = 3000 in
C order. scipy runs on the OpenBLAS its wheel bundles, with its default thread count (every
core); hetla on its default platform. Prints one line per target and a JSON object at the end.
"""

import argparse
import json
import os
import platform

import numpy as np
import scipy
import scipy.linalg as sl

import hetla
from targets import timed  # the same warm-up-then-repeat timing as the package's targets


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rng = np.random.default_rng(49)
    a3000 = rng.standard_normal((3000, 3000))
    tall = rng.standard_normal((4000, 1000))
    deficient = rng.standard_normal((4000, 900)) @ rng.standard_normal((900, 1000))
    spd = a3000 @ a3000.T + 3000 * np.eye(3000)
    b10 = rng.standard_normal((3000, 10))
    b_tall = rng.standard_normal((4000, 1))
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
            lambda: hetla.lstsq(deficient, b_tall),
            lambda: sl.lstsq(deficient, b_tall, lapack_driver="gelsy"),
        ),
        ("cho_factor n=3000 C order", lambda: hetla.cho_factor(spd), lambda: sl.cho_factor(spd)),
    ]
    rows = []
    for name, ours, theirs in cases:
        h = timed(ours, args.repeat)
        s = timed(theirs, args.repeat)
        rows.append({"case": name, "hetla_s": h, "scipy_s": s, "ratio_best": s[0] / h[0],
                     "ratio_median": s[1] / h[1]})
        print(f"{name:40s} hetla {h[0]:.4f} s (median {h[1]:.4f}), scipy {s[0]:.4f} s "
              f"(median {s[1]:.4f}): {s[0] / h[0]:.2f}x best, {s[1] / h[1]:.2f}x median", flush=True)
    print(json.dumps({"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                      "scipy": scipy.__version__, "numpy": np.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
