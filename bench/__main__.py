"""`make bench`: `python -m bench [--quick] [--update] [--scale-only] [--floor-only N]`."""

from bench.cli import command

command()
