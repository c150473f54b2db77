"""Simulations through the package's own decision code: the gate's false alarms and power (simulate_gates), the
watch's change-point detector on made-up series (simulate_watch)."""
