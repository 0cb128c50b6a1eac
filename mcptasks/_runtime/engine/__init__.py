"""The task engine: a thin `TaskEngine` facade over parts that each own their state.

Layers, from the top (each module imports only the ones below it; import-linter keeps this):
`facade`; `liveness | via_executor`; `queue`; `host | immediate`; `bodies | ends`;
`records | runs`; `placement | duties`.
"""

from mcptasks._runtime.engine.creating import new_task_id
from mcptasks._runtime.engine.facade import TaskEngine
from mcptasks._runtime.engine.host import BODY_TASK_NAME
from mcptasks._runtime.engine.immediate import IMMEDIATE_TURNS, IMMEDIATE_WRITE_WAIT
from mcptasks._runtime.engine.records import Unsettled

__all__ = [
    "BODY_TASK_NAME",
    "IMMEDIATE_TURNS",
    "IMMEDIATE_WRITE_WAIT",
    "TaskEngine",
    "Unsettled",
    "new_task_id",
]
