"""What a resume event is: its kinds and parsing, the inbox that keeps events for a later wait, the
ids a run has seen.
"""
