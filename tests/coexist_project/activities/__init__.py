"""The team's own activities and agents."""
