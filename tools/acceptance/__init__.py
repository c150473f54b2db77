"""Acceptance runs on a GPU box: the gate's self-test, the history and bisect demos, the independent CUDA-events timer
the self-test compares the gate with, and the one kernel-slowing edit they share (inject)."""
