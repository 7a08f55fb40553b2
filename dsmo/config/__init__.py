"""The configuration every DSMO process reads, typed and checked once.

`settings.Settings` composes one frozen group per concern, each in its own module:
`temporal_settings` (address, namespace, TLS, task queue, Web UI), `store_settings` (the S3
store), `worker_settings` (plugins, concurrency, sandbox, metrics), `ingress_settings` (`dsmo
serve`), `messaging_settings` (channels), `llm_settings` (the model endpoint) and
`codec_settings` (payload keys); `env_values` reads and checks one variable for all of them.
"""
