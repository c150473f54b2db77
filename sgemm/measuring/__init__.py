"""Measuring: a case built, checked against FP64, timed with NVBench and recorded with its GPU telemetry, for asv."""
