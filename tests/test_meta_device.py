"""Modules built for their shapes only (core.model.meta_device): the same names, shapes and counts as a real build,
no torch._dynamo import on the way (the first checkpoint load of a server process paid 2-5 s for it: issue 52,
item 5), and a model another thread builds meanwhile is initialised as ever."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from core.model.config import PRESETS, ModelConfig
from core.model.meta_device import shapes_only
from core.model.transformer import Transformer

ROOT = Path(__file__).resolve().parent.parent


def test_shapes_only_builds_the_same_tensors_as_a_real_build_on_the_meta_device():
    for name in list(PRESETS)[:4]:
        config = ModelConfig(**PRESETS[name])
        with shapes_only():
            meta = Transformer(config)
        real = Transformer(config)
        assert {k: tuple(v.shape) for k, v in meta.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in real.state_dict().items()}
        assert meta.num_parameters() == real.num_parameters()
        assert all(p.is_meta for p in meta.parameters())


def test_another_thread_building_meanwhile_draws_its_weights():
    config = ModelConfig(**PRESETS[next(iter(PRESETS))])
    inside, built = threading.Event(), {}

    def other() -> None:
        inside.wait(10)
        built["model"] = Transformer(config)

    thread = threading.Thread(target=other)
    thread.start()
    with shapes_only():
        inside.set()
        thread.join(60)
    weights = built["model"].tok_emb.weight.detach()
    assert not weights.is_meta and float(weights.abs().sum()) > 0 and float(weights.std()) > 0


def test_loading_a_checkpoint_and_counting_parameters_import_no_dynamo():
    code = ("import sys; from core.io import checkpoint as c; from core.lens.describe import parameter_count; "
            "loaded = c.load('checkpoints/names-pretrained.safetensors'); "
            "assert parameter_count(c.read_metadata('checkpoints/lm-char.safetensors')['config']); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
