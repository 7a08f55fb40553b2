"""`python -m bench scale`: many runs waiting on one worker, beside as many bare workflows, and the console."""
