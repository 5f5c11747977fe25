"""The input-kind registry: everything the core knows about each kind of input request.

One :class:`InputKind` per kind a server may ask of a client (form and URL
elicitation, sampling, roots): its short name, its method and the ``mode``
that selects it, its request and answer classes, the ``ClientCapabilities``
it needs, and the 2025-era server-to-client request that carries it.
Structuring, the round engine, the server's asking helpers, the legacy shim
and the server connection's rules all read :data:`INPUT_KINDS` (or a registry
passed in), so a new kind is one entry plus its model classes.

Capabilities are judged on the wire ``params`` (a plain mapping), not on the
typed request, because the same check serves ``input_required`` results and
2025-era server-to-client requests, and the latter are never structured.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from .._errors import INVALID_PARAMS, LocalProtocolError, RemoteProtocolError, describe
from ._model import (
    CreateMessageRequest,
    CreateMessageResult,
    ElicitFormRequest,
    ElicitResult,
    ElicitUrlRequest,
    ListRootsRequest,
    ListRootsResult,
)

#: Sub-capabilities that particular params call for (``sampling.tools`` for ``tools``).
ParamNeeds = Callable[[Mapping[str, Any]], Iterable[str]]


@attrs.frozen(kw_only=True)
class InputKind:
    """One kind of input request.

    ``name`` is what ``RoundStarted.kinds`` and error messages say (the method,
    ``#url`` for URL elicitation).  When several kinds share a ``method``,
    ``params["mode"]`` picks one: ``modes`` lists the values that pick this
    kind (``None`` standing for an absent mode).

    Capabilities: the request needs ``capability`` declared as an object, and in
    it ``sub_capability`` if set, plus whatever ``param_needs`` finds in the
    params.  ``bare_capability_suffices`` says that a bare ``{}`` declaration
    covers ``sub_capability`` (``elicitation: {}`` means form, as in 2025).

    2025 era: a client that negotiated ``initialize`` is asked with a real
    ``legacy_method`` request carrying the same params, plus a fresh id under
    ``legacy_id_param`` when that version names each request (URL elicitation's
    ``elicitationId``).
    """

    name: str
    method: str
    request_class: type[Any]
    response_class: type[Any]
    modes: frozenset[str | None] = frozenset({None})
    params_optional: bool = False
    capability: str
    sub_capability: str | None = None
    bare_capability_suffices: bool = False
    param_needs: ParamNeeds | None = None
    legacy_method: str
    legacy_id_param: str | None = None

    def needed_capabilities(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``ClientCapabilities`` fragment a request with these ``params`` needs."""
        subs: dict[str, Any] = {}
        if self.sub_capability is not None:
            subs[self.sub_capability] = {}
        if self.param_needs is not None:
            subs.update((name, {}) for name in self.param_needs(params))
        return {self.capability: subs}

    def missing_capabilities(
        self, params: Mapping[str, Any], declared: Mapping[str, Any]
    ) -> dict[str, Any]:
        """What :meth:`needed_capabilities` asks that ``declared`` lacks (``{}``: allowed).

        All of it at once, so a client that adds what it was told is not refused again.
        (On the client's hot path: plain loops, no fragment built when nothing lacks.)
        """
        have = declared.get(self.capability)
        if not isinstance(have, (dict, Mapping)):
            return self.needed_capabilities(params)
        lacking: dict[str, Any] = {}
        sub = self.sub_capability
        if sub is not None and sub not in have and (have or not self.bare_capability_suffices):
            lacking[sub] = {}
        if self.param_needs is not None:
            for name in self.param_needs(params):
                if name not in have:
                    lacking[name] = {}
        return {self.capability: lacking} if lacking else {}


def _select_by_mode(kinds: tuple[InputKind, ...], method: str, params: Any) -> InputKind:
    if len(kinds) == 1:
        return kinds[0]  # a method with one kind never reads its params' mode
    mode = params.get("mode") if isinstance(params, (dict, Mapping)) else None
    if mode is None or isinstance(mode, str):  # a peer's mode may be anything, a list say
        for kind in kinds:
            if mode in kind.modes:
                return kind
    family = method.partition("/")[0]
    raise RemoteProtocolError(f"unknown {family} mode {describe(mode)}", code=INVALID_PARAMS)


@attrs.frozen(kw_only=True)
class InputRegistry:
    """The input kinds a peer knows, with the lookups every layer needs.

    Built from its entries; a malformed set (a duplicate name or class, two
    kinds of one method selected by the same mode) raises ``LocalProtocolError``.
    """

    kinds: tuple[InputKind, ...]
    _by_method: dict[str, tuple[InputKind, ...]] = attrs.field(init=False, repr=False, eq=False)
    _by_legacy_method: dict[str, tuple[InputKind, ...]] = attrs.field(
        init=False, repr=False, eq=False
    )
    _by_class: dict[type[Any], InputKind] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        by_method: dict[str, tuple[InputKind, ...]] = {}
        by_legacy: dict[str, tuple[InputKind, ...]] = {}
        by_class: dict[type[Any], InputKind] = {}
        names: set[str] = set()
        for kind in self.kinds:
            if kind.name in names or kind.request_class in by_class:
                raise LocalProtocolError(f"input kind {kind.name!r} is registered twice")
            for table, method in ((by_method, kind.method), (by_legacy, kind.legacy_method)):
                if any(kind.modes & other.modes for other in table.get(method, ())):
                    raise LocalProtocolError(
                        f"input kind {kind.name!r}: another kind of {describe(method)} has its mode"
                    )
                table[method] = (*table.get(method, ()), kind)
            names.add(kind.name)
            by_class[kind.request_class] = kind
        object.__setattr__(self, "_by_method", by_method)
        object.__setattr__(self, "_by_legacy_method", by_legacy)
        object.__setattr__(self, "_by_class", by_class)

    @property
    def methods(self) -> tuple[str, ...]:
        """The methods an input request may name, in registry order."""
        return tuple(self._by_method)

    @property
    def legacy_methods(self) -> frozenset[str]:
        """The 2025-era server-to-client request methods that carry an input request."""
        return frozenset(self._by_legacy_method)

    @property
    def response_for_request(self) -> dict[type[Any], type[Any]]:
        """Which answer class answers which request class."""
        return {cls: kind.response_class for cls, kind in self._by_class.items()}

    def kind_of(self, request: object) -> InputKind | None:
        """The kind of a typed input request, ``None`` for anything else."""
        return self._by_class.get(type(request))

    def kind_for(self, request: object) -> InputKind:
        """The kind of a typed input request; anything else is the caller's mistake."""
        kind = self._by_class.get(type(request))
        if kind is None:
            raise LocalProtocolError(f"{type(request).__name__} is not an input request")
        return kind

    def resolve(self, method: Any, params: Any) -> InputKind:
        """The kind a wire ``{method, params}`` input request names (-32602 if none)."""
        kinds = self._by_method.get(method) if isinstance(method, str) else None
        if kinds is None:
            raise RemoteProtocolError(
                f"unknown input request method {describe(method)}", code=INVALID_PARAMS
            )
        return _select_by_mode(kinds, method, params)

    def resolve_legacy(self, method: str, params: Mapping[str, Any]) -> InputKind | None:
        """The kind a 2025-era server-to-client request carries (``None``: not an input
        request; an unknown mode raises -32602)."""
        kinds = self._by_legacy_method.get(method)
        return None if kinds is None else _select_by_mode(kinds, method, params)


def _sampling_needs(params: Mapping[str, Any]) -> Iterable[str]:
    # 2025-11-25 and 2026-07-28: a server MUST NOT send tools/toolChoice without
    # sampling.tools, and SHOULD send includeContext other than "none" only with
    # sampling.context.
    if params.get("tools") is not None or params.get("toolChoice") is not None:
        yield "tools"
    if params.get("includeContext") not in (None, "none"):
        yield "context"


#: The kinds of the 2026-07-28 schema.
INPUT_KINDS = InputRegistry(
    kinds=(
        InputKind(
            name="elicitation/create",
            method="elicitation/create",
            modes=frozenset({None, "form"}),
            request_class=ElicitFormRequest,
            response_class=ElicitResult,
            capability="elicitation",
            sub_capability="form",
            bare_capability_suffices=True,
            legacy_method="elicitation/create",
        ),
        InputKind(
            name="elicitation/create#url",
            method="elicitation/create",
            modes=frozenset({"url"}),
            request_class=ElicitUrlRequest,
            response_class=ElicitResult,
            capability="elicitation",
            sub_capability="url",
            legacy_method="elicitation/create",
            legacy_id_param="elicitationId",
        ),
        InputKind(
            name="sampling/createMessage",
            method="sampling/createMessage",
            request_class=CreateMessageRequest,
            response_class=CreateMessageResult,
            capability="sampling",
            param_needs=_sampling_needs,
            legacy_method="sampling/createMessage",
        ),
        InputKind(
            name="roots/list",
            method="roots/list",
            request_class=ListRootsRequest,
            response_class=ListRootsResult,
            params_optional=True,
            capability="roots",
            legacy_method="roots/list",
        ),
    )
)

#: Which response class answers which input request class.
RESPONSE_FOR_REQUEST: Mapping[type, type] = INPUT_KINDS.response_for_request


def capability_paths(fragment: Mapping[str, Any]) -> list[str]:
    """``{"elicitation": {"url": {}}, "roots": {}}`` -> ``["elicitation.url", "roots"]``."""
    paths: list[str] = []
    for name, subs in fragment.items():
        paths.extend([f"{name}.{sub}" for sub in subs] if subs else [name])
    return paths
