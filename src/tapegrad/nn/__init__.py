"""Neural-network building blocks mirroring ``torch.nn``: ``Module``, ``Parameter``, layers,
containers, activations and losses; ``tapegrad.nn.functional``, ``tapegrad.nn.init`` and
``tapegrad.nn.utils`` alongside."""
from . import functional, init
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList
from .modules import (AlphaDropout, BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Dropout,
                      Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout, Flatten, Identity,
                      L1Loss, Linear, LogSoftmax, Module, MSELoss, NLLLoss, Parameter, ReLU,
                      Sequential, Sigmoid, Softmax, Tanh, Unflatten, Upsample, ZeroPad2d)
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                         LeakyReLU, LogSigmoid, Mish, PReLU, ReLU6, RReLU, SELU, SiLU, Softmin,
                         Softplus, Softshrink, Softsign, Tanhshrink, Threshold)
from .conv import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool2d, Conv1d, Conv2d, Conv3d,
                   ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, MaxPool2d)
from .layers import (Bilinear, CosineSimilarity, Embedding, Fold, MultiheadAttention,
                     PairwiseDistance, Unfold)
from .loss import (CosineEmbeddingLoss, GaussianNLLLoss, HuberLoss, KLDivLoss, MarginRankingLoss,
                   PoissonNLLLoss, SmoothL1Loss, TripletMarginLoss)
from .normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RMSNorm
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .transformer import TransformerEncoderLayer
from . import utils

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "Sequential", "ModuleList",
    "ModuleDict", "ParameterList", "ParameterDict", "Identity", "Flatten", "Unflatten",
    "Linear", "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "MSELoss",
    "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
    "GELU", "SiLU", "ELU", "SELU", "CELU", "LeakyReLU", "Softplus", "Mish", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "Softsign", "LogSigmoid", "Tanhshrink", "Softshrink",
    "Hardshrink", "Threshold", "GLU", "Softmin", "PReLU", "HuberLoss", "SmoothL1Loss",
    "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MarginRankingLoss",
    "CosineEmbeddingLoss", "TripletMarginLoss", "LayerNorm", "GroupNorm", "BatchNorm1d",
    "BatchNorm2d", "Embedding", "CosineSimilarity", "PairwiseDistance", "Bilinear",
    "RNNCell", "GRUCell", "LSTMCell", "RNN", "GRU", "LSTM", "Conv1d", "Conv2d", "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "RMSNorm", "MultiheadAttention",
    "TransformerEncoderLayer", "Upsample", "ZeroPad2d", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "RReLU", "ConvTranspose1d", "ConvTranspose2d",
    "Unfold", "Fold", "Conv3d", "ConvTranspose3d",
]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
