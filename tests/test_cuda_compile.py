"""The CUDA sources compile with nvcc against the installed PyTorch's headers
(a CPU-only PyTorch is enough) for every target architecture, ptxas reports no
register spills, and the tiled fast paths use vector memory instructions.

Runs wherever nvcc exists, GPU or not, with setup.py's nvcc flags and the C++
standard torch.utils.cpp_extension builds with."""

import concurrent.futures
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from torch.utils import cpp_extension

ROOT = Path(__file__).resolve().parents[1]
CU_SOURCES = sorted((ROOT / "csrc" / "cuda").glob("*.cu"))
ARCHS = ["75", "80", "86", "89", "90", "100", "120"]


def find_nvcc():
    home = cpp_extension.CUDA_HOME
    candidate = os.path.join(home, "bin", "nvcc") if home else None
    return candidate if candidate and os.path.exists(candidate) else shutil.which("nvcc")


NVCC = find_nvcc()
pytestmark = pytest.mark.skipif(
    NVCC is None, reason="nvcc not found (install the CUDA toolkit or set CUDA_HOME)"
)


def setup_py_nvcc_flags():
    """The quoted flags of setup.py's `nvcc = opt + [...]` list."""
    text = (ROOT / "setup.py").read_text()
    block = re.search(r"nvcc = opt \+ \[(.*?)\]", text, re.S)
    assert block, "setup.py no longer has an `nvcc = opt + [...]` flag list"
    flags = re.findall(r'"([^"]+)"', block.group(1))
    assert any(f.startswith("-D__CUDA_NO_HALF") for f in flags), flags
    return flags


def nvcc_command(source, *args):
    includes = [str(ROOT / "csrc" / "include")] + cpp_extension.include_paths()
    return (
        [NVCC, "-std=c++20", "-O3", *setup_py_nvcc_flags()]
        + [f"-I{p}" for p in includes]
        + [*args, str(source)]
    )


def run_nvcc(command):
    done = subprocess.run(command, capture_output=True, text=True)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)}\nfailed:\n{output[-6000:]}"
    return output


def compile_for_archs(source, out_dir):
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in ARCHS]
    out = Path(out_dir) / (source.stem + ".o")
    return run_nvcc(nvcc_command(source, *gencode, "-Xptxas", "-v", "-c", "-o", str(out)))


def parse_ptxas_report(report):
    """{(kernel, arch): {"registers": n, "spill_stores": n, "spill_loads": n}}."""
    kernels, current = {}, None
    for line in report.splitlines():
        entry = re.search(r"Compiling entry function '(\S+)' for '(sm_\d+)'", line)
        if entry:
            current = kernels.setdefault(entry.groups(), {})
            continue
        spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if spills and current is not None:
            current["spill_stores"], current["spill_loads"] = map(int, spills.groups())
        used = re.search(r"Used (\d+) registers", line)
        if used and current is not None:
            current["registers"] = int(used.group(1))
    return kernels


def demangle(name):
    filt = shutil.which("c++filt")
    if filt is None:
        return name
    return subprocess.run([filt], input=name, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def ptxas_reports(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("nvcc")
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        reports = pool.map(lambda s: compile_for_archs(s, out_dir), CU_SOURCES)
        return dict(zip([s.name for s in CU_SOURCES], reports))


def test_every_source_compiles_without_warnings_in_poolx_code(ptxas_reports):
    assert CU_SOURCES, "no .cu sources found"
    for name, report in ptxas_reports.items():
        ours = [l for l in report.splitlines() if "warning" in l.lower() and "csrc/" in l]
        assert not ours, f"{name}:\n" + "\n".join(ours)


def test_ptxas_reports_every_kernel_on_every_arch_without_spills(ptxas_reports):
    for name, report in ptxas_reports.items():
        kernels = parse_ptxas_report(report)
        assert kernels, f"{name}: no kernel in the ptxas report"
        for (kernel, arch), info in kernels.items():
            assert "registers" in info and "spill_stores" in info, (
                f"{name}: ptxas report for {demangle(kernel)} on {arch} not parsed"
            )
        per_arch = {arch: {k for k, a in kernels if a == arch} for arch in {a for _, a in kernels}}
        assert sorted(per_arch) == sorted(f"sm_{a}" for a in ARCHS), name
        assert len({frozenset(v) for v in per_arch.values()}) == 1, f"{name}: kernels differ"
        spilling = [
            f"{arch} {demangle(kernel)}: {info['spill_stores']} B stored, "
            f"{info['spill_loads']} B loaded"
            for (kernel, arch), info in sorted(kernels.items())
            if info["spill_stores"] or info["spill_loads"]
        ]
        assert not spilling, f"{name} spills registers:\n" + "\n".join(spilling)


# Tiled kernels and the vector instructions each must contain (16 bytes, or 8
# for a half-width group): loads of input/grad and stores of values/grad_input.
VECTOR_LOAD = r"ld\.global(\.nc)?\.v(2|4)\.(u32|f32|b32|u64|f64)"
VECTOR_STORE = r"st\.global\.v(2|4)\.(u32|f32|b32|u64|f64)"
TILED_KERNELS = {
    "max_pool2d_forward.cu": [
        "max_pool2d_tiled_nchw_forward_kernel<float, 4, true>",
        "max_pool2d_tiled_nchw_forward_kernel<float, 4, false>",
        "max_pool2d_tiled_nchw_forward_kernel<c10::Half, 8, true>",
        "cl_forward_kernel<float, 4, true>",
        "cl_forward_kernel<float, 2, false>",
        "cl_forward_kernel<c10::BFloat16, 8, true>",
    ],
    "max_pool2d_backward.cu": [
        "tiled_nchw_route_kernel<(Route)0, ArgmaxTaps, float, 4>",
        "tiled_nchw_route_kernel<(Route)1, ArgmaxTaps, float, 4>",
        "tiled_nchw_route_kernel<(Route)0, ArgmaxTaps, c10::Half, 8>",
        "tiled_cl_route_kernel<(Route)0, ArgmaxTaps, float, 4>",
        "tiled_cl_route_kernel<(Route)1, ArgmaxTaps, float, 4>",
        "tiled_cl_route_kernel<(Route)0, ArgmaxTaps, c10::BFloat16, 8>",
        "tiled_cl_route_kernel<(Route)0, ArgmaxTaps, float, 2>",
        "cl_gather_kernel<(Route)0, float, 4>",
        "cl_gather_kernel<(Route)1, c10::BFloat16, 8>",
        "cl_gather_kernel<(Route)0, float, 2>",
    ],
    "argmax_ops.cu": [
        "tiled_nchw_route_kernel<(Route)2, ArgmaxTaps, unsigned char, 16>",
        "tiled_cl_route_kernel<(Route)2, ArgmaxTaps, unsigned char, 16>",
        "tiled_nchw_route_kernel<(Route)1, IndexTaps, unsigned int, 4>",
        "tiled_cl_route_kernel<(Route)1, IndexTaps, unsigned short, 8>",
    ],
}


def ptx_entries(ptx):
    """{demangled kernel name without its parameter list: body}."""
    entries = {}
    for match in re.finditer(r"\.entry (\S+)\((.*?)\n\}", ptx, re.S):
        name = demangle(match.group(1))
        name = re.sub(r"poolx::|cuda_launch::|\(anonymous namespace\)::", "", name)
        entries[without_parameters(name).removeprefix("void ")] = match.group(2)
    return entries


def without_parameters(name):
    """A demangled function name without its parameter list (template
    arguments may hold parentheses too: `(Route)0`)."""
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i]
    return name


def sm90_ptx_entries(source, tmp_path):
    """ptx_entries of csrc/cuda/<source> compiled to PTX for sm_90."""
    ptx_file = tmp_path / "out.ptx"
    run_nvcc(nvcc_command(ROOT / "csrc" / "cuda" / source, "-arch=sm_90", "-ptx", "-o",
                          str(ptx_file)))
    return ptx_entries(ptx_file.read_text())


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt needed to find kernels")
@pytest.mark.parametrize("source", sorted(TILED_KERNELS))
def test_tiled_kernels_use_vector_loads_and_stores(source, tmp_path):
    entries = sm90_ptx_entries(source, tmp_path)
    for kernel in TILED_KERNELS[source]:
        assert kernel in entries, f"{kernel} not in the PTX; kernels: {sorted(entries)}"
        assert re.search(VECTOR_LOAD, entries[kernel]), f"{kernel}: no vector load"
        assert re.search(VECTOR_STORE, entries[kernel]), f"{kernel}: no vector store"


# The plane scatter (plane_scatter.cuh) reads 4 keys per shared-memory load.
PLANE_SCATTERS = {
    "argmax_ops.cu": "IndexClaims",
    "max_pool2d_backward.cu": "ArgmaxClaims<unsigned char>",
}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="c++filt needed to find kernels")
@pytest.mark.parametrize("source", sorted(PLANE_SCATTERS))
def test_plane_scatter_reads_keys_in_vectors(source, tmp_path):
    entries = sm90_ptx_entries(source, tmp_path)
    for bits in ["unsigned int", "unsigned short"]:
        wanted = f"PlaneScatter<{PLANE_SCATTERS[source]}, {bits}>"
        found = [body for name, body in entries.items() if wanted in name]
        assert found, f"{wanted} not in the PTX; kernels: {sorted(entries)}"
        assert re.search(r"ld\.shared\.v4\.(u32|b32)", found[0]), f"{wanted}: no vector key load"
