"""A PyTorch DataLoader workload for the /dev/shm proof: a synthetic dataset of fixed-size float32
samples, a training loop slower than the workers (so every prefetch slot fills), and a monitor
that records the peak use of /dev/shm. With --procs N it starts N processes, each with its own
DataLoader, as `torchrun --nproc-per-node=N` does.

usage: dataloader_workload.py --batch-size B --num-workers W --sample-size BYTES
                              [--prefetch-factor P] [--procs N] [--steps S] [--step-seconds T]
Prints one JSON line {"peak_shm_bytes": ...} and exits 0 when every process finished."""
import argparse
import json
import os
import subprocess
import sys
import threading
import time


def shm_used():
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def loader_main(args):
    import torch
    from torch.utils.data import DataLoader, Dataset

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
    print(json.dumps({"checksum": checksum}), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--num-workers", type=int, required=True)
    p.add_argument("--sample-size", type=int, required=True)
    p.add_argument("--prefetch-factor", type=int, default=2)
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-seconds", type=float, default=0.15)
    p.add_argument("--child", action="store_true")
    args = p.parse_args()
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
    children = [subprocess.Popen([sys.executable, __file__, "--child"] + sys.argv[1:]) for _ in range(args.procs)]
    codes = [c.wait() for c in children]
    stop.set()
    t.join()
    print(json.dumps({"peak_shm_bytes": peak[0], "exit_codes": codes}), flush=True)
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    sys.exit(main())
