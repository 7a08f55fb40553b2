"""The evaluation harness: the DSMO paper's Table 1 on the real stack, and the raw-Temporal floor."""
