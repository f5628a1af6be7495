"""Neural-network building blocks mirroring ``torch.nn``: ``Module``, ``Parameter``, layers,
activations and losses; ``tapegrad.nn.functional`` and ``tapegrad.nn.init`` alongside."""
from . import functional, init
from .modules import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Identity, L1Loss,
                      Linear, LogSoftmax, Module, MSELoss, NLLLoss, Parameter, ReLU, Sequential,
                      Sigmoid, Softmax, Tanh)

__all__ = [
    "functional", "init", "Module", "Parameter", "Sequential", "Identity", "Linear", "ReLU",
    "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "MSELoss", "L1Loss", "NLLLoss",
    "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
]
