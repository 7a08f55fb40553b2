"""`dsmo init`: a new user project — an agent, its unit test, a definition, and the entry point
that makes every worker installed beside it load the agent."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from importlib.resources import files
from pathlib import Path
from string import Template

from dsmo.workflows.common.errors import DsmoError
from dsmo.workflows.common.identifiers import AGENT_NAME_PATTERN

# Per template: template file -> where it goes in the project ({package} and {slug} filled in),
# from its own folder, else from the agent template's (what they share: pyproject, .gitignore).
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "gitignore.tmpl": ".gitignore",
    "agents.py.tmpl": "{package}/agents.py",
    "test_agents.py.tmpl": "tests/test_agents.py",
    "definition.yaml.tmpl": "definitions/{slug}.yaml",
}
TOOLS_FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "gitignore.tmpl": ".gitignore",
    "tools.py.tmpl": "{package}/tools.py",
    "test_tools.py.tmpl": "tests/test_tools.py",
    "definition.yaml.tmpl": "definitions/{slug}.yaml",
}
# Template -> (its folder, its files, the module the plugin entry point loads).
TEMPLATES = {
    "agent": ("project_template", FILES, "agents"),
    "tools": ("tools_template", TOOLS_FILES, "tools"),
}
# Leaves room for the agent's "-triage" suffix within the 63 characters a name may have.
_MAX_SLUG = 56


class ProjectExists(DsmoError):
    """The target folder already holds files: `dsmo init` never overwrites."""


class InvalidProjectName(DsmoError):
    """The project name cannot become a distribution, package and agent name."""


@dataclass(frozen=True)
class ProjectNames:
    """The names one project name yields.

    Attributes:
        slug: The distribution, definition and entry-point name (``ticket-desk``).
        package: The Python package (``ticket_desk``).
        agent: The agent the project registers (``ticket-desk-triage``).
    """

    slug: str
    package: str
    agent: str


def project_names(name: str) -> ProjectNames:
    """Derive the slug, package and agent names from a project (folder) name.

    Raises:
        InvalidProjectName: Nothing usable is left, or it does not start with a letter.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        raise InvalidProjectName(f"name: {name!r} must start with a letter (letters, digits and - or _ follow)")
    if len(slug) > _MAX_SLUG:
        raise InvalidProjectName(f"name: {name!r} is longer than {_MAX_SLUG} characters")
    agent = f"{slug}-triage"
    assert re.fullmatch(AGENT_NAME_PATTERN, agent), agent
    return ProjectNames(slug=slug, package=slug.replace("-", "_"), agent=agent)


def scaffold(directory: Path, name: str | None = None, template: str = "agent") -> list[Path]:
    """Write a new project into ``directory`` (created if missing, else it must be empty).

    Args:
        directory: Where the project goes.
        name: The project name (default: the folder's name).
        template: ``agent`` (a processor and a graph that routes on its summary) or ``tools``
            (a support agent whose model calls tools: plugin actions).

    Returns:
        The files written, relative to ``directory``.

    Raises:
        ProjectExists: ``directory`` exists and is not empty.
        InvalidProjectName: The name cannot become package and agent names.
    """
    names = project_names(name or directory.resolve().name)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ProjectExists(f"{directory}: already exists and is not empty; dsmo init writes only into a new folder")
    folder, layout, module = TEMPLATES[template]
    values = {**vars(names), "dsmo_version": _dsmo_version(), "plugin_module": module}
    own, shared = files("dsmo.scaffold") / folder, files("dsmo.scaffold") / "project_template"
    written = []
    for source, target in layout.items():
        path = Path(target.format(**vars(names)))
        found = own.joinpath(source) if own.joinpath(source).is_file() else shared.joinpath(source)
        text = Template(found.read_text()).substitute(values)
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text(text)
        written.append(path)
    (directory / names.package / "__init__.py").write_text(f'"""{names.slug}: agents run by DSMO."""\n')
    written.append(Path(names.package) / "__init__.py")
    return written


def _dsmo_version() -> str:
    try:
        return metadata.version("dsmo")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0.1"
