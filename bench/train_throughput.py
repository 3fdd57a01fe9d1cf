"""Training throughput: our Transformer (fast path) against a straightforward minGPT-style model.

    python -m bench.train_throughput [--layers 4 --heads 8 --width 256 --block 128 --batch 8]
                                     [--dropout 0.1 0.0] [--steps 12] [--threads 0] [--device cpu]

Same configuration, same data, same optimizer (AdamW), same run: the baseline below is minGPT's model
written out plainly (explicit q @ k^T, a registered causal mask, masked_fill(-inf), softmax, dropout,
att @ v: what the CS224N assignment ships), ours is `core.model.transformer.Transformer` on its training path
(`scaled_dot_product_attention` with is_causal, no attention weights kept). Our weights are copied
into the baseline first and the logits compared, so both really compute the same function.

Timing: full training steps (forward, loss, backward, AdamW step) on the same batches, the two models
alternating step by step so both see the same machine load; tokens/s comes from each model's median
step time, and the ratio is the median of the per-step ratios (robust to bursts on a shared machine).

Achieved FLOP/s uses Kaplan et al.'s training estimate per token: 6 * N + 6 * n_layer * T * C, where
N = parameters used in matmuls (everything but the token and position tables and the LayerNorms),
T = block size, C = width (the second term is the attention scores and weighted sum, forward and
backward, not discounted for the causal mask). It is compared with a large float32 matmul (2 n^3
FLOPs) timed in the same run: "fraction of matmul peak".

Dropout is measured at 0.1 (the trainer's and minGPT's default) and 0.0 (the pretraining recipes'):
attention dropout changes which kernel scaled_dot_product_attention can use on a CPU.

Target: our tokens/s >= the baseline's (ratio >= 1.0) at every dropout measured; exit status 1 when
missed. The last line is `RESULT train_throughput measured=<lowest ratio> target=>=1 pass=<true|false>`
for bench.run_all.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from core.model.config import ModelConfig
from core.model.transformer import Transformer

TARGET_RATIO = 1.0


# --------------------------------------------------------------------------- minGPT, written plainly


class MinGPTSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float) -> None:
        super().__init__()
        self.key = nn.Linear(n_embd, n_embd)
        self.query = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size,
                                                                                         block_size))
        self.n_head = n_head

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        hs = C // self.n_head
        k = self.key(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))


class MinGPTBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.attn = MinGPTSelfAttention(n_embd, n_head, block_size, dropout)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                 nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class MinGPT(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int,
                 dropout: float) -> None:
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[MinGPTBlock(n_embd, n_head, block_size, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        T = idx.size(1)
        x = self.drop(self.tok_emb(idx) + self.pos_emb[:, :T, :])
        logits = self.head(self.ln_f(self.blocks(x)))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=0)
        return logits, loss


def copy_weights(ours: Transformer, baseline: MinGPT) -> None:
    """Our state dict under minGPT's names (the converter's mapping, the other way round)."""
    state = {}
    for name, tensor in ours.state_dict().items():
        if name == "pos.table":
            state["pos_emb"] = tensor.unsqueeze(0)
        elif name == "head.unembed.weight":
            state["head.weight"] = tensor
        else:
            state[name] = tensor
    for name, buffer in baseline.state_dict().items():
        if name.endswith("attn.mask"):
            state[name] = buffer
    baseline.load_state_dict(state)


# --------------------------------------------------------------------------- measuring


def training_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> float:
    """Seconds for one full step (forward, loss, backward, AdamW)."""
    started = time.perf_counter()
    _, loss = model(x, y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    if x.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - started


def matmul_flops(n: int, repeats: int, device: torch.device) -> float:
    """FLOP/s of an n x n float32 matmul (2 n^3 FLOPs), median over repeats."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    torch.mm(a, b)  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return 2 * n**3 / statistics.median(times)


def matmul_parameters(model: Transformer) -> int:
    """Parameters that take part in a matmul: all but the embedding tables and the LayerNorms."""
    skip = ("tok_emb.", "pos.")
    total = 0
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and not name.startswith(skip):
            total += sum(p.numel() for p in module.parameters(recurse=False))
    return total


@dataclass
class Measured:
    dropout: float
    ratio: float
    tokens_per_s: dict[str, float]
    spread: dict[str, tuple[float, float]]
    logits_difference: float


def measure(args: argparse.Namespace, dropout: float, device: torch.device) -> Measured:
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=args.vocab, block_size=args.block, n_layer=args.layers, n_head=args.heads,
                         n_embd=args.width, dropout=dropout, positional="learned", attention="vanilla")
    ours = Transformer(config).to(device)
    baseline = MinGPT(args.vocab, args.block, args.layers, args.heads, args.width, dropout).to(device)
    copy_weights(ours, baseline)
    ours.eval(), baseline.eval()
    with torch.no_grad():
        probe = torch.randint(1, args.vocab, (2, args.block), device=device)
        difference = (ours(probe)[0] - baseline(probe)[0]).abs().max().item()
    ours.train(), baseline.train()
    models = {"ours": ours, "minGPT-style": baseline}
    optimizers = {label: torch.optim.AdamW(model.parameters(), lr=3e-4) for label, model in models.items()}
    generator = torch.Generator().manual_seed(0)

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        data = torch.randint(1, args.vocab, (args.batch, args.block + 1), generator=generator).to(device)
        return data[:, :-1].contiguous(), data[:, 1:].contiguous()

    for _ in range(2):  # warm-up: allocator, autograd graph caches
        x, y = batch()
        for label, model in models.items():
            training_step(model, optimizers[label], x, y)
    # Step by step, alternating (which model goes first alternates too), so that both see the same
    # machine load; per model the median step time gives tokens/s, and the ratio is the median of
    # the per-pair ratios (a burst of load hits both halves of a pair, not one model's whole run).
    times: dict[str, list[float]] = {label: [] for label in models}
    pair_ratios = []
    order = list(models)
    for step in range(args.steps):
        x, y = batch()
        pair = {}
        for label in (order if step % 2 == 0 else order[::-1]):
            pair[label] = training_step(models[label], optimizers[label], x, y)
            times[label].append(pair[label])
        pair_ratios.append(pair["minGPT-style"] / pair["ours"])
    tokens = args.batch * args.block
    return Measured(dropout, statistics.median(pair_ratios),
                    {label: tokens / statistics.median(t) for label, t in times.items()},
                    {label: (tokens / max(t), tokens / min(t)) for label, t in times.items()}, difference)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.train_throughput",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=128, help="a character vocabulary's size")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dropout", type=float, nargs="+", default=[0.1, 0.0],
                        help="one measurement each (default: 0.1, the trainer's and minGPT's default, and 0.0, "
                             "the pretraining recipes'); the target applies to every one")
    parser.add_argument("--steps", type=int, default=12, help="timed training steps per model and dropout")
    parser.add_argument("--matmul", type=int, default=1024, help="size n of the n x n reference matmul")
    parser.add_argument("--threads", type=int, default=0, help="torch threads; 0 leaves torch's default")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    config = ModelConfig(vocab_size=args.vocab, block_size=args.block, n_layer=args.layers, n_head=args.heads,
                         n_embd=args.width, dropout=0.0)
    n_matmul = matmul_parameters(Transformer(config))
    flops_per_token = 6 * n_matmul + 6 * args.layers * args.block * args.width
    print(f"config: {args.layers} layers, {args.heads} heads, width {args.width}, block {args.block}, vocab "
          f"{args.vocab}, batch {args.batch}; device {device}, torch threads {torch.get_num_threads()}; "
          f"{args.steps} paired steps per dropout")

    results = [measure(args, dropout, device) for dropout in args.dropout]
    peak = matmul_flops(args.matmul, repeats=10, device=device)
    print(f"FLOPs per token (Kaplan: 6*N + 6*n_layer*T*C, N = {n_matmul:,} matmul parameters): "
          f"{flops_per_token / 1e6:.1f} MFLOP; reference {args.matmul}x{args.matmul} float32 matmul: "
          f"{peak / 1e9:.1f} GFLOP/s")
    for result in results:
        print(f"dropout {result.dropout:g}: same function, max |logits ours - minGPT-style| = "
              f"{result.logits_difference:.1e} (weights copied, eval mode)")
        for label, rate in result.tokens_per_s.items():
            low, high = result.spread[label]
            achieved = rate * flops_per_token
            print(f"  {label:>13}: {rate:10,.0f} tokens/s (median step; range {low:,.0f}-{high:,.0f}); "
                  f"{achieved / 1e9:6.2f} GFLOP/s = {achieved / peak:5.1%} of matmul peak")
        print(f"  ratio ours / minGPT-style: {result.ratio:.2f}x (median of {args.steps} paired steps)")
    if any(r.logits_difference > 1e-3 for r in results):
        print("the two models disagree: the comparison is meaningless")
        print(f"RESULT train_throughput measured=nan target=>={TARGET_RATIO:g} pass=false")
        return 1
    worst = min(results, key=lambda r: r.ratio)
    passed = worst.ratio >= TARGET_RATIO
    print(f"lowest ratio: {worst.ratio:.2f}x at dropout {worst.dropout:g} (target >= {TARGET_RATIO:g})"
          + ("" if passed else "  MISSED"))
    print(f"RESULT train_throughput measured={worst.ratio:.3f} target=>={TARGET_RATIO:g} "
          f"pass={str(passed).lower()}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
