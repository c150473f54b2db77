"""`sgemm publish`, `sgemm merge` and `sgemm report`: the static site of many boxes, and the seed ladders' reports."""
