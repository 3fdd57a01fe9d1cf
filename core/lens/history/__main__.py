"""`python -m core.lens.history FOLDER_OR_FILE... [-o OUT.csv] [--tags REGEX]`: what the readers find in runs
other tools wrote (runs, metrics mapped and not, points, saved steps, problems), and the tidy table as a CSV with
the curves page's columns (run, step, epoch, tokens, wall_time, split, metric, value), one row per point.
TensorBoard folders are read as the page reads them: through TensorBoard's data server where it runs (stopped when
the command ends), else TensorBoard's Python record reader, with one sentence saying so."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from core.lens.history.records import to_csv
from core.lens.history.sources import read_paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.lens.history", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", metavar="FOLDER_OR_FILE",
                        help="TensorBoard folders or event files, Trainer output folders or trainer_state.json, "
                             "metrics CSV/TSV, nanoGPT printouts, mlruns folders, .log.jsonl, .safetensors")
    parser.add_argument("-o", "--out", help="write the tidy table here (CSV); an existing file is not overwritten "
                                            "unless --force")
    parser.add_argument("--tags", help="a regular expression metric names must match (TensorBoard's tag filter)")
    parser.add_argument("--force", action="store_true", help="overwrite OUT")
    args = parser.parse_args(argv)
    found = read_paths(args.paths, tag_filter=args.tags)
    runs = found.runs
    print(f"{len(runs)} run(s), {len(found.frame):,} points.")
    for line in found.summary():
        print(f"  {line}")
    for note in found.notes:
        print(f"note: {note}")
    if args.out:
        out = Path(args.out)
        if out.exists() and not args.force:
            print(f"{out} exists; not overwritten (add --force).", file=sys.stderr)
            return 1
        if found.frame.empty:
            print("Nothing to write: no points were read.", file=sys.stderr)
            return 1
        tmp = out.with_name(out.name + ".partial")
        tmp.write_bytes(to_csv(found.frame))
        tmp.replace(out)
        print(f"wrote {out} ({len(found.frame):,} rows)")
    return 0 if runs else 1


if __name__ == "__main__":
    raise SystemExit(main())
