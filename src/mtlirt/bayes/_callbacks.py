"""nutpie's numba callbacks, calling PyTensor's compiled functions by address.

``nutpie.compile_pymc_model(model, backend="numba")`` wraps PyTensor's numba
functions (log density with gradient; the expansion to the traced variables)
in two numba C callbacks that call them as numba functions. Numba links the
callee's code into the caller and optimises and emits the whole of it again:
``nutpie.compile_pymc_model`` took 16-20 s for the joint model of 40 LLMs x 30
items in a new process, on every fit, even where PyTensor loaded its
functions from its on-disk cache in half a second.

Here the callbacks call PyTensor's function through its address (numba's
own calling convention: the ``call_at`` intrinsic of :func:`_intrinsics`), so
nothing is linked. ``benchmarks/bench_callbacks.py`` (new processes, session
14, quiet machine): the 40 x 30 model compiled in 3.8 s against nutpie's 18.8
s where PyTensor's cache held its functions; a model of new shapes (120 LLMs x
six domains of 10-60 items, PyTensor compiling its functions first) in 34.0 s
against 53.9 s. PyTensor's functions are compiled once per machine (its cache).
The callbacks do what nutpie's do (the same checks, return codes and
calls): the benchmark's two routes draw the same numbers to the bit, and
``tests/test_bayes.py::test_nuts_callbacks_are_pytensors_functions`` checks
the values and return codes against PyTensor's functions.

The shared data's addresses and shapes, and the two functions' addresses,
are read from ``user_data`` (a ``uint64`` vector): ``[logp address, expand
address, then for each shared variable its data's address and its shape]``.
The callbacks' machine code holds no address, so it is kept in PyTensor's
numba cache (:func:`_compile_callbacks`): what a compile in a new process then
costs is mostly the graph rewriting in nutpie's ``_make_functions`` and
loading PyTensor's functions.

This uses nutpie's ``_make_functions``, ``_prepare_dims_and_coords`` and
``CompiledPyMCModel`` (nutpie 0.16); :func:`compile_pymc` raises
:class:`Unsupported` where they or the model do not fit, and the caller
compiles with nutpie itself.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

__all__ = ["compile_pymc", "initial_point_fn", "Unsupported"]


class Unsupported(Exception):
    """The model or the installed nutpie does not fit this route."""


def _intrinsics():
    """The two numba intrinsics: an integer as a void pointer, and a caller of
    a compiled numba function at an address (numba's calling convention,
    errors propagated as a numba function's)."""
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def as_voidptr(typingctx, addr):
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(addr), codegen

    def caller(star, restype):
        @intrinsic
        def call_at(typingctx, addr, args):
            def codegen(context, builder, sig, llargs):
                fnty = context.call_conv.get_function_type(restype, [star])
                fnptr = builder.inttoptr(llargs[0], fnty.as_pointer())
                status, res = context.call_conv.call_function(builder, fnptr, restype, [star], [llargs[1]])
                with cgutils.if_unlikely(builder, status.is_error):
                    context.call_conv.return_status_propagate(builder, status)
                return res

            return restype(addr, args), codegen

        return call_at

    return as_voidptr, caller


def _entry(function, argtypes):
    """PyTensor's numba function (``function.vm.jit_fn``, which takes its
    inputs as ``*args``) compiled for ``argtypes`` (from PyTensor's cache where
    it is there): its address, the star-args type and its return type."""
    from numba.core import types

    jit = function.vm.jit_fn
    star = types.StarArgTuple.from_types(list(argtypes))
    jit.compile((star,))
    cres = jit.overloads[(star,)]
    return cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name), star, cres.signature.return_type


def _user_data(addresses, shared_data, layout):
    out = [int(addresses[0]), int(addresses[1])]
    for key, _ in layout:
        arr = shared_data[key]
        out += [arr.ctypes.data, *arr.shape]
    return np.array(out, dtype=np.uint64)


def _body_src(name, keys, offsets, shared_data, call, slot):
    """Source of a numba function ``name(x, ud)`` that views the shared data
    ``keys`` at their addresses in ``ud`` and calls ``call(ud[slot], (x,
    *shared))`` (``slot``: where ``ud`` holds the function's address)."""
    lines, args = [f"def {name}(x, ud):"], ["x"]
    for j, key in enumerate(keys):
        arr, off = shared_data[key], offsets[key]
        shape = "".join(f"np.intp(ud[{off + 1 + k}]), " for k in range(arr.ndim))
        lines.append(f"    s{j} = numba.carray(as_voidptr(ud[{off}]), ({shape}), np.{arr.dtype.name})")
        args.append(f"s{j}")
    lines.append(f"    return {call}(ud[{slot}], ({', '.join(args)},))")
    return "\n".join(lines)


_CALLBACKS = """
def logp_cb(dim, x_, out_, logp_, ud_):
    if dim != {n}:
        return -1
    try:
        x = numba.carray(x_, ({n},))
        out = numba.carray(out_, ({n},))
        logp = numba.carray(logp_, ())
        ud = numba.carray(ud_, ({m},), np.uint64)
        value, grad = logp_body(x, ud)
        value = value{scalar}
        logp[()] = value
        bad = False
        for i in range({n}):
            out[i] = grad[i]
            bad = bad or not math.isfinite(grad[i])
        if bad:
            return 3
        if not math.isfinite(value):
            return 4
    except Exception:  # noqa: BLE001
        return 1
    return 0


def expand_cb(dim, expanded, x_, out_, ud_):
    if dim != {n}:
        return -1
    if expanded != {e}:
        return -1
    try:
        x = numba.carray(x_, ({n},))
        out = numba.carray(out_, ({e},))
        ud = numba.carray(ud_, ({m},), np.uint64)
        (values,) = expand_body(x, ud)
        for i in range({e}):
            out[i] = values[i]
    except Exception:  # noqa: BLE001
        return -2
    return 0
"""


def _compile_callbacks(bodies, callbacks, calls):
    """The two C callbacks: ``bodies`` (name -> source) and ``callbacks`` (the
    source of ``logp_cb`` and ``expand_cb``) compiled with numba, the intrinsic
    ``calls`` (name -> (star-args type, return type)) at hand. They take their
    addresses from ``user_data`` at run time, so their machine code depends
    on the sources and types alone: it is kept in PyTensor's numba cache under
    a key of those, and a later compile of a model of the same shapes in any
    process loads it (about 3 s of compiling otherwise)."""
    import hashlib
    import math

    import numba
    from numba.core import types

    as_voidptr, caller = _intrinsics()
    # __name__: numba's cache rebuilds a loaded function's environment from its module
    env = {"__name__": __name__, "numba": numba, "np": np, "math": math, "as_voidptr": as_voidptr,
           **{name: caller(*sig) for name, sig in calls.items()}}
    key = hashlib.sha256(repr((_KEY_VERSION, numba.__version__, sorted(bodies.items()), callbacks,
                               sorted((k, str(a), str(r)) for k, (a, r) in calls.items()))).encode()).hexdigest()
    try:
        from pytensor.link.numba.cache import compile_numba_function_src
    except ImportError:  # no on-disk cache: compiled in this process only
        compile_numba_function_src, cache = None, False
    else:
        cache = True

    def function(src, name, part):
        if compile_numba_function_src is None:
            exec(src, env)  # noqa: S102 - generated from the model's shapes and types only
            return env[name]
        return compile_numba_function_src(src, name, global_env=env, cache_key=f"mtlirt-callbacks-{part}-{key}")

    for name, src in bodies.items():
        env[name] = numba.njit(cache=cache)(function(src, name, name))
    double = types.CPointer(types.double)
    logp = numba.cfunc(types.int64(types.uint64, double, double, double, types.voidptr), cache=cache)(
        function(callbacks, "logp_cb", "logp"))
    expand = numba.cfunc(types.int64(types.uint64, types.uint64, double, double, types.voidptr), cache=cache)(
        function(callbacks, "expand_cb", "expand"))
    return logp, expand


# part of the callbacks' cache key: bump it when _intrinsics' code generation changes (the sources
# and types are in the key already)
_KEY_VERSION = 1


def initial_point_fn(model, initvals=None):
    """PyMC's initial point function as ``nutpie.compile_pymc_model`` makes
    it (support points, jittered, on the transformed scale)."""
    from pymc.initial_point import make_initial_point_fn

    return make_initial_point_fn(model=model, overrides=initvals, default_strategy="support_point",
                                 jitter_rvs=set(model.free_RVs), return_transformed=True)


@functools.cache
def _model_class():
    from nutpie.compile_pymc import CompiledPyMCModel

    @dataclasses.dataclass(frozen=True)
    class CallbackModel(CompiledPyMCModel):
        """nutpie's compiled model whose callbacks read ``user_data`` as
        :mod:`mtlirt.bayes._callbacks` lays it out."""

        layout: tuple = ()

        def with_data(self, **updates):
            shared_data = dict(self.shared_data)
            for name, value in updates.items():
                keys = [key for var, key in self.shared_var_keys.items() if var.name == name]
                if not keys:
                    raise KeyError(f"Unknown shared variable: {name}")
                if len(keys) > 1:
                    raise ValueError(f"Name of shared variable {name} is not unique")
                old = shared_data[keys[0]]
                new = np.array(value, dtype=old.dtype, order="C", copy=True)
                if new.ndim != old.ndim:
                    raise ValueError(f"Shared variable {name} must have rank {old.ndim}")
                new.flags.writeable = False
                shared_data[keys[0]] = new
            return dataclasses.replace(self, shared_data=shared_data,
                                       user_data=_user_data(self.user_data[:2], shared_data, self.layout))

    return CallbackModel



def compile_pymc(model, initvals=None):
    """What ``nutpie.compile_pymc_model(model, backend="numba",
    initial_points=initvals)`` returns, with callbacks that call PyTensor's
    functions by address (module docstring). Raises :class:`Unsupported`
    where this nutpie or this model does not fit."""
    import numba
    from numba.core import types

    try:
        import nutpie.compile_pymc as ncp

        make_functions, prepare, wrap = ncp._make_functions, ncp._prepare_dims_and_coords, ncp._wrap_with_lock
        model_class = _model_class()
    except (ImportError, AttributeError, TypeError) as err:
        raise Unsupported(f"nutpie's internals differ: {err}") from err

    n_dim, n_expanded, logp_pt, expand_pt, point, shape_info, reparameterized = make_functions(
        model, mode="NUMBA", compute_grad=True, join_expanded=True,
        pymc_initial_point_fn=wrap(initial_point_fn(model, initvals)),
        var_names=None)

    shared_vars = list(dict.fromkeys([*logp_pt.get_shared(), *expand_pt.get_shared()]))
    keys = {var: f"s{i}" for i, var in enumerate(shared_vars)}
    shared_data = {}
    for var, key in keys.items():
        arr = np.array(var.get_value(), order="C", copy=True)
        if arr.dtype.kind not in "biuf":
            raise Unsupported(f"shared variable {var.name} holds {arr.dtype}")
        arr.flags.writeable = False
        shared_data[key] = arr
    layout, offsets, at = [], {}, 2
    for key, arr in shared_data.items():
        layout.append((key, arr.ndim))
        offsets[key] = at
        at += 1 + arr.ndim

    def argtypes(function):
        arrs = [shared_data[keys[v]] for v in function.get_shared()]
        return (types.Array(types.float64, 1, "C"),
                *[types.Array(numba.from_dtype(a.dtype), a.ndim, "C") for a in arrs])

    try:  # PyTensor's and numba's internals: where they differ, nutpie compiles (the caller's fallback)
        logp_addr, logp_star, logp_ret = _entry(logp_pt, argtypes(logp_pt))
        expand_addr, expand_star, expand_ret = _entry(expand_pt, argtypes(expand_pt))
    except (AttributeError, KeyError, TypeError) as err:
        raise Unsupported(f"PyTensor's numba functions differ: {err!r}") from err
    if not (isinstance(logp_ret, types.BaseTuple) and len(logp_ret) == 2
            and isinstance(expand_ret, types.BaseTuple) and len(expand_ret) == 1):
        raise Unsupported(f"unexpected return types {logp_ret}, {expand_ret}")
    value_type = logp_ret[0]
    scalar = "[()]" if isinstance(value_type, types.Array) else ""

    user_data = _user_data((logp_addr, expand_addr), shared_data, layout)
    bodies = {name: _body_src(name, [keys[v] for v in function.get_shared()], offsets, shared_data, call, slot)
              for slot, (name, function, call) in enumerate((("logp_body", logp_pt, "call_logp"),
                                                             ("expand_body", expand_pt, "call_expand")))}
    callbacks = _CALLBACKS.format(n=n_dim, e=n_expanded, m=len(user_data), scalar=scalar)
    try:
        logp_cb, expand_cb = _compile_callbacks(bodies, callbacks, {"call_logp": (logp_star, logp_ret),
                                                                    "call_expand": (expand_star, expand_ret)})
    except (AttributeError, TypeError) as err:
        raise Unsupported(f"numba's or PyTensor's internals differ: {err!r}") from err

    dims, coords = prepare(model, shape_info, reparameterized)
    return model_class(
        _n_dim=n_dim, dims=dims, _coords=coords,
        _shapes={name: tuple(shape) for name, _, shape in zip(*shape_info, strict=True)},
        compiled_logp_func=logp_cb, compiled_expand_func=expand_cb, initial_point_func=point,
        shared_data=shared_data, shared_var_keys=keys, user_data=user_data, n_expanded=n_expanded,
        shape_info=shape_info, logp_func=logp_pt, expand_func=expand_pt,
        reparameterized_names=reparameterized, layout=tuple(layout))
