"""The GPU targets of issue 5 as ratios, from `python -m bench --device cuda` JSON.

    python bench/gpu_targets.py bench.json [bench_compile.json ...]

Each target line gives the worst case (and its key), the median over the
layouts and dtypes measured, the goal, and whether the worst case meets it.
The goals are for an H100-class GPU, tiled 2x2 (seed, vgg) unless named."""

import json
import statistics
import sys

TILED = ("seed", "vgg-")

# (label, shape filter, mode, record field, peer, goal)
TARGETS = [
    ("forward, fraction of copy bandwidth (seed, vgg)", TILED, "forward",
     "fraction_of_copy", "poolx", 0.85),
    ("backward, fraction of copy bandwidth (seed, vgg)", TILED, "backward",
     "fraction_of_copy", "poolx", 0.85),
    ("forward+backward, speedup over F.max_pool2d eager (seed, vgg)", TILED,
     "forward+backward", "speedup", "eager", 3.0),
    ("forward+backward, speedup over torch.compile(F.max_pool2d) (seed, vgg)", TILED,
     "forward+backward", "speedup", "compile", 1.3),
    ("forward+backward, speedup over eager (resnet-stem, overlapping)", ("resnet-stem",),
     "forward+backward", "speedup", "eager", 1.5),
]


def load_cases(paths):
    cases = []
    for path in paths:
        try:
            with open(path) as f:
                cases += json.load(f)["cases"]
        except (OSError, ValueError, KeyError) as error:
            print(f"gpu_targets: no results from {path} ({error})")
    return cases


def main(paths):
    cases = load_cases(paths)
    print("GPU targets (worst case | median | goal):")
    for label, shapes, mode, field, peer, goal in TARGETS:
        found = [
            (c[field][peer], c["key"])
            for c in cases
            if c["mode"] == mode and c["shape"].startswith(shapes) and peer in c[field]
        ]
        if not found:
            print(f"  {label}: not measured")
            continue
        worst, key = min(found)
        median = statistics.median(v for v, _ in found)
        verdict = "met" if worst >= goal else "MISSED"
        print(f"  {label}: {worst:.2f} ({key}) | {median:.2f} | {goal:.2f} -> {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
