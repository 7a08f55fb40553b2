"""Importing a worker's plugins: named modules, and the `dsmo.plugins` entry points of installed distributions.

Importing a plugin module runs its decorators (`dsmo.agent`, `dsmo.action`, `dsmo.channel`),
which register what it offers. Anything wrong stops the worker at start with one line naming
the plugin and the reason.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from dsmo.activities.plugin_errors import PluginError

ENTRY_POINT_GROUP = "dsmo.plugins"
# Plugins only the embedded stack's worker loads besides those (`dsmo dev up --worker`): DSMO's
# examples declare theirs here, so a production worker offers them only when asked (DSMO_LOAD).
DEV_ENTRY_POINT_GROUP = "dsmo.dev_plugins"
# A plugin whose import takes longer than this is named in a log line, and again each time as
# long again has passed: a worker that seems to hang at start says which import it waits for.
PROGRESS_EVERY = 10.0

log = logging.getLogger("dsmo.plugins")


def load_plugins(modules: Iterable[str] = (), *, entry_points: bool = True) -> list[str]:
    """Import every plugin; importing one twice is harmless (Python keeps modules once).

    Args:
        modules: Module names to import (from `--load` and `DSMO_LOAD`).
        entry_points: Also import the modules that installed distributions declare in the
            ``dsmo.plugins`` entry-point group (DSMO's own channels are declared there).

    Returns:
        The loaded module names, in load order.

    Raises:
        PluginError: A module is not found, fails to import, or registers something invalid.
    """
    loaded: list[str] = []
    if entry_points:
        for point in _entry_points(ENTRY_POINT_GROUP):
            where = f"entry point {point.name!r}" + (f" of {point.dist.name}" if point.dist else "")
            _import(point.module, where)
            loaded.append(point.module)
    for module in modules:
        name = module.strip()
        if name:
            _import(name, "plugin")
            loaded.append(name)
    return loaded


def entry_point_modules(group: str) -> list[str]:
    """The modules installed distributions declare in an entry-point ``group``, by entry-point name.

    Args:
        group: The entry-point group, e.g. `DEV_ENTRY_POINT_GROUP`.

    Returns:
        Module names, each once.
    """
    return list(dict.fromkeys(point.module for point in _entry_points(group)))


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=group), key=lambda point: point.name)


def _import(module: str, where: str) -> None:
    try:
        with _progress(module, where):
            importlib.import_module(module)
    except PluginError as err:
        raise PluginError(f"{where} {module}: {err}") from None
    except ModuleNotFoundError as err:
        if err.name and (module == err.name or module.startswith(f"{err.name}.")):
            raise PluginError(f"{where} {module}: module not found (is it installed, or on PYTHONPATH?)") from None
        raise PluginError(f"{where} {module}: it imports {err.name!r}, which is not installed") from None
    except SystemExit as err:
        # sys.exit() in a plugin would end the worker with the plugin's code and no word of why.
        raise PluginError(
            f"{where} {module}: import failed: the module exits at import (SystemExit: {err.code})"
        ) from None
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - any failure while importing user code is reported in one line
        first = str(err).splitlines()[0] if str(err) else ""
        raise PluginError(f"{where} {module}: import failed: {type(err).__name__}: {first}") from None


@contextmanager
def _progress(module: str, where: str) -> Iterator[None]:
    """Log "still importing" every `PROGRESS_EVERY` seconds while the block runs."""
    done = threading.Event()
    started = time.monotonic()

    def report() -> None:
        while not done.wait(PROGRESS_EVERY):
            log.warning("still importing %s %s (%.0f s)", where, module, time.monotonic() - started)

    watcher = threading.Thread(target=report, name=f"dsmo-import-{module}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


def split_modules(value: str) -> list[str]:
    """``DSMO_LOAD``'s comma-separated module names."""
    return [name.strip() for name in value.split(",") if name.strip()]
