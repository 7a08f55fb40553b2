"""The HTTP ingress (`dsmo serve`): outside systems start runs, send events, read status."""
