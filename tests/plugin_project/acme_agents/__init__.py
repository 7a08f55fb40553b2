"""A user project's plugins, outside DSMO's source: loaded by `dsmo worker --load acme_agents.plugin`."""
