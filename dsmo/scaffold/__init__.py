"""`dsmo init`: a new user project from templates."""
