"""Optimizers and learning-rate schedulers, as in ``torch.optim``."""
from . import lr_scheduler, swa_utils
from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import Adadelta, Adagrad, RMSprop
from .rprop import ASGD, Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop",
           "Adagrad", "Adadelta", "Rprop", "ASGD", "LBFGS", "lr_scheduler",
           "swa_utils"]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
