"""The samplers and reparameterisation gradients of ATen's CPU kernels for the gamma family
(``_standard_gamma``, ``_sample_dirichlet``, ``binomial``) and their gradients
(``_standard_gamma_grad``, ``_dirichlet_grad``).

Each sampler runs an element at a time in the result's order, drawing from tapegrad's copy of
PyTorch's generator exactly as ATen's serial kernels do: a uniform is one 53-bit double, a
normal is one of a Box-Muller pair (the other kept for the next normal draw), so the numbers
after ``manual_seed`` are PyTorch's.  The arithmetic is scalar C double arithmetic (those
kernels are built for the baseline CPU: no fused multiply-add), with the ``float`` literals
of the C source (``0.0331f``, ``1.0f / 3.0f``, ``0.8f``...) taken at their float values.
"""
import math

import numpy as np

_F32 = np.float32
_THIRD_F = float(_F32(1.0) / _F32(3.0))     # 1.0f / 3.0f, divided in float
_C0331 = float(_F32(0.0331))
_C08 = float(_F32(0.8))
_C09 = float(_F32(0.9))
_C11 = float(_F32(1.1))
_TINY = 2.2250738585072014e-308              # numeric_limits<double>::min()
_BELOW_ONE = float(np.nextafter(1.0, 0.0))
_PSI_10 = 2.25175258906672110764
_PSI_SERIES = (8.33333333333333333333E-2, -2.10927960927960927961E-2,
               7.57575757575757575758E-3, -4.16666666666666666667E-3,
               3.96825396825396825397E-3, -8.33333333333333333333E-3,
               8.33333333333333333333E-2)


def _uniform(stream):
    return float(stream._unit(1)[0])


def _normal(stream):
    return float(stream.normals_one_at_a_time(1)[0])


def sample_gamma(alpha, stream):
    """One draw of Gamma(alpha, 1): Marsaglia and Tsang's rejection, alpha < 1 boosted by
    a uniform's power (ATen's ``sample_gamma``)."""
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        scale *= math.pow(1 - _uniform(stream), 1.0 / alpha)
        alpha += 1.0
    d = alpha - _THIRD_F
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = _normal(stream)
            y = 1.0 + c * x
            if not y <= 0:
                break
        v = y * y * y
        u = 1 - _uniform(stream)
        xx = x * x
        if u < 1.0 - _C0331 * xx * xx:
            return scale * d * v
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


def standard_gamma_array(alpha, stream):
    """``_standard_gamma`` of a float64 array: each draw at least the smallest normal
    double."""
    flat = [max(_TINY, sample_gamma(a, stream)) for a in alpha.reshape(-1).tolist()]
    return np.array(flat, dtype=np.float64).reshape(alpha.shape)


def normalise_dirichlet(gamma, total):
    """``_sample_dirichlet``'s last step: gamma draws over their sum, each clamped into
    [smallest normal double, the double below 1]."""
    ratio = gamma / total
    return np.minimum(_BELOW_ONE, np.maximum(_TINY, ratio))


def digamma_one(x):
    """ATen's ``digamma_one`` (the one its reparameterisation gradients call)."""
    if x == 0:
        return math.inf
    extra = 0.0
    if x < 0:
        if x == math.floor(x):
            return math.inf
        extra = -math.pi / math.tan(math.pi * x)
        x = 1 - x
    result = 0.0
    while x < 10:
        result -= 1 / x
        x += 1
    if x == 10:
        return result + _PSI_10 + extra
    y = 0.0
    if x < 1.0e17:
        z = 1.0 / (x * x)
        p = 0.0
        for a in _PSI_SERIES:
            p = p * z + a
        y = z * p
    return result + math.log(x) - (0.5 / x) - y + extra


_GAMMA_UV = ((0.16009398, -0.094634809, 0.025146376, -0.0030648343,
              1, 0.32668115, 0.10406089, 0.0014179084),
             (0.53487893, 0.1298071, 0.065735949, -0.0015649758,
              0.16639465, 0.020070113, -0.0035938915, -0.00058392623),
             (0.040121004, -0.0065914022, -0.0026286047, -0.0013441777,
              0.017050642, -0.0021309326, 0.00085092367, -1.5247877e-07))


def standard_gamma_grad_one(alpha, x):
    """d x / d alpha of a Gamma(alpha, 1) draw x at fixed CDF (ATen's
    ``standard_gamma_grad_one``): a Taylor series for small x, Rice's saddle point for large
    alpha, else a rational approximation."""
    if x < _C08:
        numer = 1.0
        denom = alpha
        series1 = numer / denom
        series2 = numer / (denom * denom)
        for i in range(1, 6):
            numer *= -x / float(i)
            denom += 1
            series1 += numer / denom
            series2 += numer / (denom * denom)
        pow_x_alpha = _pow(x, alpha)
        gamma_pdf = _pow(x, alpha - 1) * _exp(-x)
        gamma_cdf = pow_x_alpha * series1
        gamma_cdf_alpha = (_log(x) - digamma_one(alpha)) * gamma_cdf - pow_x_alpha * series2
        result = _div(-gamma_cdf_alpha, gamma_pdf)
        return 0.0 if math.isnan(result) else result
    if alpha > 8.0:
        if _C09 * alpha <= x <= _C11 * alpha:
            numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
            numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x)
                       - 65 * x * x / alpha + alpha * (107 + 3600 * x))
            denom = 1244160 * (alpha * alpha) * (alpha * alpha)
            return numer_1 * numer_2 / denom
        denom = math.sqrt(8 * alpha)
        term2 = _div(denom, alpha - x)
        term3 = _pow(x - alpha - alpha * _log(x / alpha), -1.5)
        term23 = term2 - term3 if x < alpha else term2 + term3
        term1 = _log(x / alpha) * term23 - _div(math.sqrt(2 / alpha) * (alpha + x),
                                                ((alpha - x) * (alpha - x)))
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        numer = x * term1
        return -stirling * numer / denom
    u = _log(x / alpha)
    v = _log(alpha)
    cv = [_GAMMA_UV[0][i] + u * (_GAMMA_UV[1][i] + u * _GAMMA_UV[2][i]) for i in range(8)]
    p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
    q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
    return _exp(p / q)


def _log(x):
    if x > 0:
        return math.log(x)
    return -math.inf if x == 0 else math.nan


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _pow(x, y):
    try:
        return math.pow(x, y)
    except (OverflowError, ValueError, ZeroDivisionError):
        return float(np.power(np.float64(x), np.float64(y)))


def _div(a, b):
    if b == 0:
        return float(np.float64(a) / np.float64(0.0)) if a == a else math.nan
    return a / b


def _beta_grad_alpha_small(x, alpha, beta):
    factor = digamma_one(alpha) - digamma_one(alpha + beta) - _log(x)
    numer = 1.0
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        fi = float(i)
        numer *= (fi - beta) * x / fi
        denom = alpha + fi
        series += numer / denom * (factor + 1 / denom)
    result = x * _pow(1 - x, -beta) * series
    return 0.0 if math.isnan(result) else result


def _beta_grad_beta_small(x, alpha, beta):
    factor = digamma_one(alpha + beta) - digamma_one(beta)
    numer, betas, dbetas, series = 1.0, 1.0, 0.0, factor / alpha
    for i in range(1, 9):
        fi = float(i)
        numer *= -x / fi
        dbetas = dbetas * (beta - fi) + betas
        betas = betas * (beta - fi)
        series += numer / (alpha + fi) * (dbetas + factor * betas)
    result = -_pow(1 - x, 1 - beta) * series
    return 0.0 if math.isnan(result) else result


def _beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = math.sqrt(alpha * beta / (total + 1)) / total
    if mean - 0.1 * std <= x <= mean + 0.1 * std:
        poly = (47 * x * (beta * beta) * (beta * beta) + alpha * (
            (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
                3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                    (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (
                        8 * (1 - x) * (135 * beta - 11))))))
        prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
        prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
        return prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / math.sqrt(2 * alpha * beta / total)
    stirling = ((1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha))
                * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta))
                / (1 + 1 / (12 * total) + 1 / (288 * total * total)))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = math.sqrt(2 * alpha / beta) * _pow(total, 1.5) * axbx * axbx
    term1 = _div(term1_num, term1_den)
    term2 = 0.5 * _log(alpha / (total * x))
    term3_num = math.sqrt(8 * alpha * beta / total)
    term3_den = beta * x + alpha * (x - 1)
    term3 = _div(term3_num, term3_den)
    term4_base = (beta * _log(beta / (total * (1 - x)))
                  + alpha * _log(alpha / (total * x)))
    term4 = _pow(term4_base, -1.5)
    term1234 = term1 + term2 * (term3 + (term4 if x < mean else -term4))
    return stirling * prefactor * term1234


_DIRICHLET_C = (
    (((1.003668233, -0.01061107488, -0.0657888334, 0.01201642863),
      (0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033),
      (-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013)),
     ((0.221950385, -0.3187676331, 0.01799915743, 0.01074823814),
      (-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057),
      (0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05)),
     ((-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565),
      (0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181),
      (0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05))),
    (((1, -0.02924021934, -0.04438342661, 0.007285809825),
      (0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521),
      (-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149)),
     ((0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273),
      (0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956),
      (-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05)),
     ((0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05),
      (0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05),
      (-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06))))


def dirichlet_grad_one(x, alpha, total):
    """d x / d alpha of a Beta(alpha, total - alpha) draw x at fixed CDF, divided by 1 - x
    (ATen's ``dirichlet_grad_one``)."""
    beta = total - alpha
    boundary = total * x * (1 - x)
    if x <= 0.5 and boundary < 2.5:
        return _beta_grad_alpha_small(x, alpha, beta)
    if x >= 0.5 and boundary < 0.75:
        return -_beta_grad_beta_small(1 - x, beta, alpha)
    if alpha > 6 and beta > 6:
        return _beta_grad_alpha_mid(x, alpha, beta)
    u = _log(x)
    a = _log(alpha) - u
    b = _log(total) - a
    pow_u = (1.0, u, u * u)
    pow_a = (1.0, a, a * a)
    p = 0.0
    q = 0.0
    c = _DIRICHLET_C
    for i in range(3):
        for j in range(3):
            ua = pow_u[i] * pow_a[j]
            cp, cq = c[0][i][j], c[1][i][j]
            p += ua * (cp[0] + b * (cp[1] + b * (cp[2] + b * cp[3])))
            q += ua * (cq[0] + b * (cq[1] + b * (cq[2] + b * cq[3])))
    approx = _div(x * (digamma_one(total) - digamma_one(alpha)), beta)
    return p / q * approx


def _ieee(fn, *args):
    # Python floats raise where C's doubles give inf or NaN (a zero divisor, an overflow):
    # such a case is computed again with NumPy scalars, which follow IEEE
    try:
        return fn(*args)
    except (ZeroDivisionError, OverflowError, ValueError):
        with np.errstate(all="ignore"):
            try:
                return float(fn(*(np.float64(a) for a in args)))
            except (ZeroDivisionError, OverflowError, ValueError):
                return math.nan


def standard_gamma_grad_array(alpha, x):
    alpha, x = np.broadcast_arrays(alpha, x)
    flat = [_ieee(standard_gamma_grad_one, a, v)
            for a, v in zip(alpha.reshape(-1).tolist(), x.reshape(-1).tolist())]
    return np.array(flat, dtype=np.float64).reshape(alpha.shape)


def dirichlet_grad_array(x, alpha, total):
    x, alpha, total = np.broadcast_arrays(x, alpha, total)
    flat = [_ieee(dirichlet_grad_one, a, b, c) for a, b, c in
            zip(x.reshape(-1).tolist(), alpha.reshape(-1).tolist(), total.reshape(-1).tolist())]
    return np.array(flat, dtype=np.float64).reshape(x.shape)


# --- binomial ----------------------------------------------------------------------------
_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
         0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
         0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k):
    if k < len(_TAIL):
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _binomial_inversion(count, prob, stream):
    geom_sum = 0.0
    num_geom = 0.0
    logprob = math.log1p(-prob)
    while True:
        u = _uniform(stream)
        geom = math.ceil(_log(u) / logprob)
        geom_sum += geom
        if geom_sum > count:
            return num_geom
        num_geom = num_geom + 1


def _btrs(count, prob, stream):
    stddev = math.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor((count + 1) * prob)
    while True:
        u = _uniform(stream) - 0.5
        v = _uniform(stream)
        us = 0.5 - abs(u)
        k = float(math.floor((2 * a / us + b) * u + c))
        if k < 0 or k > count:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = _log(v * alpha / (a / (us * us) + b))
        upperbound = ((m + 0.5) * _log((m + 1) / (r * (count - m + 1)))
                      + (count + 1) * _log((count - m + 1) / (count - k + 1))
                      + (k + 0.5) * _log(r * (count - k + 1) / (k + 1))
                      + _stirling_tail(m) + _stirling_tail(count - m)
                      - _stirling_tail(k) - _stirling_tail(count - k))
        if v <= upperbound:
            return k


def sample_binomial(count, prob, stream):
    """One draw of ATen's ``sample_binomial``: inversion by geometric jumps for a mean below
    10, Hoermann's BTRS rejection above (on 1 - prob above one half)."""
    if count <= 0.0 or prob <= 0.0:
        return 0.0
    if prob >= 1.0:
        return count
    if prob <= 0.5:
        if count * prob >= 10.0:
            return _btrs(count, prob, stream)
        return _binomial_inversion(count, prob, stream)
    if prob > 0.5:
        qprob = 1.0 - prob
        if count * qprob >= 10.0:
            return count - _btrs(count, qprob, stream)
        return count - _binomial_inversion(count, qprob, stream)
    return math.nan


def binomial_array(count, prob, stream):
    count, prob = np.broadcast_arrays(count, prob)
    flat = [sample_binomial(n, p, stream)
            for n, p in zip(count.reshape(-1).tolist(), prob.reshape(-1).tolist())]
    return np.array(flat, dtype=np.float64).reshape(count.shape)


# --- sums over the last dimension in ATen's order ------------------------------------------
_LANES = 4          # doubles in one of ATen's vectors (checked against PyTorch on this CPU)
_ILP = 4            # vectors summed side by side


def _cascade(blocks):
    """ATen's ``multi_row_sum``: rows of blocks (R, size, ...) summed in a cascade of four
    levels, so long rows keep their rounding error small."""
    size = blocks.shape[1]
    levels = 4
    power = max(4, (int(size - 1).bit_length() if size > 1 else 0) // levels)
    step = 1 << power
    acc = np.zeros((levels, blocks.shape[0]) + blocks.shape[2:])
    i = 0
    while i + step <= size:
        for _ in range(step):
            acc[0] += blocks[:, i]
            i += 1
        for j in range(1, levels):
            acc[j] += acc[j - 1]
            acc[j - 1] = 0.0
            if i & ((step - 1) << (j * power)):
                break
    while i < size:
        acc[0] += blocks[:, i]
        i += 1
    for j in range(1, levels):
        acc[0] += acc[j]
    return acc[0]


def last_dim_sum(a):
    """``a.sum(-1, keepdim=True)`` with PyTorch's rounding: its inner-sum kernel adds whole
    vectors of 4 doubles (4 vectors side by side), then the leftover elements from zero,
    then the vector's lanes one by one."""
    a = np.ascontiguousarray(a, dtype=np.float64)
    shape = a.shape
    n = shape[-1]
    rows = a.reshape(-1, n)
    nvec = n // _LANES
    vecs = rows[:, :nvec * _LANES].reshape(rows.shape[0], nvec, _LANES)
    whole = nvec // _ILP
    partial = _cascade(vecs[:, :whole * _ILP].reshape(rows.shape[0], whole, _ILP, _LANES))
    for i in range(whole * _ILP, nvec):
        partial[:, 0] += vecs[:, i]
    for k in range(1, _ILP):
        partial[:, 0] += partial[:, k]
    total = np.zeros(rows.shape[0])
    for k in range(nvec * _LANES, n):
        total += rows[:, k]
    for k in range(_LANES):
        total += partial[:, 0, k]
    return total.reshape(shape[:-1] + (1,))
