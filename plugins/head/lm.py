"""Language-model head: hidden -> vocabulary logits, tied to the token table or not."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Embedding, Head, NormFactory

from ..ffn.activations import ACTIVATIONS
from .losses import linear_cross_entropy, token_cross_entropy


class LMHead(Head, name="lm", generates=True, mup=True):
    """project to vocabulary logits (tied to the input embedding or its own weights)"""

    families = ("decoder", "encoder-decoder")

    class Config:
        tie: bool = param(True, "reuse the token embedding table as the output projection")
        bias: bool = param(False, "a learned bias per vocabulary entry")
        fixed_bias: bool = param(False, "a bias kept as a buffer, not trained (BART)")
        rescale: bool = param(False, "multiply hidden states by d_model^-0.5 first (tied T5)")
        logit_scale: float = param(
            1.0,
            "multiply the logits by this (Cohere's logit_scale; Granite: 1 / logits_scaling)",
            gt=0.0,
        )
        softcap: float | None = param(
            None, "soft-cap logits to cap * tanh(logits / cap) (Gemma 2)", gt=0.0
        )
        transform: bool = param(
            False, "dense + activation + norm before the projection (ModernBERT decoder)"
        )
        transform_activation: Literal["relu", "gelu", "gelu_tanh", "gelu_new", "silu"] = param(
            "gelu", "transform: the non-linearity after its dense layer"
        )
        transform_bias: bool = param(False, "transform: a bias on its dense layer")
        shift: bool | None = param(
            None,
            "the loss scores position t against label t+1 (null: in a decoder; XLM's CLM and "
            "BartForCausalLM: no, labels are already the targets)",
        )

    def __init__(
        self,
        cfg: Any,
        dims: Any,
        *,
        embedding: Embedding,
        family: str,
        make_norm: NormFactory | None = None,
        **_: Any,
    ) -> None:
        super().__init__(cfg, dims)
        self.dense = self.norm = None
        if cfg.transform:  # d_model -> d_model, then the stack's norm
            if make_norm is None:
                raise ValueError("head 'lm' with a transform needs the stack's norm (make_norm)")
            self.dense = nn.Linear(dims.d_model, dims.d_model, bias=cfg.transform_bias)
            self.norm = make_norm()
        self.act = ACTIVATIONS[cfg.transform_activation]
        width = embedding.embed_width(embedding.cfg, embedding.dims) if cfg.tie else dims.d_model
        # A tied table narrower than d_model (factorized embedding) is reached through d -> E.
        self.down = nn.Linear(dims.d_model, width, bias=False) if width != dims.d_model else None
        self.proj = nn.Linear(width, dims.vocab_size, bias=cfg.bias)
        if cfg.tie:
            self.proj.weight = embedding.word_weight()
        if cfg.fixed_bias:
            self.register_buffer("fixed_bias", torch.zeros(dims.vocab_size))
        else:
            self.fixed_bias = None
        self.shift = family == "decoder" if cfg.shift is None else cfg.shift
        self.multiplier = (dims.d_model**-0.5 if cfg.rescale else 1.0) * dims.output_multiplier

    def features(self, hidden: Tensor) -> Tensor:
        """What the vocabulary projection sees: (B, T, d_model) -> (B, T, E)."""
        if self.dense is not None:
            hidden = self.norm(self.act(self.dense(hidden)))
        if self.multiplier != 1.0:
            hidden = hidden * self.multiplier
        if self.down is not None:
            hidden = self.down(hidden)  # (B, T, E)
        return hidden

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        logits = self.proj(self.features(hidden))  # (B, T, V)
        if self.fixed_bias is not None:
            logits = logits + self.fixed_bias
        if self.cfg.logit_scale != 1.0:
            logits = logits * self.cfg.logit_scale
        if self.cfg.softcap is not None:
            logits = torch.tanh(logits / self.cfg.softcap) * self.cfg.softcap
        return logits

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return token_cross_entropy(logits, labels, shift=self.shift)

    def hidden_loss(
        self, hidden: Tensor, labels: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """The same loss, a chunk of tokens at a time: full logits never exist (soft-capped
        logits are made whole: the chunked loss has no cap)."""
        if self.cfg.softcap is not None:
            return self.loss(self(hidden), labels)
        features, bias = self._chunk_inputs(hidden)
        return linear_cross_entropy(features, self.proj.weight, bias, labels, shift=self.shift)

    def token_loss(
        self,
        hidden: Tensor,
        targets: Tensor,
        attention_mask: Tensor | None = None,
        *,
        logits: Tensor | None = None,
        label_smoothing: float = 0.0,
        num_items: float | Tensor | None = None,
        **inputs: Tensor,
    ) -> Tensor:
        """Aligned targets, in chunks (the training loop's loss): logits never made whole."""
        if logits is not None or self.cfg.softcap is not None:
            return super().token_loss(
                hidden,
                targets,
                logits=logits,
                label_smoothing=label_smoothing,
                num_items=num_items,
            )
        features, bias = self._chunk_inputs(hidden)
        return linear_cross_entropy(
            features,
            self.proj.weight,
            bias,
            targets,
            shift=False,
            label_smoothing=label_smoothing,
            num_items=num_items,
        )

    def _chunk_inputs(self, hidden: Tensor) -> tuple[Tensor, Tensor | None]:
        """Features and bias whose projection gives the logits: the logit scale moved onto
        both, (h W + b) s = (h s) W + b s, so chunked losses need no whole logits."""
        features, bias = self.features(hidden), self._bias()
        scale = self.cfg.logit_scale
        if scale != 1.0:
            features = features * scale
            bias = None if bias is None else bias * scale
        return features, bias

    def _bias(self) -> Tensor | None:
        """The projection's bias plus the fixed one, or None."""
        bias = self.proj.bias
        if self.fixed_bias is not None:
            bias = self.fixed_bias if bias is None else bias + self.fixed_bias
        return bias
