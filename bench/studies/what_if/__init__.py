"""`python -m bench what-if`: replaying a corpus of ended runs against a candidate version."""
