"""transformers' side of an export: the model class of a type and task, its config, and the
probe batch that both models must agree on before an export is kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..parts.converter import Converter
from ..specs.spec import Spec
from .express import ExportError

# a task key's ending -> the transformers auto class that holds that head
AUTO_CLASSES = {
    "ForCausalLM": "AutoModelForCausalLM",
    "LMHeadModel": "AutoModelForCausalLM",
    "ForMaskedLM": "AutoModelForMaskedLM",
    "ForPreTraining": "AutoModelForPreTraining",
    "ForConditionalGeneration": "AutoModelForSeq2SeqLM",
    "ForSequenceClassification": "AutoModelForSequenceClassification",
    "ForTokenClassification": "AutoModelForTokenClassification",
    "ForQuestionAnswering": "AutoModelForQuestionAnswering",
    "Model": "AutoModel",
}
# compared, if present
OUTPUTS = ("logits", "start_logits", "end_logits", "last_hidden_state", "sentence_embedding")
# archzoo's output name -> transformers' where they differ (CLIPTextModelWithProjection's)
HF_OUTPUT = {"sentence_embedding": "text_embeds"}


def transformers_module() -> Any:
    try:
        import transformers
    except ImportError:
        raise ExportError(
            "to_hf checks every export with transformers before writing it: "
            "pip install 'archzoo[hf]' (or transformers)"
        ) from None
    return transformers


def quiet_progress_bars() -> Callable[[], None]:
    """Turn transformers' loading bars off; returns the function that restores them."""
    logging = transformers_module().utils.logging
    if not logging.is_progress_bar_enabled():
        return lambda: None
    logging.disable_progress_bar()
    return logging.enable_progress_bar


def hf_config(config: dict[str, Any]) -> Any:
    """transformers' config object of a config.json dict."""
    tf = transformers_module()
    settings = {k: v for k, v in config.items() if k != "model_type"}
    return tf.AutoConfig.for_model(config["model_type"], **settings)


def model_class(converter: Converter, task: str, config: Any, spec: Spec) -> type:
    """The transformers class of `task` for `config`: `<hf_prefix><task>` when it is that
    type's class, else the auto class for the task's ending (a type sharing a table)."""
    tf = transformers_module()
    named = getattr(tf, converter.hf_prefix + task, None) if converter.hf_prefix else None
    if named is not None and getattr(named, "config_class", None) is type(config):
        return named
    ending = task or _untasked(spec)
    key = max((k for k in AUTO_CLASSES if ending.endswith(k)), key=len, default=None)
    auto = getattr(tf, AUTO_CLASSES[key]) if key else None
    mapping = getattr(auto, "_model_mapping", None)
    try:
        return mapping[type(config)]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ExportError(
            f"transformers has no {ending or 'model'} class for model_type {converter.model_type!r}"
        ) from None


def _untasked(spec: Spec) -> str:
    """The task of a converter without tasks, from the spec's head."""
    kind = spec.data["head"]["kind"]
    if kind == "lm":
        return "ForConditionalGeneration" if spec.family == "encoder-decoder" else "ForCausalLM"
    return {"mlm": "ForMaskedLM", "none": "Model"}.get(kind, kind)


def probe_batch(spec: Spec) -> tuple[dict[str, Tensor], Tensor]:
    """Model inputs (two rows, the second right-padded, when the spec has a pad id) and the
    mask of the positions compared."""
    data = spec.data
    vocab, pad = data["vocab_size"], data.get("pad_token_id")
    length = min(8, data["max_len"])
    g = torch.Generator().manual_seed(0)
    batch = 1 if pad is None else 2
    ids = torch.randint(0, vocab, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    if pad is not None:
        ids[ids == pad] = (pad + 1) % vocab
        cut = max(1, length - 3)
        ids[1, cut:], mask[1, cut:] = pad, 0
    inputs = {"input_ids": ids, "attention_mask": mask}
    eos = (data.get("head") or {}).get("eos_token_id")
    if eos is not None:  # a head pooling at a token: once per row, as its last real token
        ids[ids == eos] = next(t for t in range(3) if t not in (pad, eos))
        ids[torch.arange(batch), mask.sum(1) - 1] = eos
    if spec.family == "encoder-decoder":
        dec = torch.randint(0, vocab, (batch, min(5, length)), generator=g)
        if pad is not None:
            dec[dec == pad] = (pad + 1) % vocab
        if eos is not None:  # the decoder pools where input_ids hold eos: ids shifted right
            start = data.get("decoder_start_token_id") or 0
            dec = torch.cat([torch.full((batch, 1), start), ids[:, :-1]], dim=1)
        inputs["decoder_input_ids"] = dec
    return inputs, mask


@torch.no_grad()
def run(
    model: torch.nn.Module, inputs: dict[str, Tensor], use_cache: bool | None = None
) -> dict[str, Tensor]:
    """The compared outputs of a model on the probe inputs (float32, on the CPU);
    `use_cache`, when given, goes to the forward too (transformers' seq2seq models)."""
    device = next(model.parameters()).device
    extra = {} if use_cache is None else {"use_cache": use_cache}
    out = model(**{k: v.to(device) for k, v in inputs.items()}, **extra)
    found = {}
    for name in OUTPUTS:
        value = getattr(out, name, None)
        if value is None and name in HF_OUTPUT:
            value = getattr(out, HF_OUTPUT[name], None)
        if isinstance(value, Tensor):
            found[name] = value.detach().float().cpu()
    return found


def default_tolerance(dtype: torch.dtype) -> float:
    """Allowed |difference| relative to max(1, max |reference|): float32 kernels differ in
    the last bits, half precision in the third digit."""
    return 1e-4 if dtype in (torch.float32, torch.float64) else 5e-2


def compare(
    ours: dict[str, Tensor], theirs: dict[str, Tensor], mask: Tensor, tolerance: float
) -> tuple[float, str | None]:
    """The largest relative difference over the shared outputs (padded positions left out),
    and a problem when there is nothing to compare, a shape differs or a value is too far."""
    shared = [n for n in OUTPUTS if n in ours and n in theirs]
    if not shared:
        return float("inf"), f"no common output to compare (archzoo: {list(ours)})"
    worst = 0.0
    for name in shared:
        a, b = ours[name], theirs[name]
        if a.shape != b.shape:
            return float(
                "inf"
            ), f"{name} shapes differ: archzoo {tuple(a.shape)}, HF {tuple(b.shape)}"
        if a.dim() >= 2 and tuple(a.shape[:2]) == tuple(mask.shape):
            keep = mask.bool()
            a, b = a[keep], b[keep]  # (N, ...) real positions only
        scale = max(1.0, b.abs().max().item()) if b.numel() else 1.0
        diff = (a - b).abs().max().item() / scale if a.numel() else 0.0
        if not diff <= tolerance:  # NaN fails too
            return diff, f"{name} differ by {diff:.3g} (relative) > tolerance {tolerance:g}"
        worst = max(worst, diff)
    return worst, None
