"""The results as a table on stdout, a JSON file and a PNG plot."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(results):
    note = ("%copy: of the copy into a warm buffer (headline, the stricter floor); "
            "%clone: of an allocating copy, which pays the page faults of a fresh output")
    head = (f"{'shape':<12} {'layout':<13} {'dtype':<8} {'mode':<16} {'poolx ms':>9} "
            f"{'GB/s':>6} {'%copy':>6} {'%clone':>6} {'x eager':>8} {'x compile':>9} {'x avgpool':>9} "
            f"{'saved B/out torch->poolx':>24}")
    lines = [note, head, "-" * len(head)]
    for r in results["cases"]:
        sp = r["speedup"]
        saved = r.get("saved_bytes_per_output") or {}
        ms = r["median_s"]["poolx"] * 1e3
        frac = 100 * r["fraction_of_copy"]["poolx"]
        frac_clone = r.get("fraction_of_clone", {}).get("poolx")
        saved_txt = (f"{_fmt(saved.get('eager'), '.1f')} -> {_fmt(saved.get('poolx'), '.1f')}"
                     if saved else "")
        lines.append(
            f"{r['shape']:<12} {r['layout']:<13} {r['dtype']:<8} {r['mode']:<16} "
            f"{ms:9.3f} {r['gbps']['poolx']:6.1f} {frac:6.0f} "
            f"{_fmt(frac_clone and 100 * frac_clone, '6.0f')} "
            f"{_fmt(sp.get('eager'), '8.2f')} {_fmt(sp.get('compile'), '9.2f')} "
            f"{_fmt(sp.get('avg_pool2d'), '9.2f')} {saved_txt:>24}")
    return "\n".join(lines)


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


def plot(results, path):
    cases = results["cases"]
    labels = [f"{r['shape']} {r['layout'][:2]} {r['dtype'][:4]} {r['mode']}" for r in cases]
    xs = range(len(cases))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(max(8, 0.22 * len(cases) + 2), 9),
                                      sharex=True)
    width = 0.4
    for i, peer in enumerate(["eager", "compile"]):
        ys = [r["speedup"].get(peer) or 0 for r in cases]
        top.bar([x + (i - 0.5) * width for x in xs], ys, width, label=f"poolx vs {peer}")
    top.axhline(1, color="k", lw=0.8)
    top.set_yscale("log")
    top.set_ylabel("speedup (x)")
    top.legend()
    top.set_title(f"poolx on {results['machine']['cpu_model']} "
                  f"({results['machine']['threads']} threads, {results['machine']['device']}, "
                  f"allocator: {results.get('allocator', 'system')})")
    floors = [("fraction_of_copy", f"warm copy_ ({results['copy_gbps']:.1f} GB/s)")]
    if "clone_gbps" in results:
        floors.append(("fraction_of_clone", f"allocating clone ({results['clone_gbps']:.1f} GB/s)"))
    for i, (field, label) in enumerate(floors):
        ys = [100 * (r.get(field, {}).get("poolx") or 0) for r in cases]
        bottom.bar([x + (i - 0.5) * width for x in xs], ys, width, label=f"% of {label}")
    bottom.axhline(100, color="k", lw=0.8)
    bottom.set_ylabel("poolx, % of copy bandwidth")
    bottom.legend()
    bottom.set_xticks(list(xs))
    bottom.set_xticklabels(labels, rotation=90, fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
