"""core.train.sae_job: the SAE command in its own process; Stop ends training after the step in progress and the
command still evaluates and saves what it has (exit 0, `stopped` in the file)."""

from __future__ import annotations

import time

from core.io import checkpoint
from core.lens import sae as S
from core.train import sae_job
from tests.conftest import TINY_CORPUS, tiny_model


def test_stop_ends_the_job_and_keeps_the_sae(tmp_path):
    from core.model.tokenizer import CharTokenizer

    text = tmp_path / "text.txt"
    text.write_text(TINY_CORPUS * 30)
    tokenizer = CharTokenizer.from_corpus(TINY_CORPUS)
    path = checkpoint.save(tmp_path / "tiny-lm.safetensors", tiny_model(tokenizer.vocab_size), tokenizer, "lm",
                           data=[{"path": str(text)}], command="pytest", seed=0)
    slot = sae_job.SAEJobSlot()
    job = slot.start(path, 0, "resid", 1_000_000)
    deadline = time.time() + 90
    while sae_job.progress(job)[:2] < ("train", 40) and job.running() and time.time() < deadline:
        time.sleep(0.2)
    assert job.running(), sae_job.error(job)
    assert slot.stop()
    job.process.wait(timeout=60)
    assert job.process.returncode == 0, sae_job.error(job)
    meta = S.read_sae_meta(job.out)
    assert job.out == S.sae_path(path, 0, "resid") and meta["stopped"] and 0 < meta["steps"] < 1_000_000
    assert sae_job.progress(job)[0] == "done" and not slot.stop()  # nothing left running
