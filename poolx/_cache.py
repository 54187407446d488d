"""The cache of large CPU output blocks (csrc/cpu/output_cache.h)."""

from poolx._library import ops

_STATS = ("cached_bytes", "in_use_bytes", "hits", "misses")


def empty_cache():
    """Return every cached CPU block that no tensor uses to the system.

    Like ``torch.cuda.empty_cache()``: live tensors keep their memory, and
    later outputs map fresh blocks (and page-fault them in) again.
    """
    ops.empty_cpu_cache()


def cpu_cache_stats():
    """The CPU output cache's counters, as a dict.

    ``cached_bytes``: free blocks held for reuse; ``in_use_bytes``: blocks of
    live tensors from the cache; ``hits``: outputs served from a cached block;
    ``misses``: blocks newly mapped. All 0 when ``POOLX_CPU_CACHE_MB=0``.
    """
    return dict(zip(_STATS, ops.cpu_cache_stats()))
