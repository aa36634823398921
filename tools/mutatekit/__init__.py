"""The parts of `tools/mutate.py`, the mutation sampler (its docstring says
how a run goes):

* `sites`: every mutation site of `book/src`, and the reproducible sample;
* `plugin`: the pytest plugin that names coverage's contexts after tests;
* `coverage_map`: the scratch copy of the checkout, and the coverage map
  built in it once per content;
* `selection`: the tests that could notice a mutant;
* `running`: running them on the mutated copy, and each mutant's outcome;
* `record`: the equivalent mutants' labels, the score and the report.
"""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = "book/src"
