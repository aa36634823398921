"""The words chapter 5's sentences choose from what a run measured.

Each function picks the clause a sentence of a chapter-5 section pastes
(through ``glue``) for the numbers of this run, on whichever backend ran
it; the cells that call them are hidden from the page, so the choice is
kept, and tested, here (``tests/test_streamwords.py``).

Section 5.3 explains the host's pace once, where it measures it (after
`energy_pace_words`): why the host can fall behind on the CPU device
model, and how a span whose start is inferred counts the host's
lateness. The other words of that page point to it ("above", "below")
rather than explain it again.
"""


def compared(first, later, factor=1.5):
    """How ``first`` compares with ``later``: ``"longer than"``,
    ``"shorter than"`` or ``"about as long as"`` (within ``factor``)."""
    if first > factor * later:
        return "longer than"
    if later > factor * first:
        return "shorter than"
    return "about as long as"


def kernels_words(together, first, later):
    """What two kernels on two streams did, given how long they ran
    together (ms) and the two ops (``.start``, ``.ready``, ``.end``)."""
    if together > 0.05 * (later.end - later.start):
        return ("the two kernels ran side by side for part of the time, on "
                "the multiprocessors that the other left free, as a GPU "
                "with concurrent kernels (concurrentKernels) can")
    if later.ready < first.end:
        return ("the two kernels took turns: the later one waited, although "
                "its stream had reached it, until the first was done or "
                "nearly done, as kernels do on a device that runs one "
                "kernel at a time, or when each fills the device")
    return ("the host issued the later kernel only once the first had "
            "ended, so this run cannot show whether the two would have "
            "overlapped")


def copy_words(beside):
    """Why a copy ran beside a kernel for ``beside`` ms (or did not)."""
    if beside > 0:
        return ("a copy and a kernel use different engines, and nothing "
                "orders two streams")
    return ("none here: the kernels were done before the copy started, "
            "although a copy and a kernel use different engines and "
            "nothing orders two streams")


def waited_for(waited_ms, blocking_ms):
    """Whether a host that waited ``waited_ms`` waited for a blocking
    stream's kernel, which made it wait ``blocking_ms``, and what CUDA
    says of it."""
    if waited_ms < blocking_ms / 2:
        return ("did not wait for the blocking stream's kernel, as CUDA "
                "promises: the barrier is the legacy stream's alone")
    return ("waited for the blocking stream's kernel, which CUDA does not "
            "ask of it (the barrier is the legacy stream's alone): the "
            "wait came from something else on the device")


def racy_first(total, right):
    """What the first run without the wait gave."""
    if total != right:
        return f"the first gave {total:.0f}, where the right sum is {right}"
    return f"the first gave the right sum, {right}"


def race_words(raced, runs):
    """What ``raced`` wrong sums out of ``runs`` runs say about the race."""
    if raced == runs:
        return ("Every time, B summed x before A had copied it in, and read "
                "its stale contents")
    if raced:
        return ("In those, B summed x before A had copied it in, and read "
                "its stale contents; in the others A's copy happened to "
                "finish first")
    return ("Here A's copy happened to finish before B read x, every time; "
            "nothing made it so, and on another machine, or under another "
            "load, B can read first")


def proportion_words(copies_ms, kernel_ms):
    """Which part of the sequential demo was the long one."""
    if copies_ms > kernel_ms:
        return ("the copies were the long part, as on a GPU, where they "
                "cross the PCIe link and this small kernel is soon done")
    return ("the kernel was the long part, unlike on the GPUs of the "
            "published figures, where the copies cross the PCIe link")


def _pace_case(share, gap_ms):
    """Which of V2's three cases a run is: ``"device"`` (issuing took a
    small part of V2's time), ``"waited"`` (the device waited for the
    host) or ``"head start"`` (it did not, thanks to the timeline's)."""
    if share <= 0.3:
        return "device"
    return "waited" if gap_ms > 0.01 else "head start"


def pace_words(share, gap_ms):
    """Who set the pace of V2: ``share`` is the host's time to issue V2's
    work over V2's time, ``gap_ms`` how long stream 0's kernel waited for
    the host after its copy in. The same on either backend: on the model
    the host's clock reads the modelled timeline, as a GPU's does."""
    most = ("about as long as V2's whole run, or longer" if share > 0.9
            else "a large part of V2's time")
    case = _pace_case(share, gap_ms)
    if case == "device":
        return ("issuing the work took the host a small part of V2's time: "
                "at this size the device's work sets the pace")
    if case == "waited":
        return ("the host spent " + most + ("," if share > 0.9 else "")
                + " just issuing the work, and the "
                "device waited for it: at this size the host, not the "
                "device, sets the pace")
    return ("the device did not wait for the host here, but the host "
            "had a head start: Timeline's first kernel holds the "
            "streams for half a millisecond, and the host issued ahead "
            "meanwhile. Issuing took " + most + ", so without that start "
            + ("the host, not the device, would set the pace at this size"
               if share > 0.9 else "the device would have waited for the "
               "host at first"))


def pace_summary_words(share, gap_ms):
    """`pace_words` in a clause for the summary: what the host's issue
    time, ``share`` of V2's, did to the device (the same case)."""
    return {"device": "and the device's work set the pace",
            "waited": "and the device waited for it",
            "head start": "and only the timeline's half-millisecond head "
                          "start kept the device from waiting for it",
            }[_pace_case(share, gap_ms)]


#: The host's issue time over the link's copy time past which the host,
#: not the link, sets the chunked energy's pace (a tenth past even).
HOST_SLOWER = 1.1


def energy_pace_words(ratio):
    """Who sets the pace of the chunked energy: ``ratio`` is the host's
    time to issue one chunk's work over the time its copy takes the link
    (the longer of the chunk's two operations, as MindSpore's sizes
    make it)."""
    if ratio > HOST_SLOWER:
        return ("the host issues more slowly than the link copies, so over "
                "many chunks the host, not the device, sets the pace, and "
                "a second stream can only overlap work that the host has "
                "already queued (section 5.2 asks the same of NVIDIA's "
                "demo). Over a few chunks, the half millisecond for which "
                "the timeline's first kernel holds the streams (section "
                "5.1) lets the host get ahead, so a short run can still "
                "overlap")
    if ratio > 0.7:
        return ("the host issues about as fast as the link copies, so the "
                "host's pace matters as much as the device's")
    return ("the host keeps ahead of the link, so the device sets the pace")


def streams_words(best_streams, beyond, beyond_bound, speedup_2, bound,
                  worst=None):
    """What more streams than two did for the chunked energy: the best
    count, the best speedup past two (and its bound), two streams'
    speedup and its bound for one reduction at a time; ``worst``, the
    ``(count, speedup)`` pairs of the counts past two, adds which of them
    were slower than one stream, at the digits the page shows."""
    words = _streams_words(best_streams, beyond, beyond_bound, speedup_2,
                           bound)
    slower = [(n, s) for n, s in sorted(worst or []) if round(s, 2) < 1]
    if slower and best_streams != 1:
        counts = _listed([f"{n}" for n, _ in slower])
        values = _listed([f"{s:.2f}" for _, s in slower])
        words += (f"; {counts} streams were even slower than one "
                  f"({values})")
    return words


def _listed(items):
    """``["a", "b", "c"]`` as "a, b and c"."""
    return items[0] if len(items) == 1 else (
        ", ".join(items[:-1]) + " and " + items[-1])


def _streams_words(best_streams, beyond, beyond_bound, speedup_2, bound):
    more = beyond / speedup_2
    if best_streams == 1:
        return ("overlap did not pay on this run: every count of streams "
                "was slower than one stream")
    if speedup_2 < 1:
        return ("two streams were slower than one here, and no count of "
                f"streams did better than {beyond:.2f}: overlap barely "
                "paid on this run")
    if beyond > 1.05 * beyond_bound:
        if more >= 1.05:
            lead = f"{best_streams} streams did best, past their bound"
        else:
            lead = ("more streams than two added "
                    + ("little" if best_streams > 2 else "nothing")
                    + ", yet ran past their bound")
        return (lead + ": the run did not go as the bound assumes, with "
                "copies in one direction that share one link, reductions "
                "that fit side by side no more often than "
                "pipeline.kernels_at_once says, and a one-stream run with "
                "no idle time between its operations")
    if more < 1.1 and speedup_2 < 0.8 * bound:
        return ("more streams than two added little, and two streams "
                "stayed well below the bound: what held them back is "
                "something the bound leaves out, such as the host's time "
                "to issue each chunk's copy, reduction and events, which "
                "Python pays whatever the streams")
    if more < 1.1:
        return ("more streams than two added little: two streams already "
                "give the copies and the reductions work while the other "
                "is busy")
    within = ("within the bound" if beyond <= beyond_bound
              else "up to about its bound")
    return (f"more streams than two added more ({more:.2f} times two "
            f"streams' speedup), {within}: two streams had not yet kept "
            "both engines busy")


def engines_words(r_copy, r_compute, inferred=False):
    """The engines' busy times on two streams, ``r_copy`` and
    ``r_compute`` times their one-stream times, in words. ``inferred``:
    every start was inferred (`timeline.on_engines`), so no two
    operations of one engine overlap on the timeline. Pasted below the
    page's explanation of the host's lateness, which it points to."""
    ratios = f"{r_copy:.2f} and {r_compute:.2f} times their one-stream times"
    if min(r_copy, r_compute) < 0.85 and inferred:
        return (ratios + ": less busy time for the same work. That is not "
                "overlap, since the timeline places operations whose start "
                "it infers one at a time on each engine. The one-stream "
                "spans were longer, counting more of the host's lateness "
                "(above)")
    if min(r_copy, r_compute) < 0.85:
        return (ratios + ". An engine that runs one operation at a time "
                "cannot do the same work in less time, so here operations "
                "on the same engine overlapped, such as kernels running "
                "side by side, and the timeline, which starts each one when "
                "the one before it on its engine ended, counted only part "
                "of their time")
    if max(r_copy, r_compute) > 1.15 and inferred:
        return (ratios + ": more busy time for the same work. Operations "
                "that overlapped may have slowed each other down, or the "
                "host fell behind more often: the spans count its "
                "lateness (above)")
    if max(r_copy, r_compute) > 1.15:
        return (ratios + ": operations that overlapped also slowed each "
                "other down")
    return "about what they were on one stream"


def past_bound_words(speedup_2, bound):
    """A sentence for two streams' speedup past its bound for one
    reduction at a time, at the digits the page shows; the empty string
    when the speedup is not past it."""
    if not _past(speedup_2, bound):
        return ""
    return (" Two streams ran past the bound for one reduction at a time "
            "here: either reductions ran side by side, which that bound "
            "excludes, or the one-stream busy times it comes from were "
            "longer than the device's work, by the host's lateness.")


def _past(speedup_2, bound):
    """Whether two streams' speedup is past its bound at the two decimals
    the page shows."""
    return round(speedup_2, 2) > round(bound, 2)


def above_bound(speedup_2, bound):
    """How two streams' speedup reads beside its bound."""
    if _past(speedup_2, bound):
        return "above its bound for one reduction at a time,"
    return "against a bound of"


def timeline_words(one_ms, two_ms, pace_ratio):
    """What the timelines of the chunked energy show: two streams' total
    time against one stream's (at the two decimals the sentence shows),
    and where two gained nothing, why: the host's pace when it issued
    more slowly than the link copied (``pace_ratio``, as
    `energy_pace_words` reads it), else the copies' share of the work."""
    head = (f"In these runs one stream took {one_ms:.2f} ms and two streams "
            f"{two_ms:.2f} ms")
    if round(two_ms, 2) < round(one_ms, 2):
        return (head + ": on two streams the copy of the next chunk ran "
                "while the last one was reduced.")
    if pace_ratio > HOST_SLOWER:
        return (head + ": here the second stream gained nothing. Where both "
                "lanes sit idle, the host had not yet queued the next "
                "chunk (the host's pace, below).")
    return (head + ": here the second stream gained nothing, though the "
            "host kept up with the link (below): each chunk's copy, which "
            "a second stream cannot shorten, is most of its work.")
