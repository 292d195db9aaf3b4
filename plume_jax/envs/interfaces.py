"""The five component interfaces in one view, and a structural check of a
component class against its interface (layer 2: it imports the five
families of layer 1 to name their interfaces and tables).

=============  ===============================================  =========================
slot           interface                                         registered in
=============  ===============================================  =========================
``plume``      :class:`plume_jax.plumes.base.Plume`              ``plumes.PLUMES``
``sensor``     :class:`plume_jax.sensors.base.Sensor`            ``sensors.SENSORS``
``actions``    :class:`plume_jax.actions.base.ActionModel`       ``actions.ACTIONS``
``reward``     :class:`plume_jax.rewards.base.Reward`            ``rewards.REWARDS``
``start``      :class:`plume_jax.starts.base.StartDistribution`  ``starts.STARTS``
=============  ===============================================  =========================

:func:`check_component` lists what keeps a class from being a well-formed
component of its slot; the contract suite runs it over every registered
class, and a new component can run it before it is registered.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing

from plume_jax.actions.base import ActionModel
from plume_jax.plumes.base import Plume
from plume_jax.rewards.base import Reward
from plume_jax.sensors.base import Sensor
from plume_jax.settings import Configurable, OrNone, Real
from plume_jax.settings.schema import NESTED_PARAMS, ROLE, SETTING, declared_fields
from plume_jax.starts.base import StartDistribution

#: Component slot -> the interface its components implement.
INTERFACES: dict[str, type[Configurable]] = {
    "plume": Plume,
    "sensor": Sensor,
    "actions": ActionModel,
    "reward": Reward,
    "start": StartDistribution,
}


def _parameters(function: typing.Any) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(function).parameters.values() if p.name != "self"]


def _signature_problem(cls: type, base: type, name: str) -> str | None:
    """Whether ``cls.name`` accepts the parameters of ``base.name``, in order
    (extra trailing parameters need defaults)."""
    ours = _parameters(getattr(cls, name))
    theirs = _parameters(getattr(base, name))
    if [p.name for p in ours[:len(theirs)]] != [p.name for p in theirs] or any(
            p.default is inspect.Parameter.empty for p in ours[len(theirs):]):
        return (f"{cls.__name__}.{name}{inspect.signature(getattr(cls, name))} does not take "
                f"the interface's parameters {[p.name for p in theirs]}")
    return None


def _interface_members(base: type) -> tuple[list[str], list[str]]:
    """``(methods, class attributes without a default)`` that ``base`` declares
    (on itself and the interfaces it extends, not on ``Configurable``)."""
    methods, attributes = [], []
    for klass in base.__mro__:
        if klass is Configurable or not issubclass(klass, Configurable):
            continue
        for name, value in vars(klass).items():
            function = value.__func__ if isinstance(value, classmethod) else value
            if not name.startswith("_") and inspect.isfunction(function) and name not in methods:
                methods.append(name)
        for name in klass.__dict__.get("__annotations__", {}):
            if not hasattr(klass, name) and name not in attributes:
                attributes.append(name)
    return methods, attributes


def declaration_problems(cls: type[Configurable]) -> list[str]:
    """What breaks the rule "each setting declared once, as a field":

    - every field of ``cls.Params`` declares exactly one thing: a dynamic
      setting, the params of a nested setting of the same name, or a
      derived value;
    - every field of the component is a static setting or derived;
    - no name is a setting of both the component and its params;
    - every setting has a doc, and a real-valued one finite bounds;
    - ``at_most`` / ``below`` name settings of the same component.
    """
    problems = []
    params_cls = cls.Params
    if not dataclasses.is_dataclass(params_cls):
        return [f"{cls.__name__}.Params is not a dataclass"]
    static = {f.name: f for f in declared_fields(cls) if SETTING in f.metadata}
    for owner, kind in ((params_cls, "Params"), (cls, "component")):
        for f in declared_fields(owner):
            if (SETTING in f.metadata) == (ROLE in f.metadata):
                problems.append(f"{kind} field {cls.__name__}.{f.name} must declare exactly one "
                                "setting (setting(...)) or role (nested_params(), derived(), "
                                "grid_domain())")
    for f in declared_fields(params_cls):
        if f.name in static and not static[f.name].metadata[SETTING].nested:
            problems.append(f"setting {f.name!r} of {cls.__name__} is declared twice (on the "
                            "component and on its Params)")
        if f.metadata.get(ROLE) == NESTED_PARAMS and not (
                f.name in static and static[f.name].metadata[SETTING].nested):
            problems.append(f"Params field {f.name!r} of {cls.__name__} holds nested params but "
                            "the component has no nested setting of that name")
    params_names = {f.name for f in declared_fields(params_cls)}
    for name, f in static.items():
        if f.metadata[SETTING].nested and name not in params_names:
            problems.append(f"nested setting {name!r} of {cls.__name__} has no Params field "
                            "(nested_params()) for its params")
    schema = cls.SETTINGS
    for name, s in schema.items():
        if not s.doc:
            problems.append(f"setting {name!r} of {cls.__name__} has no doc")
        problems += [f"setting {name!r} of {cls.__name__} is bounded by {other!r}, which is not "
                     "one of its settings"
                     for other in (s.at_most, s.below) if other is not None and other not in schema]
        check = s.check.check if isinstance(s.check, OrNone) else s.check
        if isinstance(check, Real) and (check.low is None or check.high is None):
            problems.append(f"real setting {name!r} of {cls.__name__} needs finite bounds (the "
                            "computations it feeds must stay finite in float32)")
    return problems


def check_component(cls: type, slot: str) -> list[str]:
    """Everything that keeps ``cls`` from being a well-formed component of
    ``slot`` (one of :data:`INTERFACES`); empty when it is one.

    Checks: it subclasses the slot's interface and leaves nothing abstract;
    it is a frozen dataclass with a ``type_name`` and the class attributes
    the interface requires; each method of the interface it overrides takes
    the interface's parameters; and its settings are declared once
    (:func:`declaration_problems`).
    """
    base = INTERFACES[slot]
    if not (isinstance(cls, type) and issubclass(cls, base)):
        return [f"{cls!r} is not a subclass of {base.__name__}"]
    problems = []
    if inspect.isabstract(cls):
        abstract = sorted(getattr(cls, "__abstractmethods__", ()))
        problems.append(f"{cls.__name__} does not implement {abstract}")
    dataclass_params = getattr(cls, "__dataclass_params__", None)  # set by @dataclass
    if not dataclasses.is_dataclass(cls) or dataclass_params is None \
            or not dataclass_params.frozen:
        problems.append(f"{cls.__name__} is not a frozen dataclass")
    if not isinstance(cls.type_name, str) or not cls.type_name:
        problems.append(f"{cls.__name__} has no type_name")
    methods, attributes = _interface_members(base)
    problems += [f"{cls.__name__} does not set the class attribute {name!r}"
                 for name in attributes if not hasattr(cls, name)]
    problems += [p for name in methods if (p := _signature_problem(cls, base, name))]
    return problems + declaration_problems(cls)
