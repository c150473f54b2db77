"""Judging: which cases a change can affect, measured round by round at two commits, and the verdicts."""
