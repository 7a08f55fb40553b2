"""`python -m bench w5`: W5, LLM-bound stages, against raw Temporal with and without the same store writes."""
