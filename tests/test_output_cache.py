"""The CPU output cache (csrc/cpu/output_cache.h): blocks come back to the next
output, the stats count them, the cap and POOLX_CPU_CACHE_MB hold, and tensors
from it behave like any CPU tensor. tests/test_output_cache_stale.py checks that
every op overwrites a reused block completely.

Tests that need the cache run here only with POOLX_CPU_CACHE_MB unset (the
sanitizer run sets it to 0); test_with_the_cache_on then runs them in a
subprocess that unsets it. The cap and the off switch are tested in subprocesses
that set it themselves.
"""

import io
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import poolx

MiB = 2**20
LINUX = sys.platform.startswith("linux")
CACHE_ON = LINUX and "POOLX_CPU_CACHE_MB" not in os.environ
needs_cache = pytest.mark.skipif(not CACHE_ON, reason="the cache is not at its default here; "
                                 "test_with_the_cache_on runs this test in a subprocess")
linux_only = pytest.mark.skipif(not LINUX, reason="the cache maps memory: Linux only")

# Pools 2x2 into float32 values of exactly 2 MiB (one block), argmax 0.5 MiB.
SHAPE = (4, 16, 128, 256)


def stats():
    return poolx.cpu_cache_stats()


def pooled(x):
    with torch.no_grad():
        return poolx.max_pool2d(x, 2)


@needs_cache
def test_a_freed_output_is_reused_by_the_next_call():
    x = torch.randn(SHAPE)
    first = pooled(x)
    ptr, before = first.data_ptr(), stats()
    assert ptr % (2 * MiB) == 0
    del first
    freed = stats()
    assert freed["cached_bytes"] == before["cached_bytes"] + 2 * MiB
    assert freed["in_use_bytes"] == before["in_use_bytes"] - 2 * MiB
    second = pooled(x)
    assert second.data_ptr() == ptr
    assert stats() == dict(before, hits=before["hits"] + 1)
    assert torch.equal(second, F.max_pool2d(x, 2))


@needs_cache
def test_empty_cache_frees_every_free_block_and_keeps_live_ones():
    x = torch.randn(SHAPE)
    kept, freed = pooled(x), pooled(x)
    del freed
    assert stats()["cached_bytes"] >= 2 * MiB
    in_use = stats()["in_use_bytes"]
    poolx.empty_cache()
    assert stats()["cached_bytes"] == 0
    assert stats()["in_use_bytes"] == in_use
    misses = stats()["misses"]
    again = pooled(x)
    assert stats()["misses"] == misses + 1
    assert torch.equal(again, kept)


@needs_cache
@pytest.mark.parametrize("elements, cached", [(MiB // 4 - 1, False), (MiB // 4, True)])
def test_only_outputs_of_1_mib_and_more_use_the_cache(elements, cached):
    x = torch.randn(1, 1, 2, 2 * elements)
    before = stats()
    y = pooled(x)
    after = stats()
    assert y.nbytes == 4 * elements
    served = after["hits"] + after["misses"] - before["hits"] - before["misses"]
    assert served == int(cached)
    assert after["in_use_bytes"] - before["in_use_bytes"] == (2 * MiB if cached else 0)


def run_python(code, **env):
    """stdout of `python -c code` with the given environment variables."""
    env = {k: v for k, v in os.environ.items() if k != "POOLX_CPU_CACHE_MB"} | env
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


CAP_CHECK = """
import json, torch, poolx
x = torch.randn(4, 16, 128, 512)  # pooled values: 4 MiB
with torch.no_grad():
    outs = [poolx.max_pool2d(x + i, 2) for i in range(5)]
    ptrs = [o.data_ptr() for o in outs]
    while outs:
        outs.pop(0)  # freed in order of allocation
    cached = poolx.cpu_cache_stats()["cached_bytes"]
    again = poolx.max_pool2d(x, 2)
print(json.dumps(dict(cached=cached, ptrs=ptrs, again=again.data_ptr(), **poolx.cpu_cache_stats())))
"""


@linux_only
def test_the_cap_keeps_the_most_recently_freed_blocks():
    got = json.loads(run_python(CAP_CHECK, POOLX_CPU_CACHE_MB="8").stdout)
    assert got["cached"] == 8 * MiB  # two of the five 4 MiB blocks
    assert got["again"] == got["ptrs"][-1]  # the last one freed is kept and reused
    assert got["hits"] == 1 and got["misses"] == 5
    assert got["cached_bytes"] == 4 * MiB


OFF_CHECK = """
import json, torch, poolx
x = torch.randn(4, 16, 128, 256, requires_grad=True)
for _ in range(3):
    y, idx = poolx.max_pool2d(x, 2, return_indices=True)
    y.backward(torch.ones_like(y))
    u = poolx.max_unpool2d(y.detach(), idx, 2)
    del y, idx, u
print(json.dumps(poolx.cpu_cache_stats()))
"""


@linux_only
def test_a_cap_of_0_turns_the_cache_off():
    got = json.loads(run_python(OFF_CHECK, POOLX_CPU_CACHE_MB="0").stdout)
    assert got == dict(cached_bytes=0, in_use_bytes=0, hits=0, misses=0)


@linux_only
def test_a_bad_cap_warns_and_keeps_the_default():
    done = run_python(OFF_CHECK, POOLX_CPU_CACHE_MB="lots")
    assert "POOLX_CPU_CACHE_MB must be a whole number of MiB" in done.stderr
    assert json.loads(done.stdout)["hits"] > 0


@needs_cache
def test_resize_moves_a_cached_tensor_to_a_bigger_block():
    y = pooled(torch.randn(SHAPE))
    expected, in_use = y.flatten().clone(), stats()["in_use_bytes"]
    y.resize_(2 * y.numel())  # the storage's allocator, the cache, maps 4 MiB
    assert torch.equal(y[: expected.numel()], expected)
    assert stats()["in_use_bytes"] == in_use + 2 * MiB
    y[expected.numel():] = 1.0
    del y
    assert stats()["in_use_bytes"] == in_use - 2 * MiB


@needs_cache
def test_share_memory_copies_out_and_returns_the_block():
    y = pooled(torch.randn(SHAPE))
    expected, in_use = y.clone(), stats()["in_use_bytes"]
    y.share_memory_()
    assert y.is_shared() and torch.equal(y, expected)
    assert stats()["in_use_bytes"] == in_use - 2 * MiB


@needs_cache
def test_save_load_and_pickle_round_trips():
    y = pooled(torch.randn(SHAPE))
    buffer = io.BytesIO()
    torch.save({"y": y, "row": y[1, 2]}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert torch.equal(loaded["y"], y) and torch.equal(loaded["row"], y[1, 2])
    assert loaded["row"].untyped_storage().data_ptr() == loaded["y"].data_ptr()
    assert torch.equal(pickle.loads(pickle.dumps(y)), y)


@needs_cache
def test_a_numpy_view_keeps_the_block_alive():
    y = pooled(torch.randn(SHAPE))
    expected, ptr = y.clone().numpy(), y.data_ptr()
    array = y.numpy()
    in_use = stats()["in_use_bytes"]
    del y
    assert stats()["in_use_bytes"] == in_use
    assert array.ctypes.data == ptr and np.array_equal(array, expected)
    del array
    assert stats()["in_use_bytes"] == in_use - 2 * MiB


def test_many_threads_forward_and_backward_concurrently():
    # Widths 512..736: blocks of several sizes, reused across shapes (best fit).
    xs = [torch.randn(2, 16, 128, 512 + 32 * i) for i in range(8)]
    expected = []
    for x in xs:
        xr = x.clone().requires_grad_()
        y = F.max_pool2d(xr, 2)
        y.backward(y.detach())
        expected.append((y.detach(), xr.grad))
    hits, in_use = stats()["hits"], stats()["in_use_bytes"]
    failures = []

    def work(i):
        for _ in range(6):
            x = xs[i].clone().requires_grad_()
            y = poolx.max_pool2d(x, 2)
            y.backward(y.detach())
            if not (torch.equal(y, expected[i][0]) and torch.equal(x.grad, expected[i][1])):
                failures.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert stats()["in_use_bytes"] == in_use
    assert stats()["hits"] > hits or not CACHE_ON


def _child(x, kept, queue):
    torch.set_num_threads(1)  # as a DataLoader worker
    again = pooled(x)
    queue.put((torch.equal(again, kept), stats()))


@needs_cache
def test_a_forked_child_reuses_inherited_blocks():
    x = torch.randn(SHAPE)
    kept, freed = pooled(x), pooled(x)
    del freed
    hits = stats()["hits"]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(x, kept, queue))
    child.start()
    equal, child_stats = queue.get(timeout=120)
    child.join(60)
    assert child.exitcode == 0 and equal
    assert child_stats["hits"] == hits + 1


@needs_cache
def test_the_profiler_sees_cached_outputs():
    x = torch.randn(SHAPE)
    with torch.profiler.profile(profile_memory=True) as prof:
        y = pooled(x)
    del y
    (op,) = [e for e in prof.key_averages() if e.key == "poolx::max_pool2d_values"]
    assert op.self_cpu_memory_usage == 2 * MiB


@pytest.mark.skipif(CACHE_ON or not LINUX, reason="the cache is on here: the tests ran above")
def test_with_the_cache_on():
    here = os.path.dirname(__file__)
    env = {k: v for k, v in os.environ.items() if k != "POOLX_CPU_CACHE_MB"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
           os.path.join(here, "test_output_cache_stale.py"), "-k", "not test_with_the_cache_on"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "skipped" not in done.stdout.splitlines()[-1], done.stdout[-4000:]
