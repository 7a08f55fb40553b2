"""Data lifecycle's workflow: the retention sweep."""
