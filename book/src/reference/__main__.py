"""``python -m src.reference``: the command line (`src.reference.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
