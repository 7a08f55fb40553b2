"""`python -m bench flow`: per-key concurrency, what the locks cost a workload and what one lock can take."""
