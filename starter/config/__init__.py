"""The configuration every DSMO process reads, typed and checked once."""
