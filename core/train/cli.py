"""`python -m core.train`: the CLI over core.train.recipes (CS224N words for the birthplace task).

One subparser per function, holding only the flags that function uses: a flag given to a function that
does not take it (`--vocab-from` on pretrain) is argparse's own error, exit status 2. Every command in USAGE
and in the README is run by tests/test_cli_docs.py on tiny data, so the documentation cannot drift from
what the parser accepts.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from core.io import checkpoint as ckpt
from core.model.transformer import POOLINGS
from core.train.optim import DECAY_POLICIES
from core.train.trainer import TrainerConfig

USAGE = """Train and evaluate models (CS224N words for the birthplace task).

  python -m core.train pretrain vanilla data/world/wiki.txt --writing_params_path vanilla.pretrain.safetensors
  python -m core.train finetune vanilla data/world/wiki.txt --reading_params_path vanilla.pretrain.safetensors \\
      --finetune_corpus_path data/world/birth_places_train.tsv --writing_params_path vanilla.finetune.safetensors
  python -m core.train evaluate vanilla data/world/wiki.txt --reading_params_path vanilla.finetune.safetensors \\
      --eval_corpus_path data/world/birth_dev.tsv --outputs_path vanilla.dev.predictions
  python -m core.train lm data/world/wiki.txt --positional alibi --writing_params_path lm.safetensors
  python -m core.train lm speechesdataset/train_LM.txt --level word --splitter nltk \\
      --vocab-from speechesdataset/train_CLS.tsv --vocab-from speechesdataset/train_LM.txt --stride 1 \\
      --n-embd 64 --n-layer 4 --n-head 2 --ffn-width 100 --block-size 32 --dropout 0 --batch-size 16 --lr 1e-3 \\
      --lr-schedule constant --max-iters 500 --val-fraction 0 --init pytorch --betas 0.9 0.999 \\
      --weight-decay 0.01 --decay all --grad-clip 0 --writing_params_path speeches_lm.safetensors
  python -m core.train evaluate --reading_params_path speeches_lm.safetensors \\
      --eval_corpus_path speechesdataset/test_LM_obama.txt --eval_corpus_path speechesdataset/test_LM_hbush.txt \\
      --eval_corpus_path speechesdataset/test_LM_wbush.txt
  python -m core.train mlm data/world/wiki.txt --writing_params_path encoder.safetensors
  python -m core.train classify data/world/names_train.tsv --eval_corpus_path data/world/names_test.tsv \\
      --writing_params_path names.safetensors

The attention variant word (vanilla | synthesizer) is optional for every function; the corpus path
follows it. lm: each --eval_corpus_path is a validation split named after its file, measured after
every epoch; the last --val-fraction of the training file is the split 'val' (0: none). evaluate
scores a birthplace model (accuracy), a language model (perplexity per file) or a classifier.
"""

VARIANTS = ("vanilla", "synthesizer")
# the model flags' defaults (None on the parser, so that a flag given on purpose can be told from a default)
SHAPE_DEFAULTS = dict(n_layer=4, n_head=8, n_embd=256, block_size=128, positional="learned", ffn_width=0)
FUNCTIONS = ("pretrain", "finetune", "evaluate", "lm", "mlm", "classify")

# The assignment's settings where it has them (finetuning without --reading_params_path: 75 epochs).
DEFAULTS = {
    "pretrain": dict(epochs=650, batch_size=128, lr=6e-3, warmup_tokens=512 * 20),
    "finetune": dict(epochs=10, batch_size=256, lr=6e-4, warmup_tokens=512 * 20),
    "lm": dict(epochs=10, batch_size=64, lr=1e-3, warmup_tokens=0),
    "mlm": dict(epochs=20, batch_size=128, lr=2e-3, warmup_tokens=0),
    "classify": dict(epochs=10, batch_size=64, lr=1e-3, warmup_tokens=0),
}


class CommandError(ValueError):
    """A command line that cannot be run as written; one sentence."""


# The flags each function takes (argparse refuses the others with its own error, exit status 2).
TRAINING = ("pretrain", "finetune", "lm", "mlm", "classify")
READS_A_MODEL = ("finetune", "classify", "evaluate")  # --reading_params_path
EVALUATES = ("finetune", "lm", "classify", "evaluate")  # --eval_corpus_path
LEVELS = {"pretrain": ("char", "bpe"), "finetune": ("char", "bpe"), "lm": ("char", "word", "bpe"),
          "classify": ("char", "word", "bpe")}  # mlm builds a character vocabulary
WORD_VOCABULARY = ("lm", "classify")  # --lowercase, --min-freq, --splitter, --vocab-from
FUNCTION_HELP = {
    "pretrain": "pretrain on wiki.txt (span corruption, the assignment's; or --objective lm)",
    "finetune": "finetune on the birthplace questions (--finetune_corpus_path)",
    "evaluate": "score a birthplace model, a language model (perplexity per file) or a classifier",
    "lm": "train a language model",
    "mlm": "pretrain an encoder by masked language modelling",
    "classify": "train a classifier on a TSV of text and label",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m core.train", description=USAGE,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    functions = parser.add_subparsers(dest="function", required=True, metavar="function",
                                      title="functions (`python -m core.train FUNCTION --help` lists its flags)")
    for function in FUNCTIONS:
        sub = functions.add_parser(function, help=FUNCTION_HELP[function], description=FUNCTION_HELP[function])
        add_function_arguments(sub, function)
    return parser


def add_function_arguments(parser: argparse.ArgumentParser, function: str) -> None:
    parser.add_argument("words", nargs="*", metavar="[variant] corpus_path",
                        help="optional attention variant (vanilla | synthesizer), then wiki.txt "
                             "(pretrain/finetune/evaluate), the text (lm/mlm) or the train TSV (classify)")
    if function in READS_A_MODEL:
        parser.add_argument("--reading_params_path")
    if function in TRAINING:
        parser.add_argument("--writing_params_path")
    if function == "finetune":
        parser.add_argument("--finetune_corpus_path")
    if function in EVALUATES:
        parser.add_argument("--eval_corpus_path", action="append", default=[],
                            help="repeatable for lm and for evaluating a language model")
    if function == "evaluate":
        parser.add_argument("--outputs_path")
        parser.add_argument("--force", action="store_true", help="overwrite an existing --outputs_path")
        return
    model = parser.add_argument_group("model (with --reading_params_path the file sets the shape: leave these out)")
    model.add_argument("--n-layer", type=int, default=None, help="default 4")
    model.add_argument("--n-head", type=int, default=None, help="default 8")
    model.add_argument("--n-embd", type=int, default=None, help="default 256")
    model.add_argument("--ffn-width", type=int, default=None,
                       help="hidden units of each feed-forward (default 0: 4 x --n-embd; CSE 256 PA2 uses 100)")
    model.add_argument("--block-size", type=int, default=None, help="default 128")
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--positional", default=None, help="default learned")
    if function == "classify":
        model.add_argument("--pooling", choices=list(POOLINGS), default=None,
                           help="how the pieces' final states become one vector (default: last when "
                                "--reading_params_path is a causal language model, which measured best; "
                                "mean otherwise)")
    model.add_argument("--init", choices=["gpt2", "pytorch"], default="gpt2",
                       help="how new weights start: gpt2 N(0, 0.02) (default); pytorch the torch.nn modules' own "
                            "defaults (Embedding N(0, 1), Linear kaiming-uniform), as CSE 256 PA2's model has")
    if function in LEVELS:
        vocab = parser.add_argument_group("vocabulary")
        vocab.add_argument("--level", choices=LEVELS[function], default=None,
                           help="default char; with --reading_params_path the file's own")
        vocab.add_argument("--vocab-size", type=int, default=None,
                           help="--level bpe: pieces learned from the training (pretraining) text (default 2000)")
    if function == "pretrain":
        vocab.add_argument("--objective", choices=["span", "lm"], default="span",
                           help="span corruption (the assignment's) or next-token LM over packed documents")
    if function in WORD_VOCABULARY:
        vocab.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=False,
                           help="fold case before building the word vocabulary (default: keep case)")
        vocab.add_argument("--min-freq", type=int, default=1,
                           help="keep pieces seen at least this often in the training text (default 1: all)")
        vocab.add_argument("--splitter", choices=["regex", "nltk"], default=None,
                           help="--level word: how text is cut into words; regex (default) \\w+ runs and "
                                "punctuation, nltk the words of NLTK's word_tokenize, as CSE 256 PA2 splits them")
        vocab.add_argument("--vocab-from", action="append", default=[], metavar="FILE",
                           help="repeatable: build the vocabulary from these files instead of the training text "
                                "(a .tsv gives its text column); PA2 names every training file")
    train = parser.add_argument_group("training")
    train.add_argument("--epochs", type=int, default=None)
    train.add_argument("--max-iters", type=int, default=0, help="stop after this many optimizer steps (0: no limit)")
    train.add_argument("--batch-size", type=int, default=None)
    train.add_argument("--lr", type=float, default=None)
    train.add_argument("--lr-schedule", choices=["cosine", "constant"], default="cosine",
                       help="cosine: warmup then cosine decay to 10%% (CS224N); constant: one rate throughout")
    train.add_argument("--warmup-tokens", type=int, default=None)
    train.add_argument("--betas", type=float, nargs=2, default=None, metavar=("B1", "B2"),
                       help="AdamW's betas (default 0.9 0.95, minGPT's; torch.optim.AdamW's own: 0.9 0.999)")
    train.add_argument("--weight-decay", type=float, default=None,
                       help="AdamW's weight decay (default 0.1; torch.optim.AdamW's own: 0.01)")
    train.add_argument("--decay", choices=list(DECAY_POLICIES), default=None,
                       help="which parameters are decayed (default: cs224n for pretrain/finetune, mingpt for the "
                            "others; all: every parameter, as torch.optim.AdamW(model.parameters()))")
    train.add_argument("--grad-clip", type=float, default=None,
                       help="clip the gradient norm to this (default 1.0; 0: no clipping)")
    if function == "lm":
        train.add_argument("--stride", type=int, default=None, metavar="N",
                           help="a training window starts every N tokens (default: --block-size, no overlap; "
                                "1: at every token, as CSE 256 PA2 samples them)")
        train.add_argument("--val-fraction", type=float, default=0.1,
                           help="the last part of the training text held out as split 'val' (0: none)")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--device", default="auto")
    train.add_argument("--snapshots", type=int, default=0, metavar="N",
                       help="keep the weights at N log-spaced steps (first steps dense) in "
                            "<checkpoint>.snapshots.safetensors, float16 (0: none)")
    train.add_argument("--resume", action="store_true", help="continue the run at --writing_params_path")
    train.add_argument("--force", action="store_true", help="overwrite an existing output")


def split_words(words: list[str]) -> tuple[str, str | None]:
    """(variant, corpus path) from the positional words: the variant word is optional, so a path is
    never taken for it (a file literally named 'vanilla' still wins when it is the only word)."""
    words = list(words)
    variant = "vanilla"
    if words and words[0] in VARIANTS and (len(words) > 1 or not Path(words[0]).exists()):
        variant = words.pop(0)
    if len(words) > 1:
        raise CommandError(f"Expected at most a variant and one corpus path, got {len(words) + 1} words: "
                           f"{shlex.join(words)}.")
    return variant, (words[0] if words else None)


def trainer_config(args, function: str) -> TrainerConfig:
    d = DEFAULTS[function]
    for name in ("epochs", "batch_size", "max_iters", "min_freq", "snapshots"):
        value = getattr(args, name, None)
        at_least = 0 if name in ("max_iters", "snapshots") else 1
        if value is not None and value < at_least:
            raise CommandError(f"--{name.replace('_', '-')} must be {at_least} or more.")
    epochs = args.epochs or (75 if function == "finetune" and not args.reading_params_path else d["epochs"])
    if args.max_iters and not args.epochs:
        epochs = 10**6  # --max-iters alone: the steps decide (recipes.bounded runs only the epochs they need)
    # The birthplace functions use the assignment's decay groups and unclamped cosine (TrainerConfig's
    # defaults); the others the project's own, as `make checkpoints` does: minGPT groups, clamped cosine.
    own = {} if function in ("pretrain", "finetune") else dict(decay="mingpt", schedule="cosine-clamped")
    own.update(optimizer_options(args))
    # ~20 saves a run, and one at least every 5 minutes: 650 epochs do not write 650 checkpoints
    return TrainerConfig(**own, max_epochs=epochs, max_steps=args.max_iters,
                         batch_size=args.batch_size or d["batch_size"],
                         save_every=max(1, min(epochs, 10**4) // 20), save_seconds=300.0,
                         learning_rate=args.lr or d["lr"], lr_decay=args.lr_schedule == "cosine", seed=args.seed,
                         snapshots=getattr(args, "snapshots", 0) or 0,
                         device=args.device,
                         warmup_tokens=d["warmup_tokens"] if args.warmup_tokens is None else args.warmup_tokens)


def optimizer_options(args) -> dict:
    """The AdamW and clipping options given on the command line (TrainerConfig keeps its default for the rest)."""
    chosen = {}
    if getattr(args, "betas", None) is not None:
        if not all(0.0 <= b < 1.0 for b in args.betas):
            raise CommandError(f"--betas must be two numbers in [0, 1), not {args.betas[0]} {args.betas[1]}.")
        chosen["betas"] = tuple(args.betas)
    for name, field in (("weight_decay", "weight_decay"), ("grad_clip", "grad_norm_clip")):
        value = getattr(args, name, None)
        if value is not None:
            if value < 0:
                raise CommandError(f"--{name.replace('_', '-')} must be 0 or more.")
            chosen[field] = value
    if getattr(args, "decay", None) is not None:
        chosen["decay"] = args.decay
    return chosen


def run_command(args, command: str, out=print) -> str:
    from core.data.vocabulary import vocabulary_warnings
    from core.lens.lm_eval import unknown_warning
    from core.model.tokenizer import VocabularyChoice
    from core.train import recipes
    from core.train.callbacks import Checkpointing, Snapshots
    from core.train.progress import EpochReport

    variant, corpus = split_words(args.words)
    flags = vars(args)  # each function's parser has only its own flags
    evals = list(flags.get("eval_corpus_path", []))

    def need(name: str) -> str:
        value = corpus if name == "corpus" else flags.get(name)
        if not value:
            raise CommandError(f"{args.function} needs the corpus path argument." if name == "corpus"
                               else f"{args.function} needs --{name}.")
        return value

    def one_eval(required: bool) -> str | None:
        if len(evals) > 1:
            raise CommandError(f"{args.function} takes one --eval_corpus_path, not {len(evals)}.")
        return need("eval_corpus_path")[0] if required else (evals[0] if evals else None)

    if args.function == "evaluate":
        return evaluate_command(args, need, one_eval, out)
    # flags left out take the defaults; those given are checked against a pretrained file's own values
    chosen = {f: flags[f] for f in SHAPE_DEFAULTS if flags[f] is not None}
    given = set(chosen) | {f for f in ("level", "vocab_size") if flags.get(f) is not None}
    if variant != "vanilla" or (args.words and args.words[0] in VARIANTS):
        given.add("attention")
    level, vocab_size = flags.get("level") or "char", flags.get("vocab_size") or 2000
    shape = recipes.ModelShape(**{**SHAPE_DEFAULTS, **chosen}, dropout=args.dropout, attention=variant,
                               init=args.init)
    birthplace = args.function in ("pretrain", "finetune")
    subword = dict(level=level, vocab_size=vocab_size) if birthplace else {}
    vocabulary = VocabularyChoice(level=level, lowercase=args.lowercase, min_freq=args.min_freq,
                                  splitter=args.splitter or "regex", files=tuple(args.vocab_from),
                                  vocab_size=vocab_size) if args.function in WORD_VOCABULARY else None
    for warning in vocabulary_warnings(flags.get("vocab_from", []), evals):
        out(warning)
    common = dict(resume=args.resume, force=args.force, command=command)
    report = None
    if args.function == "pretrain":
        report = EpochReport("tokens", out=out)
        t = recipes.pretrain(need("corpus"), need("writing_params_path"), shape, trainer_config(args, "pretrain"),
                             report=report, objective=args.objective, **subword, **common)
    elif args.function == "finetune":
        report = EpochReport("tokens", best=("val_accuracy", True) if evals else None, out=out)
        t = recipes.finetune(need("corpus"), need("finetune_corpus_path"), need("writing_params_path"), shape,
                             trainer_config(args, "finetune"), reading_params_path=args.reading_params_path,
                             eval_corpus_path=one_eval(False), report=report, level=args.level,
                             vocab_size=args.vocab_size, given=given, **common)
    elif args.function == "lm":
        first = recipes.split_names(evals)[0] if evals else "val"
        report = EpochReport("tokens", best=(f"{first}_loss", False), out=out)
        t = recipes.train_lm(need("corpus"), need("writing_params_path"), shape, trainer_config(args, "lm"),
                             val_fraction=args.val_fraction, eval_paths=evals, vocabulary=vocabulary,
                             report=report, stride=args.stride, **common)
    elif args.function == "mlm":
        report = EpochReport("tokens", out=out)
        t = recipes.pretrain_encoder(need("corpus"), need("writing_params_path"), shape,
                                     trainer_config(args, "mlm"), report=report, **common)
    else:
        report = EpochReport("sentences", best=("val_accuracy", True), out=out)
        t = recipes.train_classifier(need("corpus"), one_eval(True), need("writing_params_path"), shape,
                                     trainer_config(args, "classify"), reading_params_path=args.reading_params_path,
                                     pooling=args.pooling, vocabulary=vocabulary, report=report, given=given,
                                     **common)
    for line in report.summary() if report else []:
        out(line)
    snaps, plan = t.callback(Snapshots), t.callback(Checkpointing).plan
    if snaps is not None and snaps.keeper.active:
        out(snapshot_line(snaps))
    shares = (plan.extra.get("vocabulary") or {}).get("unknown_share", {})
    if shares:
        out(vocabulary_line(plan.extra, plan.tokenizer))
    for name, share in shares.items():
        out(f"unknown share of split {name}: {share:.1%}")
        if warning := unknown_warning(f"split {name}", share):
            out(warning)
    return f"wrote {args.writing_params_path}: " + ", ".join(f"{k} {v:.4g}" for k, v in t.metrics.items())


def snapshot_line(snaps) -> str:
    """What the run kept (a Snapshots callback's): steps, the size of one snapshot and of the file."""
    from core.io import snapshots

    path = snapshots.snapshots_path(snaps.path)
    keeper = snaps.keeper
    kept = sorted(s.step for s, _ in keeper.kept)
    each = sum(t.numel() * t.element_size() for t in keeper.kept[0][1].values()) if kept else 0
    return (f"snapshots: {len(kept)} at steps {', '.join(map(str, kept))}; {each / 1e6:.2f} MB each "
            f"({keeper.dtype}), {path.stat().st_size / 1e6:.1f} MB in {path.name}")


def vocabulary_line(metadata: dict, tokenizer) -> str:
    """'vocabulary: SIZE entries (LEVEL, SPLITTER), built from FILES (sha256 ...)': printed beside the
    unknown shares, which mean little without knowing what the vocabulary was built from."""
    from core.lens.describe import describe_vocabulary

    # a Hugging Face folder's tokenizer has no description of ours: its kind is all there is to say
    description = tokenizer.to_dict() if hasattr(tokenizer, "to_dict") else {"kind": tokenizer.kind}
    return "vocabulary: " + describe_vocabulary(metadata, description, tokenizer.vocab_size)


def evaluate_command(args, need, one_eval, out=print) -> str:
    from core.data.datasets import DataError, read_tsv_pairs

    loaded = ckpt.load(need("reading_params_path"))
    name = Path(args.reading_params_path).name
    if loaded.task == "lm":
        return evaluate_lm(loaded, need("eval_corpus_path"), name, out)
    if loaded.task not in ("classify", "birthplace") or loaded.metadata.get("format") == "huggingface":
        raise CommandError(f"{name} is a {loaded.task} model; evaluate scores language models (perplexity), "
                           "Attention Lab classifiers and birthplace models.")
    path = one_eval(True)
    if loaded.task == "classify":
        from core.data.datasets import ClassificationDataset
        from core.train.trainer import evaluate_loss

        data = ClassificationDataset(read_tsv_pairs(path), loaded.tokenizer, loaded.config.block_size, loaded.labels)
        scores = evaluate_loss(loaded.model, data, accuracy=True)
        out(vocabulary_line(loaded.metadata, loaded.tokenizer))
        return f"{Path(path).name}: accuracy {scores['accuracy']:.4f}, loss {scores['loss']:.4f} ({len(data)} lines)"
    from tqdm import tqdm

    from core.lens.probe.evaluation import evaluate_birthplaces

    pairs = read_tsv_pairs(path)
    has_answers = any(a for _, a in pairs)
    bar = tqdm(total=len(pairs), desc="evaluate", disable=None)
    result = evaluate_birthplaces(loaded.model, loaded.tokenizer, pairs,
                                  baseline_place=loaded.metadata.get("baseline_place") or None,
                                  progress=lambda done, total: bar.update(done - bar.n))
    bar.close()
    if args.outputs_path:
        target = Path(args.outputs_path)
        if target.exists() and not args.force:
            raise DataError(f"{target} already exists; pass --force to overwrite it.")
        target.write_text("".join(p + "\n" for p in result.predictions), encoding="utf-8")
    if not has_answers:
        return f"wrote {len(pairs)} predictions to {args.outputs_path} (no answers to score)"
    return result.summary()


def evaluate_lm(loaded, paths: list[str], name: str, out=print) -> str:
    from core.lens.lm_eval import score_file, unknown_warning

    scores = [score_file(loaded.model, loaded.tokenizer, path) for path in paths]
    out(vocabulary_line(loaded.metadata, loaded.tokenizer))
    for score in scores:
        out(score.line())
        if warning := unknown_warning(score.name, score.unknown_share):
            out(warning)
    return f"evaluated {name} on {len(scores)} file(s)"


def main(argv: list[str] | None = None) -> int:
    from core.data.datasets import DataError
    from core.io.checkpoint import CheckpointError
    from core.model.config import ConfigError
    from core.model.tokenizer import TokenizerError

    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0), or argparse's own refusal, e.g. a flag the function does not take (2)
        return exc.code if isinstance(exc.code, int) else 2
    command = "python -m core.train " + shlex.join(argv)
    try:
        print(run_command(args, command, out=lambda line: print(line, flush=True)))
    except (CommandError, DataError, CheckpointError, ConfigError, TokenizerError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: the last saved epoch is kept; continue with --resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
