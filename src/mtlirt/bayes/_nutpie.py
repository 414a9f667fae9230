"""nutpie's compiled models, reused within a process for models of the same graph.

A NUTS fit compiles its model with nutpie's public compile
(``nutpie.compile_pymc_model(model, backend="numba")``): it rewrites the
model's graph, builds PyTensor's functions (log density with gradient, and the
expansion to the traced variables; loaded from PyTensor's on-disk cache where
it holds them) and has numba compile the two C callbacks nutpie samples with.
The callbacks link PyTensor's code in, so numba compiles them again in every
process, whatever PyTensor's cache holds (``benchmarks/bench_callbacks.py``
gives the seconds). A refit in the same process (another seed, another
leaderboard of the same size, a notebook cell run again) need not pay that:
the compiled model is kept and reused.

Two models whose log density and traced variables are the same graph up to the
values of their shared data (mtlirt's models hold no data-dependent constants:
``mtlirt.bayes.model._index_data``), with traced variables of the same shapes
and the same dims, compile to the same callbacks (:func:`model_key`). The last
``CACHE_SIZE`` compiles are kept; a later model of the same graph gets one
back with its own shared data (the compiled model's ``with_data``) and its
own initial point (nutpie's initial point function, rebuilt for it); the trace
nutpie draws with it carries the coordinates of the model it was compiled for,
so :func:`relabel` gives it this model's. Only nutpie's, PyMC's and PyTensor's
public API is used.

A kept compile holds a copy of its model's shared data, so only compiles whose
data take at most ``CACHE_MAX_BYTES`` are kept: at leaderboard scale the
sampling takes minutes to hours and the compile is a small part of it.

Anything this cannot match (a shared variable without a unique name, a graph
PyTensor does not key) is compiled afresh and not kept.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

import numpy as np

__all__ = ["compile_model", "relabel", "model_key", "clear", "CACHE_SIZE", "CACHE_MAX_BYTES"]

CACHE_SIZE = 4
CACHE_MAX_BYTES = 2**28

_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}


def _shared_by_name(outputs):
    """The shared variables the model's log density and traced variables
    (``outputs``) read, by name (None where two share a name or one has none)."""
    from pytensor.compile import SharedVariable
    from pytensor.graph import ancestors

    out = {}
    for v in ancestors(outputs):
        if isinstance(v, SharedVariable):
            if not v.name or (v.name in out and out[v.name] is not v):
                return None
            out[v.name] = v
    return out


def _graph_token(outputs) -> tuple:
    """The graph of ``outputs`` as a hashable tuple: each root by kind (a
    constant by its data's digest, a shared or input variable by name and
    type), each node by its Op (PyTensor's Ops compare and hash by their
    properties; one without properties only equals itself, so such a graph
    matches nothing) and its inputs' positions."""
    import hashlib

    from pytensor.graph import Constant, graph_inputs
    from pytensor.graph.traversal import io_toposort

    inputs = list(graph_inputs(outputs))
    pos, out = {}, []
    for v in inputs:
        if isinstance(v, Constant):
            data = np.asarray(v.data)
            tok = ("C", str(v.type), data.dtype.str, data.shape,
                   hashlib.sha1(np.ascontiguousarray(data).tobytes()).hexdigest())
        else:
            tok = ("I", type(v).__name__, v.name, str(v.type))
        pos[v] = len(out)
        out.append(tok)
    for node in io_toposort(inputs, outputs):
        args = tuple(pos[v] for v in node.inputs)
        for o in node.outputs:
            pos[o] = len(out)
            out.append(("A", node.op, args, node.outputs.index(o), str(o.type)))
    out.append(("O", tuple(pos[v] for v in outputs)))
    return tuple(out)


def _traced_shapes(model) -> tuple:
    """The shapes of the variables nutpie traces (the free variables on the
    sampler's scale, the untransformed ones and the deterministics), by name,
    at the model's initial point."""
    import pytensor

    point = model.initial_point(random_seed=0)
    traced = model.unobserved_value_vars
    shapes = pytensor.function(model.value_vars, [v.shape for v in traced], mode="FAST_COMPILE",
                               on_unused_input="ignore")(*[point[v.name] for v in model.value_vars])
    return tuple(sorted((v.name, tuple(int(s) for s in shape)) for v, shape in zip(traced, shapes)))


def model_key(model, outputs=None) -> tuple:
    """What makes two models compile to the same nutpie callbacks: the graph
    of their log density and traced variables (:func:`_graph_token`: with its
    constants, without the values of shared data), the shapes of the traced
    variables, the dims of the named variables and the fast-math flag."""
    import pytensor

    outputs = [model.logp(), *model.unobserved_value_vars] if outputs is None else outputs
    dims = tuple(sorted((name, tuple(d)) for name, d in model.named_vars_to_dims.items()))
    return _graph_token(outputs), _traced_shapes(model), dims, bool(pytensor.config.numba__fastmath)


def _initial_point_fn(model, initvals, names, shapes):
    """The initial point function ``nutpie.compile_pymc_model(model,
    initial_points=initvals)`` builds: PyMC's (support points, jittered, on
    the transformed scale) as one float64 vector of the free variables
    ``names`` (in that order, of ``shapes``), called under a lock."""
    from pymc.initial_point import make_initial_point_fn

    fn = make_initial_point_fn(model=model, overrides=initvals, default_strategy="support_point",
                               jitter_rvs=set(model.free_RVs), return_transformed=True)
    lock = threading.Lock()

    def point(seed=None):
        with lock:
            values = fn(seed)
        parts = []
        for name, shape in zip(names, shapes, strict=True):
            value = np.asarray(values[name])
            if value.shape != tuple(shape):
                raise ValueError(f"Size of initial value for {name} is {value.shape}, expected {tuple(shape)}")
            parts.append(value.ravel().astype("float64"))
        return np.concatenate(parts) if parts else np.empty(0)

    return point


def _for_model(compiled, model, initvals, shared):
    """The compiled model of an equal graph, given this model's shared data
    and initial point function."""
    # the compiled functions read some of the model's shared variables (the dims' lengths are folded
    # into the shapes, which the key holds)
    names = {var.name for var in compiled.shared_var_keys}
    if not names <= set(shared):
        return None
    n_free = len(model.free_RVs)
    all_names, _, all_shapes = compiled.shape_info
    if [model.rvs_to_values[v].name for v in model.free_RVs] != list(all_names[:n_free]):
        return None
    out = compiled.with_data(**{name: shared[name].get_value(borrow=True) for name in names})
    point = _initial_point_fn(model, initvals, list(all_names[:n_free]), list(all_shapes[:n_free]))
    return dataclasses.replace(out, initial_point_func=point)


def compile_model(model, initvals=None):
    """What ``nutpie.compile_pymc_model(model, backend="numba",
    initial_points=initvals)`` returns, from this process's earlier compile of
    the same graph where there is one (sample with it, then :func:`relabel`
    the trace)."""
    import nutpie

    try:
        outputs = [model.logp(), *model.unobserved_value_vars]
        key, shared = model_key(model, outputs), _shared_by_name(outputs)
        hash(key)  # an Op whose properties do not hash: no key
    except (ImportError, AttributeError, TypeError, ValueError, NotImplementedError):
        key, shared = None, None
    if key is not None and shared is not None:
        with _lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
        if hit is not None:
            out = _for_model(hit, model, initvals, shared)
            if out is not None:
                stats["hits"] += 1
                return out
    compiled = nutpie.compile_pymc_model(model, backend="numba", initial_points=initvals)
    stats["misses"] += 1
    if (key is not None and shared is not None and dataclasses.is_dataclass(compiled)
            and sum(v.nbytes for v in getattr(compiled, "shared_data", {}).values()) <= CACHE_MAX_BYTES):
        with _lock:
            _cache[key] = compiled
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return compiled


def relabel(trace, model):
    """``trace`` (nutpie's ``DataTree``, or one of its datasets) with ``model``'s coordinate labels
    where they differ: a reused compile (:func:`compile_model`) draws with
    the coordinates of the model it was compiled for, of the same lengths."""
    import pandas as pd
    import xarray as xr

    coords = {name: pd.Index(values) for name, values in model.coords.items() if values is not None}

    def one(ds):
        new = {name: labels for name, labels in coords.items()
               if name in ds.dims and not (name in ds.indexes and ds.indexes[name].equals(labels))}
        return ds.assign_coords(new) if new else ds

    return one(trace) if isinstance(trace, xr.Dataset) else trace.map_over_datasets(one)


def clear() -> None:
    """Forget the kept compiles."""
    with _lock:
        _cache.clear()
