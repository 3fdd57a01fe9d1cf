"""Hugging Face folders for the tests: the tiny random folders (built in bench/hf_folders.py, which the
benchmarks use too) and transformers' own attention, the reference the parity tests compare with.

Only imported by tests that first did `require_hf_extra()` (tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path

import torch
import transformers

from bench.hf_folders import BERT_VOCAB, GPT_TEXT, bert_folder, distilbert_folder, gpt2_folder, roberta_folder

__all__ = ["BERT_VOCAB", "GPT_TEXT", "bert_folder", "distilbert_folder", "gpt2_folder", "reference_attention",
           "roberta_folder"]


def reference_attention(folder: Path, ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """What transformers itself returns: eager attention, output_attentions=True; (L, H, T, T) and logits."""
    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    cls = (transformers.AutoModelForCausalLM if config.model_type == "gpt2" else
           getattr(transformers, config.architectures[0]))
    model = cls.from_pretrained(folder, local_files_only=True, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(torch.tensor([ids]), output_attentions=True)
    logits = out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
    return torch.stack(out.attentions)[:, 0], logits[0]
