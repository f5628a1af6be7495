"""``torch.nn.parameter``: where library code imports ``Parameter`` and ``Buffer`` from.

Example:
    >>> from tapegrad.nn.parameter import Buffer, Parameter
    >>> Parameter is nn.Parameter and Buffer is nn.Buffer
    True
"""
from .modules import Buffer, Parameter

__all__ = ["Parameter", "Buffer"]
