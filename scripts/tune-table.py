#!/usr/bin/env python3
"""The tuner's pick beside the real sweep, as markdown tables, from `hetla tune --sweep --json`
reports (one file per factorisation and order):

    hetla tune --factorization lu --n 4096 --sweep --repeat 3 --json > lu-4096.json
    python3 scripts/tune-table.py lu-4096.json cholesky-4096.json ...

Prints one summary row per report (the pick, its predicted and measured time, the fastest
configuration measured, the pick's and the default's best time over the fastest's, how many
predictions fall within 15% of their measurement) and then every measured row.
"""
import json
import sys


def config(c):
    return f"{c['clusters']} b={c['tile']} {c['scheduler']}"


def main(paths):
    reports = [json.load(open(p)) for p in paths]
    print("| factorisation | n | pick | predicted ms | pick best ms | fastest measured | fastest ms "
          "| pick / fastest | default | default / fastest | predictions within 15% |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        rows = r["verified"]
        pick = rows[0]
        default = next(v for v in rows if v["role"] == "default")
        fastest = min(rows, key=lambda v: v["best_ms"])
        ratios = [v["predicted_over_best"] for v in rows if v["predicted_over_best"]]
        within = sum(1 for x in ratios if abs(x - 1) <= 0.15)
        print(f"| {r['factorization']} | {r['n']} | {config(pick['candidate'])} "
              f"| {pick['candidate']['predicted_ms']:.0f} | {pick['best_ms']:.0f} "
              f"| {config(fastest['candidate'])} | {fastest['best_ms']:.0f} "
              f"| {pick['best_ms'] / fastest['best_ms']:.3f} | {config(default['candidate'])} "
              f"| {default['best_ms'] / fastest['best_ms']:.3f} | {within} of {len(ratios)} |")
    print()
    print("| factorisation | n | role | configuration | predicted ms | best ms | median ms "
          "| predicted / best |")
    print("|---|---|---|---|---|---|---|---|")
    for r in reports:
        for v in r["verified"]:
            c = v["candidate"]
            ratio = v["predicted_over_best"]
            ratio = f"{ratio:.3f}" if ratio else "-"
            # A candidate the model has no rate for carries no prediction.
            predicted = f"{c['predicted_ms']:.0f}" if "predicted_ms" in c else "(no rate)"
            print(f"| {r['factorization']} | {r['n']} | {v['role']} | {config(c)} "
                  f"| {predicted} | {v['best_ms']:.0f} | {v['median_ms']:.0f} "
                  f"| {ratio} |")


if __name__ == "__main__":
    main(sys.argv[1:])
