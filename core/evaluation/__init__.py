"""Evaluation of zoo models with EleutherAI's lm-evaluation-harness (the `eval` extra).

`archzoo.evaluation.lm_eval_model` registers the model `archzoo` in lm-eval's registry when
imported; `python -m archzoo.evaluation ...` imports it and runs lm-eval's own command line,
and `zoo eval MODEL --tasks ...` calls lm-eval's API. Nothing here imports lm_eval or torch
until one of those runs.
"""
