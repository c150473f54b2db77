"""The history's watch: change points in every series, and the notices they become."""
