"""Before and after tuning, for a user who sets nothing: hetla's default calls (cho_factor,
spd_inv, lu_factor, qr) with and without the tuned configurations `hetla tune` saves,
alternated in each round in one process (the library reads the tuned file at every call, from
the directory HETLA_PERFMODEL_DIR names).

    python python/benchmarks/tuned_defaults.py --tuned FILE [--models DIR] [--orders 2048,4096]
                                               [--repeat 3]

FILE is a tuned-<backend>.json; DIR holds the performance models a user had before tuning (the
default: the user cache's, ~/.cache/hetla/perfmodels). Both sides get copies of DIR's models; the
"after" side also FILE. Prints a line per factorisation and order, and a JSON object at the end:
best and median seconds of each side, and after / before (< 1: tuning made the call faster).
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import hetla


def calls(n, rng):
    g = rng.standard_normal((n, n))
    spd = g @ g.T + n * np.eye(n)
    general = rng.standard_normal((n, n))
    return {
        "cholesky": lambda: hetla.cho_factor(spd),
        "inverse": lambda: hetla.spd_inv(spd),
        "lu": lambda: hetla.lu_factor(general),
        "qr": lambda: hetla.qr(general, mode="economic"),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tuned", required=True, help="a tuned-<backend>.json")
    p.add_argument("--models", default=str(Path.home() / ".cache/hetla/perfmodels"))
    p.add_argument("--orders", default="2048,4096,8192")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", help="one factorisation: cholesky, inverse, lu or qr")
    args = p.parse_args()
    tuned = Path(args.tuned)
    if not tuned.is_file():
        p.error(f"--tuned {tuned}: no such file (run `hetla tune`, or give a saved one)")
    sides = {}
    for side in ("before", "after"):
        d = Path(tempfile.mkdtemp(prefix=f"hetla-{side}-"))
        for f in Path(args.models).glob("perfmodels-*.json") if Path(args.models).is_dir() else []:
            shutil.copy(f, d)
        if side == "after":
            shutil.copy(tuned, d / tuned.name)
        sides[side] = str(d)
    rng = np.random.default_rng(1)
    out = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
           "hetla": hetla.__version__, "tuned": str(tuned), "rows": []}
    for n in (int(x) for x in args.orders.split(",")):
        for name, call in calls(n, rng).items():
            if args.only and name != args.only:
                continue
            times = {side: [] for side in sides}
            for round in range(args.repeat + 1):
                for side, d in sides.items():
                    os.environ["HETLA_PERFMODEL_DIR"] = d
                    t = time.perf_counter()
                    call()
                    if round > 0:  # round 0 warms both sides up
                        times[side].append(time.perf_counter() - t)
            b, a = times["before"], times["after"]
            ratios = [x / y for x, y in zip(a, b)]
            row = {"factorization": name, "n": n,
                   "before_best_s": min(b), "before_median_s": statistics.median(b),
                   "after_best_s": min(a), "after_median_s": statistics.median(a),
                   "after_over_before_best": min(a) / min(b),
                   "after_over_before_per_round_median": statistics.median(ratios)}
            out["rows"].append(row)
            print(f"{name:8} n={n}: before {min(b):.4f} s (median {statistics.median(b):.4f}), "
                  f"after {min(a):.4f} s ({statistics.median(a):.4f}) -> after/before best "
                  f"{row['after_over_before_best']:.3f}, per-round median "
                  f"{row['after_over_before_per_round_median']:.3f}", flush=True)
    os.environ.pop("HETLA_PERFMODEL_DIR", None)
    for d in sides.values():
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
