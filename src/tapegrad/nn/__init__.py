"""Neural-network building blocks mirroring ``torch.nn``: ``Module``, ``Parameter``, layers,
containers, activations and losses; ``tapegrad.nn.functional``, ``tapegrad.nn.init`` and
``tapegrad.nn.utils`` alongside."""
from . import functional, init
from .adaptive import AdaptiveLogSoftmaxWithLoss
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList
from .modules import (AlphaDropout, BCELoss, BCEWithLogitsLoss, ChannelShuffle,
                      CrossEntropyLoss, Dropout,
                      Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout, Flatten, Identity,
                      L1Loss, Linear, LogSoftmax, Module, MSELoss, NLLLoss, Parameter, ReLU,
                      PixelShuffle, PixelUnshuffle, Sequential, Sigmoid, Softmax, Tanh,
                      Unflatten, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d, ZeroPad2d)
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                         LeakyReLU, LogSigmoid, Mish, PReLU, ReLU6, RReLU, SELU, SiLU, Softmin,
                         Softmax2d, Softplus, Softshrink, Softsign, Tanhshrink, Threshold)
from .conv import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool2d,
                   AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, Conv1d, Conv2d, Conv3d,
                   ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                   MaxPool1d, MaxPool2d, MaxPool3d, AvgPool3d, AdaptiveMaxPool1d, MaxUnpool1d,
                   MaxUnpool2d, MaxUnpool3d, LPPool1d, LPPool2d, LPPool3d)
from .layers import (Bilinear, CosineSimilarity, Embedding, EmbeddingBag, Fold,
                     MultiheadAttention, PairwiseDistance, Unfold)
from .loss import (CTCLoss, CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss,
                   KLDivLoss, MarginRankingLoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                   PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss)
from .loss import MultiLabelMarginLoss, TripletMarginWithDistanceLoss
from .conv import FractionalMaxPool2d, FractionalMaxPool3d
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, LayerNorm, LocalResponseNorm,
                            RMSNorm, SyncBatchNorm)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,
                      ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d,
                      ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      ZeroPad1d, ZeroPad3d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)
from . import parameter, utils
from . import parallel
from .parallel import DataParallel
from .modules import Buffer
from .parameter import UninitializedBuffer, UninitializedParameter
from .lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d,
                   LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
                   LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)

__all__ = [
    "functional", "init", "parameter", "utils", "Module", "Parameter", "Buffer", "Sequential",
    "ModuleList",
    "ModuleDict", "ParameterList", "ParameterDict", "Identity", "Flatten", "Unflatten",
    "Linear", "ReLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Dropout", "MSELoss",
    "L1Loss", "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss",
    "GELU", "SiLU", "ELU", "SELU", "CELU", "LeakyReLU", "Softplus", "Mish", "Hardtanh", "ReLU6",
    "Hardsigmoid", "Hardswish", "Softsign", "LogSigmoid", "Tanhshrink", "Softshrink",
    "Hardshrink", "Threshold", "GLU", "Softmin", "PReLU", "HuberLoss", "SmoothL1Loss",
    "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "MarginRankingLoss",
    "CosineEmbeddingLoss", "TripletMarginLoss", "LayerNorm", "GroupNorm", "BatchNorm1d",
    "BatchNorm2d", "Embedding", "EmbeddingBag", "CosineSimilarity", "PairwiseDistance",
    "Bilinear",
    "RNNCell", "GRUCell", "LSTMCell", "RNN", "GRU", "LSTM", "Conv1d", "Conv2d", "MaxPool2d",
    "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool3d", "RMSNorm", "MultiheadAttention",
    "TransformerEncoderLayer", "Upsample", "ZeroPad2d", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "FeatureAlphaDropout", "RReLU", "ConvTranspose1d", "ConvTranspose2d",
    "Unfold", "Fold", "Conv3d", "ConvTranspose3d",
    "MaxPool1d", "AvgPool1d", "AdaptiveMaxPool2d", "MaxPool3d", "AvgPool3d",
    "AdaptiveMaxPool1d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d",
    "LPPool3d", "InstanceNorm1d", "InstanceNorm2d",
    "BatchNorm3d", "InstanceNorm3d", "LocalResponseNorm",
    "PixelShuffle", "Softmax2d", "ZeroPad1d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
    "CircularPad1d", "CircularPad2d", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
    "MultiMarginLoss", "HingeEmbeddingLoss", "UpsamplingNearest2d", "TransformerEncoder",
    "Transformer",
    "TransformerDecoderLayer", "TransformerDecoder", "UpsamplingBilinear2d", "PixelUnshuffle",
    "UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d", "LazyConv2d",
    "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
    "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
    "LazyInstanceNorm2d", "LazyInstanceNorm3d", "CTCLoss",
    "ChannelShuffle", "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d",
    "RNNBase", "RNNCellBase",
    "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss", "FractionalMaxPool2d",
    "FractionalMaxPool3d", "AdaptiveLogSoftmaxWithLoss", "parallel", "DataParallel",
    "SyncBatchNorm",
]


from .._public import public_dir as _public_dir  # noqa: E402

__dir__ = _public_dir(globals())   # tab completion offers __all__, not the imports
