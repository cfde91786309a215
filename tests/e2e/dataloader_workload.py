"""A PyTorch DataLoader workload for the /dev/shm proof: a synthetic dataset of fixed-size float32
samples, a training loop slower than the workers (so every prefetch slot fills), and a monitor
that records the peak use of /dev/shm. With --procs N it starts N processes, each with its own
DataLoader, as `torchrun --nproc-per-node=N` does; with --torchrun N the real torchrun
(torch.distributed.run) starts them, each rank joining a gloo process group on loopback.

usage: dataloader_workload.py --batch-size B --num-workers W --sample-size BYTES
                              [--prefetch-factor P] [--procs N | --torchrun N] [--steps S]
                              [--step-seconds T] [--idle]
Prints one JSON line {"peak_shm_bytes": ...} and exits 0 when every process finished. With --idle
it prints {"idle_shm_bytes": ...} instead: what one DataLoader holds in /dev/shm before any batch
exists (a page per semaphore of its queues), then exits."""
import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid


def shm_used():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def loader_main(args):
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, Dataset

    ranked = "RANK" in os.environ  # started by torchrun
    if ranked:
        dist.init_process_group("gloo")

    torch.set_num_threads(1)
    n = args.sample_size // 4

    class Synthetic(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            return torch.full((n,), float(i % 1000), dtype=torch.float32)

    loader = DataLoader(Synthetic(), batch_size=args.batch_size, num_workers=args.num_workers,
                        prefetch_factor=args.prefetch_factor if args.num_workers > 0 else None,
                        persistent_workers=False)
    it = iter(loader)
    checksum = 0.0
    for _ in range(args.steps):
        batch = next(it)
        checksum += float(batch[0, 0])
        time.sleep(args.step_seconds)  # the "training step": slower than the workers
    del it
    if ranked:
        dist.barrier()
        dist.destroy_process_group()
    # The rank (torchrun's RANK, 0 without it) says which process of the pod or job finished.
    print(json.dumps({"rank": int(os.environ.get("RANK", 0)), "checksum": checksum}), flush=True)


def idle_main(args):
    """The DataLoader's own use of /dev/shm: its iterator started, its workers asleep before their
    first sample, so every page counted is one its queues hold, not a batch's."""
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            time.sleep(2)
            return torch.zeros(1)

    loader = DataLoader(Slow(), batch_size=args.batch_size, num_workers=args.num_workers,
                        prefetch_factor=args.prefetch_factor, persistent_workers=False)
    it = iter(loader)  # its queues (and their semaphores) exist once this returns
    print(json.dumps({"idle_shm_bytes": shm_used()}), flush=True)
    del it  # the workers wake, see the loader shut down, and exit


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun_command(args, child_args):
    # torch 1.13 under Python 3.11 (Debian 12) cannot parse torchrun's default --redirects/--tee "0"
    # (enum.IntFlag no longer iterates NONE, so Std.from_str returns None); a per-rank mapping
    # parses. Rank 0's stdout is teed, the other ranks' streams are inherited as usual.
    # --standalone would put the rendezvous on the fixed port 29400, where two runs at once collide
    # (RendezvousConnectionError): the same c10d rendezvous on a free loopback port instead.
    return [sys.executable, "-m", "torch.distributed.run", "--rdzv_backend", "c10d",
            "--rdzv_endpoint", f"127.0.0.1:{free_port()}", "--rdzv_id", str(uuid.uuid4()), "--nnodes", "1",
            "--nproc_per_node", str(args.torchrun), "--redirects", "0:1", "--tee", "0:1",
            __file__, "--child"] + child_args


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--num-workers", type=int, required=True)
    p.add_argument("--sample-size", type=int, required=True)
    p.add_argument("--prefetch-factor", type=int, default=2)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--torchrun", type=int, default=0)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-seconds", type=float, default=0.15)
    p.add_argument("--child", action="store_true")
    p.add_argument("--idle", action="store_true")
    args = p.parse_args()
    if args.idle:
        idle_main(args)
        return 0
    if args.child:
        loader_main(args)
        return 0

    peak = [shm_used()]
    stop = threading.Event()

    def monitor():
        while not stop.is_set():
            peak[0] = max(peak[0], shm_used())
            time.sleep(0.002)

    t = threading.Thread(target=monitor, daemon=True)
    t.start()
    if args.torchrun:
        i = sys.argv.index("--torchrun")  # the ranks get every argument but this one
        children = [subprocess.Popen(torchrun_command(args, sys.argv[1:i] + sys.argv[i + 2:]))]
    else:
        children = [subprocess.Popen([sys.executable, __file__, "--child"] + sys.argv[1:]) for _ in range(args.procs)]
    codes = [c.wait() for c in children]
    stop.set()
    t.join()
    print(json.dumps({"peak_shm_bytes": peak[0], "exit_codes": codes}), flush=True)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
