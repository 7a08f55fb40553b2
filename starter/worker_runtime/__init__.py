"""What only a worker process needs around its activities: logging that cannot wedge it, its heap."""
