"""What a model makes of the attention page's input, one function per task (plain data for the page).

Each takes (model, tokenizer, idx (1, T), logits from the traced pass, class labels) and returns a
`ModelOutput`: a table (top next tokens, class probabilities), a generated answer, or a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from core.lens.birthplace import ANSWER_CHARS, answer_from_completion
from core.model.tokenizer import Tokenizer
from core.text import MASK_CHAR, MASK_LABEL, visible_token

TOP_K = 5
ANSWER_CHUNKS = (12, 20)  # the CS224N 32 characters, generated in these steps, stopping once answered


@dataclass
class ModelOutput:
    """What the model makes of the input: a table, an answer, or a note (whichever applies)."""

    title: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    completion: str | None = None
    note: str | None = None

    @property
    def shown_completion(self) -> str | None:
        """The completion as people read it: each MASK as [MASK], not the '⁇' that reads as '??'."""
        return None if self.completion is None else self.completion.replace(MASK_CHAR, f"[{MASK_LABEL}]")


def lm_next_tokens(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                   labels: list[str]) -> ModelOutput:
    """Top-5 next tokens after every position (the model's prediction for position + 1)."""
    probs = torch.softmax(logits[0].float(), dim=-1)  # (T, V)
    top = torch.topk(probs, min(TOP_K, probs.size(-1)), dim=-1)
    shown = {i: visible_token(tokenizer.decode([i])) for i in set(top.indices.flatten().tolist())}
    ids = idx[0].tolist()
    rows = []
    for pos, (values, indices) in enumerate(zip(top.values.tolist(), top.indices.tolist())):
        row: dict[str, Any] = {"pos": pos, "token": visible_token(tokenizer.decode([ids[pos]]))}
        for rank, (p, i) in enumerate(zip(values, indices), start=1):
            row[f"next #{rank}"] = f"{shown[i]}  {p:.1%}"
        rows.append(row)
    return ModelOutput(title=f"Top-{TOP_K} next {getattr(tokenizer, 'unit', 'token')} after each position",
                       rows=rows)


def birthplace_answer(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                      labels: list[str]) -> ModelOutput:
    # generation runs ANSWER_CHARS steps of the model's own unit: characters, or pieces of a subword vocabulary
    title = f"Generated answer (greedy, {ANSWER_CHARS} {getattr(tokenizer, 'unit', 'token')}s)"
    if not model.config.causal or model.config.head != "lm":
        return ModelOutput(title=title, note="This model cannot generate text.")
    if getattr(tokenizer, "mask_id", None) not in idx[0].tolist():
        return ModelOutput(title=title, note="A birthplace model answers a question: end it with '?', "
                                             "e.g. 'Where was Ada Lovelace born?' (the MASK it answers "
                                             "after is added for you).")
    out = idx
    with torch.inference_mode():
        # Greedy decoding is deterministic, so stopping once the answer's closing MASK is out changes
        # nothing but the time: a trained model answers in about ten characters, not 32.
        for chunk in ANSWER_CHUNKS:
            out = model.generate(out, chunk, do_sample=False)
            if (out[0, idx.size(1):] == tokenizer.mask_id).any():
                break
    completion = tokenizer.decode(out[0].tolist())
    answer = answer_from_completion(completion) if MASK_CHAR in completion else None
    return ModelOutput(title=title, answer=answer, completion=completion)


def class_probabilities(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                        labels: list[str]) -> ModelOutput:
    probs = torch.softmax(logits[0].float(), dim=-1).tolist()  # (n_classes,)
    names = labels if len(labels) == len(probs) else [f"class {i}" for i in range(len(probs))]
    rows = sorted(({"label": n, "probability": round(p, 6)} for n, p in zip(names, probs)),
                  key=lambda r: -r["probability"])
    return ModelOutput(title="Class probabilities", rows=rows)


def masked_lm_predictions(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                          labels: list[str]) -> ModelOutput:
    """A Hugging Face masked LM: what it predicts at every position (the same table as an LM's)."""
    output = lm_next_tokens(model, tokenizer, idx, logits, labels)
    output.title = f"Top-{TOP_K} tokens the masked LM predicts at each position"
    for row in output.rows:
        for key in [k for k in row if k.startswith("next #")]:
            row[key.replace("next", "predicted")] = row.pop(key)
    return output


def no_output_head(model, tokenizer: Tokenizer, idx: torch.Tensor, logits: torch.Tensor,
                   labels: list[str]) -> ModelOutput:
    return ModelOutput(title="Model output", note="This encoder has no output head (a bare "
                                                 "Hugging Face model); only its attention is shown.")


# task -> what the attention page shows under the map ("masked-lm" and "encoder": Hugging Face only)
MODEL_OUTPUTS: dict[str, Callable[..., ModelOutput]] = {
    "lm": lm_next_tokens,
    "birthplace": birthplace_answer,
    "classify": class_probabilities,
    "masked-lm": masked_lm_predictions,
    "encoder": no_output_head,
}
