"""Modules built for their shapes only (core.model.meta_device): the same names, shapes and counts as a real build,
no torch._dynamo import on the way (the first checkpoint load of a server process paid 2-5 s for it: issue 52,
item 5), and a model another thread builds meanwhile is initialised as ever. Models built to be loaded
(`to_be_loaded`): a load draws no random number and gives the weights a normal build then loaded gives."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from core.model.config import PRESETS, ModelConfig
from core.model.meta_device import shapes_only, to_be_loaded
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


def test_a_checkpoint_load_leaves_torchs_random_state_as_it_was():
    """A seeded script that loads a model draws the same numbers after the load as without it."""
    import torch

    from core.io import checkpoint

    torch.manual_seed(0)
    before = torch.get_rng_state()
    checkpoint.load(ROOT / "checkpoints" / "lm-char.safetensors")
    assert torch.equal(torch.get_rng_state(), before)


def test_a_model_built_to_be_loaded_loads_to_the_same_weights_and_outputs_as_a_drawn_one():
    import torch

    for name in list(PRESETS)[:4]:
        config = ModelConfig(**PRESETS[name])
        torch.manual_seed(1)
        source = Transformer(config).eval()
        state = {k: v.clone() for k, v in source.state_dict().items()}
        with to_be_loaded():
            built = Transformer(config)
        built.load_state_dict(state)
        built.eval()
        assert all(torch.equal(built.state_dict()[k], state[k]) for k in state)
        idx = torch.randint(0, config.vocab_size, (2, min(8, config.block_size)))
        assert torch.equal(built(idx)[0], source(idx)[0])
