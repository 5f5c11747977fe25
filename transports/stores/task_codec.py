"""A task's record as ``RedisTaskStore`` stores it: one canonical JSON string.

Canonical (sorted keys, no spaces): the same record always gives the same text, which
is what the store's compare-and-set compares (``task_scripts``' ``SWAP``), and what a
change that changed nothing is recognised by.  Every field of
:class:`~mrtr_transports.apps.task_store.TaskRecord` that outlives one process is
kept; the in-process ones (``changed``, ``cancel_work``) are not.  The same text is
what the store's status notifications carry between workers.
"""

from __future__ import annotations

import json

import mrtr_core as m
from mrtr_core.wire._convert import unstructure_input_request

from ..apps.task_store import TaskRecord

__all__ = ["decode_task", "encode_task"]


def encode_task(record: TaskRecord) -> str:
    """The record as stored."""
    error = record.error
    return json.dumps(
        {
            "id": record.task_id,
            "principal": record.principal,
            "client": record.client,
            "created": record.created_at,
            "updated": record.updated_at,
            "ttl": record.ttl,
            "poll": record.poll_interval,
            "status": record.status,
            "message": record.message,
            "pending": {key: unstructure_input_request(ask) for key, ask in record.pending.items()},
            "answered": record.answered,
            "used": sorted(record.used_keys),
            "result": record.result,
            "error": None
            if error is None
            else {"code": error.code, "message": error.message, "data": error.data},
            "cancel": record.cancel_requested,
            "keep": record.keep_until,
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def decode_task(raw: str) -> TaskRecord:
    """The record :func:`encode_task` stored as ``raw``."""
    data = json.loads(raw)
    error = data["error"]
    return TaskRecord(
        task_id=data["id"],
        principal=data["principal"],
        client=data["client"],
        created_at=data["created"],
        updated_at=data["updated"],
        ttl=data["ttl"],
        poll_interval=data["poll"],
        status=data["status"],
        message=data["message"],
        pending={key: m.wire.structure_input_request(ask) for key, ask in data["pending"].items()},
        answered=data["answered"],
        used_keys=set(data["used"]),
        result=data["result"],
        error=None if error is None else m.ErrorObject(**error),
        cancel_requested=data["cancel"],
        keep_until=data["keep"],
    )
