"""Where-from views on the bundled birthplace model: one question's three causal-trace panels, its logit lens and
direct attribution, its integrated gradients, and the dev set's averaged grids.

    python -m bench.where_from [--checkpoint PATH] [--questions TSV] [--repeats 5] [--limit N] [--no-dev]

Targets (issue 34, this 2-core CPU): causal-trace panels <= 0.5 s, logit lens + attribution <= 0.2 s,
integrated gradients <= 0.5 s, the 200 dev questions' averaged grids <= 60 s (medians of `--repeats`).
Baselines, measured in the same run and interleaved:
- for the panels: the way a notebook does causal tracing (ROME's own code does it this way): plain torch forward
  hooks, one forward pass per (noise sample, panel, layer, position), on the same cells and samples; the
  ratio says what batching the grid into one pass buys;
- for everything: one plain forward pass of the same question (model(idx)), so each time is also given in
  "forward passes" (a unit that moves with the machine's load).
`--limit N` averages the first N dev questions and scales the time to the file (labelled as such).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from bench.birthplace_eval import timed

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CHECKPOINT = ROOT / "checkpoints" / "birth-vanilla-pretrained.safetensors"
DEFAULT_QUESTIONS = ROOT / "data" / "knowledge" / "birth_dev.tsv"
QUESTION = ("Where was Michelle Lefort born?", "Paris")
TARGETS = {"panels": 0.5, "lens + attribution": 0.2, "integrated gradients": 0.5, "dev averages": 60.0}


def hooks_loop(model, q, samples: int, seed: int, noise: float) -> dict[str, list[list[float]]]:
    """Causal tracing as notebooks write it: forward hooks, one pass per (sample, kind, layer, position)."""
    blocks = list(model.blocks)
    modules = {"residual": blocks, "attention": [b.attn for b in blocks], "MLP": [b.mlp for b in blocks]}
    idx = torch.tensor([q.ids])
    clean: dict[str, list[torch.Tensor]] = {k: [] for k in modules}
    handles = [m.register_forward_hook(lambda _m, _i, out, k=k: clean[k].append(
        (out[0] if isinstance(out, tuple) else out).detach().clone())) for k, ms in modules.items() for m in ms]
    with torch.no_grad():
        model(idx)
    for h in handles:
        h.remove()
    names = q.name_positions
    std = model.tok_emb.weight[torch.tensor([q.ids[p] for p in names])].detach().std()
    draws = torch.randn(samples, len(names), model.config.n_embd, generator=torch.Generator().manual_seed(seed))
    grids = {}
    for kind in modules:
        grid = []
        for layer in range(len(blocks)):
            row = []
            for t in range(len(q.ids)):
                if layer == len(blocks) - 1 and t < len(q.ids) - 1:
                    row.append(0.0)
                    continue
                total = 0.0
                for s in range(samples):
                    def noised(_m, _i, out, s=s):
                        out = out.clone()
                        out[0, names] += draws[s] * noise * std
                        return out

                    def patch(_m, _i, out, kind=kind, layer=layer, t=t):
                        value = (out[0] if isinstance(out, tuple) else out).clone()
                        value[0, t] = clean[kind][layer][0, t]
                        return (value,) + tuple(out[1:]) if isinstance(out, tuple) else value

                    hs = [model.tok_emb.register_forward_hook(noised),
                          modules[kind][layer].register_forward_hook(patch)]
                    with torch.no_grad():
                        logits, _ = model(idx)
                    for h in hs:
                        h.remove()
                    total += float(torch.softmax(logits[0, -1].double(), -1)[q.answer_id])
                row.append(total / samples)
            grid.append(row)
        grids[kind] = grid
    return grids


FORWARDS: list[float] = []  # the baseline, measured between the things measured


def interleaved(function, baseline, repeats: int) -> tuple[object, float]:
    """Median of `function` over `repeats` calls, each followed by 5 timed calls of `baseline` (kept)."""
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
        for _ in range(5):
            started = time.perf_counter()
            baseline()
            FORWARDS.append(time.perf_counter() - started)
    return result, statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.where_from", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=DEFAULT_CHECKPOINT)
    parser.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--limit", type=int, help="average only the first N dev questions (time scaled to all)")
    parser.add_argument("--no-dev", action="store_true", help="skip the dev-set averages")
    args = parser.parse_args(argv)

    from core.io.checkpoint import load
    from core.lens import where_from as wf
    from core.lens.where_from import dev_set

    loaded = load(args.checkpoint)
    model, tok = loaded.model, loaded.tokenizer
    torch.set_grad_enabled(False)
    q = wf.read_question(model, tok, *QUESTION)
    idx = torch.tensor([q.ids])
    print(f"{args.checkpoint.name}: {QUESTION[0]!r}, {len(q.ids)} pieces, {len(q.name_positions)} in the name; "
          f"{torch.get_num_threads()} threads")
    def forward_pass():
        return model(idx)

    for _ in range(3):
        forward_pass()  # warm-up

    def lens_and_attribution():
        rec = wf.record(model, q)
        return wf.logit_lens(model, tok, rec, q.answer_id), wf.direct_attribution(model, rec, q.answer_id)

    rows = []
    ct, panels = interleaved(lambda: wf.causal_trace(model, tok, q, samples=wf.SAMPLES), forward_pass, args.repeats)
    loop, loop_time = timed(lambda: hooks_loop(model, q, wf.SAMPLES, wf.SEED, wf.NOISE), 1)
    worst = max(abs(ct.scores[k][~ct.impossible] - torch.tensor(loop[k]).numpy()[~ct.impossible]).max()
                for k in wf.KINDS)
    print(f"panels: batched {panels:.3f} s, hook loop {loop_time:.3f} s ({loop_time / panels:.1f}x); "
          f"largest difference between the two grids {worst:.1e}")
    rows.append(("panels", panels))
    _, lens = interleaved(lens_and_attribution, forward_pass, args.repeats)
    rows.append(("lens + attribution", lens))
    torch.set_grad_enabled(True)
    _, ig = interleaved(lambda: wf.input_attribution(model, q, steps=wf.IG_STEPS), forward_pass, args.repeats)
    torch.set_grad_enabled(False)
    rows.append(("integrated gradients", ig))
    if not args.no_dev:
        rows_q, _ = dev_set.read_questions(args.questions)
        pairs = [(qq, t) for qq, t in rows_q if t][: args.limit or None]
        answered = dev_set.answered_flags(loaded, pairs)
        pool = dev_set.swap_pool(args.questions, rows_q)
        started = time.perf_counter()
        dev_set.average_traces(model, tok, pairs, answered, None, swap_names=pool)
        dev = time.perf_counter() - started
        scale = len(rows_q) / len(pairs)
        label = f"(first {len(pairs)}, scaled to {len(rows_q)})" if scale != 1 else f"({len(pairs)} questions)"
        print(f"dev averages {label}: {dev * scale:.1f} s, answers included ({dev_set.DEV_SAMPLES} noise draws each)")
        rows.append(("dev averages", dev * scale))
    forward = statistics.median(FORWARDS)
    print(f"\none plain forward pass of the question: {forward * 1e3:.2f} ms, median of {len(FORWARDS)} taken between "
          "the measurements (the unit below)")
    print(f"{'what':<22} {'median s':>9} {'target s':>9} {'forwards':>9}")
    passed = True
    for name, seconds in rows:
        ok = seconds <= TARGETS[name]
        passed &= ok
        print(f"{name:<22} {seconds:>9.3f} {TARGETS[name]:>9.2f} {seconds / forward:>9.0f}  {'pass' if ok else 'FAIL'}")
    print(f"RESULT where_from measured=panels:{panels:.2f}s,loop/batched:{loop_time / panels:.0f}x "
          f"target=<=0.5s pass={'true' if passed else 'false'}")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
