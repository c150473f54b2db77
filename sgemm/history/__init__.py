"""`sgemm history`: every commit of the branch measured on this box, one asv run, sharded over its GPUs."""
