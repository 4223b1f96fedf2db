"""Where a profiled run's GPU time went, by kernel, from ncu's per-kernel summary.

  ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv PROGRAM > ncu.csv
  python3 tools/gpu/kernel_table.py ncu.csv [--top 12] [--steps N]

Prints the kernels by total time (invocations x average duration), largest first, with their
share; with --steps, the time per step as well. Exits 2 when the file holds no kernel rows.
"""

import argparse
import collections
import csv
import sys

_UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
            "second": 1e9, "s": 1e9}


def kernel_times(lines):
    """{kernel name: total ns} from ncu's --print-summary per-kernel --csv output."""
    rows = csv.reader(line for line in lines if line.startswith('"'))
    header = next(rows, None)
    if header is None:
        return {}
    col = {name: i for i, name in enumerate(header)}
    needed = ("Kernel Name", "Invocations", "Metric Name", "Metric Unit", "Average")
    if any(n not in col for n in needed):
        raise ValueError(f"not ncu's per-kernel summary: columns {header}")
    totals = collections.Counter()
    for r in rows:
        if r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        unit = _UNIT_NS.get(r[col["Metric Unit"]])
        if unit is None:
            raise ValueError(f"unknown time unit {r[col['Metric Unit']]!r}")
        average = float(r[col["Average"]].replace(",", ""))
        totals[r[col["Kernel Name"]]] += average * unit * int(r[col["Invocations"]])
    return totals


def short(name, width=100):
    """The kernel's name without its argument list (its last parenthesised part), cut to width.

    Parentheses may come earlier too: `void ns::(anonymous namespace)::Kernel<T>(T *)`."""
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += name[i] == ")"
            depth -= name[i] == "("
            if depth == 0:
                name = name[:i]
                break
    return name if len(name) <= width else name[:width - 3] + "..."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--steps", type=int, default=0, help="steps the profile covers")
    args = parser.parse_args(argv)
    with open(args.csv, errors="replace") as f:
        try:
            totals = kernel_times(f)
        except ValueError as e:
            print(f"kernel_table: {args.csv}: {e}", file=sys.stderr)
            return 2
    total = sum(totals.values())
    if not total:
        print(f"kernel_table: {args.csv} holds no kernel times", file=sys.stderr)
        return 2
    per_step = f", {total / 1e6 / args.steps:.2f} ms per step" if args.steps else ""
    print(f"GPU time {total / 1e6:.2f} ms in {len(totals)} kernels{per_step}")
    for name, ns in totals.most_common(args.top):
        print(f"{ns / 1e6:10.2f} ms {100 * ns / total:5.1f}%  {short(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
