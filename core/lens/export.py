"""`python -m core.lens.export MODEL TEXT -o OUT.npz [--csv]`: the attention page's numbers, as files.

MODEL is anything the app opens: an Attention Lab checkpoint (bundled, uploaded, or converted from
CS224N with core.io.convert) or a Hugging Face model folder. The arrays come from the same call the page
makes (`core.lens.attention.run_attention`), so a script sees exactly what the page shows:

  attention  float32 (n_layer, n_head, T, T)   rows are queries, columns keys
  tokens     str (T,)                           the page's display labels
  ids        int64 (T,)                         token ids
  allowed    bool (T, T)                        True where a query may attend a key

--csv also writes the long table of the page's CSV download (layer, head, query, key, weight).

  python -m core.lens.export lm.safetensors "Ada Lovelace was born in London." -o ada.npz --csv
  python -m core.lens.export models/tiny-bert "The cat sat on the mat." -o cat.npz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def export(model_path: str | Path, text: str, out: str | Path, csv_path: str | Path | None = None,
           run_past_block: bool = False):
    from core.io.checkpoint import load
    from core.lens import attention as av

    out = Path(out)
    if out.suffix != ".npz":
        raise ExportError(f"The output {out.name} must end in .npz.")
    loaded = load(model_path)
    run = av.run_attention(loaded.model, loaded.tokenizer, loaded.task, text, loaded.labels,
                           run_past_block=run_past_block)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, attention=run.attention.astype(np.float32), tokens=np.array(run.tokens, dtype=str),
             ids=np.array(run.ids, dtype=np.int64), allowed=run.allowed.astype(bool))
    if csv_path is not None:
        Path(csv_path).write_text(av.attention_csv(run.attention, run.tokens), encoding="utf-8")
    return run


class ExportError(ValueError):
    """One sentence for the user."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.lens.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a .safetensors checkpoint or a Hugging Face model folder")
    parser.add_argument("text", help="the sentence, as typed on the attention page")
    parser.add_argument("-o", "--output", required=True, help="where to write the .npz")
    parser.add_argument("--csv", nargs="?", const=True, default=None, metavar="CSV",
                        help="also write the long table (default: the output's name with .csv)")
    parser.add_argument("--past-block", action="store_true",
                        help="read past the block size (schemes without a hard limit), as the page's tick box")
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.io.checkpoint import CheckpointError
    from core.lens.attention import AttentionInputError

    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    csv_path = Path(args.output).with_suffix(".csv") if args.csv is True else args.csv
    try:
        run = export(args.model, args.text, args.output, csv_path, args.past_block)
    except (ExportError, CheckpointError, AttentionInputError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in run.notes:
        print(note)
    L, H, T, _ = run.attention.shape
    print(f"wrote {args.output}: attention ({L}, {H}, {T}, {T}) over {T} tokens"
          + (f"; {csv_path}" if csv_path else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
