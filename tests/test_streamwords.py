"""The words chapter 5's sections choose (src.streamwords): each choice
for each case it tells apart, on either backend."""
from types import SimpleNamespace as Op

from src import streamwords as w


def test_compared_within_a_factor_is_about_as_long():
    assert w.compared(3.0, 1.0) == "longer than"
    assert w.compared(1.0, 3.0) == "shorter than"
    assert w.compared(1.2, 1.0) == "about as long as"


def test_two_kernels_side_by_side_took_turns_or_never_met():
    first = Op(start=0.0, ready=0.0, end=2.0)
    later = Op(start=1.0, ready=0.5, end=3.0)
    assert "side by side" in w.kernels_words(1.0, first, later)
    later = Op(start=2.0, ready=0.5, end=4.0)
    assert "took turns" in w.kernels_words(0.0, first, later)
    later = Op(start=2.5, ready=2.5, end=4.0)
    assert "only once the first had" in w.kernels_words(0.0, first, later)


def test_a_copy_beside_a_kernel_or_none():
    assert w.copy_words(0.5).startswith("a copy and a kernel")
    assert w.copy_words(0.0).startswith("none here")


def test_waited_for_a_blocking_stream_or_not():
    assert w.waited_for(0.1, 5.0).startswith("did not wait for")
    assert "as CUDA promises" in w.waited_for(0.1, 5.0)
    # A wait CUDA does not ask for is not followed by "CUDA promises it
    # does not" (the page's sentence once read so).
    waited = w.waited_for(4.0, 5.0)
    assert waited.startswith("waited for") and "promises" not in waited


def test_the_race_in_words():
    assert w.racy_first(0.0, 1024) == ("the first gave 0, where the right "
                                       "sum is 1024")
    assert w.racy_first(1024.0, 1024) == "the first gave the right sum, 1024"
    assert w.race_words(5, 5).startswith("Every time")
    assert w.race_words(2, 5).startswith("In those")
    assert w.race_words(0, 5).startswith("Here A's copy happened")


def test_the_long_part_of_the_sequential_demo():
    assert "copies were the long part" in w.proportion_words(3.0, 1.0)
    assert "kernel was the long part" in w.proportion_words(1.0, 3.0)


def test_who_sets_the_pace_on_either_backend():
    assert "device's work sets the pace" in w.pace_words(0.2, 0.0)
    waited = w.pace_words(0.5, 0.1)
    assert "device waited for it" in waited
    assert "a large part of V2's time just issuing" in waited
    assert "about as long as V2's whole run, or longer, just" in (
        w.pace_words(1.0, 0.1))
    ahead = w.pace_words(0.95, 0.0)
    assert "head start" in ahead and "whole run, or longer" in ahead
    assert "the host, not the device, would set the pace" in ahead
    # Issuing took less than V2's run: the device sets the pace there.
    part = w.pace_words(0.4, 0.0)
    assert "device would have waited for the host at first" in part
    assert "the host, not the device" not in part
    assert "a large part of V2's time" in w.pace_words(0.5, 0.0)



def test_the_summary_says_what_the_issue_time_did_as_the_body_does():
    """The summary's clause takes the same branch as `pace_words`."""
    for share, gap in [(0.2, 0.0), (0.5, 0.1), (1.2, 0.0), (0.4, 0.0)]:
        body, summary = w.pace_words(share, gap), w.pace_summary_words(
            share, gap)
        assert ("device's work set" in summary) == (
            "device's work sets" in body)
        assert ("waited for it" in summary) == ("device waited" in body)
        assert ("head start" in summary) == ("head start" in body)

def test_who_sets_the_energy_pace_in_words():
    assert "the device sets the pace" in w.energy_pace_words(0.5)
    assert "as much as the device's" in w.energy_pace_words(0.9)
    # A model run of 05.3: a chunk took the host 1.9 times its copy.
    host = w.energy_pace_words(1.9)
    assert "the host, not the device, sets the pace" in host
    assert "the device sets" not in host


def test_more_streams_in_words():
    assert "did not pay" in w.streams_words(1, 0.9, 1.5, 0.9, 1.5)
    # Two streams slower than one: no "two streams already give" claim.
    slower = w.streams_words(3, 1.02, 1.13, 0.96, 1.13)
    assert "two streams were slower than one" in slower
    assert "8 streams did best, past their bound" in w.streams_words(
        8, 2.0, 1.5, 1.4, 1.5)
    # The best count is 3, not the most: no "kept adding".
    assert "3 streams did best" in w.streams_words(3, 1.5, 1.3, 1.4, 1.3)
    # The best count is two: more streams did not keep adding (a model run
    # of 05: 1.44 on two streams, bound 1.28 on every count).
    assert "added nothing, yet ran past their bound" in w.streams_words(
        2, 1.40, 1.28, 1.44, 1.28)
    assert "added little, yet ran past" in w.streams_words(
        3, 1.24, 1.10, 1.20, 1.10)
    assert "well below the bound" in w.streams_words(2, 1.1, 1.9, 1.05, 1.9)
    assert "added little:" in w.streams_words(2, 1.5, 1.9, 1.45, 1.5)
    assert "added more (1.20 times" in w.streams_words(8, 1.8, 1.9, 1.5, 1.9)
    # Just past the bound, inside the 5% it allows: not "within" it.
    assert "up to about its bound" in w.streams_words(
        8, 1.17, 1.13, 1.05, 1.13)
    # A count past two slower than one stream says so (a model run of 05.3:
    # 3 streams at 0.95 beside "added little").
    worse = w.streams_words(2, 1.05, 1.13, 1.11, 1.13, worst=[(3, 0.95)])
    assert worse.startswith("more streams than two added little")
    assert worse.endswith("3 streams were even slower than one (0.95)")
    # 0.996 shows as 1.00: not "slower" at the page's digits.
    assert "slower than one" not in w.streams_words(
        2, 1.05, 1.13, 1.11, 1.13, worst=[(3, 0.996)])
    # Every count past two that was slower is named (a model run: 4 and 8
    # streams below one, 3 streams not).
    many = w.streams_words(2, 1.11, 1.13, 1.11, 1.13,
                           worst=[(3, 1.11), (4, 0.89), (8, 0.73)])
    assert many.endswith("4 and 8 streams were even slower than one "
                         "(0.89 and 0.73)")
    # Every count slower: the first sentence says it, no second clause.
    assert "even slower" not in w.streams_words(
        1, 0.9, 1.5, 0.9, 1.5, worst=[(3, 0.8)])


def test_the_engines_busy_times_in_words():
    assert "overlapped, such as kernels" in w.engines_words(0.5, 1.0)
    assert "slowed each other" in w.engines_words(1.0, 1.3)
    assert w.engines_words(1.0, 1.05) == "about what they were on one stream"
    # Inferred starts never overlap on one engine: less busy time on two
    # streams is the one-stream spans' lateness (a model run of 05.3).
    late = w.engines_words(0.97, 0.85 - 0.01, inferred=True)
    assert "That is not overlap" in late and "lateness (above)" in late
    assert "side by side" not in late
    longer = w.engines_words(1.03, 1.17, inferred=True)
    assert "or the host fell behind" in longer
    assert longer.endswith("lateness (above)")


def test_past_the_bound_in_words():
    assert w.past_bound_words(1.13, 1.13) == ""
    assert w.past_bound_words(1.10, 1.15) == ""
    past = w.past_bound_words(1.20, 1.15)
    assert past.startswith(" Two streams ran past the bound")
    # The host's lateness is explained just before it on the page.
    assert past.endswith("by the host's lateness.")


def test_two_streams_beside_their_bound():
    assert w.above_bound(1.6, 1.5).startswith("above its bound")
    assert w.above_bound(1.5, 1.501) == "against a bound of"


def test_the_timelines_in_words():
    faster = w.timeline_words(0.71, 0.52, 2.0)
    assert "one stream took 0.71 ms and two streams 0.52 ms" in faster
    assert "ran while" in faster
    # A model run of 05.3: two streams 0.83 ms, one 0.71 ms, the host's
    # issue 2.2 times the link's copy.
    slower = w.timeline_words(0.71, 0.83, 2.2)
    assert "gained nothing" in slower and "host's pace, below" in slower
    # Equal at the two decimals shown: no gain claimed.
    assert "gained nothing" in w.timeline_words(0.712, 0.714, 2.0)
    # Nothing gained with the host ahead: no blame on the host's pace.
    ahead = w.timeline_words(0.71, 0.72, 0.5)
    assert "kept up with the link" in ahead
    assert "host's pace, below" not in ahead
