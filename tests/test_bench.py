"""The benchmark runs and writes complete, well-formed results (never a timing check)."""

import json
import math
import os
import subprocess
import sys

import pytest

from bench import allocator
from bench import cases as bench_cases
from bench.__main__ import main
from bench.side_by_side import COMPARED_MODES

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_bench(tmp_path, *args):
    json_path, png_path = tmp_path / "out.json", tmp_path / "out.png"
    main(["--quick", "--no-progress", "--json", str(json_path), "--plot", str(png_path), *args])
    with open(json_path) as f:
        results = json.load(f)
    return results, png_path


def positive(x):
    return isinstance(x, (int, float)) and math.isfinite(x) and x > 0


def check_case(r, peers):
    assert set(r["median_s"]) == set(peers)
    assert set(r["speedup"]) == set(peers) - {"poolx"}
    for table in ("median_s", "gbps", "fraction_of_copy", "fraction_of_clone"):
        assert set(r[table]) == set(peers)
        assert all(positive(v) for v in r[table].values()), (r["key"], table, r[table])
    assert all(positive(v) for v in r["speedup"].values())
    assert positive(r["minimal_bytes"])
    saved = r["saved_bytes_per_output"]
    # poolx keeps its 1-byte argmax; torch keeps the input and int64 indices
    assert saved["poolx"] == 1.0
    assert saved["eager"] > 8


def test_quick_run_covers_every_case(tmp_path):
    results, png = run_bench(tmp_path)
    peers = ["eager", "avg_pool2d", "poolx"]
    expected = {
        f"{s}/{layout}/{dtype}/{mode}"
        for s in bench_cases.QUICK["shapes"]
        for layout in ("nchw", "channels_last")
        for dtype in bench_cases.QUICK["dtypes"]
        for mode in bench_cases.MODES
    }
    assert {r["key"] for r in results["cases"]} == expected
    for r in results["cases"]:
        # average pooling has no indices: it is a peer of the pooling modes alone
        pooling = r["mode"] in ("inference", "forward", "backward", "forward+backward")
        check_case(r, peers if pooling else ["eager", "poolx"])
    assert positive(results["copy_gbps"]) and positive(results["clone_gbps"])
    assert results["allocator"] in ("system", "tcmalloc", "jemalloc")
    machine = results["machine"]
    for key in ("cpu_model", "threads", "torch", "poolx_commit", "cpu_capability"):
        assert machine[key], key
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_compile_peer(tmp_path):
    results, _ = run_bench(tmp_path, "--shapes", "mnist", "--layouts", "nchw", "--dtypes",
                           "float32", "--modes", "forward+backward", "--peers", "compile")
    (r,) = results["cases"]
    check_case(r, ["compile", "poolx"])


def test_rounds_report_the_median_of_each_peers_rounds(tmp_path):
    results, _ = run_bench(tmp_path, "--shapes", "mnist", "--layouts", "nchw", "--dtypes",
                           "float32", "--modes", "inference", "--rounds", "3")
    (r,) = results["cases"]
    check_case(r, ["eager", "avg_pool2d", "poolx"])
    assert results["settings"]["rounds"] == 3
    for peer, times in r["median_s_by_round"].items():
        assert len(times) == 3 and all(positive(t) for t in times)
        assert r["median_s"][peer] == sorted(times)[1]


def test_side_by_side_ratios_come_from_the_same_rounds(tmp_path):
    results, _ = run_bench(tmp_path, "--layouts", "channels_last", "--rounds", "3",
                           "--modes", *COMPARED_MODES)
    records = results["poolx_side_by_side"]
    assert [(r["shape"], r["layout"]) for r in records] == [
        (s, "channels_last") for s in bench_cases.QUICK["shapes"]]
    for r in records:
        median = r["median_s"]
        assert set(median) == {"float32", "bfloat16"}
        assert all(set(m) == set(COMPARED_MODES) for m in median.values())
        assert all(positive(t) for m in median.values() for t in m.values())
        for mode, ratio in r["narrow_over_float32"]["bfloat16"].items():
            assert ratio == median["bfloat16"][mode] / median["float32"][mode]
        for dtype, ratio in r["inference_over_forward"].items():
            assert ratio == median[dtype]["inference"] / median[dtype]["forward"]


def test_side_by_side_needs_something_to_compare(tmp_path):
    one_dtype, _ = run_bench(tmp_path, "--shapes", "mnist", "--dtypes", "float32",
                             "--modes", "backward")
    assert one_dtype["poolx_side_by_side"] == []
    skipped, _ = run_bench(tmp_path, "--shapes", "mnist", "--no-side-by-side")
    assert "poolx_side_by_side" not in skipped


def test_models_train_alike_stock_and_converted(tmp_path):
    json_path = tmp_path / "models.json"
    main(["--models", "mnist", "segnet", "--quick", "--rounds", "1", "--json", str(json_path)])
    with open(json_path) as f:
        results = json.load(f)
    records = results["models"]
    assert [(r["model"], r["layout"]) for r in records] == [
        (m, layout) for m in ("mnist", "segnet") for layout in ("nchw", "channels_last")]
    for r in records:
        assert r["losses_equal"] and positive(r["first_loss"]["poolx"])
        assert positive(r["speedup"]) and all(positive(t) for t in r["median_s"].values())
    assert positive(results["geometric_mean_speedup"])


def run_module(*args):
    # any allocator preloaded here goes; other preloads (sanitizers) stay
    preload = allocator.preload_without_allocators(os.environ.get("LD_PRELOAD", ""))
    env = dict(os.environ, LD_PRELOAD=":".join(preload))
    return subprocess.run([sys.executable, "-m", "bench", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


@pytest.mark.parametrize("name", ["tcmalloc", "jemalloc"])
def test_allocator_reexecutes_under_it_and_names_it(tmp_path, name):
    if allocator.find(name) is None:
        done = run_module("--allocator", name, "--quick")
        assert done.returncode != 0
        assert f"--allocator {name}: its library was not found" in done.stderr
        assert allocator.LIBRARIES[name][0] in done.stderr
        return
    json_path = tmp_path / "out.json"
    done = run_module("--allocator", name, "--quick", "--shapes", "mnist", "--layouts", "nchw",
                      "--dtypes", "float32", "--modes", "inference", "--no-progress",
                      "--no-side-by-side", "--json", str(json_path), "--plot", "")
    assert done.returncode == 0, done.stderr
    assert f"allocator: {name}" in done.stdout
    with open(json_path) as f:
        assert json.load(f)["allocator"] == name


def test_other_preloaded_libraries_stay_first():
    kept = allocator.preload_without_allocators(
        "/usr/lib/libasan.so.8:/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 /x/libubsan.so")
    assert kept == ["/usr/lib/libasan.so.8", "/x/libubsan.so"]


def test_a_missing_allocator_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(allocator, "find", lambda name: None)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    with pytest.raises(SystemExit, match="apt-get install libjemalloc2"):
        allocator.ensure("jemalloc", ["--quick"])


def test_plot_shows_what_was_measured():
    """The plot's legend lists only the peers measured, its rows carry full case
    names, its axis is linear with 1x marked, and its title names the machine,
    threads and allocator."""
    from bench import report

    def case(shape, layout, dtype, mode, speedup):
        return {"shape": shape, "layout": layout, "dtype": dtype, "mode": mode,
                "speedup": speedup}

    results = {
        "allocator": "tcmalloc",
        "machine": {"cpu_model": "Test CPU 9000", "device": "cpu", "threads": 2,
                    "torch": "2.13.0+cpu"},
        "cases": [
            case("vgg-64@224", "channels_last", "bfloat16", "inference", {"eager": 2.5}),
            case("mnist", "nchw", "float32", "inference", {"eager": 0.8}),
            case("mnist", "nchw", "float32", "unpool", {"eager": 1.7}),
        ],
    }
    fig = report.figure(results)
    try:
        axes = [ax for ax in fig.axes if ax.has_data()]
        assert [ax.get_title() for ax in axes] == ["inference", "unpool"]
        for ax in axes:
            assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vs torch eager"]
            assert ax.get_xscale() == "linear"
            assert any(line.get_xdata()[0] == 1 for line in ax.get_lines())
        labels = [t.get_text() for t in axes[0].get_yticklabels()]
        assert labels == ["vgg-64@224 / channels_last / bfloat16", "mnist / nchw / float32"]
        values = {t.get_text().strip() for t in axes[0].texts}
        assert values == {"2.50x", "0.80x"}
        title = fig._suptitle.get_text()
        for word in ("Test CPU 9000", "2 threads", "tcmalloc", "2.13.0+cpu"):
            assert word in title
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


def test_kernel_profile_lists_each_peers_time_and_kernels(capsys):
    from bench.kernel_profile import main as profile_main

    profile_main(["--device", "cpu", "--shapes", "mnist", "--layouts", "channels_last",
                  "--modes", "backward", "unpool", "--calls", "1"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("mnist/")]
    assert [line.split(":")[0] for line in lines] == [
        f"mnist/channels_last/float32/{mode} {peer}"
        for mode in ("backward", "unpool") for peer in ("eager", "poolx")]
    poolx_unpool = lines[-1]
    assert "poolx::max_unpool2d" in poolx_unpool and float(poolx_unpool.split()[2]) > 0


def test_family_runs_every_path_of_the_family_against_torch():
    rows = main(["--family", "--quick", "--rounds", "1", "--no-progress"])
    from bench.family import CASES, DTYPES, LAYOUTS

    assert len(rows) == sum(len(LAYOUTS[c.dims]) * len(c.modes) for c in CASES) * len(DTYPES)
    assert {c.dims for c in CASES if not c.output} == {1, 3}
    assert {c.dims for c in CASES if c.output} == {1, 2}
    assert all(torch_s > 0 and poolx_s > 0 and floor_s > 0
               for *_, torch_s, poolx_s, floor_s in rows)
