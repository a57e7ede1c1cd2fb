"""BERT masked-LM head: dense -> activation -> norm -> tied decoder + bias.

The transform maps d_model to the embedding's `embed_width`, so an ALBERT head (dense d -> E,
norm over E) ties to its E-wide token table; for BERT the width is d_model.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from archzoo.parts.component import param
from archzoo.parts.interfaces import Embedding, Head, NormFactory

from ..ffn.activations import ACTIVATIONS
from .losses import linear_cross_entropy, token_cross_entropy


class MLMHead(Head, name="mlm", mup=True):
    """BERT's masked-LM head: transform (dense, activation, norm), then tied decoder"""

    families = ("encoder",)

    class Config:
        activation: Literal["relu", "gelu", "gelu_tanh", "gelu_new", "silu"] = param(
            "gelu", "non-linearity of the transform"
        )
        tie: bool = param(True, "reuse the token embedding table as the decoder")
        pooler: bool = param(
            False, "carry BERT's pooler weights, unused by the logits (HF's BigBird MLM has one)"
        )
        transform: bool = param(True, "dense + activation + norm before the decoder (XLM: none)")
        dense_bias: bool = param(True, "a bias on the transform's dense layer")
        decoder_bias: bool = param(True, "a bias on the decoder (ModernBERT: decoder_bias)")
        width: int | None = param(
            None,
            "the transform's output width, which the decoder reads (null: the embedding's; "
            "RemBERT: its wider output_embedding_size, with an untied decoder)",
            min=1,
        )
        transform_norm_eps: float | None = param(
            None,
            "the transform's norm: null: the stack's; a number: a LayerNorm of its own with "
            "this eps (MobileBERT, whose stack norms do not normalise)",
            gt=0.0,
        )
        bottleneck: int | None = param(
            None,
            "the transform as a two-layer bottleneck without a norm: dense to this width, "
            "activation, dense back, activation (UltraBERT's prediction_head_size)",
            min=1,
        )
        decoder_extension: bool = param(
            False,
            "with tie and a transform width wider than the token table, the decoder's first "
            "embed_width columns are the table and the rest a matrix of the head's own "
            "(MobileBERT: 128 of 512)",
        )

    def __init__(
        self, cfg: Any, dims: Any, *, embedding: Embedding, make_norm: NormFactory, **_: Any
    ) -> None:
        super().__init__(cfg, dims)
        table = embedding.embed_width(embedding.cfg, embedding.dims)
        width = table if cfg.width is None else cfg.width
        extension = width - table if cfg.decoder_extension else 0
        if cfg.decoder_extension and (not cfg.tie or extension <= 0):
            raise ValueError(
                f"head 'mlm': decoder_extension needs tie: true and a width above the "
                f"{table}-wide token table, got tie {cfg.tie} and width {width}"
            )
        if cfg.tie and width != table and not extension:
            raise ValueError(
                f"head 'mlm': width {width} cannot tie to the {table}-wide token table; "
                "set tie: false"
            )
        self.dense = self.norm = self.dense_out = None
        if cfg.transform and cfg.bottleneck:  # d_model -> bottleneck -> width, no norm
            self.dense = nn.Linear(dims.d_model, cfg.bottleneck, bias=cfg.dense_bias)
            self.dense_out = nn.Linear(cfg.bottleneck, width, bias=cfg.dense_bias)
        elif cfg.transform:
            self.dense = nn.Linear(dims.d_model, width, bias=cfg.dense_bias)
            self.norm = make_norm(dim=width)
            if cfg.transform_norm_eps is not None:  # a LayerNorm whatever the stack's norm
                self.norm = nn.LayerNorm(width, eps=cfg.transform_norm_eps)
        elif width != dims.d_model:
            raise ValueError(f"head 'mlm' without a transform needs embed_width {dims.d_model}")
        self.act = ACTIVATIONS[cfg.activation]
        self.decoder = nn.Linear(width - extension, dims.vocab_size, bias=cfg.decoder_bias)
        if cfg.tie:
            self.decoder.weight = embedding.word_weight()
        self.bias = self.decoder.bias  # one parameter, two names: the add fuses into addmm
        # decoder_extension: (V, width - E), the decoder's columns past the tied table
        self.extension = nn.Linear(extension, dims.vocab_size, bias=False) if extension else None
        self.pooler = nn.Linear(dims.d_model, dims.d_model) if cfg.pooler else None

    def features(self, hidden: Tensor) -> Tensor:
        """What the decoder sees: (B, T, d_model) -> (B, T, E), transformed or not, times
        muP's output multiplier (1 without muP)."""
        if self.dense is None:
            out = hidden
        elif self.dense_out is not None:  # the bottleneck: (B, T, bottleneck) in between
            out = self.act(self.dense_out(self.act(self.dense(hidden))))
        else:
            out = self.norm(self.act(self.dense(hidden)))
        scale = self.dims.output_multiplier
        return out if scale == 1.0 else out * scale

    def decoder_weight(self) -> Tensor:
        """(V, width): the tied table, with decoder_extension's columns after it."""
        if self.extension is None:
            return self.decoder.weight
        return torch.cat([self.decoder.weight, self.extension.weight], dim=1)

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        if self.extension is not None:  # (B, T, V): one matmul over the joined columns
            return F.linear(self.features(hidden), self.decoder_weight(), self.decoder.bias)
        return self.decoder(self.features(hidden))  # (B, T, V), decoder bias = self.bias

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
        """The masked-LM loss in chunks (the training loop's): logits never made whole."""
        if logits is not None:
            return super().token_loss(
                hidden, targets, logits=logits, label_smoothing=label_smoothing, num_items=num_items
            )
        return linear_cross_entropy(
            self.features(hidden),
            self.decoder_weight(),
            self.decoder.bias,
            targets,
            shift=False,
            label_smoothing=label_smoothing,
            num_items=num_items,
        )

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return token_cross_entropy(logits, labels, shift=False)
