"""``python -m ledgershield.training``: the training pipeline's command line."""

from .cli import main

raise SystemExit(main())
