"""The allocator every peer of a run shares: the process's malloc, or a caching
malloc preloaded for the whole process (--allocator), as PyTorch's CPU
performance advice recommends. A speedup that comes from memory management a
user could have for torch too is not poolx's, so every peer runs under the same
one and every result names it."""

import glob
import os
import sys

# Debian's packages: libtcmalloc-minimal4, libjemalloc2.
LIBRARIES = {
    "tcmalloc": ("libtcmalloc-minimal4", "libtcmalloc_minimal.so*"),
    "jemalloc": ("libjemalloc2", "libjemalloc.so*"),
}
NAMES = ["system", *LIBRARIES]
_SEARCH = ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
           "/usr/local/lib"]


def find(name):
    """Path of the shared library of allocator `name`, or None."""
    pattern = LIBRARIES[name][1]
    for folder in _SEARCH:
        found = sorted(glob.glob(os.path.join(folder, pattern)), key=len)
        if found:
            return found[0]
    return None


def _allocator_of(library):
    """The allocator a preloaded library path is, or None."""
    for name, (_, pattern) in LIBRARIES.items():
        if pattern.split(".")[0] in library:
            return name
    return None


def _preloaded():
    return os.environ.get("LD_PRELOAD", "").replace(":", " ").split()


def current():
    """The allocator this process runs under, from LD_PRELOAD."""
    return next((_allocator_of(lib) for lib in _preloaded() if _allocator_of(lib)), "system")


def preload_without_allocators(preload):
    """LD_PRELOAD's other libraries (a sanitizer's runtime, say), in order."""
    return [lib for lib in preload.replace(":", " ").split() if _allocator_of(lib) is None]


def ensure(name, argv):
    """Re-executes `python -m bench argv` with `name` preloaded, unless this
    process already runs under it; other preloaded libraries stay first."""
    if name == current():
        return
    preload = preload_without_allocators(os.environ.get("LD_PRELOAD", ""))
    if name != "system":
        path = find(name)
        if path is None:
            package = LIBRARIES[name][0]
            raise SystemExit(f"--allocator {name}: its library was not found; install it "
                             f"(Debian: apt-get install {package})")
        preload.append(path)
    env = dict(os.environ, LD_PRELOAD=":".join(preload))
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", "bench", *argv], env)
