"""Comparing the structure of jaxprs: which primitives, in which order, nested how."""

CONTROL_FLOW = ("cond", "for_loop", "while_loop")


def skeleton(jaxpr) -> list:
    """The primitives of a jaxpr in order, each with the skeletons of the jaxprs it holds."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    out = []
    for eqn in jaxpr.eqns:
        nested = []
        for value in eqn.params.values():
            for item in value if isinstance(value, (tuple, list)) else [value]:
                inner = getattr(item, "jaxpr", item)
                if hasattr(inner, "eqns"):
                    nested.append(skeleton(inner))
        out.append((eqn.primitive.name, nested))
    return out


def control_flow_of(jaxpr) -> list:
    """Only the control-flow primitives of the jaxpr, with their nesting."""
    return _control_flow(skeleton(jaxpr))


def _control_flow(sk: list) -> list:
    return [(name, [_control_flow(n) for n in nested]) for name, nested in sk if name in CONTROL_FLOW]
