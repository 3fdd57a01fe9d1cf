"""Tiny random Hugging Face model folders built with transformers itself (no download, no network), for the
tests (tests/hf_models.py re-exports them) and the benchmarks (bench/long_inputs.py's 512-position BERT).

Needs the optional extra (requirements-hf.txt): import it only after checking that transformers is there.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import torch  # noqa: E402
import transformers  # noqa: E402

BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "play", "##ing",
              "##s", ".", ",", "a", "dog", "ran"]
GPT_TEXT = ["Hello world, the cat sat on the mat.", "A dog ran in the park; the cat played."] * 20


def bert_folder(path: Path, architecture: str = "BertForMaskedLM", vocab: list[str] | None = None,
                max_positions: int = 40, width: int = 16, layers: int = 2, heads: int = 2) -> Path:
    """`vocab`: words (and ##pieces) after the five special tokens; default BERT_VOCAB's."""
    words = BERT_VOCAB if vocab is None else BERT_VOCAB[:5] + [w for w in vocab if w not in BERT_VOCAB[:5]]
    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    config = transformers.BertConfig(vocab_size=len(words), hidden_size=width, num_hidden_layers=layers,
                                     num_attention_heads=heads, intermediate_size=2 * width,
                                     max_position_embeddings=max_positions,
                                     id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def gpt2_folder(path: Path) -> Path:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(GPT_TEXT, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
    tokenizer = transformers.GPT2TokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                               bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    config = transformers.GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=2, n_head=2, n_positions=48,
                                     bos_token_id=end, eos_token_id=end)
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def distilbert_folder(path: Path) -> Path:
    tokenizer = transformers.BertTokenizer(vocab={w: i for i, w in enumerate(BERT_VOCAB)})
    config = transformers.DistilBertConfig(vocab_size=len(BERT_VOCAB), dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                           max_position_embeddings=40)
    torch.manual_seed(0)
    transformers.DistilBertForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def roberta_folder(path: Path) -> Path:
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(GPT_TEXT, vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer = transformers.RobertaTokenizerFast(
        tokenizer_object=bpe._tokenizer, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
        mask_token="<mask>", sep_token="</s>", cls_token="<s>")
    config = transformers.RobertaConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=42,
                                        pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    transformers.RobertaForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


# Tiny configs of today's decoder families, each as its Config class takes them (random weights; sizes chosen so
# that grouped key/value heads, partial rotary and parallel residuals are all exercised).
_TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=64)
DECODER_CONFIGS: dict[str, dict] = {
    "llama": dict(_TINY, num_key_value_heads=2),
    "qwen2": dict(_TINY, num_key_value_heads=2),
    "qwen3": dict(_TINY, num_key_value_heads=2, head_dim=8),
    "mistral": dict(_TINY, num_key_value_heads=2, sliding_window=48),
    "gemma": dict(_TINY, num_key_value_heads=1, head_dim=8),
    "gpt_neox": dict(_TINY, rotary_pct=0.5, use_parallel_residual=True),
    "phi": dict(_TINY, partial_rotary_factor=0.5, num_key_value_heads=2),
    "phi3": dict(_TINY, partial_rotary_factor=0.5, num_key_value_heads=2),  # Phi-4-mini's partial rotary, GQA
    # one sliding-window layer (local rotary base 100) then one global layer (base 10000); scores scaled by 20^-0.5
    "gemma3_text": dict(_TINY, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=20, sliding_window=48,
                        layer_types=["sliding_attention", "full_attention"], rope_theta=10000.0,
                        rope_local_base_freq=100.0),
    # Gemma 3's layout with one rotary base, and strong soft caps on the scores and on the output logits
    "gemma2": dict(_TINY, num_key_value_heads=2, head_dim=8, query_pre_attn_scalar=20, sliding_window=48,
                   layer_types=["sliding_attention", "full_attention"], attn_logit_softcapping=2.0,
                   final_logit_softcapping=3.0),
    "opt": dict(hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
                word_embed_proj_dim=32),
    "bloom": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4),
}


def sentencepiece_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A LLaMA-style tokenizer trained here: BPE over SentencePiece's metaspace (`▁` starts a word), with
    <unk>, <s> and </s>; the model prepends <s> as LLaMA's does."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=False))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    bpe.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
    bpe.train_from_iterator(GPT_TEXT, trainers.BpeTrainer(vocab_size=200, special_tokens=["<unk>", "<s>", "</s>"],
                                                          min_frequency=1))
    bpe.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>", bos_token="<s>",
                                                eos_token="</s>")


def decoder_folder(path: Path, model_type: str, seed: int = 0, **overrides) -> Path:
    """A tiny random `model_type` causal LM (DECODER_CONFIGS) saved with save_pretrained, with a tokenizer:
    the LLaMA-style one for rotary families, GPT-2's byte-level BPE for GPT-NeoX, OPT and BLOOM."""
    if model_type in ("gpt_neox", "opt", "bloom"):
        from tokenizers import ByteLevelBPETokenizer

        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(GPT_TEXT, vocab_size=300, min_frequency=1, special_tokens=["<|endoftext|>"])
        tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                                         bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    else:
        tokenizer = sentencepiece_tokenizer()
    end = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    config = transformers.AutoConfig.for_model(model_type, vocab_size=len(tokenizer), bos_token_id=end,
                                               eos_token_id=end, pad_token_id=None,
                                               **{**DECODER_CONFIGS[model_type], **overrides})
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # wider weights than the 0.02 default, so attention is far from uniform in the tests
        for name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
            elif name.endswith("weight") and "norm" in name.lower() and not model_type.startswith("gemma"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
