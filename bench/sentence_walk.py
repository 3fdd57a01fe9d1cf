"""What a typed sentence passes through between the Attention page and the browser, traced as it runs.

    python -m bench.sentence_walk [--text "A new sentence."] [--checkpoints DIR] [--files]

The Attention page (pages/attention.py) runs under Streamlit's AppTest on the bundled checkpoints. It runs
once (model loaded, caches warm); then a sentence nobody typed before goes into the box and the rerun that
draws it is traced with a profile hook: every call into a project file (app.py, pages/, ui/, core/) is recorded,
in order. Printed:

- files entered: the project files any of whose code ran for this sentence, in order of first entry (the
  files a reader follows to see how a sentence becomes a picture), split into the app (app.py, pages/, ui/) and core/;
- doors into core: the core functions that app code (pages/, ui/) calls directly, grouped by file (what a page must
  know of core);
- round trips: how often control goes from the app into core/ and back, counted once per core file a page
  enters (a second call into the same file is the same trip: the reader already knows the way).

It measures structure, not speed (nothing is timed), so it runs the same on a busy machine. Run it in two
checkouts to compare a restructuring.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "The quiet river carried old letters past the mill before the storm."


def layer(path: str) -> str | None:
    """'pages' or 'core' (app.py, pages/ and ui/ count as pages: the app) for a project file, None for anything else."""
    try:
        relative = Path(path).resolve().relative_to(ROOT)
    except ValueError:
        return None
    top = relative.parts[0]
    if top in ("app.py", "pages", "ui"):
        return "pages"
    return "core" if top == "core" else None


class Recorder:
    """A profile hook: (caller file, callee file, callee function) of every call into a project file."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, str, str]] = []
        self._layers: dict[str, str | None] = {}

    def _layer(self, path: str) -> str | None:
        if path not in self._layers:
            self._layers[path] = layer(path)
        return self._layers[path]

    def __call__(self, frame, event, arg):
        if event != "call":
            return
        callee = frame.f_code.co_filename
        if self._layer(callee) is None:
            return
        caller = frame.f_back
        while caller is not None and self._layer(caller.f_code.co_filename) is None:
            caller = caller.f_back  # through library frames (streamlit's cache wrappers, torch modules)
        self.calls.append((caller.f_code.co_filename if caller else None, callee, frame.f_code.co_name))


def relative(path: str) -> str:
    return str(Path(path).resolve().relative_to(ROOT))


def walk(calls: list[tuple[str | None, str, str]]) -> dict:
    entered: OrderedDict[str, None] = OrderedDict()
    doors: OrderedDict[str, OrderedDict[str, None]] = OrderedDict()
    for caller, callee, function in calls:
        entered.setdefault(relative(callee))
        if caller is not None and layer(caller) == "pages" and layer(callee) == "core":
            doors.setdefault(relative(callee), OrderedDict()).setdefault(function)
    files = list(entered)
    return {"files": files, "pages": [f for f in files if layer(str(ROOT / f)) == "pages"],
            "core": [f for f in files if layer(str(ROOT / f)) == "core"],
            "doors": {file: list(functions) for file, functions in doors.items()}}


def traced_sentence(text: str) -> dict:
    """The walk of `text` typed on the Attention page (checkpoints: ATTENTION_LAB_CHECKPOINTS or the bundled)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "pages" / "attention.py"), default_timeout=300)
    at.run()
    if at.exception:
        raise SystemExit(f"The Attention page failed before the sentence: {at.exception[0].message}")
    box = next((area for area in at.text_area if area.label == "Sentence"), None)
    if box is None:  # no usable checkpoint: the page says so and draws no sentence box
        said = " ".join(dict.fromkeys(e.value for e in at.info)) or "no sentence box"
        raise SystemExit(f"The Attention page has no sentence box to type into ({said}).")
    box.set_value(text)
    recorder = Recorder()
    threading.setprofile(recorder)
    try:
        at.run()
    finally:
        threading.setprofile(None)
    if at.exception:
        raise SystemExit(f"The Attention page failed on the sentence: {at.exception[0].message}")
    if not at.get("plotly_chart"):
        raise SystemExit("The Attention page drew no chart for the sentence.")
    return walk(recorder.calls)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--text", default=SENTENCE, help="the sentence typed (default: %(default)r)")
    parser.add_argument("--checkpoints", help="a checkpoints folder (default: the bundled checkpoints/)")
    parser.add_argument("--files", action="store_true", help="list the files entered, in order")
    args = parser.parse_args(argv)
    if args.checkpoints:
        os.environ["ATTENTION_LAB_CHECKPOINTS"] = args.checkpoints
    found = traced_sentence(args.text)
    if args.files:
        for file in found["files"]:
            print(f"  {file}")
    print(f"files entered: {len(found['files'])} ({len(found['pages'])} in app.py, pages/ and ui/, "
          f"{len(found['core'])} in core/)")
    print(f"round trips pages/ -> core/ -> pages/: {len(found['doors'])} (one per core file a page calls)")
    for file, functions in found["doors"].items():
        print(f"  {file}: {', '.join(functions)}")


if __name__ == "__main__":
    sys.exit(main())
