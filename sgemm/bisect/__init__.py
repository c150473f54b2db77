"""`sgemm bisect` and `sgemm confirm`: the commit a step came in with, and whether a notice holds, measured paired."""
