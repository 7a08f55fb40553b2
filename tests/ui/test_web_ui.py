"""The Temporal Web UI as the run console: a waiting run is found by its search attributes.

Runs only where Chromium is installed (`make ui-check` installs Debian's package first).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest

from dsmo.workflows.common.status import RunStatus
from tests.conftest import Harness, definition_from
from tests.polling import until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make ui-check)"),
]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "candidate_screening.yaml"
FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=15000",
    "--window-size=1400,900",
]


async def chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return await asyncio.to_thread(
        subprocess.run,
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_waiting_run_is_listed_in_the_web_ui(harness: Harness, tmp_path: Path) -> None:
    run_id = await harness.start(definition_from(EXAMPLE), {"candidate": {"name": "UI", "phone": "1"}})
    await harness.dsmo.wait_for_status(run_id, {RunStatus.WAITING})
    query = f"WaitingFor='response' AND AgentName='candidate-screening' AND WorkflowId='{run_id}'"

    async def listed() -> bool:  # visibility first
        return bool([r async for r in harness.dsmo.temporal.list_workflows(query)])

    await until(listed, f"{run_id} listed by visibility")
    settings = harness.settings
    temporal = settings.temporal
    url = f"{temporal.ui_url}/namespaces/{temporal.namespace}/workflows?query={urllib.parse.quote(query)}"
    dom = await chromium(tmp_path / "profile", "--dump-dom", url)
    assert run_id in dom.stdout, dom.stderr[-2000:]
    screenshot = settings.state_dir / "ui-check.png"
    shot = await chromium(tmp_path / "profile", f"--screenshot={screenshot}", url)
    assert screenshot.exists() and screenshot.stat().st_size > 10_000, shot.stderr[-2000:]
