"""The ground every other workflow module stands on: errors, the wire model, identifiers,
durations, templates, limits and the run status machine.
"""
