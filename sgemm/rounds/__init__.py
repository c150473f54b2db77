"""A case at two commits timed side by side, a process a round, and what the rounds show: under the gate and bisect."""
