"""``python -m ledgershield.training``: the training pipeline's command line."""

from .cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    raise SystemExit(main())
