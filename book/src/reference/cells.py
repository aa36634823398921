"""What a cell's fingerprint sees of its code: `model_blind`.

A reference value is current while the cell that glued it is unchanged
(`src.reference.store.fingerprint`); what only the CPU device model runs
is left out of that comparison, so that a change of the model's sizes
leaves a GPU's values current.
"""
import ast


#: What `model_blind` writes in place of a ``cpu=`` size.
MODEL_SIZE = "..."


def model_blind(source):
    """``source`` with the argument that only the CPU device model runs
    written as `MODEL_SIZE`: the ``cpu`` argument of every call of
    ``pick`` (``pick(cpu=2**22, gpu=2**26)`` reads ``pick(cpu=...,
    gpu=2**26)``; ``src.pick`` returns it only off a GPU). Code that does
    not parse (IPython magics) is returned as it is."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name != "pick":
            continue
        args = [k.value for k in node.keywords if k.arg == "cpu"]
        args += node.args[:1]
        spans += [(a.lineno, a.col_offset, a.end_lineno, a.end_col_offset)
                  for a in args]
    if not spans:
        return source
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(lineno, col):
        # ast counts columns in UTF-8 bytes
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(
            line.encode()[:col].decode(errors="ignore"))

    for l0, c0, l1, c1 in sorted(spans, reverse=True):
        a, b = offset(l0, c0), offset(l1, c1)
        source = source[:a] + MODEL_SIZE + source[b:]
    return source
