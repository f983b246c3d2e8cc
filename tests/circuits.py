"""Quantum functions shared by the tests."""

import pennylane as qml


def layered(n_wires: int, layers: int, rotation=qml.RX, observable=None):
    """``layers`` layers of ``rotation(params[layer, w])`` on every wire and a CNOT chain, then
    the expectation of ``observable`` (``Z`` on wire 0 unless given); ``params`` has shape
    ``(layers, n_wires)``."""

    def circuit(params):
        for layer in range(layers):
            for w in range(n_wires):
                rotation(params[layer, w], wires=w)
            for w in range(n_wires - 1):
                qml.CNOT(wires=[w, w + 1])
        return qml.expval(qml.Z(0) if observable is None else observable)

    return circuit
