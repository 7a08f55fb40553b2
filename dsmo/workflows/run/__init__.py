"""One run's state and the moves every node handler shares: state, audit trail, routing, activity
calls, events in, continue-as-new.
"""
