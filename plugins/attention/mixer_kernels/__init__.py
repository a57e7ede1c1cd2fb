"""Optional GPU kernels of the recurrent mixers (flash-linear-attention, causal-conv1d,
mamba-ssm), registered by name; each library is imported only when a call could use it."""
