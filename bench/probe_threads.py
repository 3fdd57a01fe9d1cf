"""Would the probe's three models answer faster on threads? (issue 45, item 3: "if it measures faster")

    python -m bench.probe_threads [--repeats 3]

The probe asks every compared model the same question: its greedy answer and its ranking of every candidate place
(core.lens.probe.answers.ask). The three bundled birthplace models differ in their weights, so they cannot share a
batch; they could run on three threads (torch releases the GIL inside its operations). This times both ways on the
same questions, taking turns, in this process with torch's own thread count: median ms per question and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("birth-vanilla-pretrained", "birth-vanilla-scratch", "birth-synthesizer-pretrained")
NAMES = ("Lise Meitner", "Paul Dirac", "Max Born", "Otto Hahn", "Rosalind Franklin", "Dorothy Hodgkin")


def main(argv: list[str] | None = None) -> int:
    from core.io.checkpoint import load
    from core.lens.probe import answers, corpus

    parser = argparse.ArgumentParser(prog="python -m bench.probe_threads", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    models = [load(ROOT / "checkpoints" / f"{name}.safetensors") for name in MODELS]
    places = tuple(corpus.load_probe_data(ROOT / "data" / "knowledge").labels)
    questions = [f"Where was {name} born?" for name in NAMES]
    pool = ThreadPoolExecutor(len(models))

    def one_after_another(question: str) -> list:
        return [answers.ask(m.model, m.tokenizer, question, places) for m in models]

    def on_threads(question: str) -> list:
        return list(pool.map(lambda m: answers.ask(m.model, m.tokenizer, question, places), models))

    assert [a.answer for a in one_after_another(questions[0])] == [a.answer for a in on_threads(questions[0])]
    times: dict[str, list[float]] = {"one after another": [], "on threads": []}
    for _ in range(args.repeats):
        for question in questions:
            for way, ask in (("one after another", one_after_another), ("on threads", on_threads)):
                start = time.perf_counter()
                ask(question)
                times[way].append(time.perf_counter() - start)
    pool.shutdown()
    medians = {way: 1000 * statistics.median(t) for way, t in times.items()}
    print(f"{len(models)} models x {len(places)} candidates, torch threads {torch.get_num_threads()}, "
          f"{len(times['on threads'])} questions each way")
    for way, ms in medians.items():
        print(f"{way:20} {ms:7.1f} ms a question")
    ratio = medians["one after another"] / medians["on threads"]
    print(f"RESULT probe_threads measured={ratio:.2f} target>=1.2 pass={str(ratio >= 1.2).lower()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
