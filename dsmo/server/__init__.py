"""The HTTP servers: the ingress (events and runs for outside systems), the console, the codec server."""
