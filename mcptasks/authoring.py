"""The rest of what a task body and its tool can name, past the everyday names of `mcptasks`.

For tool authors who annotate the answers of sampling and roots requests (`SampleAnswer`,
`Sampled`, `RootsAnswer`, `Roots`, `Root`), build input requests by hand (`InputRequest`), name
the answers of an elicitation that cannot be unsupported (`Elicitation`), or hold the tool object
the decorator returns and its options (`TaskTool`, `TaskToolOptions`, `FallbackMode`).
`Status(...)` says what `yield "text"` says, for code that builds the value elsewhere.
`RelatedTask` is what `TaskContext.related_tasks()` returns.
"""

from __future__ import annotations

from mcptasks._authoring.capabilities import InputCapability
from mcptasks._authoring.context import MAX_CHECKPOINT_BYTES
from mcptasks._authoring.related import RelatedTask
from mcptasks._authoring.tool import FallbackMode, TaskTool, TaskToolOptions
from mcptasks._authoring.yields import (
    Elicitation,
    InputRequest,
    Root,
    Roots,
    RootsAnswer,
    SampleAnswer,
    Sampled,
    Status,
)

__all__ = [
    "MAX_CHECKPOINT_BYTES",
    "Elicitation",
    "FallbackMode",
    "InputCapability",
    "InputRequest",
    "RelatedTask",
    "Root",
    "Roots",
    "RootsAnswer",
    "SampleAnswer",
    "Sampled",
    "Status",
    "TaskTool",
    "TaskToolOptions",
]
