"""Flow control's own workflows: key locks, throttle buckets, the rate limiter, the start debouncer."""
