"""What nbval compares of a cell's outputs, in one place: the notebook tests
and the GPU lane's lessons step (tools/gpu/run.sh, which imports this file
without importing src, so that no CUDA context opens beside the kernel's)."""
import copy

CHECK = "# NBVAL_CHECK_OUTPUT"


def checked(cell):
    """A code cell whose outputs nbval compares in lax mode."""
    return cell.cell_type == "code" and cell.source.lstrip().startswith(CHECK)


def texts(outputs):
    """What nbval compares of a cell's outputs, images aside; streams are
    merged as nbval merges them (one print may arrive in several pieces)."""
    from nbval.plugin import coalesce_streams
    out = []
    for o in coalesce_streams(copy.deepcopy(outputs)):
        if o.output_type == "stream":
            out.append((o.name, o.text))
        elif o.output_type in ("execute_result", "display_data"):
            out.append(("data", o.data.get("text/plain", "")))
        elif o.output_type == "error":
            out.append(("error", o.ename))
    return out
