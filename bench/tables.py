"""Markdown tables for the README from the benchmark's JSON files.

python -m bench.tables docs/results/cpu.json docs/results/models.json
"""

import json
import statistics
import sys

MODES = ["inference", "forward+backward", "return_indices", "unpool", "unpool_argmax",
         "pool+unpool", "argmax_to_mask"]


def speedup_table(results, dtype):
    """torch eager time / poolx time, a row per (shape, layout), a column per path."""
    rows = {}
    for c in results["cases"]:
        if c["dtype"] == dtype and c["mode"] in MODES:
            rows.setdefault((c["shape"], c["layout"]), {})[c["mode"]] = c["speedup"]["eager"]
    head = "| shape | layout | " + " | ".join(MODES) + " |"
    lines = [head, "|" + "---|" * (len(MODES) + 2)]
    for (shape, layout), by_mode in rows.items():
        cells = [f"{by_mode[m]:.2f}x" if m in by_mode else "-" for m in MODES]
        lines.append(f"| {shape} | {layout} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def training_table(results, dtype="float32"):
    lines = ["| shape | layout | poolx ms | torch ms | vs eager | poolx % of copy |",
             "|---|---|---|---|---|---|"]
    for c in results["cases"]:
        if c["dtype"] == dtype and c["mode"] == "forward+backward":
            lines.append(f"| {c['shape']} | {c['layout']} | {c['median_s']['poolx'] * 1e3:.3g} | "
                         f"{c['median_s']['eager'] * 1e3:.3g} | {c['speedup']['eager']:.2f}x | "
                         f"{100 * c['fraction_of_copy']['poolx']:.0f}% |")
    return "\n".join(lines)


def slower_cases(results):
    out = [c for c in results["cases"] if c["speedup"].get("eager", 2) < 1.0]
    return [f"- {c['key']}: {c['speedup']['eager']:.2f}x ({c['median_s']['poolx'] * 1e3:.3g} ms "
            f"against {c['median_s']['eager'] * 1e3:.3g})" for c in out]


def models_table(models):
    lines = ["| model | layout | stock ms | converted ms | speedup | losses equal |",
             "|---|---|---|---|---|---|"]
    for r in models["models"]:
        lines.append(f"| {r['model']} | {r['layout']} | {r['median_s']['stock'] * 1e3:.1f} | "
                     f"{r['median_s']['poolx'] * 1e3:.1f} | {r['speedup']:.3f}x | "
                     f"{r['losses_equal']} |")
    lines.append(f"\nGeometric mean {models['geometric_mean_speedup']:.3f}x "
                 f"(allocator: {models['allocator']}, {models['threads']} threads).")
    return "\n".join(lines)


def main(paths):
    for path in paths:
        with open(path) as f:
            results = json.load(f)
        print(f"## {path} (allocator: {results.get('allocator')})\n")
        if "models" in results:
            print(models_table(results), "\n")
            continue
        print(f"copy floor {results['copy_gbps']:.1f} GB/s\n")
        print(training_table(results), "\n")
        for dtype in ("float32", "bfloat16"):
            print(f"### {dtype}: torch eager time / poolx time\n")
            print(speedup_table(results, dtype), "\n")
        slower = slower_cases(results)
        print(f"### slower than eager: {len(slower)} of {len(results['cases'])}\n")
        print("\n".join(slower), "\n")
        ratios = [c["speedup"]["eager"] for c in results["cases"] if "eager" in c["speedup"]]
        print(f"geometric mean over every case: {statistics.geometric_mean(ratios):.2f}x\n")


if __name__ == "__main__":
    main(sys.argv[1:])
