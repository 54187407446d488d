"""poolx against itself, side by side: bfloat16 (or float16) against float32,
and inference against the forward with argmax, measured in turns.

The main table measures each case apart, minutes from the case it is
compared with here, so a shared machine's drift between them (5-10% on small
cases) shows up as a difference. Here every (dtype, mode) of one shape and
layout is timed in the same rounds, as the peers of a case are.
"""

import statistics

COMPARED_MODES = ["inference", "forward", "backward", "forward+backward"]


def side_by_side(shapes, layouts, dtypes, modes, rounds, min_run_time, device, progress=True):
    """One record per (shape, layout): each (dtype, mode)'s median over
    `rounds` turns, and the ratios of those medians."""
    import torch
    from tqdm import tqdm

    from bench.cases import DTYPES, LAYOUTS
    from bench.peers import CaseTensors, make_runner
    from bench.timing import measure, warm_up

    narrow = [d for d in dtypes if d != "float32"]
    compares_dtypes = "float32" in dtypes and bool(narrow)
    compares_modes = "inference" in modes and "forward" in modes
    if not (compares_dtypes or compares_modes):
        return []
    if not compares_dtypes:
        dtypes, modes = dtypes[:1], ["inference", "forward"]
    modes = [m for m in COMPARED_MODES if m in modes]
    records, threads = [], torch.get_num_threads()
    bar = tqdm(total=len(shapes) * len(layouts) * len(dtypes) * len(modes) * rounds,
               disable=not progress, unit="run", desc="poolx side by side")
    for shape in shapes:
        for layout in layouts:
            tensors = {d: CaseTensors(shape, LAYOUTS[layout], DTYPES[d], device) for d in dtypes}
            runs = {(d, m): make_runner("poolx", m, tensors[d], shape)
                    for d in dtypes for m in modes}
            times = {key: [] for key in runs}
            for i in range(rounds):
                for key, run in runs.items():
                    if i == 0:
                        warm_up(run, min_run_time)
                    times[key].append(measure(run, threads, min_run_time))
                    bar.update()
            median = {key: statistics.median(t) for key, t in times.items()}
            records.append(_record(shape.name, layout, median, dtypes, modes))
            for t in tensors.values():
                t.release()
    bar.close()
    return records


def _record(shape, layout, median, dtypes, modes):
    rec = {"shape": shape, "layout": layout,
           "median_s": {d: {m: median[d, m] for m in modes} for d in dtypes},
           # same element count in both dtypes, so a time ratio is a per-element one
           "narrow_over_float32": {}, "inference_over_forward": {}}
    if "float32" in dtypes:
        rec["narrow_over_float32"] = {
            d: {m: median[d, m] / median["float32", m] for m in modes}
            for d in dtypes if d != "float32"}
    if "inference" in modes and "forward" in modes:
        rec["inference_over_forward"] = {
            d: median[d, "inference"] / median[d, "forward"] for d in dtypes}
    return rec


def table(records):
    lines = ["poolx side by side (time ratios, each pair measured in the same rounds; "
             "below 1: the first is faster)"]
    for r in records:
        cells = [f"{d}/float32 {m} {x:.2f}" for d, by_mode in r["narrow_over_float32"].items()
                 for m, x in by_mode.items()]
        cells += [f"{d} inference/forward {x:.2f}"
                  for d, x in r["inference_over_forward"].items()]
        lines.append(f"{r['shape']:<12} {r['layout']:<13} " + ", ".join(cells))
    return "\n".join(lines)
