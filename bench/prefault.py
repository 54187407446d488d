"""Touch memory once before measuring. On a virtual machine the host backs
guest memory on its first touch, at well under 1 GB/s; a benchmark that
allocates fresh outputs would otherwise charge that one-time cost to whichever
peer first grows the process's memory (we saw single calls stall 10x)."""


def available_bytes():
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return 0


def prefault(gib):
    """Writes and frees `gib` GiB (at most half the available memory); returns the bytes touched."""
    import torch

    nbytes = min(int(gib * 2**30), available_bytes() // 2)
    if nbytes > 0:
        buffer = torch.empty(nbytes, dtype=torch.uint8)
        buffer.fill_(1)
        del buffer
    return nbytes
