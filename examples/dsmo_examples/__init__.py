"""DSMO's examples, a plugin like any other: importing this package registers them all.

The example agents (`agents`: candidate-profile, the document pipeline, llm-summarize) and the
order saga's four actions on their database (`orders`). A production worker offers them only
when asked (``DSMO_LOAD=dsmo_examples``); the embedded stack's worker loads them through this
distribution's ``dsmo.dev_plugins`` entry point.
"""

from dsmo_examples import agents as agents
from dsmo_examples.orders import plugin as order_saga  # noqa: F401 - registers the order actions
