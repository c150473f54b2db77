"""Change points of one series: where its level stepped, by how much, and whether the step is real.

The test is the standardised CUSUM of a mean shift (Csörgő and Horváth, *Limit Theorems in Change-Point Analysis*,
1997, ch. 1; the statistic `ruptures` and asv's own fit both minimise for one boundary) run on the logarithms of a
trailing window of WINDOW figures: the boundary is where the difference between the two sides' means, weighted
by sqrt(k (n - k) / n), is largest; it is real where that difference lies beyond Z standard errors and is at least
MIN_STEP. The standard error is the **long-run** one: the residuals about the two fitted levels give the spread and
their lag-1 autocorrelation (bias-corrected, Kendall 1954, never below 0), and the variance of the difference of the
two means is the exact one of an AR(1) process with those parameters. Neighbouring commits that move together (a
box's day, a clock regime) therefore widen the threshold instead of hiding in it, as they hid in first differences.
A real step leads to the two sides being searched again the same way (binary segmentation), so that a step and its
undoing inside one window are both seen.

Calibration (lab/2026-11-28-watch-simulation, `python -m tools.simulate.simulate_watch`): growing histories published
after every commit, 275 series a machine sharing a common regime term, normal, t3 and AR(1) 0.5 noise at 0.1-0.5%;
Z and the persistence rule of sgemm.watch.notices hold false notices to at most 1 per 1,000 commits per machine. The
test is scale-free, so a cuBLAS round-median series moving 2-8% between processes is judged against its own spread.

Why a window: a regime that drifts slowly stays inside one window's level, refitting whole histories at every
publish would cost what the watch cannot spend, and a notice, once filed, is kept in the notices file (carried) after
its step has left the window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy import stats

WINDOW = 40  # the newest figures of a series the detector reads at a publish
MIN_POINTS = 4  # figures on each side of a boundary: the newest three commits cannot show a step yet
MIN_WINDOW = 2 * MIN_POINTS  # the fewest figures a boundary can be placed among
# A series shorter than this has no step to find: its spread and dependence cannot be read yet (the simulation's
# false notices came from the first commits of a history).
MIN_SERIES = 20
# A step must be beyond this many long-run standard errors of the difference between the two levels (calibrated).
Z = 5.5
# ...and at least this large: a step smaller than this is for the gate's rounds to see, not a commit-by-commit history.
MIN_STEP = 0.005
NOISE_FLOOR = 1e-4  # relative: a series of identical figures has no noise to scale from
NOISE_PUBLISHES = 40  # publishes whose windows' residuals give a series' spread (series_sd)
MAX_PHI = 0.95  # an autocorrelation above this is a trend, not noise: the standard error stops growing there
# How much worse (in long-run variances of the sum of squares) a split may fit and still be in the boundary's range.
RANGE_CHI2 = 6.0
CONFIDENCE = 0.95  # of a step's interval
# Two fitted levels pull residuals' lag-1 autocorrelation further down than Kendall's correction for one mean.
BIAS_EXTRA = 1.0


@dataclass(frozen=True)
class Scan:
    """The strongest boundary of each window (numpy arrays over the leading axes of the windows scanned)."""

    split: np.ndarray  # figures before the boundary
    earliest: np.ndarray  # the boundary's range: the fewest figures before it that fit nearly as well
    latest: np.ndarray  # ...and the most
    difference: np.ndarray  # mean log after minus mean log before
    se: np.ndarray  # its long-run standard error, as the test reads it
    interval_se: np.ndarray  # the same at the series' spread, for its interval
    phi: np.ndarray  # the residuals' lag-1 autocorrelation, as used
    own_sd: np.ndarray  # the sd of the window's residuals about its two levels (logarithms: relative)

    @property
    def z(self) -> np.ndarray:
        return np.abs(self.difference) / self.se

    @property
    def real(self) -> np.ndarray:
        return (self.z > Z) & (np.abs(self.difference) >= math.log1p(MIN_STEP))


def difference_variance(before, after, phi):
    """Var(mean of `after` figures - mean of the `before` figures just ahead of them) for an AR(1) series of unit
    variance and lag-1 correlation phi (elementwise; phi = 0 gives 1/before + 1/after)."""
    before, after, phi = (np.asarray(v, dtype=float) for v in (before, after, phi))
    q = np.clip(phi, 0.0, MAX_PHI)
    one = (1 - q) ** 2

    def mean_variance(n):
        return (n + 2 * (n * q * (1 - q) - q * (1 - q ** n)) / one) / n ** 2

    covariance = q * (1 - q ** before) * (1 - q ** after) / (one * before * after)
    return mean_variance(before) + mean_variance(after) - 2 * covariance


def scan(logs: np.ndarray, phi_floor=0.0, sd=None) -> Scan:
    """The strongest boundary of every window along the last axis (each at least MIN_WINDOW figures), vectorised
    over the leading axes: the watch scans one window, the simulation a machine's every series and publish.
    `phi_floor` (broadcast against the leading axes) is the box's own dependence (machine_phi): a window whose
    residuals read less is judged at that; `sd`, where given, the series' spread read over more figures than one
    window holds (series_sd), in place of the window's own."""
    logs = np.asarray(logs, dtype=float)
    n = logs.shape[-1]
    if n < MIN_WINDOW:
        raise ValueError(f"a window of {n} figures: at least {MIN_WINDOW} are needed")
    total = np.cumsum(logs, axis=-1)
    k = np.arange(MIN_POINTS, n - MIN_POINTS + 1)
    before_sum = total[..., k - 1]
    mean_before = before_sum / k
    mean_after = (total[..., -1:] - before_sum) / (n - k)
    cusum = np.abs(mean_after - mean_before) * np.sqrt(k * (n - k) / n)
    best = np.argmax(cusum, axis=-1)
    split = k[best]
    pick = best[..., None]
    level_before = np.take_along_axis(mean_before, pick, axis=-1)[..., 0]
    level_after = np.take_along_axis(mean_after, pick, axis=-1)[..., 0]
    index = np.arange(n)
    fitted = np.where(index < split[..., None], level_before[..., None], level_after[..., None])
    residuals = logs - fitted
    squares = np.sum(residuals ** 2, axis=-1)
    own_sd = np.sqrt(squares / (n - 2))
    read = np.maximum(own_sd if sd is None else np.asarray(sd, dtype=float), NOISE_FLOOR)
    # For the test, a window's own spread stands where it reads more: an outlier in it is not diluted by quieter
    # windows; the interval is the series' spread's.
    tested = np.maximum(read, own_sd)
    lagged = np.sum(residuals[..., 1:] * residuals[..., :-1], axis=-1)
    raw = np.divide(lagged, squares, out=np.zeros_like(lagged), where=squares > 0)
    phi = np.clip(np.maximum(raw + (1 + 3 * raw) / n + BIAS_EXTRA / n, phi_floor), 0.0, MAX_PHI)
    unit = np.sqrt(difference_variance(split, n - split, phi))
    # The boundary's range: every split whose fit is within RANGE_CHI2 long-run variances of the best one's (the
    # drop in the sum of squares a split buys is its cusum squared).
    slack = RANGE_CHI2 * tested ** 2 * (1 + phi) / (1 - phi)
    near = cusum ** 2 >= (np.max(cusum, axis=-1) ** 2 - slack)[..., None]
    earliest = k[np.argmax(near, axis=-1)]
    latest = k[len(k) - 1 - np.argmax(near[..., ::-1], axis=-1)]
    return Scan(split, earliest, latest, level_after - level_before, tested * unit, read * unit, phi, own_sd)


@dataclass(frozen=True)
class Segment:
    start: int  # index into the series' values, inclusive
    end: int  # exclusive
    level: float  # the geometric mean of its values

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Step:
    """A real step between two segments: the last point of `before` and the first of `after` are its sides."""

    before: Segment
    after: Segment
    noise: float  # the relative sd of one figure about its level
    se: float  # long-run standard error of the log ratio
    df: int  # degrees of freedom of the interval's t quantile
    first_bad_range: tuple[int, int]  # the earliest and latest index that may be the first slow figure

    @property
    def ratio(self) -> float:
        return self.after.level / self.before.level

    @property
    def interval(self) -> tuple[float, float]:
        """CONFIDENCE interval of the ratio: a t interval on the difference of the logs, at its long-run standard
        error (the correlation of neighbouring commits counted)."""
        half = float(interval_half(self.se, self.df))
        return self.ratio * math.exp(-half), self.ratio * math.exp(half)

    @property
    def slower(self) -> bool:
        return self.ratio > 1


def threshold(noise_sd: float, before: int, after: int, phi: float = 0.0) -> float:
    """The smallest relative step between segments of these sizes that counts as real."""
    return max(MIN_STEP, math.expm1(Z * noise_sd * math.sqrt(float(difference_variance(before, after, phi)))))


def machine_phi(series: list[list[float]]) -> float:
    """The dependence between neighbouring commits of a box (its days, its clock regimes), read as the median of
    its series' lag-1 autocorrelations over their newest WINDOW + NOISE_PUBLISHES - 1 figures: one series' window is
    too short to read it, a machine's few hundred series together are not."""
    windows = [np.log(np.asarray(values[-(WINDOW + NOISE_PUBLISHES - 1):], dtype=float)) for values in series
               if len(values) >= MIN_SERIES]
    if not windows:
        return 0.0
    return float(np.median([float(lag_one(window)) for window in windows]))


def lag_one(logs: np.ndarray) -> np.ndarray:
    """Each window's lag-1 autocorrelation about its mean, bias-corrected (Kendall 1954), along the last axis: the
    few windows that hold a step read high, which the median over a machine's series passes by."""
    logs = np.asarray(logs, dtype=float)
    n = logs.shape[-1]
    centred = logs - logs.mean(axis=-1, keepdims=True)
    squares = np.sum(centred ** 2, axis=-1)
    lagged = np.sum(centred[..., 1:] * centred[..., :-1], axis=-1)
    raw = np.divide(lagged, squares, out=np.zeros_like(lagged), where=squares > 0)
    return raw + (1 + 3 * raw) / n


def series_sd(values: list[float]) -> float:
    """A series' spread about its levels, read over the windows of its last NOISE_PUBLISHES publishes (the root
    mean of their residual variances): one window's 38 degrees of freedom would let a quiet stretch pass for a
    step."""
    logs = np.log(np.asarray(values[-(WINDOW + NOISE_PUBLISHES - 1):], dtype=float))
    if len(logs) < MIN_SERIES:
        return NOISE_FLOOR
    if len(logs) < WINDOW:
        return max(NOISE_FLOOR, float(scan(logs).own_sd))
    windows = sliding_window_view(logs, WINDOW)
    return max(NOISE_FLOOR, float(np.sqrt(np.mean(scan(windows).own_sd ** 2))))


def _steps(logs: np.ndarray, start: int, phi_floor: float, sd: float | None) -> list[tuple[int, int, int, Scan]]:
    """Binary segmentation of a window: (start, split, end, scan) of each real step, indices from `start`."""
    if len(logs) < MIN_WINDOW:
        return []
    found = scan(logs, phi_floor, sd)
    if not bool(found.real):
        return []
    split = int(found.split)
    return [*_steps(logs[:split], start, phi_floor, sd), (start, start + split, start + len(logs), found),
            *_steps(logs[split:], start + split, phi_floor, sd)]


def interval_half(se, df):
    """Half the width of a step's CONFIDENCE interval on the log scale (elementwise)."""
    return stats.t.ppf(0.5 + CONFIDENCE / 2, df) * se


def watch_series(values: list[float], phi_floor: float = 0.0) -> list[Step]:
    """The steps of a series as the watch reads it: its spread read over its last publishes' windows."""
    return find_steps(values, phi_floor, series_sd(values) if len(values) >= MIN_SERIES else None)


def find_steps(values: list[float], phi_floor: float = 0.0, sd: float | None = None) -> list[Step]:
    """The real steps in the trailing WINDOW figures of a series (positive figures, no gaps: the caller keeps the
    commits they belong to), oldest first; indices are into `values`. `phi_floor`: the box's machine_phi; `sd`: the
    series' spread (series_sd; default: read from the window alone)."""
    if len(values) < MIN_SERIES:
        return []
    offset = max(0, len(values) - WINDOW)
    logs = np.log(np.asarray(values[offset:], dtype=float))
    found = {split: (start, end, each) for start, split, end, each in _steps(logs, 0, phi_floor, sd)}
    bounds = sorted({0, len(logs), *found})
    parts = [Segment(offset + a, offset + b, float(np.exp(np.mean(logs[a:b])))) for a, b in zip(bounds, bounds[1:])]
    steps = []
    for before, after in zip(parts, parts[1:]):
        start, end, each = found[after.start - offset]
        first = offset + start
        steps.append(Step(before, after, float(each.own_sd if sd is None else sd), float(each.interval_se),
                          max(1, end - start - 2), (first + int(each.earliest), first + int(each.latest))))
    return steps
