"""Crash, restart and storage-fault scenarios against the real embedded stack (`make reliability`)."""
