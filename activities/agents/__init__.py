"""Example agents (pure processors). Importing this package registers them in the default registry."""

from dsmo.activities.agents import documents as documents  # the import registers the processors
