"""The text a vocabulary is built from when it is not the training text: the `--vocab-from` files.

CSE 256 PA2 builds one word vocabulary from every training file of its folder (train_CLS.tsv's
sentences and train_LM.txt, never a file named test), so the language model and the classifier share it
and a test word is unknown only if no training file has it. A `.tsv` file is `LABEL<TAB>TEXT` (the
classification format) and gives its text column, so labels do not become words.
"""

from __future__ import annotations

from pathlib import Path

from core.data.datasets import read_text, read_tsv_pairs


def vocabulary_text(paths: list[str] | tuple[str, ...]) -> str:
    """Every file's text, one after another (a file that is missing, empty or not UTF-8 is refused by
    read_text with its name)."""
    parts = []
    for path in paths:
        if Path(path).suffix.lower() == ".tsv":
            parts.extend(text for _, text in read_tsv_pairs(path))
        else:
            parts.append(read_text(path))
    return "\n".join(parts)


def vocabulary_warnings(paths: list[str] | tuple[str, ...], eval_paths: list[str] | tuple[str, ...] = ()
                        ) -> list[str]:
    """One sentence per vocabulary file that is a test file: evaluated here, or named like one (the
    course's rule: it skips every file whose name contains 'test')."""
    evaluated = {Path(p).resolve() for p in eval_paths}
    warnings = []
    for path in paths:
        name = Path(path).name
        if Path(path).resolve() in evaluated:
            warnings.append(f"warning: the vocabulary is built from {name}, which is also evaluated: none of "
                            "its words can be unknown, so its perplexity is not comparable with a vocabulary "
                            "built from training files only.")
        elif "test" in name.lower():
            warnings.append(f"warning: the vocabulary is built from {name}, named like a test file: the "
                            "course builds it from training files only, so test words stay unknown.")
    return warnings
