"""`python -m core.lens.where_from MODEL --prompts FILE`: any prompt with its subject marked
(`PROMPT<TAB>SUBJECT[<TAB>TARGET]` per line; no target: the model's own next piece), one JSON line per prompt with
its three causal-trace grids, for every model with the lens (this lab's checkpoints, nanoGPT converted, a Hugging
Face folder or a hub name in the cache). The Attention page's trace calls the same function
(core.lens.where_from.prompts.trace_prompt).

`python -m core.lens.where_from CHECKPOINT --questions FILE`: per question, the logit lens, the direct
attribution, the three causal-trace grids (with the corruption, noise scale, seed and samples used) and the
input attribution, as one JSON line each; `--average` also computes the causal-trace grids averaged per group of
people (stored x answered, wrong answers) and keeps them beside the checkpoint (dev_set's sidecar), as the
page does. The page and this command call the same functions (core.lens.where_from.dev_set)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

from core.lens.where_from.dev_set import DEV_SAMPLES, kept_averages, question_record, read_questions, swap_pool
from core.lens.where_from.prompts import check_traceable, prompt_record, read_prompts, trace_prompt
from core.lens.where_from.question import WhereFromError
from core.lens.where_from.saliency import IG_STEPS
from core.lens.where_from.tracing import CORRUPTIONS, METRICS, NOISE, SAMPLES, SEED


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.where_from", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", metavar="MODEL",
                        help="a .safetensors checkpoint (a birthplace or language model), a Hugging Face model folder "
                             "or a hub name in the cache (with --prompts)")
    given = parser.add_mutually_exclusive_group(required=True)
    given.add_argument("--questions", help="a CS224N TSV (Where was NAME born?<TAB>PLACE) or one question per line")
    given.add_argument("--prompts", help="PROMPT<TAB>SUBJECT[<TAB>TARGET] per line: causal tracing of any prompt")
    parser.add_argument("-o", "--output", help="where to write the JSON lines (default: standard output)")
    parser.add_argument("--corruption", choices=CORRUPTIONS, default="noise",
                        help="noise on the name's embeddings, or another person's name swapped in (default noise)")
    parser.add_argument("--metric", choices=[m.replace(" ", "-") for m in METRICS],
                        help="default: probability for noise, logit-difference for swap")
    parser.add_argument("--noise", type=float, default=NOISE, help="standard deviations of the name's embeddings")
    parser.add_argument("--samples", type=int, help=f"noise draws or swapped names per question (default "
                                                    f"{SAMPLES}; {DEV_SAMPLES} with --average)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--steps", type=int, default=IG_STEPS, help="integrated-gradients steps")
    parser.add_argument("--average", action="store_true",
                        help="only the grids averaged over the file's people, computed once and kept")
    parser.add_argument("--recompute", action="store_true", help="with --average: ignore what was kept")
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.io.checkpoint import CheckpointError, load

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    metric = args.metric.replace("-", " ") if args.metric else None
    try:
        if args.samples is not None and args.samples < 1:
            raise WhereFromError("--samples must be at least 1.")
        if args.steps < 1 or args.noise < 0:
            raise WhereFromError("--steps must be at least 1 and --noise at least 0.")
        if args.prompts:
            _write(args.output, trace_prompts(args, metric))
            return 0
        rows, _ = read_questions(args.questions)
        loaded = load(args.checkpoint)
        if loaded.config.head != "lm" or not loaded.config.causal:
            raise WhereFromError(f"{Path(args.checkpoint).name} is not a causal language model, so it has no "
                                 "next piece to trace.")
        if args.average:
            bar = tqdm(total=len(rows), desc="averaged traces", unit="question", file=sys.stderr)
            averages, kept = kept_averages(args.checkpoint, loaded, args.questions, args.corruption, metric,
                                           args.noise, args.samples or DEV_SAMPLES, args.seed,
                                           progress=lambda done, _total: bar.update(done - bar.n),
                                           recompute=args.recompute)
            bar.close()
            text = json.dumps(averages.to_json())
            _write(args.output, [text])
            print(("read from " if kept else "computed and kept: ") + averages.sentence(), file=sys.stderr)
            return 0
        pool = swap_pool(args.questions, rows)
        lines = []
        for question, truth in tqdm(rows, desc="where from", unit="question", file=sys.stderr):
            try:
                line = question_record(loaded.model, loaded.tokenizer, question, truth, args.corruption, metric,
                                       args.noise, args.samples or SAMPLES, args.seed, pool, args.steps)
            except WhereFromError as exc:
                line = {"question": question, "truth": truth, "problem": str(exc)}
            lines.append(json.dumps(line, ensure_ascii=False))
        _write(args.output, lines)
    except (WhereFromError, CheckpointError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def trace_prompts(args, metric: str | None) -> list[str]:
    """One JSON line per prompt of --prompts (a line that cannot be traced: its one sentence as "problem"); a swap
    draws the other lines' subjects."""
    from core.io.hf_cache import load_named

    lines = read_prompts(args.prompts)
    loaded = load_named(args.checkpoint)
    check_traceable(loaded, Path(args.checkpoint).name)
    subjects = list(dict.fromkeys(line.subject for line in lines if line.subject))
    out = []
    for line in tqdm(lines, desc="where from", unit="prompt", file=sys.stderr):
        head = {"line": line.line, "prompt": line.prompt, "subject": line.subject, "target": line.target}
        try:
            if line.problem:
                raise WhereFromError(line.problem)
            q, ct = trace_prompt(loaded, line.prompt, line.subject, line.target, args.corruption, metric,
                                 args.noise, args.samples or SAMPLES, args.seed, subjects)
            record = {"line": line.line, **prompt_record(q, ct)}
        except WhereFromError as exc:
            record = {**head, "problem": str(exc)}
        out.append(json.dumps(record, ensure_ascii=False))
    return out


def _write(output: str | None, lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
