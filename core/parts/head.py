"""The head kind's interface: task outputs on the last hidden state, and their losses."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch.nn.functional as F
from torch import Tensor

from .component import Component
from .input_checks import check_label_values

if TYPE_CHECKING:
    from .forward_inputs import ForwardBatch


class Head(Component):
    """Task output on top of the last hidden state."""

    kind: ClassVar[str] = "head"
    families: ClassVar[tuple[str, ...]] = ("encoder", "decoder", "encoder-decoder")

    def forward(self, hidden: Tensor, attention_mask: Tensor | None = None) -> Tensor | None:
        """(B, T, d_model) -> logits, or None for a head that makes none."""
        return None

    def prepare_batch(self, batch: ForwardBatch) -> ForwardBatch:
        """Hook: reshape the inputs before the stacks run (multiple choice flattens them)."""
        return batch

    def regroup(
        self, hidden: Tensor, attention_mask: Tensor | None, batch: ForwardBatch
    ) -> tuple[Tensor, Tensor | None]:
        """Hook: the stack's (rows, T, D) output as this head reads it (undoes prepare_batch)."""
        return hidden, attention_mask

    def outputs(
        self, hidden: Tensor, attention_mask: Tensor | None, batch: ForwardBatch
    ) -> tuple[dict[str, Any], Tensor | None]:
        """Outputs by Hugging Face name and the loss of the batch's labels: `shift_labels`
        through `token_loss`, `labels` through `masked_loss`, or through `hidden_loss` when
        no logits are wanted (`return_logits=False`)."""
        hidden, mask = self.regroup(hidden, attention_mask, batch)
        ids = {"input_ids": batch.input_ids} if self.capabilities.token_ids else {}
        out = self(hidden, mask, **ids) if batch.return_logits else None
        named = out if isinstance(out, dict) else {"logits": out}
        labels = batch.labels
        if batch.shift_labels is not None:
            if labels is not None:
                raise ValueError("pass labels or shift_labels, not both")
            loss = self.token_loss(
                hidden,
                batch.shift_labels,
                mask,
                logits=out,
                label_smoothing=batch.label_smoothing,
                num_items=batch.num_items,
                **ids,
            )
            return named, loss
        if labels is None:
            return named, None
        if not batch.return_logits:
            return named, self.hidden_loss(hidden, labels, mask, **ids)
        if out is None or not any(k.endswith("logits") for k in named):
            raise ValueError(f"head {self.name!r} makes no logits, so labels cannot be used")
        if isinstance(out, Tensor) and out.dim() == 3:  # token-level class ids
            check_label_values(labels, out)
        return named, self.masked_loss(out, labels, mask)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        raise NotImplementedError(f"head {self.name!r} does not compute a loss")

    def masked_loss(
        self, logits: Tensor, labels: Tensor, attention_mask: Tensor | None = None
    ) -> Tensor:
        """The loss where the padding matters to it (ELECTRA's discriminator); else `loss`."""
        return self.loss(logits, labels)

    def hidden_loss(
        self,
        hidden: Tensor,
        labels: Tensor,
        attention_mask: Tensor | None = None,
        **inputs: Tensor,
    ) -> Tensor:
        """The loss straight from hidden states, for when the logits are not wanted (`inputs`:
        input_ids for a head with the token_ids capability)."""
        logits = self(hidden, attention_mask, **inputs)
        if logits is None:
            raise ValueError(f"head {self.name!r} makes no logits, so labels cannot be used")
        return self.masked_loss(logits, labels, attention_mask)

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
        """Cross-entropy of each position's vocabulary logits against its own target (targets
        already aligned, -100 ignored): the mean, or the sum / `num_items`. This default makes
        the logits whole (or takes `logits`); LM heads override it to work in chunks."""
        if logits is None:
            logits = self(hidden, attention_mask, **inputs)
        if not isinstance(logits, Tensor) or logits.shape[:-1] != targets.shape:
            raise ValueError(
                f"head {self.name!r} makes no per-token logits, so it cannot be trained on tokens"
            )
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),  # (B*T, V)
            targets.reshape(-1).to(logits.device),
            ignore_index=-100,
            label_smoothing=label_smoothing,
            reduction="mean" if num_items is None else "sum",
        )
        return loss if num_items is None else loss / num_items
