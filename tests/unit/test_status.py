"""The seed's state table, every pair: legal ones pass, every other one is refused."""

from __future__ import annotations

import itertools

import pytest

from dsmo.workflows.common.errors import IllegalTransition
from dsmo.workflows.common.status import LEGAL, TERMINAL, RunStatus, next_status

S = RunStatus
SEED_TABLE = {
    (S.PENDING, S.RUNNING),  # "Cuando el sistema inicia la ejecucion"
    (S.PENDING, S.CANCELLED),  # "Si se cancela antes de iniciar"
    (S.RUNNING, S.WAITING),  # "Accion requiere esperar"
    (S.RUNNING, S.COMPLETED),  # "Todas las acciones completadas"
    (S.RUNNING, S.FAILED),  # "Error en alguna accion"
    (S.RUNNING, S.CANCELLED),
    (S.WAITING, S.RUNNING),  # resume, or a timeout with onTimeout continue/retry
    (S.WAITING, S.TIMEOUT),  # a timeout with onTimeout: fail
    (S.WAITING, S.CANCELLED),
}


@pytest.mark.parametrize(("current", "target"), sorted(SEED_TABLE))
def test_legal_transition(current: RunStatus, target: RunStatus) -> None:
    assert next_status(current, target) is target


ILLEGAL = sorted(set(itertools.product(RunStatus, RunStatus)) - SEED_TABLE)


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_illegal_transition_is_refused(current: RunStatus, target: RunStatus) -> None:
    with pytest.raises(IllegalTransition, match=f"status {current} cannot change to {target}"):
        next_status(current, target)


def test_terminal_states_have_no_exit() -> None:
    assert {s for s in RunStatus if s.terminal} == {S.COMPLETED, S.FAILED, S.TIMEOUT, S.CANCELLED} == TERMINAL
    assert all(not LEGAL[s] for s in TERMINAL)


def test_table_covers_every_pair() -> None:
    assert len(SEED_TABLE) + len(ILLEGAL) == len(RunStatus) ** 2
