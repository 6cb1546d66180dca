"""The limits of every run and input, and the counting of lists given as text against them.

A value too large to finish or to fit in memory is refused before any work; each limit is given
beside the measurement it comes from.
"""

from __future__ import annotations

import itertools

#: The widest reward range a server accepts local means in, unless told a narrower one: far beyond any
#: real objective (objective values are limited to half of it, the rest is room for noise), far below
#: where a sum of pulls or an average of clients could overflow (a hostile 1e308 is refused, not averaged).
REWARD_LIMIT = 2e9
#: Pulls per client. Measured (`pfxab run --horizon T`, garland, M = 10, uniform noise): T = 1e8 takes
#: 3.7 s, 1e9 21 s, 1e10 85 s; the time grows with T, so a larger horizon is refused rather than left to
#: run for hours (1e30 never ended, 2**63 gave an int64 traceback).
MAX_HORIZON = 10**10
#: Clients. Measured (`pfxab run --num-clients M --horizon 1000`): M = 1000 takes 7.6 s and 316 MB, M = 10,000
#: did not end in 300 s and held 1.8 GB (the exact optimum evaluates every client on 2**16 grid points).
MAX_CLIENTS = 1000
#: Pulls of one run, clients x horizon: each limit alone allowed 1000 clients x 1e10 pulls, which did not end in
#: 400 s. Measured at this limit (`pfxab run`, garland, uniform noise, on the 2-core machine while shared, load 4-5):
#: M = 10 x T = 1e10 107 s, M = 100 x T = 1e9 468 s, M = 1000 x T = 1e8 269 s; with M = 1000 the time grows with T
#: (1e6: 45 s, 1e7: 66 s, 1e8: 167-269 s), so 1000 x 1e10 would take the better part of an hour.
MAX_PULLS = 10**11
#: Seeds of one `pfxab compare`: one default run per algorithm and seed takes seconds, so 10,000 seeds are
#: already hours of work; `--seeds 0-100000000000` is refused before the list is built.
MAX_SEEDS = 10_000
#: Points of a sweep's regret curve: 1e5 points take 27 ms to sample (1e6: 0.3 s) and about 2 MB of
#: curve.csv per run, which a sweep writes for every run.
MAX_CURVE_POINTS = 100_000
#: Dimensions of a search space. The exact-optimum grid stays at 2**16 points whatever the dimension
#: (it grew as 2**d: 24 dimensions wanted 3 GiB); node ids are int64, so at most 62 halvings, which
#: must split each of the d dimensions at least once; 32 leaves room for a second split of half of them.
MAX_DIMENSIONS = 32
#: Flower run-config integers are signed 64-bit.
MAX_INT64 = 2**63 - 1
#: Seeds are one 32-bit word: numpy's ``SeedSequence`` reads an integer as 32-bit words and pads the pool
#: with zeros, so a larger seed made two runs' streams coincide (``[2**32, 0]`` is the words ``0, 1, 0``, as
#: ``[0, 1]`` pads to): ``solo_seed(0, 1) == solo_seed(2**32, 0)``. Below it every seed gives the numbers it
#: always gave; above it, a one-line refusal instead of a second seeding scheme.
MAX_SEED = 2**32 - 1
#: Smoothness constants the phase schedule can compute with any other allowed value: ``f(p) = 2 log T /
#: (M nu1^2 rho^(2p))`` needs ``nu1^2`` finite and non-zero (``nu1 = 1e308`` overflowed, ``1e-300`` divided by
#: zero) and ``rho^(2p)`` non-zero at the first depth whose phase no longer fits the horizon (``rho = 1e-300``
#: divided by zero); ``tests/test_config.py`` runs every corner. An objective's values lie in ``[-1e9, 1e9]``,
#: so a larger ``nu1`` is never needed; a cell shrinking by less than 1e-12 per halving is no partition.
NU1_RANGE = (1e-12, 1e12)
RHO_LOW = 1e-12
#: Evaluations per site of one calibration (``pfxab calibrate --samples``). Measured (`calibrate`, 3 sites, 2-D, on
#: the 2-core machine): a 0/1 objective, whose best point is found among each point's sqrt(n) nearest neighbours,
#: took 2.3 s and 152 MB at 1e4, 18.6 s and 335 MB at 1e5, 129 s and 1.4 GB at 3e5 (an exact one 0.8, 1.2, 1.7 s);
#: 1e8 was still running at 90 s and 1e12 ran out of memory.
MAX_CALIBRATION_SAMPLES = 100_000
#: Runs of one sweep file: a run takes a second or more, so 10,000 runs are already hours (a 2000 x 2000 grid
#: took 120 s just to build its 4 million rows, 36 us each, and never started); counted before any row is built.
MAX_SWEEP_RUNS = 10_000
#: Bytes of a sweep's TOML file: the bundled ones are under 1 kB; a larger file is no experiment (``/dev/zero`` read
#: until memory ran out). Only a regular file is read, so a FIFO cannot hang the sweep.
MAX_CONFIG_BYTES = 1 << 20
#: Characters of a sweep's name and title (a figure's title, a progress bar's label): a 900 KB title made
#: ``pfxab plot`` take 172 s and 737 MB to lay out; the bundled titles are under 60 characters.
MAX_TITLE_CHARS = 200
#: Open files a command starts with (``ulimit -n``): a sweep with two workers needed 20, a Flower run of 3 clients
#: on Ray ran with 64; with 15 a sweep failed half-way through starting its workers and then hung.
MIN_OPEN_FILES = 64
#: Address space a command starts in (``ulimit -v``), in bytes: below about 150 MB numpy's OpenBLAS could not load
#: (its own message, exit 1), at 150 MB pandas could not (an ImportError traceback); a small run took 200 MB.
MIN_ADDRESS_SPACE = 512 << 20



def index_list(text: str, bound: int) -> tuple[int, ...] | None:
    """Distinct comma-separated integers in ``[0, bound)``, or ``None`` if ``text`` is not such a list."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdecimal() for part in parts):
        return None
    values = tuple(int(part) for part in parts)
    if len(set(values)) != len(values) or not all(v < bound for v in values):
        return None
    return values


def seed_ranges(text: str) -> list[tuple[int, int]] | None:
    """The inclusive ranges of a ``--seeds`` text, or ``None`` if it is invalid or over the limits.

    Counted, never expanded: ``0-100000000000`` is refused without building its list.
    """
    ranges: list[tuple[int, int]] = []
    for item in text.split(","):
        lo, sep, hi = item.strip().partition("-")
        if not (_is_uint(lo) and (_is_uint(hi) if sep else True)) or max(len(lo), len(hi)) > 10:
            return None
        first, last = int(lo), int(hi) if sep else int(lo)
        if not first <= last <= MAX_SEED:
            return None
        ranges.append((first, last))
    total = sum(last - first + 1 for first, last in ranges)
    ordered = sorted(ranges)
    overlap = any(a[1] >= b[0] for a, b in itertools.pairwise(ordered))
    return None if total > MAX_SEEDS or overlap else ranges


def _is_uint(text: str) -> bool:
    return text.isascii() and text.isdecimal()

