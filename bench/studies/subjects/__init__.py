"""`python -m bench subjects`: what sealing a run's data costs W1 and W4, and erasing a subject."""
