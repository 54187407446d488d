"""The results as a table on stdout, a JSON file and a PNG plot."""

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _fmt(x, spec):
    return "-" if x is None else format(x, spec)


def case_line(r):
    """One case as it finishes: poolx's time, its share of the copy bandwidth
    and its speedup over each peer."""
    peers = " ".join(f"x{p}={v:.2f}" for p, v in r["speedup"].items())
    return (f"case {r['key']}: poolx {r['median_s']['poolx'] * 1e3:.4f} ms, "
            f"{100 * r['fraction_of_copy']['poolx']:.0f}% of copy, {peers}")


def table(results):
    note = ("%copy: of the copy into a warm buffer (headline, the stricter floor); "
            "%clone: of an allocating copy, which pays the page faults of a fresh output")
    head = (f"{'shape':<12} {'layout':<13} {'dtype':<8} {'mode':<16} {'poolx ms':>9} "
            f"{'GB/s':>6} {'%copy':>6} {'%clone':>6} {'x eager':>8} {'x compile':>9} {'x avgpool':>9} "
            f"{'x generic':>9} "
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
            f"{_fmt(sp.get('avg_pool2d'), '9.2f')} {_fmt(sp.get('generic'), '9.2f')} "
            f"{saved_txt:>24}")
    return "\n".join(lines)


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1)


def plot(results, path):
    fig = figure(results)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure(results):
    """One panel per mode: the speedup of poolx over each measured peer, a bar
    per (shape, layout, dtype) on a linear axis with 1x marked, values written
    on the bars; the title names the machine, threads and allocator."""
    cases = results["cases"]
    modes = list(dict.fromkeys(r["mode"] for r in cases))
    peers = [p for p in ("eager", "compile", "avg_pool2d", "generic")
             if any(r["speedup"].get(p) is not None for r in cases)]
    rows = list(dict.fromkeys(f"{r['shape']} / {r['layout']} / {r['dtype']}" for r in cases))
    by_key = {(f"{r['shape']} / {r['layout']} / {r['dtype']}", r["mode"]): r for r in cases}
    cols = min(3, len(modes))
    grid_rows = -(-len(modes) // cols)
    height = max(2.5, 0.16 * len(rows) * max(1, len(peers)) + 1.2)
    fig, axes = plt.subplots(grid_rows, cols, figsize=(6.5 * cols, height * grid_rows),
                             squeeze=False)
    bar = 0.8 / max(1, len(peers))
    for ax, mode in zip(axes.flat, modes):
        for i, peer in enumerate(peers):
            ys = [i * bar + j for j in range(len(rows))]
            values = [(by_key.get((row, mode)) or {}).get("speedup", {}).get(peer) for row in rows]
            ax.barh(ys, [v or 0 for v in values], bar, label=f"vs torch {peer}",
                    color=f"C{i}")
            for y, v in zip(ys, values):
                if v is not None:
                    ax.text(v, y, f" {v:.2f}x", va="center", fontsize=6)
        ax.axvline(1, color="k", lw=1)
        ax.set_yticks([j + bar * (len(peers) - 1) / 2 for j in range(len(rows))])
        ax.set_yticklabels(rows, fontsize=6)
        ax.invert_yaxis()
        ax.set_title(mode, fontsize=9)
        ax.set_xlabel("speedup of poolx (x, 1x marked)", fontsize=7)
        ax.tick_params(axis="x", labelsize=7)
        ax.margins(x=0.15)
        ax.legend(fontsize=6, loc="lower right")
    for ax in list(axes.flat)[len(modes):]:
        ax.axis("off")
    machine = results["machine"]
    fig.suptitle(f"poolx on {machine['cpu_model']} ({machine['device']}), {machine['threads']} "
                 f"threads, allocator: {results.get('allocator', 'system')}, torch "
                 f"{machine.get('torch', '')}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    return fig
