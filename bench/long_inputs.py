"""Models and a text for 512-token inputs (issue 28, section 3), built into a folder the app can open.

    python -m bench.long_inputs --out /tmp/long-models     # then ATTENTION_LAB_CHECKPOINTS=/tmp/long-models

- `ours-512`: our Transformer with a 512-token context (learned positions, block_size 512, so 512 is
  its hard limit), 3 layers x 4 heads x 128 like the bundled LMs, reading words (the vocabulary of
  data/world/wiki.txt). Random weights (seed 0): on the shared 2-core box the trainer ran this shape at
  ~1,000 tokens/s (`python -m core.train lm data/world/wiki.txt --block-size 512 --max-iters 6`), so
  training it would take longer than a benchmark may, and what a page costs does not depend on weights.
- `bert-512` (with requirements-hf.txt): a BertForMaskedLM with 512 positions (4 layers x 4 heads x 64)
  and a WordPiece vocabulary of wiki.txt's words, random weights, built by transformers itself.
`LONG_TEXT` is the start of wiki.txt, longer than 512 tokens for both, so the page reads exactly 512.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKI = ROOT / "data" / "world" / "wiki.txt"
LONG_TEXT = WIKI.read_text(encoding="utf-8")[:3600].rsplit(" ", 1)[0]  # ~600 words: over 512 tokens for both
OURS, BERT = "ours-512", "bert-512"
CONTEXT = 512


def ours(folder: Path) -> Path:
    import torch

    from core.io import checkpoint
    from core.model.config import ModelConfig
    from core.model.tokenizer import WordTokenizer
    from core.model.transformer import Transformer

    tokenizer = WordTokenizer.from_corpus(WIKI.read_text(encoding="utf-8"), min_freq=2)
    torch.manual_seed(0)
    model = Transformer(ModelConfig(vocab_size=tokenizer.vocab_size, block_size=CONTEXT, n_layer=3, n_head=4,
                                    n_embd=128, positional="learned", dropout=0.0)).eval()
    return checkpoint.save(folder / f"{OURS}.safetensors", model, tokenizer, "lm",
                           command="python -m bench.long_inputs (random weights, seed 0)", seed=0)


def bert(folder: Path) -> Path:
    from bench.hf_folders import bert_folder

    words = Counter(re.findall(r"[a-z]+|[0-9]+|[^\sa-z0-9]", WIKI.read_text(encoding="utf-8").lower()))
    pieces = sorted({c for w in words for c in w})
    vocab = [w for w, _ in words.most_common(3000)] + [f"##{c}" for c in pieces]
    return bert_folder(folder / BERT, vocab=list(dict.fromkeys(vocab)), max_positions=CONTEXT, width=64,
                       layers=4, heads=4)


def build(folder: Path) -> list[str]:
    """The models that could be built (BERT needs transformers), by name."""
    import importlib.util

    folder.mkdir(parents=True, exist_ok=True)
    ours(folder)
    names = [OURS]
    if importlib.util.find_spec("transformers") is not None:
        bert(folder)
        names.append(BERT)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    print("built", ", ".join(build(args.out)), "in", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
