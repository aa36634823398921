"""Tests import the helper package as lessons do: ``from src import cp``."""
import sys
from pathlib import Path

BOOK = str(Path(__file__).resolve().parents[1] / "book")
if BOOK not in sys.path:
    sys.path.insert(0, BOOK)
