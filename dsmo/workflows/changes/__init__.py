"""Changes to a running run: a move to another version, a rewind, a fork's point, and their hand-over."""
