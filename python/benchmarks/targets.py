"""The Python package's targets (issue 39), each beside its peers in this process: best and
median of REPEAT runs after a warm-up, hetla and its peers in turn in each round, as ratios
peer time / hetla time (> 1: hetla faster).

    python python/benchmarks/targets.py [--repeat 3] [--n 4096] [--count 10000] [--small 64]
                                        [--clusters 2x1]

Prints one line per comparison and a JSON object at the end. scipy and numpy run on the OpenBLAS
their wheels bundle, with its default thread count (every core); hetla on its default platform.
"""

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import scipy
import scipy.linalg as sl

import hetla


# Seconds of rest before each timed call: OpenBLAS's threads (scipy's, numpy's) spin for a while
# after a call returns, and would take a core from the call timed next.
PAUSE = 0.2


def alternated(fs, repeat, warm=1):
    """Best and median seconds of each callable over ``repeat`` rounds after ``warm`` ones, the
    callables run in turn in each round so that the machine's drift touches them alike;
    {name: (best, median)}."""
    for _ in range(warm):
        for f in fs.values():
            f()
    times = {name: [] for name in fs}
    for _ in range(repeat):
        for name, f in fs.items():
            time.sleep(PAUSE)
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def per_call(f, calls):
    """Seconds per call over ``calls`` calls (best of 5 batches)."""
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def spd(n, rng, count=None):
    shape = (n, n) if count is None else (count, n, n)
    g = rng.standard_normal(shape)
    return g @ np.swapaxes(g, -1, -2) + n * np.eye(n)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--small", type=int, default=64)
    p.add_argument("--clusters", help="hetla's clusters (a with hetla.Platform block), default auto")
    args = p.parse_args()
    if args.clusters:
        with hetla.Platform(clusters=args.clusters):
            return run(args)
    return run(args)


def run(args):
    rng = np.random.default_rng(1)
    out = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "hetla": hetla.__version__,
        "clusters": args.clusters or "auto",
        "rows": [],
    }

    def row(what, target, mine, peers):
        (hb, hm) = mine
        line = {"what": what, "target": target, "hetla_best_s": hb, "hetla_median_s": hm}
        text = f"{what}: hetla {hb:.4g} s (median {hm:.4g})"
        for name, (pb, pm) in peers.items():
            line[f"{name}_best_s"] = pb
            line[f"{name}_median_s"] = pm
            line[f"ratio_{name}"] = pb / hb
            text += f", {name} {pb:.4g} s ({pm:.4g}) -> {pb / hb:.3f}x"
        print(text + f"   [target {target}]", flush=True)
        out["rows"].append(line)

    n, r = args.n, args.repeat
    a = spd(n, rng)
    flops = n**3 / 3
    # C order (numpy's default): hetla factors the transpose in place, which is the same numbers.
    peers = alternated({"hetla": lambda: hetla.cho_factor(a), "scipy": lambda: sl.cho_factor(a),
                        "numpy": lambda: np.linalg.cholesky(a)}, r)
    mine = peers.pop("hetla")
    row(f"cho_factor f64 n={n} C-ordered ({flops / mine[0] / 1e9:.1f} Gflop/s)",
        ">= 2.0x scipy, >= 2.5x numpy", mine, peers)
    af = np.asfortranarray(a)
    peers = alternated({"hetla": lambda: hetla.cho_factor(af), "scipy": lambda: sl.cho_factor(af)}, r)
    mine = peers.pop("hetla")
    row(f"cho_factor f64 n={n} Fortran-ordered ({flops / mine[0] / 1e9:.1f} Gflop/s)",
        ">= 1.0x scipy", mine, peers)
    del a, af

    s = spd(args.small, rng, args.count)
    peers = alternated({"hetla": lambda: hetla.cho_factor(s), "scipy": lambda: sl.cho_factor(s)}, r)
    mine = peers.pop("hetla")
    row(f"batched cho_factor {args.count} x {args.small}x{args.small}", ">= 5x scipy", mine, peers)
    del s

    t = spd(4, rng)
    mine = per_call(lambda: hetla.cho_factor(t), 2000)
    peer = per_call(lambda: sl.cho_factor(t), 2000)
    numpy_peer = per_call(lambda: np.linalg.cholesky(t), 2000)
    line = {"what": "per-call cho_factor n=4", "target": "<= 3x scipy's time",
            "hetla_s": mine, "scipy_s": peer, "numpy_s": numpy_peer, "hetla_over_scipy": mine / peer}
    print(f"per-call cho_factor n=4: hetla {mine * 1e6:.2f} us, scipy {peer * 1e6:.2f} us, "
          f"numpy.linalg.cholesky {numpy_peer * 1e6:.2f} us -> hetla/scipy {mine / peer:.2f}   [target <= 3]")
    out["rows"].append(line)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
