"""Which arguments of the public functions PyTorch takes as tensors only, and the names
its TypeError gives them.  Read off PyTorch 2.13 by calling each function with a wrong-typed
argument (a script outside the repository), also with more arguments after it, for the
overloads that take a number only so (``normal(0.0, 1.0, size=(2,))``); _argtypes.py applies
it.

``ARGS[module][name]`` (and ``METHODS[name]``) is one row per function, one entry per such
argument: ``(index, tapegrad's parameter name, PyTorch's function name, its argument name,
its position, the kinds PyTorch also accepts there)`` -- kinds: ``f`` a float, ``i`` an
integer, ``l`` a list, ``t`` a tuple, ``n`` None, ``s`` anything else.

The rows are written as text, parsed once at import: as a dict literal of ~540 tuples this
module took 9-17 ms to compile where no ``.pyc`` is written (``PYTHONDONTWRITEBYTECODE``, a
read-only install), as text ~1.6 ms, 0.8 ms of it the split (with a ``.pyc``: 0.35 ms, now
0.8 ms).  One line per function::

    name[=PyTorch's name] entry entry ...

PyTorch's name is, when not written, the module's prefix and ``name`` (``linalg.norm``:
``linalg_norm``).  The entries are the arguments from the first (index 0; for a method the
one after ``self``, index 1) on, each ``mine[>PyTorch's][/kinds]``: tapegrad's parameter
name (``-``: positional only), PyTorch's argument name when it differs, and the kinds.  The
position PyTorch's text gives is the index plus one for a function (PyTorch counts from 1),
the index for a method (``self`` not counted).
"""


def _rows(text, first, offset, prefix=""):
    """``{name: row}`` from ``text`` (lines as the docstring says); ``first``: the first
    entry's index, ``offset``: position minus index, ``prefix``: of PyTorch's name."""
    rows = {}
    for line in text.split("\n"):
        if not line:
            continue
        name, *entries = line.split(" ")
        name, _, fname = name.partition("=")
        fname = fname or prefix + name
        row = []
        for i, entry in enumerate(entries, first):
            entry, _, kinds = entry.partition("/")
            mine, _, arg = entry.partition(">")
            row.append((i, None if mine == "-" else mine, fname, arg or mine, i + offset,
                        kinds))
        rows[name] = tuple(row)
    return rows


ARGS = {
    '': _rows("""
abs x>input
absolute input
acos x>input
acosh x>input
add a>input/fi b>other/fi
addcdiv input tensor1
addcmul input tensor1
addmm input mat1
addr input vec1
adjoint input
all input
allclose input other
amax x>input
amin x>input
aminmax input
angle input
any input
arccos x>input
arccosh x>input
arcsin x>input
arcsinh x>input
arctan x>input
arctan2 input other
arctanh x>input
argmax x>input
argmin x>input
argsort x>input
argwhere input
asin x>input
asinh x>input
atan x>input
atan2 input other
atanh x>input
atleast_1d ->input/lt
atleast_2d ->input/lt
atleast_3d ->input/lt
bernoulli input
bmm input mat2
bucketize input/fi boundaries
cdist x1 x2
ceil x>input
cholesky_inverse L>input
cholesky_solve B>input L>input2
chunk x>input
clamp x>input min/fin
clamp_max x>input max/fi
clamp_min x>input min/fi
clip x>input min/fin
clone x>input
combinations input
conj input
copysign input other/fi
corrcoef input
cos x>input
cosh x>input
cosine_similarity x1 x2
count_nonzero input
cov input
cross input other
cummax x>input
cummin x>input
cumprod x>input
cumsum x>input
cumulative_trapezoid y
deg2rad input
det A>input
diag input
diag_embed input
diagflat input
diagonal x>input
diff x>input
digamma x>input
dist input other
div a>input/fi b>other/fi
divide a>input/fi b/fi
dot input tensor
empty_like ->input
eq input other/fi
equal input other
erf x>input
erfc x>input
erfinv x>input
exp x>input
exp2 x>input
expm1 x>input
fix x>input
flatten x>input
fliplr x>input
flipud x>input
float_power input/fi exponent/fi
floor x>input
floor_divide input/fi other/fi
fmax input other
fmin input other
fmod input other/fi
frac x>input
frexp input
full_like ->input
gather x>input
ge input other/fi
ger a>input b>vec2
get_device input
gradient input
greater input other/fi
greater_equal input other/fi
gt input other/fi
hardshrink input
heaviside input values
histc input
hsplit input
hypot input other
i0 x>input
inner input other
inverse A>input
is_complex input
is_conj input
is_floating_point input
is_neg input
is_same_size input other
is_signed input
isclose input other
isfinite x>input
isin elements>input/fi test_elements/fi
isinf x>input
isnan x>input
isneginf x>input
isposinf x>input
isreal input
kron input other
kthvalue x>input
ldexp input other
le input other/fi
lerp input end
less input other/fi
less_equal input other/fi
lgamma x>input
log x>input
log10 x>input
log1p x>input
log2 x>input
log_softmax x>input
logaddexp input other
logaddexp2 input other
logcumsumexp x>input
logdet A>input
logical_and a>input b>other
logical_not x>input
logical_or a>input b>other
logical_xor a>input b>other
logit input
logsumexp x>input
lt input other/fi
lu=_lu_with_info A>input
matmul a>input b>other
matrix_exp A>input
matrix_power A>input
max x>input
maximum a>input b>other
mean x>input
median x>input
min x>input
minimum a>input b>other
mm input mat2
mode x>input
msort x>input
mul a>input/fi b>other/fi
multinomial input
multiply a>input/fi b/fi
mvlgamma x>input
nan_to_num input
nanmean input
nanmedian x>input
nanquantile input q/fi
nansum input
ne input other/fi
neg x>input
negative input
nextafter input other
nonzero input
normal mean/fi
not_equal input other/fi
numel input
ones_like ->input
outer a>input b>vec2
pdist input
pinverse input
poisson input
positive input
pow a>input/fi b>exponent/fi
prod x>input
qr input
quantile input q/fi
rad2deg input
rand_like ->input
randn_like ->input
randint_like ->input
ravel input
real input
reciprocal x>input
relu x>input
remainder input/fi other/fi
resolve_conj input
resolve_neg input
result_type tensor1>input/fi tensor2/fi
roll x>input
rot90 input
round x>input
rsqrt x>input
searchsorted sorted_sequence>input input/fi
sgn input
sigmoid x>input
sign x>input
signbit input
sin x>input
sinc input
sinh x>input
slice_scatter input src
slogdet A>input
softmax x>input
sort x>input
sqrt x>input
square x>input
squeeze x>input
std x>input
std_mean input
sub a>input/fi b>other/fi
subtract a>input/fi b/fi
sum x>input
svd input
t x>input
tan x>input
tanh x>input
tensor_split input
topk x>input
trace A>input
trapezoid y
trapz y
triangular_solve b>input A
tril input
triu input
true_divide a>input/fi b/fi
trunc x>input
unbind x>input
unique=_unique2 input
unique_consecutive input
unsafe_chunk input
unsafe_split input
unsqueeze x>input
vander x
var x>input
var_mean input
vdot input other
vsplit input
where condition
xlogy input/fi other/fi
zeros_like ->input
""", 0, 1, ''),
    'linalg': _rows("""
cholesky_ex A>input
cond A>input
cross input other
det A
diagonal A
eigh A>input
eigvalsh A>input
inv A
inv_ex A
lstsq A>input B>b
lu A
lu_factor A
lu_factor_ex A
matmul input other
matrix_exp A>input
matrix_norm A>input
matrix_power A>input
matrix_rank A>input
norm A>input
pinv A>input
qr A
slogdet A
solve A B
solve_ex A B
svd A
svdvals A
tensorinv A>input
tensorsolve A>input B>other
vander x
vecdot x y
vector_norm x>input
""", 0, 1, 'linalg_'),
    'nn.functional': _rows("""
adaptive_avg_pool1d input
avg_pool1d input
celu input
conv1d input weight
conv_transpose1d input weight bias/n
conv_transpose2d input weight bias/n
conv_transpose3d input weight bias/n
fold=col2im input
unfold=im2col input
cosine_similarity x1 x2
cross_entropy=cross_entropy_loss input target
dropout input
elu input
gelu input
gumbel_softmax=empty_like logits>input
hardshrink input
hardsigmoid input
hardswish input
hardtanh input
hinge_embedding_loss input target
kl_div input target
leaky_relu input
linear input weight
logsigmoid=log_sigmoid input
max_pool1d input
mish input
multilabel_soft_margin_loss=log_sigmoid input
pairwise_distance x1 x2
poisson_nll_loss input target
relu input
relu6 input
scaled_dot_product_attention query key
selu input
silu input
soft_margin_loss input target
softplus input
softshrink input
triplet_margin_loss anchor positive
adaptive_max_pool1d input
avg_pool2d input
avg_pool3d input
max_pool2d input
max_pool3d input
max_pool1d_with_indices input
max_pool2d_with_indices input
""", 0, 1, ''),
    'special': _rows("""
airy_ai x
bessel_j0 input
bessel_j1 input
bessel_y0 input
bessel_y1 input
digamma x>input
entr input
erf x>input
erfc x>input
erfcx input
erfinv x>input
exp2 x>input
expit x>input
expm1 x>input
gammaln x>input
i0 x>input
i0e x>input
i1 x>input
i1e x>input
log1p x>input
log_ndtr input
log_softmax input
logit input
logsumexp x>input
modified_bessel_i0 input
modified_bessel_i1 input
modified_bessel_k0 input
modified_bessel_k1 input
multigammaln x>input
ndtr input
ndtri input
psi x>input
round x>input
scaled_modified_bessel_k0 x
scaled_modified_bessel_k1 x
sinc input
softmax input
spherical_bessel_j0 x
xlog1py input/fi other/fi
xlogy input/fi other/fi
""", 0, 1, 'special_'),
}

# Functions that take several tensors: ``"seq"`` a list or tuple of them as the first argument
# (``cat(tensors, dim)``), ``"each"`` each as an argument of its own (``block_diag(*tensors)``)
# and ``"unpack"`` either (``meshgrid(a, b)`` or ``meshgrid([a, b])``); with the name
# PyTorch's TypeError gives the function.
SEQUENCES = {
    "": {
        "cat": ("seq", "cat"), "concat": ("seq", "concat"),
        "concatenate": ("seq", "concatenate"), "stack": ("seq", "stack"),
        "hstack": ("seq", "hstack"), "vstack": ("seq", "vstack"), "dstack": ("seq", "dstack"),
        "column_stack": ("seq", "column_stack"), "row_stack": ("seq", "row_stack"),
        "block_diag": ("each", "block_diag"), "broadcast_tensors": ("each", "broadcast_tensors"),
        "cartesian_prod": ("each", "cartesian_prod"), "chain_matmul": ("each", "chain_matmul"),
        "atleast_1d": ("unpack", "atleast_1d"), "atleast_2d": ("unpack", "atleast_2d"),
        "atleast_3d": ("unpack", "atleast_3d"), "meshgrid": ("unpack", "meshgrid"),
    },
    "nn.functional": {},
    "linalg": {"multi_dot": ("seq", "linalg_multi_dot")},
    "special": {},
}

# Tensor methods: the same for the argument after ``self`` (PyTorch counts it as position
# 1).  The operators keep Python's own handling, but for ``@``.
METHODS = _rows("""
add b>other/fi
add_ other/fi
allclose other
arctan2 other
arctan2_ ->other
atan2 other
atan2_ ->other
bernoulli_ ->other/fi
cholesky_solve L>input2
clamp min/fin
clamp_max max/fi
clamp_max_ ->other/fi
clamp_min min/fi
clamp_min_ ->other/fi
clip min/fin
copysign other/fi
copysign_ ->other/fi
cross other
dist other
div b>other/fi
div_ other/fi
divide b/fi
divide_ other/fi
dot tensor
eq b/fi
eq_ other/fi
equal other
expand_as other
float_power exponent/fi
float_power_ ->other/fi
floor_divide other/fi
floor_divide_ ->other/fi
fmax other
fmin other
fmod other/fi
fmod_ ->other/fi
ge b/fi
ge_ other/fi
ger b>vec2
greater other/fi
greater_ other/fi
greater_equal other/fi
greater_equal_ other/fi
gt b/fi
gt_ other/fi
heaviside values
heaviside_ ->values
hypot other
hypot_ ->other
inner other
is_same_size other
isclose other
kron other
ldexp other
ldexp_ ->other
le b/fi
le_ other/fi
less other/fi
less_ other/fi
less_equal other/fi
less_equal_ other/fi
logaddexp other
logaddexp2 other
logical_and b>other
logical_and_ ->other
logical_or b>other
logical_or_ ->other
logical_xor b>other
logical_xor_ ->other
lt b/fi
lt_ other/fi
map_ tensor>other
matmul b>other
max dim/i
maximum b>other
min dim/i
minimum b>other
mm mat2
mul b>other/fi
mul_ other/fi
multiply b/fi
multiply_ other/fi
nanquantile q/fi
ne b/fi
ne_ other/fi
nextafter other
nextafter_ other
not_equal other/fi
not_equal_ other/fi
outer b>vec2
pow b>exponent/fi
pow_ other/fi
quantile q/fi
remainder other/fi
remainder_ ->other/fi
reshape_as other
resize_as_ the_template
slice_scatter src
sub b>other/fi
sub_ other/fi
subtract b/fi
subtract_ other/fi
triangular_solve A
true_divide b/fi
true_divide_ other/fi
type_as other
vdot other
view_as other
xlogy other/fi
xlogy_ ->other/fi
""", 1, 0)
