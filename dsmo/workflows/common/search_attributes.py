"""The custom search attributes of the external contract.

Temporal reserves ``ExecutionStatus`` for its own workflow status (Running, Completed, ...)
and refuses to let a workflow set it, so DSMO's status lives in ``AgentExecutionStatus``;
see the README's migration note.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeIndexedValueType, SearchAttributeKey

AGENT_EXECUTION_STATUS = SearchAttributeKey.for_keyword("AgentExecutionStatus")
WAITING_FOR = SearchAttributeKey.for_keyword("WaitingFor")
WAITING_UNTIL = SearchAttributeKey.for_datetime("WaitingUntil")
AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
WORKFLOW_VERSION = SearchAttributeKey.for_keyword("WorkflowVersion")
# Who a person-facing wait is on: the reply's ``expectedFrom`` or the request's ``to`` (the console's assignee).
WAITING_ON = SearchAttributeKey.for_keyword("WaitingOn")
# When the current wait began (visibility keeps no "last updated" time): the console's task age.
WAITING_SINCE = SearchAttributeKey.for_datetime("WaitingSince")
# Whom the run is about (its definition's `subject`): what `dsmo subjects erase` finds runs by.
DATA_SUBJECT = SearchAttributeKey.for_keyword("DataSubject")
# What the run's model calls spent, as of its last status change (a wait, the end): `dsmo runs
# list`'s spend, and a filter (``LlmCostUsd > 1``). `dsmo status` reads the live figure.
LLM_COST_USD = SearchAttributeKey.for_float("LlmCostUsd")
LLM_TOKENS = SearchAttributeKey.for_int("LlmTokens")

ALL: tuple[SearchAttributeKey, ...] = (  # type: ignore[type-arg]
    AGENT_EXECUTION_STATUS,
    WAITING_FOR,
    WAITING_UNTIL,
    AGENT_NAME,
    WORKFLOW_VERSION,
    WAITING_ON,
    WAITING_SINCE,
    DATA_SUBJECT,
    LLM_COST_USD,
    LLM_TOKENS,
)


def cli_type(key: SearchAttributeKey) -> str:  # type: ignore[type-arg]
    """The type name the `temporal` CLI and the operator API use for ``key``."""
    return {
        SearchAttributeIndexedValueType.KEYWORD: "Keyword",
        SearchAttributeIndexedValueType.DATETIME: "Datetime",
        SearchAttributeIndexedValueType.DOUBLE: "Double",
        SearchAttributeIndexedValueType.INT: "Int",
    }[key.indexed_value_type]
