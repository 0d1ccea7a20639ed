#!/usr/bin/env python3
"""A real, small CPU training loop for gpufleet's workload acceptance (Python standard library only).

Linear regression by minibatch SGD on a generated data set (or a CSV given with --dataset / $GPUFLEET_DATASET:
one sample per line, the features then the target), from zero weights (or base weights given with --weights /
$GPUFLEET_WEIGHTS: JSON {"weights": [...], "bias": B}). It checkpoints atomically (a temporary file, fsync,
rename, fsync of the directory) to --checkpoint-dir / $GPUFLEET_CHECKPOINT_DIR, and resumes from the
checkpoint when one exists. It prints the lines the acceptance reads (docs/storage.md):

    gpufleet-workload event=start step=0 dataset=PATH|generated weights=PATH|zeros samples=N time=T
    gpufleet-workload event=resumed step=N time=T
    gpufleet-workload step=N samples_per_s=X loss=L time=T
    gpufleet-workload event=checkpoint step=N time=T

Killed (scancel, SIGKILL, a deleted pod) at any point it loses at most the steps since its last checkpoint.
With --window-s / $GPUFLEET_WINDOW_S it trains that many seconds in all, counted across restarts (the
checkpoint carries the seconds trained so far), then writes its last checkpoint, prints
``gpufleet-workload event=done step=N time=T`` and exits 0; without, it trains until it is killed. A
resumed run prints at least one progress line before it honours the window: the restore is measured
by the first step after it, also when the window ran out while the killed run was being replaced.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

FEATURES = 16
CHECKPOINT = "checkpoint.json"


def emit(**fields) -> None:
    words = " ".join(f"{k}={v}" for k, v in fields.items())
    print(f"gpufleet-workload {words} time={time.time():.3f}", flush=True)


def dataset(path: str | None, samples: int, seed: int) -> list[tuple[list[float], float]]:
    if path:
        rows = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                values = [float(v) for v in line.replace(",", " ").split()]
                if len(values) >= 2:
                    rows.append((values[:-1], values[-1]))
        if not rows:
            raise SystemExit(f"train.py: no samples in {path}")
        return rows
    rng = random.Random(seed)
    truth = [rng.uniform(-2, 2) for _ in range(FEATURES)]
    rows = []
    for _ in range(samples):
        x = [rng.gauss(0, 1) for _ in range(FEATURES)]
        rows.append((x, sum(w * v for w, v in zip(truth, x, strict=True)) + 0.5 + rng.gauss(0, 0.01)))
    return rows


def save(directory: str, state: dict) -> None:
    """Atomic: readers see the old checkpoint or the new one, never half of one."""
    tmp = os.path.join(directory, f".{CHECKPOINT}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, os.path.join(directory, CHECKPOINT))
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load(directory: str) -> dict | None:
    try:
        with open(os.path.join(directory, CHECKPOINT), encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint-dir", default=os.environ.get("GPUFLEET_CHECKPOINT_DIR"))
    p.add_argument("--dataset", default=os.environ.get("GPUFLEET_DATASET") or None)
    p.add_argument(
        "--weights",
        default=os.environ.get("GPUFLEET_WEIGHTS") or None,
        help='base weights to start from, JSON {"weights": [...], "bias": B} (no checkpoint yet)',
    )
    p.add_argument("--samples", type=int, default=4096, help="generated samples (no --dataset)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this step (0: run until killed)")
    p.add_argument("--report-every-s", type=float, default=1.0)
    p.add_argument("--checkpoint-every-s", type=float, default=2.0)
    p.add_argument(
        "--window-s",
        type=float,
        default=float(os.environ.get("GPUFLEET_WINDOW_S") or 0),
        help="train this many seconds in all, across restarts, then exit 0 (0: until killed)",
    )
    args = p.parse_args(argv)
    if not args.checkpoint_dir:
        p.error("--checkpoint-dir or $GPUFLEET_CHECKPOINT_DIR is required")
    os.makedirs(args.checkpoint_dir, exist_ok=True)

    data = dataset(args.dataset, args.samples, args.seed)
    dims = len(data[0][0])
    state = load(args.checkpoint_dir)
    resumed = state is not None
    if resumed:
        if len(state["weights"]) != dims:
            raise SystemExit(f"train.py: the checkpoint has {len(state['weights'])} weights, the data {dims}")
        emit(event="resumed", step=state["step"])
    else:
        base = {"weights": [0.0] * dims, "bias": 0.0}
        if args.weights:
            with open(args.weights, encoding="utf-8") as fh:
                base = json.load(fh)
            if len(base.get("weights") or []) != dims:
                raise SystemExit(
                    f"train.py: {args.weights} has {len(base.get('weights') or [])} weights, the data {dims}"
                )
        state = {
            "step": 0,
            "weights": [float(w) for w in base["weights"]],
            "bias": float(base.get("bias", 0.0)),
            "seed": args.seed,
        }
        # What it started from, for the record: the files' paths, or what it generated.
        emit(
            event="start",
            step=0,
            dataset=args.dataset or "generated",
            weights=args.weights or "zeros",
            samples=len(data),
        )
    rng = random.Random(args.seed + state["step"])
    weights, bias, step = state["weights"], state["bias"], state["step"]
    trained_before = float(state.get("trained_s", 0.0))

    started = last_report = last_ckpt = time.monotonic()
    done_since_report = 0
    loss_sum = 0.0
    owed_report = resumed
    while (not args.max_steps or step < args.max_steps) and (
        owed_report or not (args.window_s and trained_before + time.monotonic() - started >= args.window_s)
    ):
        batch = [data[rng.randrange(len(data))] for _ in range(args.batch)]
        grad_w = [0.0] * dims
        grad_b = 0.0
        for x, y in batch:
            err = sum(w * v for w, v in zip(weights, x, strict=True)) + bias - y
            loss_sum += err * err / len(batch)
            for i, v in enumerate(x):
                grad_w[i] += err * v
            grad_b += err
        scale = 2 * args.lr / len(batch)
        weights = [w - scale * g for w, g in zip(weights, grad_w, strict=True)]
        bias -= scale * grad_b
        step += 1
        done_since_report += 1
        now = time.monotonic()
        if now - last_report >= args.report_every_s or step == args.max_steps:
            rate = done_since_report * args.batch / max(now - last_report, 1e-9)
            emit(step=step, samples_per_s=f"{rate:.1f}", loss=f"{loss_sum / done_since_report:.6f}")
            last_report, done_since_report, loss_sum, owed_report = now, 0, 0.0, False
        trained = trained_before + now - started
        if now - last_ckpt >= args.checkpoint_every_s or step == args.max_steps:
            save(args.checkpoint_dir, _state(step, weights, bias, args.seed, trained))
            emit(event="checkpoint", step=step)
            last_ckpt = now
    if args.window_s:
        save(args.checkpoint_dir, _state(step, weights, bias, args.seed, trained_before + time.monotonic() - started))
        emit(event="checkpoint", step=step)
        emit(event="done", step=step)
    return 0


def _state(step: int, weights: list[float], bias: float, seed: int, trained_s: float) -> dict:
    return {"step": step, "weights": weights, "bias": bias, "seed": seed, "trained_s": round(trained_s, 3)}


if __name__ == "__main__":
    sys.exit(main())
