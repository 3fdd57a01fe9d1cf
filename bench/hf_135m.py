"""Opening a 135M-parameter LLaMA-shaped Hugging Face folder (issue 42): SmolLM2-135M's config shape, random weights.

    python -m bench.hf_135m [--repeats 3] [--folder DIR]     # builds the folder (~540 MB) unless --folder has it

The folder is made here with transformers (no download): SmolLM2-135M's shape (30 layers, width 576, 9 query
heads sharing 3 key/value heads, MLP 1536, vocabulary 49,152, tied embeddings, RMSNorm, rope theta 100,000),
random weights (seed 0), float32 safetensors, and a byte-level BPE tokenizer trained on data/world/wiki.txt
(what a page costs does not depend on the weights or on how good the tokenizer is).

Measured, each in a fresh Python process (what the app pays the first time someone picks the model; a server
has torch imported already, so the child imports torch before the clock starts, and runs one thread as
app.py does):
- lab open: `core.io.checkpoint.load(folder)` (transformers imported, model and tokenizer read, checks);
- baseline, same run, alternating with it: transformers' own `AutoModelForCausalLM.from_pretrained(folder,
  attn_implementation="eager")` + `AutoTokenizer.from_pretrained(folder)` in the same fresh-process setting;
- in context: one 64-token trace (attention recorded) on the opened model.
Target (issue 42): open <= 10 s. `RESULT hf_135m_open measured=<median s> target<=10 pass=...`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIKI = ROOT / "data" / "world" / "wiki.txt"
NAME = "smollm2-135m-shaped"
TARGET_S = 10.0
SMOLLM2_135M = dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                    num_key_value_heads=3, vocab_size=49152, max_position_embeddings=8192, rope_theta=100000.0,
                    rms_norm_eps=1e-5, tie_word_embeddings=True, hidden_act="silu", bos_token_id=0,
                    eos_token_id=0)


def build(folder: Path) -> Path:
    """The 135M folder (config.json, model.safetensors, tokenizer files); skipped when it is there already."""
    if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(WIKI.read_text(encoding="utf-8").splitlines(), vocab_size=8000, min_frequency=2,
                            special_tokens=["<|endoftext|>"])
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, eos_token="<|endoftext|>",
                                                     bos_token="<|endoftext|>", unk_token="<|endoftext|>")
    config = transformers.LlamaConfig(**SMOLLM2_135M)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


LAB = """
import sys, time, json, torch
torch.set_num_threads(1)  # as app.py runs every pass (two threads on a busy 2-core box: ~10x slower)
started = time.perf_counter()
from core.io.checkpoint import load
from core.lens.trace import trace_text
loaded = load(sys.argv[1])
opened = time.perf_counter() - started
text = open(sys.argv[2], encoding="utf-8").read()
t0 = time.perf_counter()
rec = trace_text(loaded.model, loaded.tokenizer, text, 64)
print(json.dumps({"open": opened, "trace": time.perf_counter() - t0, "tokens": rec.n_tokens,
                  "params": loaded.model.num_parameters()}))
"""
BASELINE = """
import sys, time, json, torch
torch.set_num_threads(1)
started = time.perf_counter()
import transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], attn_implementation="eager",
                                                          local_files_only=True).eval()
tokenizer = transformers.AutoTokenizer.from_pretrained(sys.argv[1], local_files_only=True)
print(json.dumps({"open": time.perf_counter() - started}))
"""


def child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin",
                              "PYTHONPATH": str(ROOT)})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", type=Path, default=None, help="where the folder is (built there if missing)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hf-135m-") as tmp:
        folder = build(args.folder or Path(tmp) / NAME)
        size = (folder / "model.safetensors").stat().st_size
        text_file = Path(tmp) / "text.txt"
        text_file.write_text(" ".join(WIKI.read_text(encoding="utf-8").split()[:200]), encoding="utf-8")
        labs, bases = [], []
        for _ in range(args.repeats):  # alternating, so both see the same load on the box
            labs.append(child(LAB, str(folder), str(text_file)))
            bases.append(child(BASELINE, str(folder)))
    lab = statistics.median(r["open"] for r in labs)
    base = statistics.median(r["open"] for r in bases)
    trace_s = statistics.median(r["trace"] for r in labs)
    print(f"{NAME}: {labs[0]['params'] / 1e6:.1f}M parameters, {size / 1e6:.0f} MB of float32 safetensors")
    print(f"lab open (core.io.checkpoint.load, fresh process): median {lab:.2f} s  "
          f"{[round(r['open'], 2) for r in labs]}")
    print(f"transformers' own from_pretrained + tokenizer:      median {base:.2f} s  "
          f"{[round(r['open'], 2) for r in bases]}")
    fastest = min(r["open"] for r in labs) / min(r["open"] for r in bases)
    print(f"ratio lab / transformers: median {lab / base:.2f}, fastest {fastest:.2f}; "
          f"a {labs[0]['tokens']}-token trace: {trace_s:.3f} s")
    passed = lab <= TARGET_S
    print(f"RESULT hf_135m_open measured={lab:.2f} target<={TARGET_S:g} pass={str(passed).lower()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
