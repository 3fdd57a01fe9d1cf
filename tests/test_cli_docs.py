"""Every command the README and the `--help` texts show is run as written, on tiny data, so the
documentation cannot drift from the CLI again (issue 16: `classify FILE` once failed as documented)."""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from core.data.world import generate_world, write_world
from core.io import hf
from core.lens.export import build_parser as export_parser
from core.train.cli import build_parser as train_parser
from tests.conftest import ROOT

MODULES = ("core.train", "core.io.convert", "core.lens.export", "core.io.hf_cache")
ENTRY_POINTS = {"core.train": "core.train.cli"}
# Appended to every training command: later flags win in argparse, so the documented command runs as
# written, only smaller and shorter.
TINY = ["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--epochs", "1", "--batch-size", "64",
        "--max-iters", "2", "--device", "cpu"]
TRAINING = {"pretrain", "finetune", "lm", "mlm", "classify"}


def commands_in(text: str) -> list[str]:
    """`python -m core.X ...` lines (with backslash continuations joined) and inline code spans."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    modules = "|".join(re.escape(m) for m in MODULES)
    for match in re.finditer(r"(?:`|^|\s)((?:\.venv/bin/)?python -m (?:" + modules + r")(?![\w.])[^`\n]*)", joined,
                             flags=re.M):
        command = match.group(1).strip()
        args = shlex.split(command)[3:]
        # a bare module name is a reference, and a synopsis ([-h], MODEL TEXT) is not an example
        if args and "[" not in command and not any(a.isupper() for a in args):
            found.append(command)
    return found


def documented() -> list[str]:
    texts = [(ROOT / "README.md").read_text(encoding="utf-8"), train_parser().format_help(),
             export_parser().format_help()]
    return list(dict.fromkeys(c for text in texts for c in commands_in(text)))


def test_the_readme_and_help_show_every_function():
    commands = " ".join(documented())
    for function in ("pretrain", "finetune", "evaluate", "lm", "mlm", "classify"):
        assert f"core.train {function} " in commands
    assert "core.train classify data/world/names_train.tsv" in commands  # no variant word before the path
    assert "core.lens.export" in commands and "core.io.convert cs224n" in commands
    assert "core.io.convert nanogpt" in commands


class NeedsTransformers(Exception):
    """A documented Hugging Face example, without the optional extra installed."""


def _prepare_inputs(argv: list[str], cwd: Path) -> None:
    """Inputs the documentation names but a fresh folder lacks: small texts, a CS224N params file,
    a tiny Hugging Face folder."""
    wiki = (cwd / "data/world/wiki.txt").read_text(encoding="utf-8").splitlines()
    outputs = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output", "--writing_params_path",
                                                                     "--outputs_path")}
    for arg in argv:
        path = cwd / arg
        if arg in outputs or path.exists():
            continue
        if arg.endswith(".txt") and arg != "wiki.txt":
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(wiki[:40 if "train" in arg else 5]) + "\n", encoding="utf-8")
        elif arg.endswith(".tsv"):  # LABEL<TAB>TEXT, the CSE 256 speeches format
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(f"{i % 3}\t{line}\n" for i, line in enumerate(wiki[:40])), encoding="utf-8")
        elif arg.endswith("ckpt.pt") or arg.endswith("meta.pkl"):  # a nanoGPT run's checkpoint and vocabulary
            from tests.test_nanogpt import CHARS, meta_pkl, nanogpt_ckpt

            path.parent.mkdir(parents=True, exist_ok=True)
            if arg.endswith("ckpt.pt"):
                torch.save(nanogpt_ckpt(bias=False, prefix="_orig_mod."), path)
            else:
                path.write_bytes(meta_pkl(CHARS))
        elif arg.endswith(".params") or arg == "wiki.txt":
            from tests.test_convert import mingpt_state_dict, write_inputs

            write_inputs(cwd, mingpt_state_dict("vanilla"))
        elif arg.startswith("models/"):
            if not hf.available():
                raise NeedsTransformers(arg)
            from tests.hf_models import bert_folder

            if "llama" in arg:  # a tiny LLaMA-family decoder (issue 42)
                from bench.hf_folders import decoder_folder

                decoder_folder(path, "llama")
            else:
                bert_folder(path)


def run_documented(command: str, cwd: Path, monkeypatch) -> int:
    words = shlex.split(command)
    module, argv = words[2], words[3:]
    if argv and argv[0] in TRAINING:
        argv = argv + TINY
    _prepare_inputs(argv, cwd)
    monkeypatch.chdir(cwd)
    try:
        # `python -m core.train` runs core/train/__main__.py, which calls core.train.cli.main
        return importlib.import_module(ENTRY_POINTS.get(module, module)).main(argv)
    except SystemExit as exit_info:  # --help
        return exit_info.code or 0


def test_every_documented_command_runs_as_written(tmp_path, monkeypatch, capsys):
    write_world(generate_world(seed=1, n_people=120, n_dev=20, n_test=10), tmp_path / "data" / "world")
    write_world(generate_world(seed=1, n_people=60, n_dev=10, n_test=5, bios=2), tmp_path / "data" / "knowledge")
    torch.set_num_threads(1)
    ran = []
    for command in documented():
        try:
            code = run_documented(command, tmp_path, monkeypatch)
        except NeedsTransformers:
            continue
        out, err = capsys.readouterr()
        assert code == 0, f"{command}\n{err}"
        ran.append(command)
    assert len(ran) >= (12 if hf.available() else 11)
    assert (tmp_path / "speeches_lm.safetensors").is_file() and (tmp_path / "ada.npz").is_file()


def test_the_new_entry_point_answers_help_in_a_fresh_process():
    for module in ("core.lens.export",):  # core.train's entry point runs in tests/test_train.py
        result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0 and "usage: python -m" in result.stdout, result.stderr


def test_a_corpus_path_is_never_taken_for_the_variant(tmp_path, monkeypatch):
    from core.train.cli import CommandError, split_words

    assert split_words(["data.tsv"]) == ("vanilla", "data.tsv")
    assert split_words(["synthesizer", "wiki.txt"]) == ("synthesizer", "wiki.txt")
    assert split_words(["vanilla"]) == ("vanilla", None)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "vanilla").write_text("a file really named vanilla\n")
    assert split_words(["vanilla"]) == ("vanilla", "vanilla")
    with pytest.raises(CommandError, match="at most a variant and one corpus path"):
        split_words(["vanilla", "a.txt", "b.txt"])


def test_no_documented_command_is_left_unparsed():
    """Each documented line parses with its module's own parser (a cheap guard beside the full run)."""
    for command in documented():
        words = shlex.split(command)
        if words[2] == "core.train" and "--help" not in words:
            train_parser().parse_args(words[3:])
    assert shutil.which("python3") or sys.executable


@pytest.mark.parametrize("argv, message", [
    (["pretrain", "wiki.txt", "--vocab-from", "a.txt"], "unrecognized arguments: --vocab-from a.txt"),
    (["finetune", "wiki.txt", "--splitter", "nltk"], "unrecognized arguments: --splitter nltk"),
    (["mlm", "a.txt", "--stride", "1"], "unrecognized arguments: --stride 1"),
    (["classify", "t.tsv", "--val-fraction", "0"], "unrecognized arguments: --val-fraction 0"),
    (["pretrain", "wiki.txt", "--level", "word"], "argument --level: invalid choice: 'word'"),
    (["finetune", "wiki.txt", "--level", "word"], "argument --level: invalid choice: 'word'"),
    (["lm", "a.txt", "--objective", "lm"], "unrecognized arguments: --objective lm"),
    (["evaluate", "--reading_params_path", "m.safetensors", "--n-layer", "2"], "unrecognized arguments: --n-layer"),
    (["teach", "a.txt"], "argument function: invalid choice: 'teach'"),
])
def test_a_flag_the_function_does_not_take_is_argparses_own_error(argv, message, tmp_path, monkeypatch, capsys):
    """The rules that were hand-written (which flag goes with which function) are the subparsers: argparse
    refuses before anything is read or written, with its usage line and exit status 2."""
    from core.train.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "usage: python -m core.train" in err, err
    assert not list(tmp_path.iterdir())


def test_each_function_lists_only_its_own_flags():
    helps = {f: _function_help(f) for f in ("pretrain", "lm", "classify", "evaluate")}
    assert "--objective" in helps["pretrain"] and "--vocab-from" not in helps["pretrain"]
    assert "--stride" in helps["lm"] and "--vocab-from" in helps["lm"] and "--pooling" not in helps["lm"]
    assert "--pooling" in helps["classify"] and "--stride" not in helps["classify"]
    assert "--outputs_path" in helps["evaluate"] and "--epochs" not in helps["evaluate"]


def _function_help(function: str) -> str:
    import contextlib
    import io

    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        train_parser().parse_args([function, "--help"])
    return text.getvalue()
