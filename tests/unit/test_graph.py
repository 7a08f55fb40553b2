"""Drawing a definition's graph: layered layout, SVG with a run's path, Mermaid, and the CLI command."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from dsmo.cli.main import cli
from dsmo.server.console.graph import layout, mermaid, svg
from dsmo.workflows.definition.model import AgentDefinition, parse_definition

REPO = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
BRANCHES: dict[str, Any] = {
    "agent": "branchy",
    "start": "ask",
    "failSafe": "oops",
    "nodes": {
        "ask": {
            "actionType": "wait_for_response",
            "transitions": [{"when": "lastResponse == 'docs'", "to": "docs"}, {"to": "sign"}],
        },
        "docs": {"actionType": "request_document", "parameters": {"documents": ["id_card"]}, "next": "again"},
        "again": {"actionType": "delay", "parameters": {"duration": "1h"}, "next": "ask_more"},
        "ask_more": {
            "actionType": "wait_for_response",
            # free text in a condition: drawn escaped
            "transitions": [{"when": "lastResponse == '<script>alert(1)</script>'", "to": "docs"}, {"to": "end"}],
        },
        "sign": {"actionType": "request_signature", "parameters": {"document": "s3://c"}, "next": "end"},
        "end": {"actionType": "send_message", "parameters": {"message": "bye"}},
        "oops": {"actionType": "send_message", "parameters": {"message": "sorry"}},
    },
}


def definition() -> AgentDefinition:
    return parse_definition(BRANCHES)


def test_layers_follow_the_graph_from_the_start() -> None:
    drawing = layout(definition())
    y = {node: box.y for node, box in drawing.boxes.items()}
    assert y["ask"] < y["docs"] < y["again"] < y["ask_more"] < y["end"]  # the back edge does not lift docs
    assert y["ask"] < y["sign"] < y["end"]
    boxes = list(drawing.boxes.values())
    for index, one in enumerate(boxes):  # no two boxes overlap
        for other in boxes[index + 1 :]:
            assert abs(one.x - other.x) >= one.w or abs(one.y - other.y) >= one.h, (one.node, other.node)
    for box in boxes:
        assert box.x - box.w / 2 >= 0 and box.x + box.w / 2 <= drawing.width
        assert box.y - box.h / 2 >= 0 and box.y + box.h / 2 <= drawing.height


def test_svg_marks_the_path_taken_and_the_current_node_and_escapes_labels() -> None:
    drawn = svg(definition(), path=["ask", "docs", "again", "ask_more"], current="ask_more")
    root = ET.fromstring(drawn)  # well-formed XML
    nodes = {g.get("data-node"): (g.get("class") or "").split() for g in root.iter(f"{SVG}g")}
    assert set(nodes) == set(BRANCHES["nodes"])
    assert "start" in nodes["ask"] and "visited" in nodes["ask"]
    assert "current" in nodes["ask_more"] and "visited" not in nodes["sign"]
    taken = {
        (line.get("data-source"), line.get("data-target"))
        for line in root.iter(f"{SVG}polyline")
        if "taken" in (line.get("class") or "")
    }
    assert taken == {("ask", "docs"), ("docs", "again"), ("again", "ask_more")}
    assert len(list(root.iter(f"{SVG}polyline"))) == 7  # every next and transition
    assert "<script>" not in drawn and "&lt;script&gt;" in drawn


def test_mermaid_lists_every_node_and_edge_with_escaped_labels() -> None:
    text = mermaid(definition(), path=["ask", "docs"])
    assert text.startswith("flowchart TD\n")
    assert "    ask -- \"lastResponse == 'docs'\" --> docs" in text
    assert '    ask -- "default" --> sign' in text and "    docs --> again" in text
    assert "#lt;script#gt;" in text and "<script>" not in text
    assert "    class ask,docs visited" in text
    assert len(re.findall(r"^    \w+\[", text, flags=re.M)) == len(BRANCHES["nodes"])


def test_the_cli_draws_a_definition_file(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "onboarding.svg"
    drawn = runner.invoke(cli, ["definitions", "graph", str(REPO / "examples" / "onboarding.yaml"), "-o", str(out)])
    assert drawn.exit_code == 0, drawn.output
    assert drawn.output.startswith(f"wrote {out} (svg, ")
    assert ET.fromstring(out.read_text()).tag == f"{SVG}svg"
    as_text = runner.invoke(
        cli, ["definitions", "graph", str(REPO / "examples" / "triage.yaml"), "--format", "mermaid"]
    )
    assert as_text.exit_code == 0 and as_text.output.startswith("flowchart TD")


def test_a_diff_marks_nodes_and_edges_added_removed_and_changed(tmp_path: Path) -> None:
    from dsmo.server.console.graph_diff import diff, diff_svg

    old = definition()
    data = {**BRANCHES, "nodes": dict(BRANCHES["nodes"])}
    del data["nodes"]["sign"]  # removed, with its edges
    data["nodes"]["ask"] = {
        **data["nodes"]["ask"],
        "transitions": [{"when": "lastResponse == 'docs'", "to": "docs"}, {"to": "end"}],
    }
    data["nodes"]["again"] = {"actionType": "delay", "parameters": {"duration": "2h"}, "next": "ask_more"}  # changed
    data["nodes"]["end"] = {"actionType": "send_message", "parameters": {"message": "bye"}, "next": "survey"}
    data["nodes"]["survey"] = {"actionType": "send_message", "parameters": {"message": "rate us"}}  # added
    new = parse_definition(data)

    changes = diff(old, new)
    assert (changes.added_nodes, changes.removed_nodes, changes.changed_nodes) == (["survey"], ["sign"], ["again"])
    assert changes.added_edges == [("ask", "end", "default"), ("end", "survey", "")]
    assert changes.removed_edges == [("ask", "sign", "default"), ("sign", "end", "")]
    assert diff(new, new).empty

    root = ET.fromstring(diff_svg(old, new))
    nodes = {g.get("data-node"): (g.get("class") or "").split() for g in root.iter(f"{SVG}g")}
    assert "added" in nodes["survey"] and "removed" in nodes["sign"] and "changed" in nodes["again"]
    assert nodes["docs"] == ["node"]
    edge_classes = {
        (line.get("data-source"), line.get("data-target")): (line.get("class") or "").split()
        for line in root.iter(f"{SVG}polyline")
    }
    assert "removed" in edge_classes[("ask", "sign")] and "added" in edge_classes[("end", "survey")]

    old_file, new_file = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old_file.write_text(yaml.safe_dump(BRANCHES))
    new_file.write_text(yaml.safe_dump(data))
    out = tmp_path / "change.svg"
    drawn = CliRunner().invoke(cli, ["definitions", "graph", str(new_file), "--diff", str(old_file), "-o", str(out)])
    assert drawn.exit_code == 0, drawn.output
    assert "svg diff: +1 -1 ~1 nodes, +2 -2 edges" in drawn.output
    refused = CliRunner().invoke(
        cli, ["definitions", "graph", str(new_file), "--diff", str(old_file), "--format", "mermaid"]
    )
    assert refused.exit_code != 0 and "--diff: draws SVG only" in refused.output
