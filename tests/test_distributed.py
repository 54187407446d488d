"""DistributedDataParallel on CPU (gloo, 2 processes on loopback): a CNN with
poolx.MaxPool2d trains exactly like the same CNN with nn.MaxPool2d."""

import datetime
import os
import socket
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import poolx

WORLD_SIZE = 2
STEPS = 3
TIMEOUT_S = 60

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed unavailable")


def free_local_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cnn(pool):
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        pool(3, 2, 1),
        nn.Conv2d(8, 8, 3, padding=1),
        nn.ReLU(),
        pool(2, 2, 0),
        nn.Flatten(),
        nn.Linear(8 * 4 * 4, 5),
    )


def rank_batch(rank, step):
    """Each rank's own batch; ties planted by drawing from a few values."""
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randint(-3, 4, (4, 3, 16, 16), generator=g).float()
    x += 0.25 * torch.randn(x.shape, generator=g).round()
    return x, torch.randint(0, 5, (4,), generator=g)


def train_and_compare(rank, port):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD_SIZE,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )
    try:
        models = [DistributedDataParallel(cnn(pool)) for pool in (poolx.MaxPool2d, nn.MaxPool2d)]
        assert any(isinstance(m, poolx.MaxPool2d) for m in models[0].modules())
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in models]
        for step in range(STEPS):
            x, y = rank_batch(rank, step)
            for model, optimizer in zip(models, optimizers):
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
            for p, p_ref in zip(models[0].parameters(), models[1].parameters()):
                torch.testing.assert_close(p.grad, p_ref.grad, rtol=0, atol=0)
            for optimizer in optimizers:
                optimizer.step()
        for p, p_ref in zip(models[0].parameters(), models[1].parameters()):
            torch.testing.assert_close(p, p_ref, rtol=0, atol=0)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_ddp_gloo_gradients_equal_nn_maxpool():
    context = mp.start_processes(
        train_and_compare,
        args=(free_local_port(),),
        nprocs=WORLD_SIZE,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + TIMEOUT_S
    try:
        # join() re-raises a worker's exception; it returns True once all exit.
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"DDP workers did not finish within {TIMEOUT_S} s")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
                process.join()
