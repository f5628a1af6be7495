"""PyTorch's module paths for names tapegrad defines elsewhere.

Programs import from where PyTorch defines a name, not only from where it exports it:
``from torch.nn.modules.loss import _Loss``, ``from torch.autograd import Variable``,
``from torch.distributions.normal import Normal``, ``from torch.utils.data.dataset import
Dataset``.  tapegrad's modules are laid out differently, so each such path is a module made
here that holds the names PyTorch's module of that path holds, where tapegrad has them (the
same objects as under their public names), registered in ``sys.modules`` and as an
attribute of its parent (``tapegrad.nn.modules.loss`` works as an expression too).

A path whose module exists in tapegrad already (``tapegrad.optim.sgd``, ``tapegrad.nn.
modules.module``) is not listed.  Each entry says where the names are read from: modules
relative to the package ("" is tapegrad itself), tried in order.
"""
import sys
import types

PATHS = {
    "autograd.variable": ("legacy", "Variable VariableMeta"),
    "autograd.grad_mode": ("", "no_grad enable_grad set_grad_enabled inference_mode"),

    "nn.modules.activation": (
        "nn", "Threshold ReLU RReLU Hardtanh ReLU6 Sigmoid Hardsigmoid Tanh SiLU Mish "
              "Hardswish ELU CELU SELU GLU GELU Hardshrink LeakyReLU LogSigmoid Softplus "
              "Softshrink MultiheadAttention PReLU Softsign Tanhshrink Softmin Softmax "
              "Softmax2d LogSoftmax"),
    "nn.modules.adaptive": ("nn", "AdaptiveLogSoftmaxWithLoss"),
    "nn.modules.batchnorm": (
        "nn nn.normalization nn.lazy",
        "BatchNorm1d LazyBatchNorm1d BatchNorm2d LazyBatchNorm2d BatchNorm3d "
        "LazyBatchNorm3d SyncBatchNorm _BatchNorm _LazyNormBase"),
    "nn.modules.channelshuffle": ("nn", "ChannelShuffle"),
    "nn.modules.container": (
        "nn nn.modules", "Sequential ModuleList ModuleDict ParameterList ParameterDict "
                         "_addindent"),
    "nn.modules.conv": (
        "nn nn.conv nn.lazy",
        "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d "
        "LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d "
        "_ConvNd _ConvTransposeNd _LazyConvXdMixin"),
    "nn.modules.distance": ("nn", "PairwiseDistance CosineSimilarity"),
    "nn.modules.dropout": (
        "nn nn.modules", "Dropout Dropout1d Dropout2d Dropout3d AlphaDropout "
                         "FeatureAlphaDropout _DropoutNd"),
    "nn.modules.flatten": ("nn", "Flatten Unflatten"),
    "nn.modules.fold": ("nn", "Fold Unfold"),
    "nn.modules.instancenorm": (
        "nn nn.normalization", "InstanceNorm1d InstanceNorm2d InstanceNorm3d "
                               "LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d "
                               "_InstanceNorm"),
    "nn.modules.linear": ("nn", "Bilinear Identity LazyLinear Linear"),
    "nn.modules.loss": (
        "nn nn.modules",
        "L1Loss NLLLoss PoissonNLLLoss GaussianNLLLoss KLDivLoss MSELoss BCELoss "
        "BCEWithLogitsLoss HingeEmbeddingLoss MultiLabelMarginLoss SmoothL1Loss HuberLoss "
        "SoftMarginLoss CrossEntropyLoss MultiLabelSoftMarginLoss CosineEmbeddingLoss "
        "MarginRankingLoss MultiMarginLoss TripletMarginLoss TripletMarginWithDistanceLoss "
        "CTCLoss _Loss _WeightedLoss"),
    "nn.modules.normalization": ("nn", "LocalResponseNorm LayerNorm GroupNorm RMSNorm"),
    "nn.modules.padding": (
        "nn nn.padding",
        "CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d ConstantPad3d "
        "ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d "
        "ReplicationPad3d ZeroPad1d ZeroPad2d ZeroPad3d _ConstantPadNd"),
    "nn.modules.pixelshuffle": ("nn", "PixelShuffle PixelUnshuffle"),
    "nn.modules.pooling": (
        "nn", "MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d AvgPool1d "
              "AvgPool2d AvgPool3d FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d "
              "LPPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d "
              "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d"),
    "nn.modules.rnn": (
        "nn", "RNNBase RNN LSTM GRU RNNCellBase RNNCell LSTMCell GRUCell"),
    "nn.modules.sparse": ("nn", "Embedding EmbeddingBag"),
    "nn.modules.transformer": (
        "nn", "Transformer TransformerEncoder TransformerDecoder TransformerEncoderLayer "
              "TransformerDecoderLayer"),
    "nn.modules.upsampling": ("nn", "Upsample UpsamplingNearest2d UpsamplingBilinear2d"),
    "nn.modules.utils": (
        "nn.module_utils", "consume_prefix_in_state_dict_if_present _ntuple _single _pair "
                           "_triple _quadruple _reverse_repeat_tuple _list_with_default"),
    "nn.utils.clip_grad": ("nn.utils", "clip_grad_norm_ clip_grad_value_"),
    "nn.utils.convert_parameters": ("nn.utils", "parameters_to_vector vector_to_parameters"),
    "nn.utils.spectral_norm": ("nn.utils", "spectral_norm remove_spectral_norm"),
    "nn.utils.stateless": ("func", "functional_call"),
    "nn.utils.weight_norm": ("nn.utils", "weight_norm remove_weight_norm"),

    "distributions.bernoulli": ("distributions", "Bernoulli"),
    "distributions.beta": ("distributions", "Beta"),
    "distributions.binomial": ("distributions", "Binomial"),
    "distributions.categorical": ("distributions", "Categorical"),
    "distributions.cauchy": ("distributions", "Cauchy"),
    "distributions.chi2": ("distributions", "Chi2"),
    "distributions.continuous_bernoulli": ("distributions", "ContinuousBernoulli"),
    "distributions.dirichlet": ("distributions", "Dirichlet"),
    "distributions.exp_family": ("distributions", "ExponentialFamily"),
    "distributions.exponential": ("distributions", "Exponential"),
    "distributions.fishersnedecor": ("distributions", "FisherSnedecor"),
    "distributions.gamma": ("distributions", "Gamma"),
    "distributions.generalized_pareto": ("distributions", "GeneralizedPareto"),
    "distributions.geometric": ("distributions", "Geometric"),
    "distributions.gumbel": ("distributions", "Gumbel"),
    "distributions.half_cauchy": ("distributions", "HalfCauchy"),
    "distributions.half_normal": ("distributions", "HalfNormal"),
    "distributions.independent": ("distributions", "Independent"),
    "distributions.inverse_gamma": ("distributions", "InverseGamma"),
    "distributions.kumaraswamy": ("distributions", "Kumaraswamy"),
    "distributions.laplace": ("distributions", "Laplace"),
    "distributions.lkj_cholesky": ("distributions", "LKJCholesky"),
    "distributions.log_normal": ("distributions", "LogNormal"),
    "distributions.logistic_normal": ("distributions", "LogisticNormal"),
    "distributions.lowrank_multivariate_normal": ("distributions", "LowRankMultivariateNormal"),
    "distributions.mixture_same_family": ("distributions", "MixtureSameFamily"),
    "distributions.multinomial": ("distributions", "Multinomial"),
    "distributions.multivariate_normal": ("distributions", "MultivariateNormal"),
    "distributions.negative_binomial": ("distributions", "NegativeBinomial"),
    "distributions.normal": ("distributions", "Normal"),
    "distributions.one_hot_categorical": (
        "distributions", "OneHotCategorical OneHotCategoricalStraightThrough"),
    "distributions.pareto": ("distributions", "Pareto"),
    "distributions.poisson": ("distributions", "Poisson"),
    "distributions.relaxed_bernoulli": (
        "distributions distributions._composite", "RelaxedBernoulli LogitRelaxedBernoulli"),
    "distributions.relaxed_categorical": (
        "distributions distributions._composite",
        "RelaxedOneHotCategorical ExpRelaxedCategorical"),
    "distributions.studentT": ("distributions", "StudentT"),
    "distributions.transformed_distribution": ("distributions", "TransformedDistribution"),
    "distributions.uniform": ("distributions", "Uniform"),
    "distributions.von_mises": ("distributions", "VonMises"),
    "distributions.weibull": ("distributions", "Weibull"),
    "distributions.utils": (
        "distributions.distribution", "broadcast_all logits_to_probs clamp_probs "
                                      "probs_to_logits lazy_property _sum_rightmost"),

    "optim.adadelta": ("optim", "Adadelta"),
    "optim.adagrad": ("optim", "Adagrad"),
    "optim.adamax": ("optim", "Adamax"),
    "optim.adamw": ("optim", "AdamW"),
    "optim.asgd": ("optim", "ASGD"),
    "optim.nadam": ("optim", "NAdam"),
    "optim.radam": ("optim", "RAdam"),

    "types": ("_types", "Number Device FileLike _int _float _bool _complex _str _bytes _dtype "
                        "_device _layout _size _symsize _Number _TensorOrTensors "
                        "_TensorOrOptionalTensors"),

    "utils.hooks": ("_hooks", "RemovableHandle"),
    "utils.data.dataloader": (
        "utils.data", "DataLoader get_worker_info default_collate default_convert"),
    "utils.data.dataset": (
        "utils.data", "Dataset IterableDataset TensorDataset StackDataset ConcatDataset "
                      "ChainDataset Subset random_split"),
    "utils.data.distributed": ("utils.data", "DistributedSampler"),
    "utils.data.sampler": (
        "utils.data", "BatchSampler RandomSampler Sampler SequentialSampler "
                      "SubsetRandomSampler WeightedRandomSampler"),
}


def resolve(package, sources, names):
    """{name: object} for ``names`` (space-separated) read from ``sources`` (modules of
    ``package`` relative to it, space-separated, tried in order), and the names none has."""
    modules = [package if not s else sys.modules[f"{package.__name__}.{s}"]
               for s in (sources.split() or [""])]
    found, missing = {}, []
    for name in names.split():
        for module in modules:
            if hasattr(module, name):
                found[name] = getattr(module, name)
                break
        else:
            missing.append(name)
    return found, missing


def install(package):
    """Register every path of ``PATHS`` under ``package`` (tapegrad, fully imported); the
    names none of its sources has are returned ({path: [names]}), for the tests to refuse.
    An attribute the parent has already under the path's last part is left as it is (the
    ``sys.modules`` entry still serves ``import`` and ``from ... import``)."""
    missing = {}
    for path, (sources, names) in PATHS.items():
        # (the sources are imported here: some are modules no one imported yet)
        for s in sources.split():
            __import__(f"{package.__name__}.{s}")
        found, lacking = resolve(package, sources, names)
        if lacking:
            missing[path] = lacking
        full = f"{package.__name__}.{path}"
        module = types.ModuleType(full, f"PyTorch's ``{path}``: names tapegrad defines "
                                        f"elsewhere, under the path programs import them by.")
        module.__dict__.update(found)
        module.__all__ = [n for n in found if not n.startswith("_")]
        sys.modules[full] = module
        parent_name, _, last = full.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is not None and not hasattr(parent, last):
            setattr(parent, last, module)
    return missing
