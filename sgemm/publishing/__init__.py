"""Publishing: results of many GPU boxes merged, the seed ladder and cross-GPU reports, and the static site."""
