"""The points a `ktune sweep --params` run timed, as it re-timed them interleaved at the end of
its run ("given: PARAMS" then "US us; ..."), not the trial rows' first timings."""
import re


def given_times(log_path):
    """[(params, median_us)] in the log's order."""
    given, last = [], None
    for line in open(log_path):
        m = re.match(r"\s+given:\s+(\S+)", line)
        if m:
            last = m.group(1)
            continue
        m = re.match(r"\s+([\d.]+) us;", line)
        if m and last:
            given.append((last, float(m.group(1))))
            last = None
    return given
