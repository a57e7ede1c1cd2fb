"""HF text types archzoo refuses, each with the mechanism it lacks (the coverage report's
`refused` rows and from_hf's error; issue 33 lists them). A type not named here and not
converted is reported as "not examined"."""

from __future__ import annotations

MULTIPLIERS = "embedding, residual, attention and logit multipliers"

MISSING_MECHANISMS = {
    "bitnet": "BitNet's inner norms over unpacked ternary weights",
    "convbert": "ConvBERT's span-based dynamic convolution",
    "fsmt": "separate source and target vocabularies",
    "funnel": "Funnel's sequence pooling between blocks",
    "jetmoe": "a mixture of attention heads",
    "llama4_text": (
        "chunked attention with an L2 QK norm, temperature-tuned NoPE layers and a router "
        "that scales the experts' input"
    ),
    "mobilebert": "MobileBERT's bottleneck layers",
    "nllb-moe": "top-2 routing with capacity and its second-expert policy (all / sampling / random)",
    "pegasus_x": "staggered blocks with global tokens",
    "prophetnet": "ProphetNet's n-stream decoder",
    "zamba": "a transformer block shared across the Mamba layers",
    "zamba2": "a transformer block shared across the Mamba 2 layers, with LoRA adapters per use",
}
