"""W6: the same agent graph on DSMO, raw Temporal, LangGraph and DBOS, side by side.

Each contender runs its own runner process (`python -m bench.studies.peers.<name>_peer`), which the
driver (`bench.studies.peers.peer_bench`) starts, SIGKILLs and restarts; every agent writes the same
external ledger (`bench.studies.peers.peer_ledger`), which the crash counts are read from.
"""
