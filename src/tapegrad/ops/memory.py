"""Memory seen by address inside compiled code: a record column, an arena, or a caller's
array a kernel reads where it is (``ext``), as a NumPy array that owns nothing.

Its own module, below ``entries`` and the op families, because both use it: the entries to
unpack their context, the elementwise loops to read a large constant in place."""
from numba.core import cgutils, types
from numba.extending import intrinsic
from numba.np.arrayobj import make_array, populate_array


def _view_of(dtype):
    """An intrinsic ``view(address, length)``: ``length`` values of ``dtype`` at ``address``
    as a C-contiguous 1-D array that owns nothing (the caller keeps the memory alive).
    ``numba.carray`` does the same through an overload that numba types and compiles anew at
    every call site: 13 such views, alone in a function, compiled in 0.55 s, this intrinsic's
    in 0.15 s (in an entry, whose rule takes most of its compile, 0-0.15 s less a compile)."""
    array_type = types.Array(dtype, 1, "C")

    @intrinsic
    def view(typingctx, address, length):
        sig = array_type(types.int64, types.int64)

        def codegen(context, builder, signature, args):
            data_type = context.get_data_type(dtype)
            itemsize = cgutils.intp_t(context.get_abi_sizeof(data_type))
            array = make_array(array_type)(context, builder)
            populate_array(array, data=builder.inttoptr(args[0], data_type.as_pointer()),
                           shape=[args[1]], strides=[itemsize], itemsize=itemsize,
                           meminfo=None)
            return array._getvalue()
        return sig, codegen
    return view


view_i64 = _view_of(types.int64)
view_f64 = _view_of(types.float64)
view_u8 = _view_of(types.uint8)
