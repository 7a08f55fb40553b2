"""W6's section of BENCHMARKS.md: the four contenders' tables, from one `make bench PEERS=1` run."""

from __future__ import annotations

from typing import Any

from bench.studies.peers.peer_rounds import PEERS, TARGETS, TEMPORAL_LOCAL, Ratio, meets, verdicts

START, END = "<!-- peers:start -->", "<!-- peers:end -->"
LABELS = {
    "dsmo": "DSMO (short stages local, the default)",
    "dsmo-regular": "DSMO, stages as regular activities",
    "temporal": "raw Temporal",
    "temporal-local": "raw Temporal, stages as local activities",
    "langgraph": "LangGraph + PostgresSaver",
    "dbos": "DBOS Transact",
}
ROLES = ("runner", "server", "s3", "driver")
ROLE_NAMES = {
    "runner": "runner / worker",
    "server": "its server (Temporal, or PostgreSQL)",
    "s3": "the store",
    "driver": "the driver (client)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def performance_table(contenders: dict[str, Any]) -> str:
    floor = contenders.get("temporal")
    lines = [
        "| contender | W1 p50 | W1 p95 | throughput at 50 (runs/min) | CPU ms per run (runner + server + store) "
        "| resume p50 / p95 | engine state per run | store per run | lines of user code |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in contenders.items():
        cpu = m["cpu_ms_per_run"]
        total = sum(cpu.get(role, 0.0) for role in ("runner", "server", "s3"))
        ratio = (
            f" ({m['throughput_per_min'] / floor['throughput_per_min']:.2f}x)" if floor and name != "temporal" else ""
        )
        lines.append(
            f"| {LABELS.get(name, name)} | {_ms(m['p50'])} | {_ms(m['p95'])} | {m['throughput_per_min']:.0f}{ratio} "
            f"| {total:.0f} ({' + '.join(f'{cpu.get(role, 0.0):.0f}' for role in ('runner', 'server', 's3'))}) "
            f"| {_ms(m['resume_p50'])} / {_ms(m['resume_p95'])} | {m['engine_bytes_per_run'] / 1000:.1f} KB "
            f"| {m['store_bytes_per_run'] / 1000:.1f} KB | {m['user_code_lines']} |"
        )
    return "\n".join(lines)


def _ratio(ratio: Ratio | None) -> str:
    return f"{ratio.value:.2f}x ({LABELS.get(ratio.peer, ratio.peer)})" if ratio else "?"


def verdict_table(rounds: dict[str, Any], contender: str = "dsmo") -> str:
    """``contender`` over the best peer, round by round, against the targets; how many rounds met each."""
    found = verdicts(rounds, contender)
    if not found:
        return ""
    kinds = ("throughput", "latency", "cpu")
    target = " | ".join(f"{TARGETS[kind][0]} {TARGETS[kind][1]:.2f}x" for kind in kinds)
    lines = [
        "| round | throughput at 50 / the fastest peer's | W1 p50 / the fastest peer's "
        "| CPU per run / the leanest peer's |",
        "|---|---|---|---|",
        f"| target | {target} |",
    ]
    for verdict in found:
        cells = " | ".join(_ratio(getattr(verdict, kind)) for kind in kinds)
        lines.append(f"| {verdict.number} | {cells} |")
    met = " | ".join(f"{sum(meets(kind, getattr(v, kind)) for v in found)} of {len(found)}" for kind in kinds)
    lines.append(f"| rounds meeting the target | {met} |")
    return "\n".join(lines)


def waiting_table(contenders: dict[str, Any]) -> str:
    """The second reply shape: each reply sent once the driver saw the run wait."""
    floor = contenders.get("temporal", {}).get("while_waiting")
    lines = [
        "| contender | W1 p50 | W1 p95 | throughput at 50 (runs/min) |",
        "|---|---|---|---|",
    ]
    for name, m in contenders.items():
        waited = m.get("while_waiting")
        if not waited:
            continue
        ratio = (
            f" ({waited['throughput_per_min'] / floor['throughput_per_min']:.2f}x)"
            if floor and name != "temporal"
            else ""
        )
        lines.append(
            f"| {LABELS.get(name, name)} | {_ms(waited['p50'])} | {_ms(waited['p95'])} "
            f"| {waited['throughput_per_min']:.0f}{ratio} |"
        )
    return "\n".join(lines)


def repeats_table(crash: dict[str, Any]) -> str:
    """The crash test's repeats split into planned and collateral, and the effect under documented keys."""
    lines = [
        "| contender | stage repeats, planned | stage repeats, collateral | effects applied twice, planned "
        "| effects applied twice, collateral | with documented keys: effects applied | ... applied twice "
        "| ... deliveries deduped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, c in crash.items():
        keyed = c.get("keyed") or {}
        lines.append(
            f"| {LABELS.get(name, name)} | {c.get('stage_repeats_planned', '?')} "
            f"| {c.get('stage_repeats_collateral', '?')} | {c.get('effects_twice_planned', '?')} "
            f"| {c.get('effects_twice_collateral', '?')} | {keyed.get('applied', '?')} "
            f"| {keyed.get('effects_twice', '?')} | {keyed.get('deduped', '?')} |"
        )
    return "\n".join(lines)


def crash_table(crash: dict[str, Any]) -> str:
    lines = [
        "| contender | runs | completed | failed (said so) | lost | stages done twice | effects applied twice "
        "| timeouts that never fired | replies ignored | runner kills (planned + while waiting) "
        "| late replies, failed hand-overs (the driver's) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in crash.items():
        lines.append(
            f"| {LABELS.get(name, name)} | {c['runs']} | {c['completed']} | {c.get('failed', 0)} | {c['lost']} "
            f"| {c['stages_twice']} "
            f"| {c['effects_twice']} | {c['timeouts_never_fired']} | {c['replies_ignored']} "
            f"| {c['kills']} + 1 | {c.get('late_replies', 0)}, {c.get('hand_overs_failed', 0)} |"
        )
    return "\n".join(lines)


def _verdicts(peers: dict[str, Any]) -> str:
    rounds = peers.get("rounds") or {}
    table = verdict_table(rounds)
    if not table:
        return ""
    names = " and ".join(LABELS[name] for name in PEERS)
    text = f"""
**DSMO against the fastest peer, round by round.** The peers are {names}. In each round,
DSMO's figure (short stages local, the default) over the best peer figure of that same round:
the highest throughput, the lowest W1 p50, the lowest CPU per run; the targets are the ones DSMO
sets itself.

{table}
"""
    floor = verdict_table(rounds, TEMPORAL_LOCAL)
    if floor:
        text += f"""
**Raw Temporal in DSMO's shape, against the same peers.** The same ratios for raw Temporal with
its stages and send as local activities (one workflow task for the stages, as DSMO's default run):
what an engine built on Temporal, with nothing of its own on top, reaches on this graph and this
server. Where it misses a target too, the gap is Temporal's, not DSMO's.

{floor}
"""
    return text


def section(results: dict[str, Any]) -> str | None:
    peers = results.get("peers")
    if not peers:
        return None
    config = peers["config"]
    slots = peers.get("stage_slots", 16)
    rounds = config.get("rounds", 1)
    return f"""{START}
## W6: DSMO beside LangGraph and DBOS (`make bench PEERS=1`)

Measured by `{results["command"]}` on {results["started_at"]} ({peers.get("seconds", "?")} s), on
{results["machine"]}. The same graph in every contender: three stages (each reads the previous
stage's artifact from the store and writes its own), a wait for a reply with a
{config["wait_seconds"]:.0f} s timeout, then a send (the run's one effect). The same agent functions,
the same SeaweedFS store; LangGraph and DBOS keep their state in PostgreSQL (pgserver), DSMO and
raw Temporal in the Temporal dev server. Each contender runs one runner process (DSMO's worker,
a Temporal worker, a LangGraph job runner, a DBOS FastAPI app), measured alone, in
{rounds} round{"s" if rounds != 1 else ""}: each round starts every runner afresh, the contenders' order rotated by one
from round to round, and each figure below is the median of the rounds. W1 latency: a
run started with its reply sent at once, **before the run waits** (the engine keeps it until the
wait: DSMO's early-event inbox, a buffered Temporal signal, a queued DBOS message or LangGraph
job), {config["latency_concurrency"]} at a time, until its effect; throughput: {config["throughput_runs"]}
runs at {config["throughput_concurrency"]} concurrent; CPU per run from the throughput batch; resume:
reply sent to a waiting run until its next stage starts. Engine state: the Temporal history,
LangGraph's checkpoint rows and jobs, or DBOS's system rows of one ended run; store: its objects in
S3 (DSMO's include the audit trail).

{performance_table(peers["contenders"])}
{_verdicts(peers)}
**Reply sent while the run waits.** The same W1 and throughput phases, but the driver sends each
reply only once the engine's own state says the run waits (DSMO: its status `waiting`; raw
Temporal: a `waiting` query; LangGraph: the thread's `interrupt` write in its checkpoint; DBOS:
the durable timeout `recv` records), polled every 50 ms, so the wait's timer is set and the
reply resumes it. The poll is part of each run's time.

{waiting_table(peers["contenders"])}

**Crash correctness.** {config["crash_runs"]} runs per contender under one fault plan drawn from
seed {config["seed"]}: {config["kill_share"]:.0%} of runs have the runner SIGKILL itself in one
stage, during the work or after it and before the engine records it; {config["no_reply_share"]:.0%} get
no reply and must time out (the wait's timeout is {config["crash_wait_seconds"]:.0f} s). Once the runs
wait, the runner is killed once more, then the contender's server (Temporal, or its PostgreSQL)
is restarted; every runner is restarted 1 s after it dies. Every runner runs at most {slots}
stage executions at once here, so a kill finds as much work in flight in each (DSMO's worker and
the raw Temporal worker: {slots} activity slots; LangGraph's runner: {slots} job slots; DBOS: each
stage a child workflow on a `Queue` with `worker_concurrency={slots}`).
Counted from an external ledger every agent writes (PostgreSQL, no unique key), and from each
engine's own record of runs it ended as failed (a failed run is not lost: the engine says why,
and DSMO keeps its stage in the dead-letter queue for a redrive): a stage done
twice did its work twice; a timeout that never fired is a run given no reply that reached its
wait and never ended by its timeout; a reply ignored is a run that ended by its timeout although
its reply was sent before the timeout was due. DSMO's "after the work" kill comes before DSMO
writes the stage's output artifact (that write is part of its commit); the others' after their
agent wrote it.

{crash_table(peers["crash"])}

**Repeats, planned and collateral; the effect under documented keys.** A kill the plan puts after
a stage's work (done, and the engine not told) makes every engine repeat that stage once: those
repeats are *planned*. Every other repeat is *collateral* (work in flight beside a kill, the kill
while waiting, the server restart). The send also delivers its effect to a receiver with a unique
key, passing the engine's documented idempotency key (DSMO: the stage message's `idempotency_key`;
raw Temporal: workflow run id + activity id; DBOS: workflow id + step id; LangGraph: thread id +
node): there an effect is applied twice only if one run's deliveries carried different keys.

{repeats_table(peers["crash"])}
{END}"""
