"""The JSON examples of SEP-2663 (status Final), copied as they stand: the ``result``
or ``params`` of each example message, named by what it shows."""

from __future__ import annotations

from typing import Any

TASK_ID = "786512e2-9e0d-44bd-8f29-789f320fe840"

#: "Task Creation", Example Response (CreateTaskResult).
CREATE_TASK_RESULT: dict[str, Any] = {
    "resultType": "task",
    "taskId": TASK_ID,
    "status": "working",
    "statusMessage": "The operation is now in progress.",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttlMs": 60000,
    "pollIntervalMs": 5000,
}

#: "Example Message Flow": the CreateTaskResult of hello_world.
FLOW_CREATE: dict[str, Any] = {
    "resultType": "task",
    "taskId": TASK_ID,
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:50:00Z",
    "ttlMs": 3600000,
    "pollIntervalMs": 5000,
}

#: The tasks/get request of the flow (ids 3, 4, 5, 7, 8 send the same params).
FLOW_GET_PARAMS: dict[str, Any] = {"taskId": TASK_ID}

#: tasks/get while working (ids 3 and 7).
FLOW_WORKING: dict[str, Any] = {
    "resultType": "complete",
    "taskId": TASK_ID,
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:50:00Z",
    "ttlMs": 3600000,
    "pollIntervalMs": 5000,
}

#: tasks/get while input_required (ids 4 and 5).
FLOW_INPUT_REQUIRED: dict[str, Any] = {
    "resultType": "complete",
    "taskId": TASK_ID,
    "status": "input_required",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:50:00Z",
    "ttlMs": 3600000,
    "pollIntervalMs": 5000,
    "inputRequests": {
        "name": {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Please enter your name.",
                "requestedSchema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
        }
    },
}

#: The tasks/update of the flow (id 6).
FLOW_UPDATE_PARAMS: dict[str, Any] = {
    "taskId": TASK_ID,
    "inputResponses": {"name": {"action": "accept", "content": {"input": "Luca"}}},
}

#: The ack of tasks/update (and of tasks/cancel).
ACK: dict[str, Any] = {"resultType": "complete"}

#: tasks/get once completed (id 8).
FLOW_COMPLETED: dict[str, Any] = {
    "resultType": "complete",
    "taskId": TASK_ID,
    "status": "completed",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:50:00Z",
    "ttlMs": 3600000,
    "pollIntervalMs": 5000,
    "result": {"content": [{"type": "text", "text": "Hello, Luca!"}], "isError": False},
}

#: "Task Status Notifications": the notifications/tasks params.
NOTIFICATION_PARAMS: dict[str, Any] = {
    "taskId": TASK_ID,
    "status": "completed",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:50:00Z",
    "ttlMs": 60000,
    "pollIntervalMs": 5000,
    "result": {
        "content": [{"type": "text", "text": "Operation completed successfully."}],
        "isError": False,
    },
}

#: "Example: Task with JSON-RPC execution error".  Its ``resultType: "task"`` contradicts
#: the SEP's own rule for tasks/get ("MUST be set to "complete""): kept as printed.
FAILED_AS_PRINTED: dict[str, Any] = {
    "resultType": "task",
    "taskId": "786512e2-9e0d-44bd-8f29-789f820fe840",
    "status": "failed",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttlMs": 3600000,
    "statusMessage": "Tool execution failed: API rate limit exceeded",
    "error": {"code": -32603, "message": "API rate limit exceeded"},
}

#: "Example: Tool call completed with tool error (isError: true)"; the same erratum.
TOOL_ERROR_AS_PRINTED: dict[str, Any] = {
    "resultType": "task",
    "taskId": "786512e2-9e0d-44bd-8f29-789f820fe840",
    "status": "completed",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:40:00Z",
    "ttlMs": 3600000,
    "result": {
        "content": [{"type": "text", "text": "Failed to process request: invalid input"}],
        "isError": True,
    },
}

#: The -32021 error of "Capability Negotiation" (its message is non-normative).
MISSING_CAPABILITY_ERROR: dict[str, Any] = {
    "code": -32021,
    "message": "Missing required client capability",
    "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
}

#: "Example: Task not found".
NOT_FOUND_ERROR: dict[str, Any] = {
    "code": -32602,
    "message": "Failed to retrieve task: Task not found",
}

#: The per-request capabilities of the flow's tools/call.
DECLARING_CAPABILITIES: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
