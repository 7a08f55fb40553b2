"""`python -m bench migrate`: moving many waiting runs to a new version in one batch, beside bare Temporal."""
