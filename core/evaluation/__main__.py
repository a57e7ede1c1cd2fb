"""`python -m archzoo.evaluation ARGS`: lm-eval's own command line with `--model archzoo`.

lm-eval 0.4.x finds models in its registry, which third parties join by being imported
(no entry points): this imports the registration, then hands the arguments to lm-eval.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Register `archzoo` in lm-eval's model registry, then run lm-eval's CLI on sys.argv."""
    try:
        import lm_eval.__main__ as lm_eval_main
    except ImportError:
        sys.exit("python -m archzoo.evaluation needs lm-eval: pip install 'archzoo[eval]'")
    from . import lm_eval_model  # noqa: F401 - registers the model "archzoo"

    lm_eval_main.cli_evaluate()


if __name__ == "__main__":
    main()
