"""asv's side of the house: the suite's contract, the configuration, the results tree, confirmations, machines."""
