"""Attention kernels, each a function registered by name (`archzoo.parts.kernels`)."""
