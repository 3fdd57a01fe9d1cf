"""Parity with the CS224N assignment's training recipe, step by step.

`reference_losses` is written from the assignment's trainer (its minGPT `Trainer.train`), not from
core/: AdamW groups chosen by parameter *name* ("bias", "LayerNorm.weight" exempt), betas (0.9, 0.95),
gradient clipping at 1.0, and the rate set *after* each step from the tokens trained on so far
(`(y >= 0).sum()`, PAD included), linear warmup then 0.5*(1+cos(pi*progress)) floored at 0.1 with
progress never clamped. The project's Trainer must give the same loss at every step from the same
weights and batches. The runs are short, so the test amplifies what the recipe decides: final_tokens
is reached after ~20 of the 50 steps (the unclamped cosine then rises again) and the weight decay is
large enough for the decay groups to move the losses well past the tolerance. Negative controls show
the test fails when the groups or the schedule are changed back.

Tolerance: both loops run the same float32 operations in the same order on the CPU; the only freedom
is the order in which AdamW's per-parameter updates are batched, which does not change any value, so
the losses agree to float32 rounding (rel 1e-5 is ~100x the float32 epsilon); the controls differ by
more than 1e-3.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch

from core.data.datasets import CharCorruptionDataset
from core.train.trainer import Trainer, TrainerConfig
from tests.conftest import tiny_model

STEPS = 50
BATCH = 8
BLOCK = 32
LR = 6e-3
WEIGHT_DECAY = 0.5
WARMUP = BATCH * (BLOCK - 1) * 4  # 4 steps
FINAL = BATCH * (BLOCK - 1) * 20  # progress reaches 1 after 20 steps, 2 after 36
SEED = 3

CORPUS = "\n".join(
    f"{name}. {name} is a {job} born in {place} ." for name, job, place in [
        ("Ada Lovelace", "writer", "London"), ("Bo Diddley", "singer", "McComb"), ("Cy Twombly", "painter",
         "Lexington"), ("Di Fossey", "scientist", "San Francisco"), ("Ed Wood", "director", "Poughkeepsie"),
        ("Flo Jo", "sprinter", "Los Angeles"), ("Gus Grissom", "astronaut", "Mitchell"),
        ("Hu Shih", "diplomat", "Shanghai"), ("Ida Tarbell", "journalist", "Hatch Hollow"),
        ("Jo Cox", "politician", "Batley")] * 6)


def reference_losses(model: torch.nn.Module, batches, lr: float, weight_decay: float, warmup_tokens: int,
                     final_tokens: int) -> list[float]:
    """The assignment's trainer, step by step (written from its code's description, not from core/)."""
    no_decay = ["bias", "LayerNorm.weight"]
    params_decay = [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)]
    params_nodecay = [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)]
    optimizer = torch.optim.AdamW([{"params": params_decay, "weight_decay": weight_decay},
                                   {"params": params_nodecay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    tokens, losses = 0, []
    model.train()
    for x, y in batches:
        _, loss = model(x, y)
        loss = loss.mean()
        losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        tokens += int((y >= 0).sum())
        if tokens < warmup_tokens:
            lr_mult = float(tokens) / float(max(1, warmup_tokens))
        else:
            progress = float(tokens - warmup_tokens) / float(max(1, final_tokens - warmup_tokens))
            lr_mult = max(0.1, 0.5 * (1.0 + math.cos(math.pi * progress)))
        for group in optimizer.param_groups:
            group["lr"] = lr * lr_mult
    return losses


def same_batches(dataset: CharCorruptionDataset, steps: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The Trainer's documented order: epoch e visits randperm(n) from a generator seeded seed*1000+e."""
    batches, epoch = [], 0
    while len(batches) < steps:
        view = copy.copy(dataset)
        view.set_epoch(epoch)
        order = torch.randperm(len(view), generator=torch.Generator().manual_seed(SEED * 1000 + epoch)).tolist()
        for i in range(0, len(order), BATCH):
            items = [view[j] for j in order[i: i + BATCH]]
            batches.append((torch.stack([x for x, _ in items]), torch.stack([y for _, y in items])))
        epoch += 1
    return batches[:steps]


@pytest.fixture(scope="module")
def setup():
    dataset = CharCorruptionDataset(CORPUS, BLOCK, seed=SEED)
    torch.manual_seed(0)
    model = tiny_model(dataset.tokenizer.vocab_size, block_size=BLOCK, dropout=0.1)
    initial = copy.deepcopy(model.state_dict())
    torch.manual_seed(7)  # dropout masks: both loops draw them in the same order
    reference = reference_losses(model, same_batches(dataset, STEPS), LR, WEIGHT_DECAY, WARMUP, FINAL)
    return dataset, initial, reference


def trainer_losses(setup, **changes) -> list[float]:
    dataset, initial, _ = setup
    model = tiny_model(dataset.tokenizer.vocab_size, block_size=BLOCK, dropout=0.1)
    model.load_state_dict(initial)
    config = TrainerConfig(max_epochs=100, max_steps=STEPS, batch_size=BATCH, learning_rate=LR,
                           weight_decay=WEIGHT_DECAY, warmup_tokens=WARMUP, final_tokens=FINAL, log_every=1,
                           seed=SEED, device="cpu", **changes)
    torch.manual_seed(7)
    trainer = Trainer(model, dataset, config)
    trainer.train()
    return [row["value"] for row in trainer.history if row["metric"] == "loss"]


def test_the_trainer_reproduces_the_assignments_losses_for_50_steps(setup):
    reference = setup[2]
    ours = trainer_losses(setup)
    assert len(ours) == len(reference) == STEPS
    assert ours == pytest.approx(reference, rel=1e-5)
    assert reference[-1] < 0.8 * reference[0]  # it trains: not a comparison of two flat lines


@pytest.mark.parametrize("changes", [dict(decay="mingpt"), dict(decay="no-embedding"), dict(decay="no-norm"),
                                     dict(schedule="cosine-clamped")], ids=lambda c: next(iter(c.values())))
def test_the_parity_test_fails_when_groups_or_schedule_change_back(setup, changes):
    reference = setup[2]
    ours = trainer_losses(setup, **changes)
    assert max(abs(a - b) / b for a, b in zip(ours, reference, strict=True)) > 1e-3
