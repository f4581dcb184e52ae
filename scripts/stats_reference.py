#!/usr/bin/env python3
"""Reference values for src/stats.rs, computed with SciPy (the standard statistics package).

Writes tests/data/stats_reference.json, which the unit tests in src/stats.rs read. The values are
kept in the repository so `cargo test` needs no Python; re-run this script (with scipy installed,
e.g. `python3 -m venv /tmp/v && /tmp/v/bin/pip install scipy==1.17.1`) only to add cases.
"""
import json
import os

import scipy
from scipy import stats

wilson = []
for k, n in [(0, 1), (1, 1), (0, 5), (5, 5), (3, 5), (1, 10), (7, 10), (50, 100), (99, 100),
             (0, 20), (20, 20), (13, 37), (1, 3), (2, 3), (400, 1000), (9999, 10000)]:
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    wilson.append({"passes": k, "runs": n, "low": ci.low, "high": ci.high})

# McNemar's exact test is the two-sided sign test on the discordant pairs: b passed only in the
# first result, c only in the second.
mcnemar = []
for b, c in [(0, 0), (0, 1), (1, 0), (3, 0), (5, 0), (6, 0), (4, 4), (1, 7), (10, 2), (0, 10),
             (12, 30), (100, 80), (250, 300)]:
    p = 1.0 if b + c == 0 else stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue
    mcnemar.append({"only_first": b, "only_second": c, "p": p})

# Fisher's exact test, two-sided, on [[passes_a, fails_a], [passes_b, fails_b]].
fisher = []
for table in [[[1, 0], [0, 1]], [[5, 0], [0, 5]], [[10, 0], [5, 5]], [[3, 2], [2, 3]],
              [[20, 0], [12, 8]], [[8, 2], [1, 5]], [[0, 0], [3, 4]], [[100, 0], [90, 10]],
              [[50, 50], [30, 70]], [[7, 3], [7, 3]], [[0, 10], [10, 0]], [[1, 9], [11, 3]],
              [[1000, 0], [990, 10]]]:
    fisher.append({"table": table, "p": stats.fisher_exact(table, alternative="two-sided").pvalue})

out = {
    "generated_by": "scripts/stats_reference.py with scipy " + scipy.__version__,
    "wilson_95": wilson,
    "mcnemar_exact": mcnemar,
    "fisher_exact_two_sided": fisher,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                    "stats_reference.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
