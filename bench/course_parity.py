"""The CS224N birthplace recipe beside the assignment's own code: same box, same files, several seeds at once.

    python -m bench.course_parity --course DIR --reference SRC --seeds 0 1 2 --out OUT [--deadline 530]

DIR holds the course's wiki.txt, birth_places_train.tsv and birth_dev.tsv; SRC a completed copy of the
assignment's src/ (run.py, model.py, trainer.py, dataset.py, utils.py, attention.py), run unchanged. For each
seed, two chains run side by side on one device, each pretrain (650 epochs) -> finetune (10) -> evaluate (dev):
- "ours": `python -m core.train pretrain|finetune|evaluate vanilla ... --seed S` (the project's CLI, which keeps
  the assignment's words);
- "assignment": the assignment's `run.py` with the same words, started through this file so that torch's global
  seed is S first (run.py itself seeds only Python's `random`, with 0; torch's seed decides the initial weights,
  dropout and the DataLoader workers' corruption draws).
Neither is given the other's data order or initial weights: this is the comparison a student makes, repeated.

Every chain runs at once (the GPU is shared), logs to OUT/<side>-s<seed>.log, and is watched: when the slowest
chain's pretraining would end after the deadline, the highest seed's pair is stopped (both sides, so the seeds
that remain stay paired). At the end OUT/course_parity.json holds each chain's pretraining loss, dev accuracy and
minutes, and a table is printed. Written for a lent GPU; `--smoke-epochs N` runs the same chains N epochs each
on any device (how tests/test_course_parity.py checks the parsing on a CPU).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

PRETRAIN_EPOCHS = 650
FILES = ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv")
REFERENCE_FILES = ("run.py", "model.py", "trainer.py", "dataset.py", "utils.py")
# seconds a chain still needs once its pretraining has ended (finetune 10 epochs, 500 dev answers)
TAIL_SECONDS = {"ours": 40.0, "assignment": 120.0}
RATE_WINDOW = 45.0  # seconds of progress a projection is made from
LOOK_EVERY = 10.0   # seconds between looks at the logs (an ended chain is noticed within half a second)

# progress lines: ours prints "epoch 12/650  train loss 1.2345 ..." per epoch; the assignment's tqdm bar
# "epoch 12 iter 22: train loss 1.23450. lr ..." (the last one written is the newest)
OURS_EPOCH = re.compile(r"epoch (\d+)/(\d+)(?:\s+train loss (\d+\.\d+))?")
ASSIGNMENT_EPOCH = re.compile(r"epoch (\d+) iter (\d+): train loss (\d+\.\d+)")
CORRECT = re.compile(r"Correct: ([0-9.]+) out of ([0-9.]+)")
STAGE = re.compile(r"^### stage (\w+) (\d+(?:\.\d+)?)$", re.M)


@dataclass
class Chain:
    side: str            # "ours" | "assignment"
    seed: int
    log: Path
    process: subprocess.Popen | None = None
    started: float = 0.0
    stopped: str = ""    # why the watcher stopped it ("" when it ran to its end)
    returncode: int | None = None
    stages: dict = field(default_factory=dict)   # stage -> seconds since start when it began

    @property
    def name(self) -> str:
        return f"{self.side}-s{self.seed}"


def stage_commands(side: str, seed: int, course: Path, reference: Path, work: Path, smoke_epochs: int) -> list[tuple]:
    """The three commands of one chain, each (stage, argv)."""
    wiki, train, dev = (str(course / f) for f in FILES)
    pre, fin, pred = (str(work / f"{side}-s{seed}.{s}")
                      for s in ("pretrain.params", "finetune.params", "dev.predictions"))
    if side == "ours":
        base = [sys.executable, "-m", "core.train"]
        extra = ["--seed", str(seed)]
        epochs = ["--epochs", str(smoke_epochs)] if smoke_epochs else []
        return [
            ("pretrain", base + ["pretrain", "vanilla", wiki, "--writing_params_path", pre + ".safetensors",
                                 "--force", *extra, *epochs]),
            ("finetune", base + ["finetune", "vanilla", wiki, "--reading_params_path", pre + ".safetensors",
                                 "--finetune_corpus_path", train, "--writing_params_path", fin + ".safetensors",
                                 "--force", *extra, *(["--epochs", "1"] if smoke_epochs else [])]),
            ("evaluate", base + ["evaluate", "vanilla", wiki, "--reading_params_path", fin + ".safetensors",
                                 "--eval_corpus_path", dev, "--outputs_path", pred]),
        ]
    base = [sys.executable, str(Path(__file__).resolve()), "--run-reference", str(reference), str(seed),
            str(smoke_epochs)]
    return [
        ("pretrain", base + ["pretrain", "vanilla", wiki, "--writing_params_path", pre]),
        ("finetune", base + ["finetune", "vanilla", wiki, "--reading_params_path", pre,
                             "--finetune_corpus_path", train, "--writing_params_path", fin]),
        ("evaluate", base + ["evaluate", "vanilla", wiki, "--reading_params_path", fin,
                             "--eval_corpus_path", dev, "--outputs_path", pred]),
    ]


def chain_script(stages: list[tuple]) -> str:
    """One shell line that runs the stages in order, marking each stage's start in the log."""
    import shlex
    parts = []
    for stage, argv in stages:
        parts.append(f'echo "### stage {stage} $(date +%s.%N)"')
        parts.append(" ".join(shlex.quote(a) for a in argv))
    parts.append('echo "### stage done $(date +%s.%N)"')
    return " && ".join(parts)


def run_reference(reference: Path, seed: int, smoke_epochs: int, argv: list[str]) -> None:
    """Run the assignment's run.py unchanged, with torch's global seed set first."""
    import runpy

    import numpy as np
    import torch
    torch.manual_seed(seed)
    np.random.seed(seed)
    print(f"reference run.py, torch seed {seed}, torch {torch.__version__}, "
          f"tf32 matmul {torch.backends.cuda.matmul.allow_tf32}", flush=True)
    sys.path.insert(0, str(reference))
    if smoke_epochs:  # tests only: the same code, fewer epochs
        import trainer as reference_trainer  # noqa: F401  (the reference's own module, found on sys.path)
        original = reference_trainer.TrainerConfig.__init__

        def fewer_epochs(self, **kwargs):
            original(self, **kwargs)
            self.max_epochs = smoke_epochs if self.max_epochs > 10 else 1
            self.num_workers = 0
        reference_trainer.TrainerConfig.__init__ = fewer_epochs
    sys.argv = [str(reference / "run.py"), *argv]
    runpy.run_path(str(reference / "run.py"), run_name="__main__")


def progress(chain: Chain) -> tuple[int, float | None]:
    """(pretraining epochs done, last train loss seen) from the chain's log."""
    try:
        text = chain.log.read_text(errors="replace")
    except OSError:
        return 0, None
    text = text.split("### stage finetune")[0]
    pattern = OURS_EPOCH if chain.side == "ours" else ASSIGNMENT_EPOCH
    found = pattern.findall(text)
    if not found:
        return 0, None
    epoch = int(found[-1][0])
    losses = [float(f[-1]) for f in found if f[-1]]
    loss = losses[-1] if losses else None
    if chain.side == "assignment":
        epoch -= 1  # tqdm names the epoch it is in
    return epoch, loss


def result(chain: Chain, total_epochs: int) -> dict:
    text = chain.log.read_text(errors="replace") if chain.log.exists() else ""
    stages = {m.group(1): float(m.group(2)) for m in STAGE.finditer(text)}
    epochs, loss = progress(chain)
    correct = CORRECT.findall(text)
    minutes = {}
    order = ["pretrain", "finetune", "evaluate", "done"]
    for a, b in zip(order, order[1:]):
        if a in stages and b in stages:
            minutes[a] = round((stages[b] - stages[a]) / 60, 2)
    out = {"side": chain.side, "seed": chain.seed, "stopped": chain.stopped, "returncode": chain.returncode,
           "pretrain_epochs": epochs + (1 if "finetune" in stages and chain.side == "assignment" else 0),
           "pretrain_epochs_asked": total_epochs, "last_pretrain_loss": loss, "minutes": minutes}
    if correct:
        got, of = (float(v) for v in correct[-1])
        out.update(dev_correct=int(got), dev_total=int(of), dev_accuracy=round(100 * got / of, 1))
    return out


def stop(chain: Chain, why: str) -> None:
    if chain.process and chain.process.poll() is None:
        chain.stopped = why
        try:
            os.killpg(chain.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--run-reference"]:
        reference, seed, smoke = Path(argv[1]), int(argv[2]), int(argv[3])
        run_reference(reference, seed, smoke, argv[4:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--course", type=Path, required=True, help="folder with " + ", ".join(FILES))
    ap.add_argument("--reference", type=Path, required=True, help="the assignment's completed src/ folder")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--sides", nargs="+", default=["ours", "assignment"], choices=["ours", "assignment"])
    ap.add_argument("--out", type=Path, required=True, help="logs and course_parity.json go here")
    ap.add_argument("--work", type=Path, default=None, help="weights and predictions (default: OUT/work)")
    ap.add_argument("--deadline", type=float, default=0.0, help="seconds; stop what cannot end by then (0: none)")
    ap.add_argument("--smoke-epochs", type=int, default=0, help="tests: N pretraining epochs, 1 of finetuning")
    args = ap.parse_args(argv)
    missing = [str(args.course / f) for f in FILES if not (args.course / f).is_file()]
    missing += [str(args.reference / f) for f in REFERENCE_FILES if not (args.reference / f).is_file()]
    if missing:
        print("Missing: " + ", ".join(missing) + ".", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or args.out / "work"
    work.mkdir(parents=True, exist_ok=True)
    total_epochs = args.smoke_epochs or PRETRAIN_EPOCHS
    root = Path(__file__).resolve().parent.parent
    chains = [Chain(side, seed, args.out / f"{side}-s{seed}.log") for seed in args.seeds for side in args.sides]
    t0 = time.time()
    for chain in chains:
        script = chain_script(stage_commands(chain.side, chain.seed, args.course.resolve(), args.reference.resolve(),
                                             work.resolve(), args.smoke_epochs))
        with open(chain.log, "w") as log:
            chain.process = subprocess.Popen(["bash", "-c", script], cwd=root, stdout=log, stderr=subprocess.STDOUT,
                                             start_new_session=True)
        chain.started = time.time()
    last_cut = 0.0
    seen: dict[str, list[tuple[float, int]]] = {}
    last_look = 0.0
    while any(c.process.poll() is None for c in chains):
        time.sleep(0.5)
        elapsed = time.time() - t0
        if elapsed - last_look < LOOK_EVERY and not (args.deadline and elapsed > args.deadline):
            continue
        last_look = elapsed
        live = [c for c in chains if c.process.poll() is None]
        if args.deadline and elapsed > args.deadline:
            for c in live:
                stop(c, f"deadline ({args.deadline:.0f} s)")
            break
        lines = []
        worst = 0.0
        for c in live:
            epochs, loss = progress(c)
            lines.append(f"{c.name} {epochs}/{total_epochs} {loss}")
            seen.setdefault(c.name, []).append((elapsed, epochs))
            # the rate over the last minute or so: start-up (imports, CUDA, the first epoch) is not a rate,
            # and a stopped pair speeds the others up
            earlier = [(t, e) for t, e in seen[c.name] if elapsed - t >= RATE_WINDOW and e > 0]
            if earlier and 0 < epochs < total_epochs and epochs > earlier[-1][1]:
                t, e = earlier[-1]
                rate = (epochs - e) / (elapsed - t)
                worst = max(worst, elapsed + (total_epochs - epochs) / rate + TAIL_SECONDS[c.side])
        print(f"[{elapsed:6.0f} s] " + "; ".join(lines) + (f"; projected end {worst:.0f} s" if worst else ""),
              flush=True)
        seeds_left = sorted({c.seed for c in live})
        if (args.deadline and worst > args.deadline and len(seeds_left) > 1
                and elapsed - last_cut > RATE_WINDOW + 15):
            cut = seeds_left[-1]
            for c in live:
                if c.seed == cut:
                    stop(c, f"stopped at {elapsed:.0f} s so the other seeds end before the deadline")
            print(f"projected end {worst:.0f} s > deadline {args.deadline:.0f} s: stopped seed {cut}", flush=True)
            last_cut = elapsed
    for c in chains:
        c.process.wait()
        c.returncode = c.process.returncode
    results = [result(c, total_epochs) for c in chains]
    summary = {"seconds": round(time.time() - t0, 1), "seeds": args.seeds, "chains": results}
    try:
        import torch
        summary["torch"] = torch.__version__
        summary["device"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
        summary["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    except Exception as error:  # the table is still worth printing
        summary["torch"] = f"unavailable: {error}"
    (args.out / "course_parity.json").write_text(json.dumps(summary, indent=1))
    print(f"\n{'chain':16} {'epochs':>7} {'last loss':>9} {'dev':>12} {'minutes (pre/fine/eval)':>24}  stopped")
    for r in results:
        dev = f"{r['dev_correct']}/{r['dev_total']} {r['dev_accuracy']}%" if "dev_accuracy" in r else "-"
        mins = "/".join(str(r["minutes"].get(s, "-")) for s in ("pretrain", "finetune", "evaluate"))
        print(f"{r['side'] + '-s' + str(r['seed']):16} {r['pretrain_epochs']:>7} {r['last_pretrain_loss'] or '-':>9} "
              f"{dev:>12} {mins:>24}  {r['stopped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
