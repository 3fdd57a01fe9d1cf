"""Task recipes: data files -> datasets -> Trainer -> checkpoint. Used by the CLI and `make checkpoints`.

Each recipe takes plain arguments (paths, a ModelConfig's fields, a TrainerConfig) so a student
can read one function and see the whole experiment.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from core.data.datasets import (
    CharCorruptionDataset,
    ClassificationDataset,
    DataError,
    DocumentStreamDataset,
    LanguageModelDataset,
    MaskedLMDataset,
    NameDataset,
    RepeatedSegmentDataset,
    TokenCorruptionDataset,
    check_no_reserved_characters,
    read_text,
    read_tsv_pairs,
)
from core.data.vocabulary import vocabulary_text
from core.io import checkpoint as ckpt
from core.lens.lm_eval import score_text, split_names, unknown_share
from core.lens.probe.evaluation import country_prior_accuracy, evaluate_birthplaces, most_frequent_place
from core.model.config import ModelConfig
from core.model.tokenizer import CharTokenizer, SubwordTokenizer, Tokenizer, VocabularyChoice, tokenizer_from_dict
from core.model.transformer import Transformer
from core.train.callbacks import CheckpointPlan, EvaluateFn, log_path, resume_path, resume_run, standard
from core.train.progress import EpochReport
from core.train.trainer import Trainer, TrainerConfig, evaluate_loss


@dataclass
class ModelShape:
    n_layer: int = 4
    n_head: int = 8
    n_embd: int = 256
    block_size: int = 128
    dropout: float = 0.1
    positional: str = "learned"
    attention: str = "vanilla"
    ffn_width: int = 0  # 0: 4 * n_embd
    init: str = "gpt2"  # core.model.transformer.INITS; "pytorch": CSE 256 PA2's (PyTorch's module defaults)


def file_record(path: str | Path) -> dict[str, str]:
    data = Path(path).read_bytes()
    return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "bytes": str(len(data))}


def _prepare_output(path: Path, resume: bool, force: bool) -> None:
    if resume:
        if not (path.exists() and resume_path(path).exists()):
            raise DataError(f"Cannot resume: {path} or its .resume file is missing.")
        return
    if path.exists() and not force:
        raise DataError(f"{path} already exists; pass --force to overwrite or --resume to continue it.")
    path.parent.mkdir(parents=True, exist_ok=True)  # the live log is written before the first save
    log_path(path).unlink(missing_ok=True)
    resume_path(path).unlink(missing_ok=True)


def _run(model: Transformer, dataset, config: TrainerConfig, plan: CheckpointPlan, resume: bool,
         evaluate: EvaluateFn | None = None, report: EpochReport | None = None) -> Trainer:
    """Train with the standard callbacks (core/train/callbacks.py), from the checkpoint when resuming."""
    trainer = Trainer(model, dataset, config, standard(plan, evaluate, report), run_name=plan.path.stem)
    if resume:
        resume_run(trainer)
    trainer.train()
    return trainer


def build_model(shape: ModelShape, vocab_size: int, seed: int, **fields) -> Transformer:
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=vocab_size, block_size=shape.block_size, n_layer=shape.n_layer,
                         n_head=shape.n_head, n_embd=shape.n_embd, dropout=shape.dropout,
                         positional=shape.positional, attention=shape.attention, ffn_width=shape.ffn_width,
                         init=shape.init, **fields)
    return Transformer(config)


def _warm_start(model: Transformer, reading_params_path: str | Path | None, skip_prefix: str = "") -> None:
    """Copy a pretrained checkpoint's weights (all but the keys under skip_prefix)."""
    if not reading_params_path:
        return
    source = ckpt.load(reading_params_path).model.state_dict()
    target = model.state_dict()
    name = Path(reading_params_path).name
    for key, tensor in source.items():
        if skip_prefix and key.startswith(skip_prefix):
            continue
        if key not in target:
            raise DataError(f"{name} does not fit this model: it has a tensor {key!r} this model has not.")
        if target[key].shape != tensor.shape:
            there, here = ("x".join(map(str, t.shape)) for t in (tensor, target[key]))
            raise DataError(f"{name} does not fit this model: tensor {key!r} is {there} there and {here} here.")
        target[key] = tensor
    model.load_state_dict(target)


# The fields of a model's shape a pretrained file fixes (its weights have them); dropout and init stay choices.
SHAPE_FIELDS = ("n_layer", "n_head", "n_embd", "block_size", "positional", "attention", "ffn_width")


@dataclass(frozen=True)
class Pretrained:
    """What a pretrained file brings to a run that starts from it: its shape, tokenizer and kind of model."""

    shape: ModelShape
    tokenizer: Tokenizer
    causal: bool
    head: str


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def read_pretrained(path: str | Path, shape: ModelShape, given: Iterable[str] = (), level: str | None = None,
                    vocab_size: int | None = None) -> Pretrained:
    """The shape and tokenizer of a pretrained file (its config and tokenizer: the weights need them), keeping
    `shape`'s dropout and init. `given`: the shape fields the caller set on purpose (command-line flags); one
    that differs from the file's, or a `level` / `vocab_size` other than its tokenizer's, is refused with one
    sentence naming both values."""
    name = Path(path).name
    meta = ckpt.read_metadata(path)
    config = ModelConfig.from_dict(meta["config"]) if isinstance(meta.get("config"), dict) else None
    if config is None or "tokenizer" not in meta:
        raise DataError(f"{name} is not an Attention Lab checkpoint with a config and a tokenizer.")
    tokenizer = tokenizer_from_dict(meta["tokenizer"])
    width = {"ffn_width": lambda s: s.ffn_width or 4 * s.n_embd}  # 0 means 4 x n_embd

    for field in given:
        if field not in SHAPE_FIELDS:
            continue
        mine, theirs = (width.get(field, lambda s, f=field: getattr(s, f))(s) for s in (shape, config))
        if mine != theirs:
            raise DataError(f"{_flag(field)} {mine} contradicts {name}, whose {field} is {theirs}; leave the flag "
                            "out (the file sets it).")
    if level is not None and level != tokenizer.kind:
        raise DataError(f"--level {level} contradicts {name}, whose tokenizer is {tokenizer.kind}; leave the flag "
                        "out (the file brings its own vocabulary).")
    if vocab_size is not None and tokenizer.kind == "bpe" and vocab_size != tokenizer.vocab_size:
        raise DataError(f"--vocab-size {vocab_size} contradicts {name}, whose vocabulary has {tokenizer.vocab_size} "
                        "pieces; leave the flag out (the file brings its own vocabulary).")
    if tokenizer.vocab_size != config.vocab_size:
        raise DataError(f"{name}'s tokenizer has {tokenizer.vocab_size} entries but its model "
                        f"{config.vocab_size}: it cannot be read.")
    fixed = {f: getattr(config, f) for f in SHAPE_FIELDS}
    return Pretrained(replace(shape, **fixed), tokenizer, config.causal, config.head)


def assignment_final_tokens(trainer: TrainerConfig, n_documents: int, block_size: int) -> TrainerConfig:
    """The assignment's decay length for both birthplace stages: 200 pretraining epochs' worth of
    tokens (200 * documents in wiki.txt * block_size), unless the caller chose one. Finetuning
    (10 or 75 epochs) therefore stays near the top of the cosine, as it does in the assignment."""
    return trainer if trainer.final_tokens else replace(trainer, final_tokens=200 * n_documents * block_size)


BIRTHPLACE_LEVELS = ("char", "bpe")  # char: the assignment's vocabulary; bpe: subwords learned from wiki.txt


def birthplace_vocabulary(corpus: str, level: str = "char", vocab_size: int = 2000) -> Tokenizer:
    """The vocabulary both birthplace stages build from the pretraining corpus (never the question files)."""
    if level not in BIRTHPLACE_LEVELS:
        raise DataError(f"The birthplace task takes --level char (the assignment's) or bpe, not {level!r}.")
    check_no_reserved_characters(corpus, "The pretraining corpus")
    if level == "char":
        return CharTokenizer.from_corpus(corpus)
    if vocab_size < 260:
        raise DataError(f"--vocab-size must be at least 260 (256 bytes and the specials), not {vocab_size}.")
    return SubwordTokenizer.from_corpus(corpus, vocab_size)


OBJECTIVES = {"span": TokenCorruptionDataset, "lm": DocumentStreamDataset}


def pretrain(corpus_path: str, writing_params_path: str, shape: ModelShape, trainer: TrainerConfig,
             resume: bool = False, force: bool = False, command: str = "", report: EpochReport | None = None,
             level: str = "char", vocab_size: int = 2000, objective: str = "span") -> Trainer:
    """Pretraining on wiki.txt. objective "span": CS224N span corruption, on characters exactly as the
    assignment does or on subword pieces (`level="bpe"`: spans counted in pieces, batches cut to their
    longest row). objective "lm": next-token prediction over the documents packed end to end (no PAD)."""
    corpus = read_text(corpus_path)
    if objective not in OBJECTIVES:
        raise DataError(f"--objective must be one of {', '.join(OBJECTIVES)}, not {objective!r}.")
    if level == "char" and objective == "span":
        dataset = CharCorruptionDataset(corpus, shape.block_size, seed=trainer.seed)
    else:
        tokenizer = birthplace_vocabulary(corpus, level, vocab_size)
        dataset = OBJECTIVES[objective](corpus, shape.block_size, tokenizer, seed=trainer.seed)
    trainer = assignment_final_tokens(trainer, len(dataset), shape.block_size)
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    model = build_model(shape, dataset.tokenizer.vocab_size, trainer.seed)
    plan = CheckpointPlan(out, dataset.tokenizer, "lm", data=[file_record(corpus_path)], command=command,
                          extra={"objective": "span-corruption" if objective == "span" else "lm",
                                 "level": level})
    return _run(model, dataset, trainer, plan, resume, report=report)


def finetune(corpus_path: str, finetune_corpus_path: str, writing_params_path: str, shape: ModelShape,
             trainer: TrainerConfig, reading_params_path: str | None = None,
             eval_corpus_path: str | None = None, resume: bool = False, force: bool = False,
             command: str = "", report: EpochReport | None = None, level: str | None = None,
             vocab_size: int | None = None, given: Iterable[str] = ()) -> Trainer:
    """CS224N finetuning on 'Where was X born?<TAB>PLACE', from a pretrained model or from scratch.

    The vocabulary always comes from the pretraining corpus, as in the assignment (a subword one is
    read from the pretrained file, so both stages share its pieces exactly). A pretrained file also sets
    the shape (`read_pretrained`: `given` names the fields the caller chose, refused where they differ)."""
    corpus = read_text(corpus_path)
    # the metadata only: the weights are read once, by _warm_start
    pretrained = None
    if reading_params_path:
        pretrained = read_pretrained(reading_params_path, shape, given, level, vocab_size)
        if pretrained.head != "lm" or not pretrained.causal:
            kind = "a classifier" if pretrained.head != "lm" else "a bidirectional (masked-LM) encoder"
            raise DataError(f"{Path(reading_params_path).name} is {kind}; finetune continues a language model "
                            "(a file pretrain wrote).")
        shape = pretrained.shape
    if pretrained is not None and pretrained.tokenizer.kind != "char":
        tokenizer = pretrained.tokenizer
        check_no_reserved_characters(corpus, "The pretraining corpus")
    else:
        tokenizer = birthplace_vocabulary(corpus, level or "char", vocab_size or 2000)
    trainer = assignment_final_tokens(trainer, sum(1 for line in corpus.split("\n") if line.strip()),
                                      shape.block_size)
    pairs = read_tsv_pairs(finetune_corpus_path)
    subword = tokenizer.kind != "char"  # the assignment's character path stays exactly as it was
    if subword:  # the questions' pieces are read in training too ('?', 'Where')
        tokenizer = tokenizer.reading(q + a for q, a in pairs)
    dataset = NameDataset(pairs, tokenizer, shape.block_size, trim_to_longest=subword)
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    model = build_model(shape, tokenizer.vocab_size, trainer.seed)
    if reading_params_path and not subword:
        pretrained = ckpt.read_metadata(reading_params_path)
        if pretrained["tokenizer"] != tokenizer.to_dict():
            raise DataError(f"{Path(reading_params_path).name} was pretrained on another vocabulary "
                            f"than {Path(corpus_path).name}.")
    _warm_start(model, reading_params_path)
    baseline = most_frequent_place([a for _, a in pairs])
    evaluate = None
    data = [file_record(corpus_path), file_record(finetune_corpus_path)]
    if eval_corpus_path:
        dev_pairs = read_tsv_pairs(eval_corpus_path)
        dev = NameDataset(dev_pairs, tokenizer, shape.block_size)
        data.append(file_record(eval_corpus_path))
        prior = country_prior_accuracy([a for _, a in pairs], [a for _, a in dev_pairs])

        def evaluate(m: Transformer) -> dict[str, float]:
            scores = evaluate_loss(m, dev, device=str(next(m.parameters()).device))
            result = evaluate_birthplaces(m, tokenizer, dev_pairs, baseline_place=baseline)
            return {"val_loss": scores["loss"], "val_perplexity": scores["perplexity"],
                    "val_accuracy": result.accuracy, "val_baseline_accuracy": result.baseline_accuracy,
                    "val_country_prior_accuracy": prior}

    plan = CheckpointPlan(out, tokenizer, "birthplace", data=data, command=command,
                          extra={"pretrained_from": Path(reading_params_path).name if reading_params_path
                                 else "", "baseline_place": baseline, "eval_corpus_path": eval_corpus_path or ""})
    return _run(model, dataset, trainer, plan, resume, evaluate, report)


def _split_text(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """(train, validation): the last `val_fraction` of the text (by characters) is held out; 0 holds none."""
    if not 0.0 <= val_fraction < 1.0:
        raise DataError(f"--val-fraction must be at least 0 and below 1, not {val_fraction:g}.")
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


def bounded(config: TrainerConfig, dataset) -> TrainerConfig:
    """Run only the epochs max_steps needs, and end the cosine schedule at the last step, counted in
    what the trainer counts (target positions: tokens for LMs, one per sentence for classifiers)."""
    steps_per_epoch = math.ceil(len(dataset) / config.batch_size)
    epochs = config.max_epochs
    steps = epochs * steps_per_epoch
    if config.max_steps:
        epochs = min(epochs, math.ceil(config.max_steps / steps_per_epoch))
        steps = min(config.max_steps, epochs * steps_per_epoch)
    _, y = dataset[0]
    # at least one train-loss record per epoch (a short last one included), for the progress line
    last_epoch_steps = steps - (epochs - 1) * steps_per_epoch
    log_every = max(1, min(config.log_every, steps_per_epoch, last_epoch_steps))
    save_every = min(config.save_every, max(1, epochs // 20))  # ~20 saves, as the CLI asks for
    return replace(config, max_epochs=epochs, log_every=log_every, save_every=save_every,
                   final_tokens=config.final_tokens or config.batch_size * y.numel() * steps)


def train_lm(corpus_path: str, writing_params_path: str, shape: ModelShape, trainer: TrainerConfig,
             level: str = "char", val_fraction: float = 0.1, resume: bool = False, force: bool = False,
             command: str = "", eval_paths: tuple[str, ...] | list[str] = (),
             vocabulary: VocabularyChoice | None = None, report: EpochReport | None = None,
             stride: int | None = None) -> Trainer:
    """A language model over a plain text file. The last `val_fraction` of it is the 'val' split; every
    file in `eval_paths` is measured too, as a split named after the file, after every epoch. A training
    window starts every `stride` tokens (None: every block_size, no overlap; 1: at every token)."""
    text = read_text(corpus_path)
    check_no_reserved_characters(text, Path(corpus_path).name)
    vocabulary = vocabulary or VocabularyChoice(level=level)
    tokenizer = vocabulary.build(vocabulary_text(vocabulary.files) if vocabulary.files else text)
    train_text, val_text = _split_text(text, val_fraction)
    dataset = LanguageModelDataset(train_text, tokenizer, shape.block_size, stride=stride)
    val = LanguageModelDataset(val_text, tokenizer, shape.block_size) if val_fraction > 0 else None
    evals = {name: read_text(path) for name, path in zip(split_names(list(eval_paths)), eval_paths)}
    for path, eval_text in zip(eval_paths, evals.values()):  # refuse before training, not after an epoch
        if len(tokenizer.encode(eval_text)) < 2:
            raise DataError(f"{Path(path).name} has fewer than two tokens; there is nothing to predict.")
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    model = build_model(shape, tokenizer.vocab_size, trainer.seed)

    def evaluate(m: Transformer) -> dict[str, float]:
        scores = {}
        if val is not None:
            result = evaluate_loss(m, val, device=str(next(m.parameters()).device))
            scores = {"val_loss": result["loss"], "val_perplexity": result["perplexity"]}
        for name, eval_text in evals.items():
            score = score_text(m, tokenizer, eval_text, name)
            scores.update({f"{name}_loss": score.loss, f"{name}_perplexity": score.perplexity})
        return scores

    held_out = {"val": val_text} if val is not None else {}
    shares = {name: unknown_share(tokenizer, t) for name, t in {**held_out, **evals}.items()}
    vocab = {**vocabulary.to_dict(), "files": [file_record(p) for p in vocabulary.files],
             "size": tokenizer.vocab_size, "unknown_share": shares}
    plan = CheckpointPlan(out, tokenizer, "lm", data=[file_record(p) for p in (corpus_path, *eval_paths)],
                          command=command, extra={"val_fraction": str(val_fraction), "level": vocabulary.level,
                                                  "vocabulary": vocab, "eval_splits": list(evals),
                                                  "stride": str(dataset.stride)})
    config = bounded(trainer, dataset)
    return _run(model, dataset, config, plan, resume, evaluate, report)


def pretrain_encoder(corpus_path: str, writing_params_path: str, shape: ModelShape, trainer: TrainerConfig,
                     resume: bool = False, force: bool = False, command: str = "",
                     report: EpochReport | None = None) -> Trainer:
    """A bidirectional encoder pretrained with masked language modelling on the corpus lines."""
    text = read_text(corpus_path)
    check_no_reserved_characters(text, Path(corpus_path).name)
    tokenizer = CharTokenizer.from_corpus(text)
    dataset = MaskedLMDataset(text.split("\n"), tokenizer, shape.block_size, tokenizer.mask_id,
                              seed=trainer.seed)
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    model = build_model(shape, tokenizer.vocab_size, trainer.seed, causal=False)
    plan = CheckpointPlan(out, tokenizer, "lm", data=[file_record(corpus_path)], command=command,
                          extra={"objective": "masked-lm"})
    return _run(model, dataset, bounded(trainer, dataset), plan, resume, report=report)


# How a classifier started from a pretrained causal LM pools its pieces when the caller does not say: on
# data/knowledge/names_*.tsv from wiki-vanilla-pretrained, `last` beat `mean` at every seed measured
# (checkpoints/README.md, "Pretraining's lesson").
POOLING_FROM_LM = "last"


def train_classifier(train_path: str, test_path: str, writing_params_path: str, shape: ModelShape,
                     trainer: TrainerConfig, reading_params_path: str | None = None, level: str = "char",
                     pooling: str | None = None, resume: bool = False, force: bool = False,
                     command: str = "", vocabulary: VocabularyChoice | None = None,
                     report: EpochReport | None = None, given: Iterable[str] = (),
                     warm_start: bool = True) -> Trainer:
    """`LABEL<TAB>TEXT` classification with an encoder, from scratch or from a pretrained model of any level
    (a masked-LM encoder or a causal LM): its tokenizer, shape and weights are kept (`read_pretrained`), so
    the embeddings mean the same thing, and only the head is new. A causal LM stays causal: the last piece
    has read the whole text. `pooling` None: `last` from a causal LM (POOLING_FROM_LM), else `mean`.
    `given`: the fields the caller chose on purpose ("level", "vocab_size" and shape fields), refused where
    they contradict the pretrained file. `warm_start` False: the file's model and tokenizer from fresh
    weights (the control a pretrained run is compared with)."""
    train_pairs = read_tsv_pairs(train_path)
    test_pairs = read_tsv_pairs(test_path)
    vocabulary = vocabulary or VocabularyChoice(level=level)
    if reading_params_path and vocabulary.files:
        raise DataError(f"--vocab-from builds a new vocabulary, but {Path(reading_params_path).name} brings its "
                        "own; leave out one of them.")
    causal = False
    if reading_params_path:
        given = set(given)
        pretrained = read_pretrained(reading_params_path, shape, given,
                                     vocabulary.level if "level" in given else None,
                                     vocabulary.vocab_size if "vocab_size" in given else None)
        shape, tokenizer, causal = pretrained.shape, pretrained.tokenizer, pretrained.causal
    elif vocabulary.files:
        tokenizer = vocabulary.build(vocabulary_text(vocabulary.files))
    else:
        joiner = "" if vocabulary.level == "char" else "\n"  # no newline in a character vocabulary
        tokenizer = vocabulary.build(joiner.join(t for _, t in train_pairs))
    labels = sorted({label for label, _ in train_pairs})
    dataset = ClassificationDataset(train_pairs, tokenizer, shape.block_size, labels)
    test = ClassificationDataset(test_pairs, tokenizer, shape.block_size, labels)
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    pooling = pooling or (POOLING_FROM_LM if causal else "mean")
    model = build_model(shape, tokenizer.vocab_size, trainer.seed, causal=causal, head="classifier",
                        n_classes=len(labels), pooling=pooling)
    _warm_start(model, reading_params_path if warm_start else None, skip_prefix="head.")

    def evaluate(m: Transformer) -> dict[str, float]:
        device = str(next(m.parameters()).device)
        scores = evaluate_loss(m, test, device=device, accuracy=True)
        train_scores = evaluate_loss(m, dataset, device=device, accuracy=True)
        return {"val_loss": scores["loss"], "val_accuracy": scores["accuracy"],
                "train_accuracy": train_scores["accuracy"]}

    test_text = "\n".join(t for _, t in test_pairs)
    vocab = {**vocabulary.to_dict(), "files": [file_record(p) for p in vocabulary.files],
             "size": tokenizer.vocab_size, "unknown_share": {"val": unknown_share(tokenizer, test_text)}}
    if reading_params_path:
        vocab["from"] = Path(reading_params_path).name
    plan = CheckpointPlan(out, tokenizer, "classify", labels=labels, command=command,
                          data=[file_record(train_path), file_record(test_path)],
                          extra={"pretrained_from": Path(reading_params_path).name if reading_params_path and warm_start
                                 else "", "vocabulary": vocab, "pooling": pooling})
    return _run(model, dataset, bounded(trainer, dataset), plan, resume, evaluate, report)


def train_induction(writing_params_path: str, shape: ModelShape, trainer: TrainerConfig,
                    segment: tuple[int, int] = (6, 12), epoch_rows: int = 3200, resume: bool = False,
                    force: bool = False, command: str = "", report: EpochReport | None = None) -> Trainer:
    """An attention-only model on repeated random segments (core.data.datasets.RepeatedSegmentDataset): where an
    induction head forms, in a phase change (Olsson et al. 2022). The training loss is the repeated-token loss;
    after every epoch the same loss on 512 held-out rows is `val_loss`."""
    dataset = RepeatedSegmentDataset(shape.block_size, epoch_rows, segment, seed=trainer.seed)
    held_out = RepeatedSegmentDataset(shape.block_size, 512, segment, seed=trainer.seed + 10_000)
    tokenizer = dataset.tokenizer
    out = Path(writing_params_path)
    _prepare_output(out, resume, force)
    model = build_model(shape, tokenizer.vocab_size, trainer.seed, mlp=False)

    def evaluate(m: Transformer) -> dict[str, float]:
        result = evaluate_loss(m, held_out, device=str(next(m.parameters()).device))
        return {"val_loss": result["loss"]}

    plan = CheckpointPlan(out, tokenizer, "lm", command=command,
                          extra={"induction": {"segment": list(segment), "epoch_rows": epoch_rows,
                                               "loss": "repeated tokens only"}})
    return _run(model, dataset, bounded(trainer, dataset), plan, resume, evaluate, report)
