"""One timing of a callable, and the warm-up before it."""


def measure(run, threads, min_run_time):
    from torch.utils import benchmark

    timer = benchmark.Timer("run()", globals=dict(run=run), num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def warm_up(run, seconds):
    """Runs until steady state, outside the timing: compiles the compile peer,
    and lets the first touches of fresh memory (page faults, huge pages being
    assembled, which can stall single calls for ~100 ms) happen here."""
    import time

    start, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - start < seconds:
        run()
        calls += 1
