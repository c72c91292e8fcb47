#!/usr/bin/python3
"""One DDP training step: Fabric (C++, c10d Reducer) against PyTorch's own
DistributedDataParallel (Python, torch 1.13, Gloo), measured in one run.

  /usr/bin/python3 bench/compare_ddp.py BUILD/bin/fabric_bench_ddp_step [--steps 50]

Both sides train the same MLP (4 Linear layers of width 512, ReLU, batch 64
per rank, SGD) on 2 CPU ranks with one intra-op thread each and report the
best of 3 rounds; the C++ side runs first, then the Python side, so on a
busy machine run it twice and compare. Needs Debian's python3-torch.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def python_rank(rank, world, port, steps, width, queue):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.manual_seed(rank)
    model = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    inputs = torch.randn(64, width)
    targets = torch.randint(0, 10, (64,))

    def step():
        optimizer.zero_grad()
        loss = torch.nn.functional.nll_loss(torch.log_softmax(ddp(inputs), 1), targets)
        loss.backward()
        optimizer.step()

    best = float("inf")
    for _ in range(3):
        for _ in range(5):
            step()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        dist.barrier()
        elapsed = torch.tensor((time.perf_counter() - start) / steps, dtype=torch.float64)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        best = min(best, elapsed.item())
    if rank == 0:
        queue.put(best)
    dist.destroy_process_group()


def python_ddp_seconds(steps, width):
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    queue = context.Queue()
    port = free_port()
    ranks = [context.Process(target=python_rank, args=(r, 2, port, steps, width, queue))
             for r in range(2)]
    for process in ranks:
        process.start()
    result = queue.get(timeout=600)
    for process in ranks:
        process.join()
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("fabric_bench")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--width", type=int, default=512)
    arguments = parser.parse_args()

    command = [arguments.fabric_bench, "--devices=2", f"--steps={arguments.steps}",
               f"--width={arguments.width}"]
    output = subprocess.run(command, capture_output=True, text=True, check=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1")).stdout
    print(output, end="")
    match = re.search(r"fabric DDP ([0-9.]+) ms", output)
    fabric_ms = float(match.group(1))
    python_ms = 1e3 * python_ddp_seconds(arguments.steps, arguments.width)
    print(f"PyTorch {__import__('torch').__version__} DistributedDataParallel (Python, Gloo): "
          f"{python_ms:.3f} ms per step")
    print(f"ratio fabric DDP / python DDP {fabric_ms / python_ms:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
