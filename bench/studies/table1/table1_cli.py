"""Table 1's section of BENCHMARKS.md, as `make bench` and `make bench TABLE1=1` write it.

A full `make bench` writes this section inside its page; `TABLE1=1` (`study.Table1`) runs only
the experiment (every workload and mode, repeated with other seeds as the configuration says)
and replaces only this section, between its markers.
"""

from __future__ import annotations

from typing import Any

from bench.paired import PERMANENT, RATES
from bench.queue_db import VISIBILITY_S
from bench.report import table1_markdown
from bench.table1_faults import skipped
from bench.workloads import STAGE

START, END = "<!-- table1:start -->", "<!-- table1:end -->"


def _share(value: float) -> str:
    return f"{value:.1%}".replace(".0%", "%")


def table1_text(results: dict[str, Any], *, own_run: bool = False) -> str:
    """The section: how the experiment runs, then its tables (``own_run``: with its own date)."""
    config = results["config"]
    w3, w4 = RATES["W3"], RATES["W4"]
    executors = config.get("executors", config.get("consumers"))
    reasons = skipped(results["workloads"])
    skipped_text = f" Not in this run for B3: {'; '.join(reasons)}." if reasons else ""
    measured = (
        f"Measured by `{results['command']}` on {results['started_at']} ({results['seconds']} s), on "
        f"{results['machine']}.\n\n"
        if own_run
        else ""
    )
    return f"""## Table 1: the paper's experiment

{measured}Table 1 compares four ways to run the same agents. **B3** is DSMO (Temporal, the S3
store). **B1** choreography, **B1'** deduplicated choreography and **B2** agent-decides run on a
real at-least-once queue, PostgreSQL with `FOR UPDATE SKIP LOCKED` and a {VISIBILITY_S} s visibility
timeout, started by the bench from pgserver's wheel. Every mode has the same number of stage
executors, {executors}: B3's worker is one process with {executors} activity slots; each queue mode
has {executors} single-threaded consumer processes competing for every stage; each agent enqueues
the next stage itself and then acknowledges. B1 has no deduplication and writes each output under a
new key. B1' is what a competent team would build on one PostgreSQL: deterministic output keys per
(run, stage), a delivery whose output exists skips the work, and the next stage enqueued once per
(run, stage) (`ON CONFLICT DO NOTHING`) in the transaction that deletes the message. B1's and B1''s
agents follow the graph; B2's names the next stage, and in {config["ambiguity"]:.0%} of runs it
takes a real alternative at one of its decisions (another branch, skipping a stage, or stopping
early); it logs every decision, and its replays take the original's.

The experiment is **paired**: every mode runs the same inputs and meets the same faults, drawn
from (seed, input, stage, attempt), so a replay meets its original's; every agent logs what it
drew, and the run fails if one draw met two different faults, in one mode or across modes.
A permanent failure strikes {_share(PERMANENT)} of the
attempts of every stage in every workload (run-ending failures at about the paper's rate of dead
letters; it gives no rates). W3 adds, per attempt of B and C, transient failures
({_share(w3.transient)}), and on B, C and D (its terminal stage) slow attempts past the timeout
({_share(w3.slow)}), crashes after the work and before the ack or commit ({_share(w3.crash)}) and
lost acks or completions ({_share(w3.lost_ack)}). W4 runs {config["w4_inputs"]} inputs
{config["w4_concurrency"]} at a time (backpressure: a run starts when one ends), with
{_share(w4.transient)} transient failures in every stage and, on C (its terminal stage), slow
attempts ({_share(w4.slow)}), crashes ({_share(w4.crash)}) and lost acks ({_share(w4.lost_ack)}).
Crashes are real process deaths in every mode: at a crash point the agent's process SIGKILLs
itself, and a supervisor starts another one second later, as a process manager would. In B3 that
is DSMO's worker process (a separate process running the AgentExecution workflow and its
activities), so every stage in flight on it dies too, and the workflow tasks it held wait for
Temporal to hand them to the new process; Temporal's start-to-close timeout ({STAGE["timeout"]}) starts
the next attempt, which re-runs the agent. A lost completion is a network loss, not a death: the
output is committed and the completion dropped; the next attempt reports the committed output.
On the queue the consumer dies (the others keep serving) or does not ack, and the message
is delivered again after the visibility timeout. Once in W3 and once in W4, when half the
workload's inputs have started, each mode's server is restarted: Temporal (SIGKILL, then started
again on its SQLite file) under B3, the queue's PostgreSQL (immediate stop, a crash recovered
from its log, then started again) under B1, B1' and B2; runs in flight ride it out.{skipped_text}
The table counts, per mode, the executor processes killed and the server restarts it went through.

Each input is **replayed** {config["replays"]} times after its original ended: B3 through
`dsmo replay` (the recorded input and configuration snapshot, re-executed as a new linked run);
the queue's modes by re-injecting the recorded input into the queue. Everything comes from one execution
log that every agent writes, by one rule for all modes (`bench/shared_rule.py`). **Success** is
the terminal stage completed and nothing dead-lettered. **SPS** compares a replay's sequence of
states (every attempt as stage and outcome) with its original's; the collapsed path (completions
only) is a second row. **Duplicates** are extra completions of a (run, stage). Lineage comes
from data, the same for every mode: each execution logs the artifact it read and the one it
wrote, and its parent is the execution that wrote what it read. **Unlinked** executions (the
paper's orphans) are those whose chain of parents is not a prefix of the input's valid trajectory
through the executions the run's result was built from; executions that **started after the
run's end** are a separate row; their union, and the first rule (off the trajectory or after the
end), are kept beside them. W1-W3 run
{config["concurrency"]} inputs at a time.

{table1_markdown(results)}

![latency CDF](docs/bench/latency_cdf.png)
![Table 1 metrics](docs/bench/table1_bars.png)"""
