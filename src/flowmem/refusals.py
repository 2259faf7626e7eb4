"""MEM-7's log line for a refused scope, written once for every consumer.

``flowmem.scope`` decides refusals and stays pure (no logging); this module is the
one place that logs them: ``MemoryService`` in process and ``flowmem.client`` before
anything is sent write the same line and the same record attributes.
"""

from __future__ import annotations

import logging

from flowmem.scope import ExecutionContext, Refusal

log = logging.getLogger("flowmem")


def _name(value: object) -> str:
    return "-" if value is None or value == "" else repr(value)


def log_refusal(
    operation: str,
    key: str,
    refusal: Refusal,
    context: ExecutionContext | None,
    consequence: str = "storage was not touched",
) -> None:
    """Log the one WARNING a refused scope gets (MEM-7), naming the node, pipeline and workflow.

    Implements MEM-7's log for every consumer: ``MemoryService`` (in process) and
    ``flowmem.client`` (a refusal answered before anything is sent, its
    ``consequence``) write the same line and the same record attributes.
    """
    node = context.node_id if context is not None else None
    pipeline = context.pipeline_id if context is not None else None
    workflow = context.workflow_id if context is not None else None
    log.warning(
        "memory %s of key %r refused (scope %s, reason %s: %s) "
        "at node %s, pipeline %s, workflow %s; %s",
        operation,
        key,
        refusal.scope,
        refusal.reason,
        refusal.sentence,
        _name(node),
        _name(pipeline),
        _name(workflow),
        consequence,
        extra={
            "flowmem_refusal": refusal.to_dict(),
            "flowmem_operation": operation,
            "flowmem_node": node,
            "flowmem_pipeline": pipeline,
            "flowmem_workflow": workflow,
        },
    )
