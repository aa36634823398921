"""The parts of `benchmarks/fidelity.py`, the entry script (its docstring
says what the fidelity table measures and how it judges):

* `effect`: what an effect is (`Effect`) and its two classes;
* `sizes`: the sizes the effects are measured at, here and on the GPU;
* `experiment`: the registry of experiments, each run once;
* `effects`: the effects, one module a lesson, each with the experiments
  that measure them; `calibration`: experiments no effect reads;
* `compare`: formulas, verdicts and the GPU reference;
* `runner`: measuring the effects and assembling the result;
* `table`: the terminal table and the book's page.

Importing it puts ``book/`` on the path, for `src`.
"""
import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parents[2] / "book"
if str(BOOK) not in sys.path:
    sys.path.insert(0, str(BOOK))
