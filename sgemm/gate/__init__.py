"""`sgemm gate` and `sgemm noise`: what a pull request can have made slower, measured round by round and judged."""
