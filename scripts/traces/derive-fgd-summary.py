#!/usr/bin/env python3
"""Derives fgd_policy_summary.csv from the FGD authors' cached results.

    derive-fgd-summary.py FOLDER > fgd_policy_summary.csv

FOLDER holds the three published files (analysis_allo_discrete.csv,
analysis_frag_discrete.csv, analysis_frag_ratio_discrete.csv: one row per
workload, policy and seed; column k is the value when the arrived GPU requests
equal k% of the cluster's GPUs). The summary has one row per workload and
policy (in the order they first appear), with means over the seeds:

  alloc_pct_mean_at_K     mean allocation ratio at K% arrival (K = 80 .. 130)
  alloc_pct_sd_at_100     its sample standard deviation at 100%
  unalloc_pct_mean_at_K   100 - the mean allocation (K = 100, 130)
  unalloc_gpus_at_K       that share of the cluster's GPUs (total_gpus), rounded
  unalloc_pct_median_at_100   100 - the median allocation at 100%
  frag_amount_pct_of_cluster_mean_at_K, frag_ratio_pct_mean_at_K   (K = 100, 90)

Numbers are rounded to two decimals and written as Python writes floats;
lines end in CRLF (as the summary the project's results were checked against).
gpupool's fetch-traces.sh runs this and checks the result's SHA-256.
"""
import csv
import statistics
import sys

ALLOC_LEVELS = (80, 90, 95, 100, 105, 110, 120, 130)
HEADER = (
    ["workload", "policy", "n_seeds"]
    + [f"alloc_pct_mean_at_{k}" for k in ALLOC_LEVELS]
    + ["alloc_pct_sd_at_100", "unalloc_pct_mean_at_100", "unalloc_gpus_at_100", "unalloc_pct_median_at_100",
       "unalloc_pct_mean_at_130", "unalloc_gpus_at_130",
       "frag_amount_pct_of_cluster_mean_at_100", "frag_ratio_pct_mean_at_100",
       "frag_amount_pct_of_cluster_mean_at_90", "frag_ratio_pct_mean_at_90"]
)


def read_groups(path, groups, part):
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["workload"], row["sc_policy"])
            groups.setdefault(key, {"allo": [], "frag": [], "ratio": []})[part].append(row)


def column(rows, level):
    return [float(r[str(level)]) for r in rows]


def two(x):
    return str(round(x, 2))


def summary_row(workload, policy, parts):
    allo = parts["allo"]
    total_gpus = int(allo[0]["total_gpus"])
    mean = lambda rows, level: statistics.mean(column(rows, level))
    unalloc_100 = 100 - mean(allo, 100)
    unalloc_130 = 100 - mean(allo, 130)
    row = [workload, policy.split("-", 1)[1], str(len(allo))]
    row += [two(mean(allo, k)) for k in ALLOC_LEVELS]
    row += [two(statistics.stdev(column(allo, 100))), two(unalloc_100), str(round(unalloc_100 / 100 * total_gpus)),
            two(100 - statistics.median(column(allo, 100))), two(unalloc_130),
            str(round(unalloc_130 / 100 * total_gpus))]
    row += [two(mean(parts["frag"], 100)), two(mean(parts["ratio"], 100)),
            two(mean(parts["frag"], 90)), two(mean(parts["ratio"], 90))]
    return row


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: derive-fgd-summary.py FOLDER > fgd_policy_summary.csv")
    folder = sys.argv[1]
    groups = {}
    for name, part in (("analysis_allo_discrete.csv", "allo"), ("analysis_frag_discrete.csv", "frag"),
                       ("analysis_frag_ratio_discrete.csv", "ratio")):
        read_groups(f"{folder}/{name}", groups, part)
    out = sys.stdout.buffer
    out.write((",".join(HEADER) + "\r\n").encode())
    for (workload, policy), parts in groups.items():
        out.write((",".join(summary_row(workload, policy, parts)) + "\r\n").encode())


if __name__ == "__main__":
    main()
