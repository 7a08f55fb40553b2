"""Every side effect of DSMO: artifact storage, agent processors, messaging."""
