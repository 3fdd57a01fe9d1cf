"""What a new sentence's attention map costs to build and make ready for the browser, in process, now and as it was
built before issue 45's session 15 (the same run, taking turns).

    python -m bench.attention_map_build [--sentences 40] [--repeats 5] [--model lm-learned]

Each sentence is new (as bench.load's typing sessions send them), traced once up front; then per sentence, best of
--repeats passes over all of them, CPU time (time.process_time):
- now: `core.figures.attention.attention_heatmap` (its margins fitted once, in `unchecked_figure`) and
  `core.figures.browser.for_browser` (the figure read as plotly holds it);
- before: the same function with `finished`'s second fitting (`fit_margins`) and the spec read through
  `to_plotly_json()`, which deep-copies the layout (template included) and every trace first.
The two specs are checked equal for every sentence. The last line, `RESULT attention_map_build ...`, is in the form
bench.run_all reads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import random
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Marie Curie", "Emmy Noether", "Niels Bohr"]
PLACES = ["London", "Paris", "Leeds", "Berlin", "Vienna", "Madrid", "Rome", "Dublin"]


def copying_spec(fig) -> dict:
    """browser_spec as it read a figure before: through plotly's `to_plotly_json()` (deep copies)."""
    from core.figures.browser import _listed, apply_template, plain

    layout = fig.layout.to_plotly_json()
    template = layout.pop("template", None)
    layout = {key: plain(item) for key, item in layout.items()}
    data = [{key: _listed(key, plain(item)) for key, item in trace.to_plotly_json().items()} for trace in fig.data]
    spec = apply_template({"data": data, "layout": {**layout, "template": template}})
    spec["layout"]["datarevision"] = hashlib.blake2b(pickle.dumps(spec["data"], protocol=5), digest_size=8).hexdigest()
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attention_map_build", description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--model", default="lm-learned", help="a bundled checkpoint's name")
    args = parser.parse_args(argv)

    import torch

    from core.figures.attention import attention_heatmap
    from core.figures.browser import browser_spec
    from core.figures.margins import fit_margins
    from core.io.checkpoint import load
    from core.lens import attention as av

    torch.set_num_threads(1)
    loaded = load(ROOT / "checkpoints" / f"{args.model}.safetensors")
    rng = random.Random(0)
    runs = [av.run_attention(loaded.model, loaded.tokenizer, loaded.task,
                             f"{rng.choice(NAMES)} was born in {rng.choice(PLACES)} ({i}).", loaded.labels)
            for i in range(args.sentences)]

    def build(run):
        return attention_heatmap(run.attention[0, 0], run.tokens, run.allowed, None, title="Layer 0, head 0")

    def now(run) -> dict:
        return browser_spec(build(run))

    def before(run) -> dict:
        return copying_spec(fit_margins(build(run)))

    for run in runs:  # warm, and the same JSON either way
        assert json.dumps(now(run), sort_keys=True) == json.dumps(before(run), sort_keys=True)
    best = {"before": float("inf"), "now": float("inf")}
    for _ in range(args.repeats):
        for name, make in (("before", before), ("now", now)):
            start = time.process_time()
            for run in runs:
                make(run)
            best[name] = min(best[name], (time.process_time() - start) / len(runs) * 1000)
    ratio = best["before"] / best["now"]
    print(f"{args.model}, {args.sentences} new sentences ({len(runs[0].tokens)}-{max(len(r.tokens) for r in runs)} "
          f"tokens), best of {args.repeats}, CPU ms per map (built and made ready for the browser):")
    print(f"  before (fit twice, spec read through deep copies)  {best['before']:.3f} ms")
    print(f"  now                                                 {best['now']:.3f} ms   {ratio:.2f}x")
    print(f"RESULT attention_map_build measured={ratio:.2f} target>=1 pass={str(ratio >= 1).lower()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
