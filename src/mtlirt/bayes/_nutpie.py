"""nutpie's compiled models, reused within a process for models of the same graph.

A compile rewrites the model's graph, builds PyTensor's functions (log density
with gradient, and the expansion to the traced variables) and compiles the two
numba C callbacks nutpie samples with. ``nutpie.compile_pymc_model`` took 16-20
s for the joint model of 40 LLMs x 30 items in a new process whose PyTensor
cache held its functions, most of it in callbacks that link PyTensor's code
in; :mod:`mtlirt.bayes._callbacks` builds them calling PyTensor's functions
by address instead and keeps them in PyTensor's on-disk cache: 3.8 s
(``benchmarks/bench_callbacks.py``, session 14, quiet machine). A refit
with another seed, another leaderboard of the same size, a notebook cell run
again paid that each time; with the compiled model kept, a refit skips it.

Two models whose log density and traced variables are the same graph up to the
values of their shared data (mtlirt's models hold no data-dependent constants:
``mtlirt.bayes.model._index_data``), with free and traced variables of the same
shapes, compile to the same callbacks. Here the first compile is kept (the last
``CACHE_SIZE`` of them) and a later model of the same graph gets it back with
its own shared data (``CompiledPyMCModel.with_data``), its own initial point
and its own coordinates. The graph's identity is its structure (:func:`model_key`).

A kept compile holds a copy of its model's shared data, so only compiles whose
data take at most ``CACHE_MAX_BYTES`` are kept: at leaderboard scale the
sampling takes minutes to hours and the compile is a small part of it.

Anything this cannot match (a shared variable without a unique name, a graph
PyTensor does not key, a nutpie whose compiled model lacks the fields used
here) is compiled afresh and not kept.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict

from mtlirt.bayes import _callbacks

__all__ = ["compile_model", "model_key", "clear", "CACHE_SIZE", "CACHE_MAX_BYTES"]

CACHE_SIZE = 4
CACHE_MAX_BYTES = 2**28

_cache: OrderedDict = OrderedDict()
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0, "nutpie": 0}


def _shared_by_name(outputs):
    """The shared variables the model's log density and traced variables
    (``outputs``) read, by name (None where two share a name or one has none)."""
    from pytensor.compile.sharedvalue import SharedVariable
    from pytensor.graph.traversal import ancestors

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

    import numpy as np
    from pytensor.graph.basic import Constant
    from pytensor.graph.traversal import graph_inputs, io_toposort

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


def model_key(model, outputs=None) -> tuple:
    """What makes two models compile to the same nutpie callbacks: the graph
    of their log density and traced variables (:func:`_graph_token`: with its
    constants, without the values of shared data), the shapes of the free and
    traced variables, and the fast-math flag."""
    import pytensor
    from nutpie.compile_pymc import _compute_shapes

    outputs = [model.logp(), *model.unobserved_value_vars] if outputs is None else outputs
    shapes = tuple(sorted((name, tuple(int(s) for s in shape)) for name, shape in _compute_shapes(model).items()))
    return _graph_token(outputs), shapes, bool(pytensor.config.numba__fastmath)


def _for_model(compiled, model, initvals, shared):
    """The compiled model of an equal graph, given this model's shared data,
    initial point function and coordinates (as ``compile_pymc_model`` builds
    them)."""
    from nutpie.compile_pymc import _prepare_dims_and_coords, _rv_dict_to_flat_array_wrapper, _wrap_with_lock

    # the compiled functions read some of the model's shared variables (the dims' lengths are folded
    # into the shapes, which the key holds)
    names = {var.name for var in compiled.shared_var_keys}
    if not names <= set(shared):
        return None
    out = compiled.with_data(**{name: shared[name].get_value(borrow=True) for name in names})
    n_free = len(model.free_RVs)
    all_names, _, all_shapes = compiled.shape_info
    if [model.rvs_to_values[v].name for v in model.free_RVs] != list(all_names[:n_free]):
        return None
    point = _rv_dict_to_flat_array_wrapper(_wrap_with_lock(_callbacks.initial_point_fn(model, initvals)),
                                           names=list(all_names[:n_free]),
                                           shapes=list(all_shapes[:n_free]))
    reparameterized = [model.rvs_to_values[v].name for v in model.free_RVs
                       if model.rvs_to_transforms.get(v) is not None]
    dims, coords = _prepare_dims_and_coords(model, compiled.shape_info, reparameterized)
    return dataclasses.replace(out, initial_point_func=point, dims=dims, _coords=coords)


def compile_model(model, initvals=None):
    """What ``nutpie.compile_pymc_model(model, backend="numba",
    initial_points=initvals)`` returns, from this process's earlier compile of
    the same graph where there is one, else compiled with mtlirt's callbacks
    (:func:`mtlirt.bayes._callbacks.compile_pymc`; by nutpie itself where
    those do not fit this nutpie or model, counted in ``stats["nutpie"]``)."""
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
            try:
                out = _for_model(hit, model, initvals, shared)
            except (AttributeError, TypeError, KeyError, ValueError):
                out = None
            if out is not None:
                stats["hits"] += 1
                return out
    try:
        compiled = _callbacks.compile_pymc(model, initvals)
    except _callbacks.Unsupported:
        stats["nutpie"] += 1
        compiled = nutpie.compile_pymc_model(model, backend="numba", initial_points=initvals)
    stats["misses"] += 1
    if (key is not None and shared is not None and dataclasses.is_dataclass(compiled)
            and sum(v.nbytes for v in getattr(compiled, "shared_data", {}).values()) <= CACHE_MAX_BYTES):
        with _lock:
            _cache[key] = compiled
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return compiled


def clear() -> None:
    """Forget the kept compiles."""
    with _lock:
        _cache.clear()
