"""The live-stream study: runs followed by SSE readers against the same runs with none (`make bench LIVE=1`)."""
