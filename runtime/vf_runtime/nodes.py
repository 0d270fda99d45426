"""The authoring classes: producers, processors and consumers.

A node records the arguments it was constructed with so a worker can rebuild it
as ``cls(**params)``; nodes do no I/O until ``open()``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from vf_runtime.constants import CPU, DEVICE_TYPES, GPU
from vf_runtime.errors import AuthoringError
from vf_runtime.policies import DeliveryPolicy, JoinPolicy

_RUNTIME_DIR = __file__.rsplit("/", 1)[0]


class _NodeMeta(type):
    """Records each construction's arguments and the user's source line."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        node = super().__call__(*args, **kwargs)
        _check_base_init(cls, node, kwargs)
        node._vf_params = bind_params(cls, args, kwargs)
        node._vf_site = _user_site()
        return node


# Where each base keyword lands on the node, when the base ``__init__`` ran with it.
_BASE_ATTRIBUTES = {"name": "_name", "image": "_image"}
_BASE_DEFAULTS: dict[type, dict[str, Any]] = {}


def _init_site(cls: type) -> str:
    code = getattr(cls.__init__, "__code__", None)  # type: ignore[misc]
    if code is None:
        return f"{cls.__name__}.__init__"
    return f"{cls.__name__}.__init__ ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"


def _base_defaults(cls: type) -> dict[str, Any]:
    """The keywords of the vf base class ``cls`` derives from, with their defaults."""
    base = next(c for c in cls.__mro__ if c.__module__ == __name__)
    if base not in _BASE_DEFAULTS:
        params = list(inspect.signature(vars(base)["__init__"]).parameters.values())[1:]
        _BASE_DEFAULTS[base] = {p.name: p.default for p in params}
    return _BASE_DEFAULTS[base]


def _same(value: Any, default: Any) -> bool:
    try:
        return value is default or (type(value) is type(default) and bool(value == default))
    except Exception:  # a value whose == cannot be read as a truth value is not a default
        return False


def _check_base_init(cls: type, node: Any, kwargs: dict[str, Any]) -> None:
    """Refuse a node whose ``__init__`` skipped the base one, or dropped a base keyword."""
    if "_wired" not in vars(node):
        raise AuthoringError(
            "VF_GRAPH_NODE_INIT",
            f"{_init_site(cls)} does not call super().__init__(), so vf cannot name or wire "
            "this node",
            f"add super().__init__(**kw) to {cls.__name__}.__init__ (with **kw in its "
            "signature), passing on the keywords it does not use itself",
        )
    for key, default in _base_defaults(cls).items():
        if key not in kwargs or _same(kwargs[key], default):
            continue
        if _same(getattr(node, _BASE_ATTRIBUTES.get(key, key), default), default):
            raise AuthoringError(
                "VF_GRAPH_NODE_INIT",
                f"{key}={kwargs[key]!r} given to {cls.__name__} was dropped: {_init_site(cls)} "
                f"does not pass {key}= on to super().__init__()",
                f"call super().__init__(**kw) in {cls.__name__}.__init__ so that {key}= "
                "reaches the base class",
            )


@dataclass(frozen=True)
class _Shape:
    """What binding needs from an ``__init__`` signature, computed once per function."""

    signature: inspect.Signature
    positional: tuple[str, ...]  # positional-or-keyword parameters after ``self``
    named: frozenset[str]  # every parameter that can be passed by keyword
    required: frozenset[str]  # named parameters without a default
    var_positional: str | None
    var_keyword: str | None
    simple: bool  # a plain ``self`` then no positional-only parameters: the fast binder applies


_SHAPES: dict[Any, _Shape | None] = {}
_P = inspect.Parameter


def _shape(init: Any) -> _Shape | None:
    """The binding shape of ``init`` (cached by function), or None when it has no signature."""
    if init in _SHAPES:
        return _SHAPES[init]
    try:
        signature = inspect.signature(init)
    except (TypeError, ValueError):
        shape = None
    else:
        every = list(signature.parameters.values())
        first, params = (every[0] if every else None), every[1:]
        named = [p for p in params if p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)]
        shape = _Shape(
            signature=signature,
            positional=tuple(p.name for p in params if p.kind is _P.POSITIONAL_OR_KEYWORD),
            named=frozenset(p.name for p in named),
            required=frozenset(p.name for p in named if p.default is _P.empty),
            var_positional=next((p.name for p in params if p.kind is _P.VAR_POSITIONAL), None),
            var_keyword=next((p.name for p in params if p.kind is _P.VAR_KEYWORD), None),
            simple=first is not None
            and first.kind is _P.POSITIONAL_OR_KEYWORD
            and all(p.kind is not _P.POSITIONAL_ONLY for p in params),
        )
    _SHAPES[init] = shape
    return shape


def bind_params(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Turn a constructor call into keyword arguments; positional extras land in ``*``.

    Parameters come in signature order (positional extras as ``*name`` in its place), then
    the extra keywords a ``**kwargs`` collected, in call order: what ``inspect`` binding
    gives, without building a signature per node.
    """
    shape = _shape(cls.__init__)  # type: ignore[misc]
    if shape is None:
        return dict(kwargs)
    if not shape.simple:
        return bind_params_slowly(shape.signature, args, kwargs)
    given = dict(zip(shape.positional, args, strict=False))
    surplus = args[len(shape.positional) :]
    extra: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in shape.named and key not in given:
            given[key] = value
        elif key not in shape.named and shape.var_keyword is not None and key != _self(shape):
            extra[key] = value
        else:
            return dict(kwargs)  # a call __init__ itself would refuse
    if (surplus and shape.var_positional is None) or not shape.required <= given.keys():
        return dict(kwargs)
    params: dict[str, Any] = {}
    for name in shape.signature.parameters:
        if name in given:
            params[name] = given[name]
        elif name == shape.var_positional and surplus:
            params["*" + name] = list(surplus)
    params.update(extra)
    return params


def _self(shape: _Shape) -> str:
    return next(iter(shape.signature.parameters))


def bind_params_slowly(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    try:
        bound = signature.bind(None, *args, **kwargs)
    except TypeError:
        return dict(kwargs)
    params: dict[str, Any] = {}
    for name, value in list(bound.arguments.items())[1:]:
        kind = signature.parameters[name].kind
        if kind is _P.VAR_KEYWORD:
            params.update(value)
        elif kind is _P.VAR_POSITIONAL:
            if value:
                params["*" + name] = list(value)
        else:
            params[name] = value
    return params


def _user_site() -> tuple[str, int] | None:
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_RUNTIME_DIR):
            return (filename, frame.f_lineno)
        frame = frame.f_back  # type: ignore[assignment]
    return None


class Node(metaclass=_NodeMeta):
    """Base of every node. Subclasses pass the base keywords through to ``super().__init__``."""

    kind: ClassVar[str] = "node"
    _vf_params: dict[str, Any]
    _vf_site: tuple[str, int] | None

    def __init__(self, *, name: str | None = None, image: str | None = None) -> None:
        self._name = name
        self._image = image
        self._parents: tuple[Node, ...] = ()
        self._wired = False

    @property
    def name(self) -> str | None:
        """The explicit name, or None when vf derives one from the class."""
        return self._name

    @property
    def image(self) -> str | None:
        return self._image

    @property
    def parents(self) -> tuple[Node, ...]:
        return self._parents

    def __call__(self, *parents: Node) -> Node:
        if self._wired:
            raise AuthoringError(
                "VF_GRAPH_REWIRED",
                f"{self!r} was already wired to its parents; a node is wired once",
                "call child(parent_a, parent_b) once with every parent",
            )
        for parent in parents:
            if not isinstance(parent, Node):
                raise AuthoringError(
                    "VF_GRAPH_PARENT_TYPE",
                    f"{self!r} got {parent!r} as a parent, which is not a vf node",
                    "pass Producer or Processor instances as parents",
                )
        self._parents = tuple(parents)
        self._wired = True
        self._vf_wired_at = _user_site()
        return self

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments a worker passes back to rebuild this node."""
        return dict(getattr(self, "_vf_params", {}))

    def open(self) -> None:
        """Acquire resources (models, connections) before the first message."""

    def close(self) -> None:
        """Release what ``open`` acquired; called even after a failure."""

    def __repr__(self) -> str:
        label = self._name if self._name is not None else type(self).__name__
        return f"<{self.kind} {label}>"


class Producer(Node):
    """A root of the graph: ``next()`` returns items and raises StopIteration at the end."""

    kind: ClassVar[str] = "producer"

    def __init__(
        self, *, name: str | None = None, image: str | None = None, is_finite: bool = True
    ) -> None:
        super().__init__(name=name, image=image)
        self.is_finite = is_finite

    def next(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement next()")

    def __iter__(self) -> Iterator[Any]:
        while True:
            try:
                yield self.next()
            except StopIteration:
                return


class Processor(Node):
    """Transforms the inputs of its parents: ``process(*inputs)`` returns the output."""

    kind: ClassVar[str] = "processor"

    def __init__(
        self,
        *,
        name: str | None = None,
        image: str | None = None,
        nb_tasks: int = 1,
        device_type: str = CPU,
        gpu_count: int = 1,
        gpu_memory_gib: float | None = None,
        partition_by: str | None = None,
        join_policy: JoinPolicy | None = None,
        delivery: DeliveryPolicy | None = None,
        warmup_seconds: int | None = None,
    ) -> None:
        super().__init__(name=name, image=image)
        self.nb_tasks = nb_tasks
        self.device_type = device_type
        self.gpu_count = gpu_count
        self.gpu_memory_gib = gpu_memory_gib
        # how long open() takes to load what the node needs (a model): vf compile gives the
        # replica that long to start and paces autoscaling by it
        self.warmup_seconds = warmup_seconds
        self.partition_by = partition_by
        self.join_policy = join_policy
        self.delivery = delivery

    def process(self, *inputs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement process(*inputs)")


class Consumer(Node):
    """A leaf of the graph: ``consume(*inputs)`` applies the inputs' effects."""

    kind: ClassVar[str] = "consumer"

    def __init__(
        self,
        *,
        name: str | None = None,
        image: str | None = None,
        join_policy: JoinPolicy | None = None,
        delivery: DeliveryPolicy | None = None,
        idempotent: bool = False,
        partition_by: str | None = None,
    ) -> None:
        super().__init__(name=name, image=image)
        self.join_policy = join_policy
        self.delivery = delivery
        self.idempotent = idempotent
        # Accepted only so the compiler can refuse it by name: consumers never partition.
        self.partition_by = partition_by

    def consume(self, *inputs: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement consume(*inputs)")


__all__ = ["CPU", "DEVICE_TYPES", "GPU", "Consumer", "Node", "Processor", "Producer"]
