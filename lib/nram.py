# GENERATED FILE: do not edit. Source: book/nram.md.
# Edit the source, then run `make export` (tools/export.py copies its exported cells here).
"""Neural Random-Access Machines (Kurach et al. 2016), derived in book/nram.md.

Gates on distributions over integers, the fuzzy machine and its discretised twin, the
controller, the curriculum and the trainer, the easy and hard tasks of Table 1, and execution
traces. The paper-scale experiments and the claims are lib.nram_report and lib.nram_hard_report.
"""

# %% book/nram.md
from __future__ import annotations

import base64
import dataclasses
import io
import math
import time
from functools import lru_cache, partial
from typing import Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from lib.toolkit import (
    Progress,
    _global_norm,
    check_array,
    check_finite,
    restore_checkpoint,
)
from lib.toolkit import Array, Bool, Float, Function, Instance, Int, Maybe, OneOf, checks
from lib.toolkit import constructor_signatures, save_checkpoint
from lib.toolkit import History, Trained


# %% book/nram.md
MODULES = (
    "READ",
    "ZERO",
    "ONE",
    "TWO",
    "INC",
    "ADD",
    "SUB",
    "DEC",
    "LESSTHAN",
    "LESSOREQUALTHAN",
    "EQUALITYTEST",
    "MIN",
    "MAX",
    "WRITE",
)
"""The fourteen modules of Sec. 4.3, in the paper's order."""

ARITY = {
    "READ": 1,
    "ZERO": 0,
    "ONE": 0,
    "TWO": 0,
    "INC": 1,
    "ADD": 2,
    "SUB": 2,
    "DEC": 1,
    "LESSTHAN": 2,
    "LESSOREQUALTHAN": 2,
    "EQUALITYTEST": 2,
    "MIN": 2,
    "MAX": 2,
    "WRITE": 2,
}
"""How many of its two inputs a module uses (the paper's modules all take two and ignore the
rest)."""


@checks(name=OneOf(*MODULES), M=Int(1))
def module_int(name: str, a, b, M: int):
    """Module `name` on integers (numpy or jax arrays, or Python ints) a, b in {0..M-1} (Sec. 4.3).

    READ and WRITE touch the memory and are handled by the machines; WRITE itself returns 0.
    """
    xp = jnp if isinstance(a, jax.Array) or isinstance(b, jax.Array) else np
    if name in ("ZERO", "WRITE"):
        return a * 0
    if name == "ONE":
        return a * 0 + 1
    if name == "TWO":
        return a * 0 + 2
    if name == "INC":
        return (a + 1) % M
    if name == "DEC":
        return (a - 1) % M
    if name == "ADD":
        return (a + b) % M
    if name == "SUB":
        return (a - b) % M
    if name == "LESSTHAN":
        return (xp.asarray(a) < b) * 1
    if name == "LESSOREQUALTHAN":
        return (xp.asarray(a) <= b) * 1
    if name == "EQUALITYTEST":
        return (xp.asarray(a) == b) * 1
    if name == "MIN":
        return xp.minimum(a, b)
    if name == "MAX":
        return xp.maximum(a, b)
    raise ValueError(f"module must be one of {MODULES[1:-1]}, got {name!r}")


# %% book/nram.md
def _boolean(p: jax.Array, M: int) -> jax.Array:
    """The distribution of a {0, 1} value that is 1 with probability p (shape (...,)) -> (...,
    M)."""
    return jnp.concatenate(
        [(1 - p)[..., None], p[..., None], jnp.zeros((*p.shape, M - 2), p.dtype)], -1
    )


def _shifted(b: jax.Array, sign: int) -> jax.Array:
    """(..., M, M) with [..., c, x] = b[(c - x) mod M] (sign=+1) or b[(x - c) mod M] (sign=-1): a
    gather of constant indices."""
    M = b.shape[-1]
    c, x = np.meshgrid(np.arange(M), np.arange(M), indexing="ij")
    return b[..., (sign * (c - x)) % M]


@jax.custom_vjp
def circular_add(a: jax.Array, b: jax.Array) -> jax.Array:
    """P(A + B = c mod M) = sum_x a_x b_{(c - x) mod M}: ADD on distributions (..., M), in M^2."""
    return jnp.einsum("...x,...cx->...c", a, _shifted(b, 1))


@jax.custom_vjp
def circular_sub(a: jax.Array, b: jax.Array) -> jax.Array:
    """P(A - B = c mod M) = sum_x a_x b_{(x - c) mod M}: SUB on distributions (..., M), in M^2."""
    return jnp.einsum("...x,...cx->...c", a, _shifted(b, -1))


# The adjoint of a circular convolution is a circular correlation and vice versa. Written out, the
# backward
# pass is two more gathers instead of the scatter-adds that autodiff of a gather produces (slow on
# CPU).
circular_add.defvjp(
    lambda a, b: (circular_add(a, b), (a, b)),
    lambda res, g: (circular_sub(g, res[1]), circular_sub(g, res[0])),
)
circular_sub.defvjp(
    lambda a, b: (circular_sub(a, b), (a, b)),
    lambda res, g: (circular_add(g, res[1]), circular_sub(res[0], g)),
)


def _upper(M: int, dtype) -> jax.Array:
    return jnp.asarray(np.triu(np.ones((M, M))), dtype)  # [x, y] = [x <= y]


def module_dist(name: str, a: jax.Array | None, b: jax.Array | None, like: jax.Array) -> jax.Array:
    """Module `name` on independent distributions a, b of shape (..., M): eq. 2 without the M^3 sum.

    like: an array of the output's shape and dtype (for the constants). Sec. 1 derives each case.
    Cumulative sums are products with a triangular matrix (a cumsum is slower on CPU).
    """
    M = like.shape[-1]
    if name in ("ZERO", "ONE", "TWO", "WRITE"):
        value = {"ZERO": 0, "WRITE": 0, "ONE": 1, "TWO": 2}[name]
        return jnp.broadcast_to(jax.nn.one_hot(value, M, dtype=like.dtype), like.shape)
    if name == "INC":
        return jnp.roll(a, 1, axis=-1)
    if name == "DEC":
        return jnp.roll(a, -1, axis=-1)
    if name == "ADD":
        return circular_add(a, b)
    if name == "SUB":
        return circular_sub(a, b)
    if name == "EQUALITYTEST":
        return _boolean(jnp.sum(a * b, -1), M)
    upper = _upper(M, a.dtype)
    cdf_a = a @ upper  # F_a(y) = sum_{x <= y} a_x
    if name == "LESSTHAN":
        return _boolean(jnp.sum(b * (cdf_a - a), -1), M)
    if name == "LESSOREQUALTHAN":
        return _boolean(jnp.sum(b * cdf_a, -1), M)
    if name == "MIN":  # P(min >= c) = S_a(c) S_b(c), S(c) = sum_{x >= c}
        tail = (a @ upper.T) * (b @ upper.T)
        return tail - jnp.concatenate([tail[..., 1:], jnp.zeros_like(tail[..., :1])], -1)
    if name == "MAX":  # P(max <= c) = F_a(c) F_b(c)
        head = cdf_a * (b @ upper)
        return head - jnp.concatenate([jnp.zeros_like(head[..., :1]), head[..., :-1]], -1)
    raise ValueError(f"module must be one of {MODULES[1:-1]}, got {name!r}")


# %% book/nram.md
def read(memory: jax.Array, p: jax.Array) -> jax.Array:
    """READ (Sec. 3.2): M^T p, the value under fuzzy address p. memory (..., M, M), p (..., M) ->
    (..., M)."""
    return jnp.einsum("...ij,...i->...j", memory, p)


def write(memory: jax.Array, p: jax.Array, a: jax.Array) -> jax.Array:
    """WRITE (eq. nram-write): cell i takes value a with probability p_i. memory (..., M, M), p, a
    (..., M)."""
    return (1 - p)[..., :, None] * memory + p[..., :, None] * a[..., None, :]


# %% book/nram.md
@checks(registers=Int(1))
@dataclasses.dataclass(frozen=True)
class NRAMSpec:
    """The machine's fixed part (Sec. 3): the gate list (READ/WRITE included; may repeat) and R
    registers."""

    modules: tuple[str, ...] = MODULES
    registers: int = 4

    def __post_init__(self):
        unknown = [m for m in self.modules if m not in ARITY]
        if unknown:
            raise ValueError(f"modules must be names from {MODULES}, got {unknown}")
        if not isinstance(self.registers, int) or self.registers < 1:
            raise ValueError(f"registers must be a positive integer, got {self.registers!r}")
        object.__setattr__(self, "modules", tuple(self.modules))

    @property
    def num_values(self) -> int:
        """R + Q: the registers and the gate outputs, the values a register can take next."""
        return self.registers + len(self.modules)

    @property
    def layout(self) -> "CircuitLayout":
        """Where each choice sits in the controller's logits (circuit_layout)."""
        return circuit_layout(self)


class CircuitLayout(NamedTuple):
    """Where each choice sits in the controller's logits vector (Sec. 1).

    args[i]: for gate i, one (start, size) per input it uses, size = R + i (eq. 1);
    outs: start of the R x (R + Q) register logits (eq. 3); finish: index of the finish logit (Sec.
    3.3).
    """

    args: tuple
    outs: int
    finish: int
    size: int


@checks(spec=Instance(NRAMSpec))
def circuit_layout(spec: NRAMSpec) -> CircuitLayout:
    """The CircuitLayout of `spec`."""
    args, start, R = [], 0, spec.registers
    for i, name in enumerate(spec.modules):
        args.append(tuple((start + k * (R + i), R + i) for k in range(ARITY[name])))
        start += ARITY[name] * (R + i)
    outs = start
    finish = outs + R * spec.num_values
    return CircuitLayout(tuple(args), outs, finish, finish + 1)


# %% book/nram.md
@partial(jax.custom_vjp, nondiff_argnums=(1,))
def clip_gradient(x: jax.Array, bound: float) -> jax.Array:
    """Identity forward; backward, each coordinate of the incoming gradient clipped to [-bound,
    bound] (Sec. 4.1)."""
    return x


def _clip_fwd(x, bound):
    return x, None


def _clip_bwd(bound, _, g):
    return (jnp.clip(g, -bound, bound),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def renormalise(x: jax.Array) -> jax.Array:
    """x / sum(x) over the last axis (negatives clipped to 0) forward; the identity backward (Sec.
    4.1, fn. 5)."""
    x_pos = jnp.maximum(x, 0)
    return x + jax.lax.stop_gradient(x_pos / jnp.sum(x_pos, -1, keepdims=True) - x)


@checks(eps=Float(0, low_open=True))
def safe_log(x: jax.Array, eps: float) -> jax.Array:
    """log(max(x, eps)) (Sec. 4.1, "Limiting the values of logarithms")."""
    return jnp.log(jnp.maximum(x, eps))


# %% book/nram.md
def _entropy(w: jax.Array, eps: float) -> jax.Array:
    return -jnp.sum(w * safe_log(w, eps), -1)


def fuzzy_step(
    spec: NRAMSpec,
    registers: jax.Array,
    memory: jax.Array,
    logits: jax.Array,
    *,
    clip: float | None = None,
    eps: float = 1e-6,
    hard: bool = False,
):
    """One timestep of the fuzzy machine (eq. 1-3 with READ/WRITE of Sec. 3.2).

    registers (B, R, M), memory (B, M, M), logits (B, layout.size). clip: C1, the bound on the
    gradient of every activation (None: no clipping). hard: replace each softmax by a one-hot of its
    argmax (the discretised controller of Sec. 3.4, still on distributions). Returns
    (registers, memory, finish logit (B,), summed entropy of the controller's choices (B,), values
    (B, R + Q, M): the registers and gate outputs of this step).
    """
    layout, R = spec.layout, spec.registers
    choose = (
        (lambda z: jax.nn.one_hot(jnp.argmax(z, -1), z.shape[-1], dtype=z.dtype))
        if hard
        else jax.nn.softmax
    )
    keep = (lambda x: clip_gradient(x, clip)) if clip is not None else (lambda x: x)
    values = [registers[:, j] for j in range(R)]
    entropy = jnp.zeros(logits.shape[0], logits.dtype)
    for i, name in enumerate(spec.modules):
        inputs = []
        for start, size in layout.args[i]:
            w = renormalise(choose(logits[:, start : start + size]))
            entropy = entropy + _entropy(w, eps)
            inputs.append(jnp.einsum("bk,kbm->bm", w, jnp.stack(values[:size])))
        if name == "READ":
            out = read(memory, inputs[0])
        elif name == "WRITE":
            memory = keep(write(memory, inputs[0], inputs[1]))
            out = module_dist("ZERO", None, None, registers[:, 0])
        else:
            inputs += [None] * (2 - len(inputs))
            out = module_dist(name, inputs[0], inputs[1], registers[:, 0])
        values.append(keep(renormalise(out)))
    values = jnp.stack(values, 1)
    c = renormalise(choose(logits[:, layout.outs : layout.finish].reshape(-1, R, spec.num_values)))
    entropy = entropy + jnp.sum(_entropy(c, eps), -1)
    registers = keep(renormalise(jnp.einsum("brk,bkm->brm", c, values)))
    return registers, memory, logits[:, layout.finish], entropy, values


# %% book/nram.md
def discrete_step(spec: NRAMSpec, registers: jax.Array, memory: jax.Array, logits: jax.Array):
    """One timestep of the discretised machine (Sec. 3.4) for one example.

    registers (R,) and memory (M,) integers, logits (layout.size,). Returns (registers, memory,
    finish (bool), values (R + Q,): registers then gate outputs, inputs (Q, 2): each gate's inputs,
    -1 if unused).
    """
    layout, R, M = spec.layout, spec.registers, memory.shape[0]
    values = jnp.zeros(spec.num_values, registers.dtype).at[:R].set(registers)
    inputs = []
    for i, name in enumerate(spec.modules):
        x = [values[jnp.argmax(logits[start : start + size])] for start, size in layout.args[i]]
        inputs.append(jnp.stack(x + [jnp.asarray(-1, registers.dtype)] * (2 - len(x))))
        if name == "READ":
            out = memory[x[0]]
        elif name == "WRITE":
            memory = memory.at[x[0]].set(x[1])
            out = jnp.zeros((), registers.dtype)
        else:
            x += [jnp.zeros((), registers.dtype)] * (2 - len(x))
            out = module_int(name, x[0], x[1], M).astype(registers.dtype)
        values = values.at[R + i].set(out)
    choice = jnp.argmax(logits[layout.outs : layout.finish].reshape(R, spec.num_values), -1)
    return values[choice], memory, logits[layout.finish] > 0, values, jnp.stack(inputs)


@checks(spec=Instance(NRAMSpec), policy=Function(), memory=Array(ndim=1), timesteps=Int(1))
def run_discrete(spec: NRAMSpec, policy: Callable, memory: jax.Array, timesteps: int, carry=()):
    """Run the discretised machine on one example until the policy finishes or `timesteps` pass.

    policy(bits (R,), carry) -> (logits (layout.size,), carry): bits are [r_j == 0] (Sec. 3.1).
    memory (M,) integers. Returns (memory at the finishing step, number of steps run).
    """
    R = spec.registers

    def body(state):
        t, registers, memory, carry, _ = state
        logits, carry = policy((registers == 0).astype(jnp.float32), carry)
        registers, memory, finish, _, _ = discrete_step(spec, registers, memory, logits)
        return t + 1, registers, memory, carry, finish

    def cond(state):
        t, _, _, _, finished = state
        return (t < timesteps) & ~finished

    start = (
        jnp.zeros((), jnp.int32),
        jnp.zeros(R, memory.dtype),
        memory,
        carry,
        jnp.zeros((), bool),
    )
    t, _, memory, _, _ = jax.lax.while_loop(cond, body, start)
    return memory, t


# %% book/nram.md
def _gate_position(spec: NRAMSpec, ref) -> int | None:
    """Position in spec.modules of the gate `ref` names: "ADD" the first ADD gate, "READ:2" the
    second READ gate (the modules repeated); None if it names none."""
    if not isinstance(ref, str):
        return None
    name, colon, k = ref.partition(":")
    if colon and not (k.isdigit() and int(k) >= 1):
        return None
    at = [i for i, m in enumerate(spec.modules) if m == name]
    k = int(k) if colon else 1
    return at[k - 1] if len(at) >= k else None


def _value_index(spec: NRAMSpec, ref) -> int:
    if isinstance(ref, (int, np.integer)):
        return int(ref)
    if (
        isinstance(ref, str)
        and ref[:1] == "r"
        and ref[1:].isdigit()
        and 1 <= int(ref[1:]) <= spec.registers
    ):
        return int(ref[1:]) - 1
    position = _gate_position(spec, ref)
    if position is not None:
        return spec.registers + position
    raise ValueError(
        f"a circuit input must be 'r1'..'r{spec.registers}', a module of {spec.modules} ('NAME:k' "
        f"for its k-th gate) or an index, got {ref!r}"
    )


@checks(spec=Instance(NRAMSpec), finish=Bool(), scale=Float(0, low_open=True))
def program_logits(
    spec: NRAMSpec, inputs: dict, registers: Sequence, finish: bool, scale: float = 30.0
) -> np.ndarray:
    """Logits (layout.size,) of a hand-written circuit (Sec. 1).

    inputs: gate -> its inputs (a name or a tuple of names: "r1".., gates). A gate is named by its
    module, "ADD" for the first ADD gate, "READ:2" for the second READ gate when the modules are
    repeated; gates not given take r1. registers: the R new register values. finish: the finish
    decision.
    """
    layout = spec.layout
    out = np.zeros(layout.size, np.float32)
    given, unknown = {}, []
    for key in inputs:
        position = _gate_position(spec, key)
        if position is None:
            unknown.append(key)
        elif position in given:
            raise ValueError(f"inputs names gate {position} twice: {given[position]!r}, {key!r}")
        else:
            given[position] = key
    if unknown:
        raise ValueError(f"inputs names modules {sorted(unknown)} that are not in the spec")
    for i, name in enumerate(spec.modules):
        refs = inputs[given[i]] if i in given else ("r1",) * ARITY[name]
        refs = (refs,) if isinstance(refs, (str, int)) else tuple(refs)
        if len(refs) != ARITY[name]:
            raise ValueError(f"module {name} takes {ARITY[name]} inputs, got {refs}")
        for (start, size), ref in zip(layout.args[i], refs):
            k = _value_index(spec, ref)
            if not 0 <= k < size:
                raise ValueError(
                    f"module {name} (position {i}) can only use the registers and earlier "
                    f"modules, got {ref!r}"
                )
            out[start + k] = scale
    if len(registers) != spec.registers:
        raise ValueError(f"registers must give {spec.registers} new values, got {len(registers)}")
    for j, ref in enumerate(registers):
        out[layout.outs + j * spec.num_values + _value_index(spec, ref)] = scale
    out[layout.finish] = scale if finish else -scale
    return out


# %% book/nram.md
@checks(spec=Instance(NRAMSpec))
def copy_program(spec: NRAMSpec) -> Callable:
    """A hand-written policy that solves Copy (Sec. 1 of the chapter): r3 source pointer, r2 the
    offset n, r1 = [something left to copy]. Needs R >= 4 and the modules READ, DEC, ADD, INC,
    LESSOREQUALTHAN, WRITE, ONE."""
    init = program_logits(
        spec,
        {"READ": "r3", "DEC": "READ", "WRITE": ("r3", "READ")},
        registers=["ONE", "DEC", "ONE", "r4"],
        finish=False,
    )  # r2 = mem[0] - 1 = n, r3 = 1
    step = program_logits(
        spec,
        {
            "READ": "r3",
            "ADD": ("r3", "r2"),
            "WRITE": ("ADD", "READ"),
            "INC": "r3",
            "LESSOREQUALTHAN": ("INC", "r2"),
        },
        registers=["LESSOREQUALTHAN", "r2", "INC", "r4"],
        finish=False,
    )  # mem[r3 + n] = mem[r3]
    done = program_logits(
        spec,
        {"READ": "r3", "WRITE": ("r3", "READ")},  # write a cell back: no change
        registers=["r1", "r2", "r3", "r4"],
        finish=True,
    )
    init, step, done = map(jnp.asarray, (init, step, done))

    def policy(bits, carry):
        """bits[j] = 1 when r_{j+1} == 0; works on (R,) and (B, R)."""
        first, finished = bits[..., 2:3] > 0.5, bits[..., 0:1] > 0.5
        return jnp.where(first, init, jnp.where(finished, done, step)), carry

    return policy


# %% book/nram.md
class Example(NamedTuple):
    """One task instance (Sec. 2): memory (M,) input, target (M,) expected memory, mask (M,) cells
    to modify."""

    memory: np.ndarray
    target: np.ndarray
    mask: np.ndarray


def _values(rng, size, M, top=None):
    return rng.integers(1, (M if top is None else top), size=size)


def _example(memory, target_cells: dict, M) -> Example:
    memory = np.asarray(memory, np.int32)
    target, mask = memory.copy(), np.zeros(M, bool)
    for cell, value in target_cells.items():
        target[cell], mask[cell] = value, True
    return Example(memory, target, mask)


def _tape(M, *cells):
    memory = np.zeros(M, np.int32)
    memory[: len(cells)] = cells
    return memory


def _gen_access(n, M, rng):
    A, k = _values(rng, n, M), rng.integers(1, n + 1)
    memory = _tape(M, k, *A)
    return _example(memory, {0: memory[k]}, M)


def _gen_increment(n, M, rng):
    A = _values(rng, n, M, top=M - 1)
    return _example(_tape(M, *A), {i: A[i] + 1 for i in range(n)}, M)


def _gen_copy(n, M, rng, reverse=False):
    A = _values(rng, n, M)
    return _example(
        _tape(M, n + 1, *A), {n + 1 + i: (A[::-1] if reverse else A)[i] for i in range(n)}, M
    )


def _gen_swap(n, M, rng):
    A = _values(rng, n + 1, M)
    p, q = np.sort(rng.choice(np.arange(2, n + 3), 2, replace=False))
    memory = _tape(M, p, q, *A)
    return _example(memory, {p: memory[q], q: memory[p]}, M)


# %% book/nram.md
def _gen_permutation(n, M, rng):
    P, A = rng.permutation(n), _values(rng, n, M)
    return _example(_tape(M, n + 1, *P, *A), {1 + i: A[P[i]] for i in range(n)}, M)


def _linked_list(n, M, rng, first):
    """n nodes (next, value) at random even offsets from `first`; returns (memory, node addresses,
    values)."""
    slots = (M - first) // 2
    addresses = first + 2 * rng.choice(slots, n, replace=False)
    values = _values(rng, n, M)
    memory = np.zeros(M, np.int32)
    for i, address in enumerate(addresses):
        memory[address] = addresses[i + 1] if i + 1 < n else 0
        memory[address + 1] = values[i]
    return memory, addresses, values


def _gen_listk(n, M, rng):
    memory, addresses, values = _linked_list(n, M, rng, 3)
    k = rng.integers(0, n)
    memory[:3] = addresses[0], k, 0
    return _example(memory, {2: values[k]}, M)


def _gen_listsearch(n, M, rng):
    memory, addresses, values = _linked_list(n, M, rng, 3)
    used = np.zeros(M, bool)
    used[:3] = True
    used[addresses], used[addresses + 1] = True, True
    memory[~used] = _values(rng, int((~used).sum()), M)  # trash
    v = values[rng.integers(0, n)]
    memory[:3] = addresses[0], v, 0
    return _example(memory, {2: addresses[np.argmax(values == v)]}, M)


def _gen_merge(n, M, rng):
    n_a = rng.integers(0, n + 1)
    A, B = np.sort(_values(rng, n_a, M, top=M - 1)), np.sort(_values(rng, n - n_a, M, top=M - 1))
    a, b = 3, 3 + n_a + 1
    o = b + (n - n_a) + 1
    merged = np.sort(np.concatenate([A, B]))
    return _example(
        _tape(M, a, b, o, *A, M - 1, *B, M - 1), {o + i: merged[i] for i in range(n)}, M
    )


def _gen_walkbst(n, M, rng):
    keys = rng.choice(np.arange(1, M), n, replace=False)
    first = 3 + n  # after root, out, a path of at most n - 1 steps and its NULL
    addresses = first + 3 * rng.choice((M - first) // 3, n, replace=False)
    memory = np.zeros(M, np.int32)
    left, right = {}, {}
    for i in range(1, n):  # insert keys[i] into the tree rooted at node 0
        node = 0
        while True:
            side = left if keys[i] < keys[node] else right
            if node not in side:
                side[node] = i
                break
            node = side[node]
    for i in range(n):
        memory[addresses[i] : addresses[i] + 3] = (
            keys[i],
            addresses[left[i]] if i in left else 0,
            addresses[right[i]] if i in right else 0,
        )
    path, node = [], 0
    length = rng.integers(0, n)
    while len(path) < length and (node in left or node in right):
        go_right = node not in left or (node in right and rng.random() < 0.5)
        path.append(2 if go_right else 1)
        node = (right if go_right else left)[node]
    memory[0], memory[1] = addresses[0], 0
    memory[2 : 2 + len(path)] = path
    return _example(memory, {1: keys[node]}, M)


# %% book/nram.md
class Task(NamedTuple):
    """A task of Sec. 4.2: generate(n, M, rng) -> Example, and the smallest tape for difficulty
    n."""

    name: str
    generate: Callable
    min_memory: Callable


TASKS = {
    t.name: t
    for t in (
        Task("access", _gen_access, lambda n: n + 2),
        Task("increment", _gen_increment, lambda n: n + 1),
        Task("copy", _gen_copy, lambda n: 2 * n + 1),
        Task("reverse", partial(_gen_copy, reverse=True), lambda n: 2 * n + 1),
        Task("swap", _gen_swap, lambda n: n + 4),
        Task("permutation", _gen_permutation, lambda n: 2 * n + 1),
        Task("listk", _gen_listk, lambda n: 3 + 2 * n),
        Task("listsearch", _gen_listsearch, lambda n: 3 + 2 * n),
        Task("merge", _gen_merge, lambda n: 2 * n + 5),
        Task("walkbst", _gen_walkbst, lambda n: 3 + n + 3 * n),
    )
}
"""The ten tasks of Sec. 4.2 by name; the first five are the paper's "easy" ones."""

EASY_TASKS = ("access", "increment", "copy", "reverse", "swap")
HARD_TASKS = ("permutation", "listk", "listsearch", "merge", "walkbst")


@checks(task=OneOf(*TASKS), memory_size=Int(1), rng=Instance(np.random.Generator))
def make_batch(
    task: str, difficulties: Sequence[int], memory_size: int, rng: np.random.Generator
) -> Example:
    """A batch of examples (arrays (B, M)) of `task`, one per difficulty, on tapes of `memory_size`
    cells."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {task!r}")
    spec = TASKS[task]
    difficulties = [int(d) for d in difficulties]
    if not difficulties or min(difficulties) < 1:
        raise ValueError(f"difficulties must be integers >= 1, got {difficulties}")
    need = spec.min_memory(max(difficulties))
    if memory_size < max(need, 3):
        raise ValueError(
            f"task {task} at difficulty {max(difficulties)} needs a tape of at least "
            f"{max(need, 3)} cells, got memory_size={memory_size}"
        )
    examples = [spec.generate(d, memory_size, rng) for d in difficulties]
    return Example(*(np.stack(x) for x in zip(*examples)))


# %% book/nram.md
class MLPController(nnx.Module):
    """Feedforward controller (Sec. 4.1): P(r_j = 0) (B, R) -> circuit logits (B, layout.size), two
    ReLU layers."""

    def __init__(self, spec: NRAMSpec, hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(spec.registers, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, spec.layout.size, rngs=rngs)

    def initial_carry(self, batch: int):
        """No state between timesteps: the empty carry."""
        return ()

    def __call__(self, bits: jax.Array, carry=()):
        h = jax.nn.relu(self.l2(jax.nn.relu(self.l1(bits))))
        return self.out(h), carry


class LSTMController(nnx.Module):
    """Recurrent controller (Sec. 4.1): a ReLU layer, an LSTM cell, a linear read-out to the circuit
    logits."""

    def __init__(self, spec: NRAMSpec, hidden: int, *, rngs: nnx.Rngs):
        self.hidden = hidden
        self.l1 = nnx.Linear(spec.registers, hidden, rngs=rngs)
        self.cell = nnx.LSTMCell(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, spec.layout.size, rngs=rngs)

    def initial_carry(self, batch: int):
        """The LSTM's (hidden, cell) state before the first timestep: zeros, (batch, hidden)."""
        zeros = jnp.zeros((batch, self.hidden), jnp.float32)
        return (zeros, zeros)

    def __call__(self, bits: jax.Array, carry):
        carry, h = self.cell(carry, jax.nn.relu(self.l1(bits)))
        return self.out(h), carry


# %% book/nram.md
def finish_probabilities(finish_logits: jax.Array, horizon: jax.Array | None = None) -> jax.Array:
    """p_t of Sec. 3.3 from the finish logits x_t (T, ...): f_t prod_{s<t}(1 - f_s), and p_T takes
    the rest. horizon (...,) integers in 1..T: each run's own last step (its p_t are those of its
    first `horizon` logits, and 0 after them); None: T for every run."""
    log_stop, log_go = jax.nn.log_sigmoid(finish_logits), jax.nn.log_sigmoid(-finish_logits)
    before = jnp.cumsum(log_go, 0) - log_go  # sum_{s<t} log(1 - f_s)
    t = jnp.arange(finish_logits.shape[0]).reshape(-1, *[1] * (finish_logits.ndim - 1))
    last = finish_logits.shape[0] if horizon is None else horizon
    p = jnp.exp(jnp.where(t == last - 1, before, log_stop + before))
    return p if horizon is None else jnp.where(t < horizon, p, 0.0)


def finish_step(finish_logits: jax.Array, horizon: jax.Array | None = None) -> jax.Array:
    """The step at which a machine stops (Sec. 3.3): the first t with f_t > 1/2, else the last (or
    the run's `horizon` - 1, as in finish_probabilities). (T, B) -> (B,)."""
    if horizon is None:
        stop = (finish_logits > 0).at[-1].set(True)
    else:
        stop = (finish_logits > 0) | (jnp.arange(finish_logits.shape[0])[:, None] == horizon - 1)
    return jnp.argmax(stop, 0)


# %% book/nram.md
class Run(NamedTuple):
    """Per-timestep record of a fuzzy run (T, B, ...): log M_{i, y_i} per cell, each cell's most
    likely value, finish logits, entropy of the controller's choices, and the entropy of the
    registers' values after the timestep (summed over the registers)."""

    log_target: jax.Array
    argmax: jax.Array
    finish_logits: jax.Array
    entropy: jax.Array
    value_entropy: jax.Array


def _initial_state(spec: NRAMSpec, memory: jax.Array, dtype=jnp.float32):
    B, M = memory.shape
    registers = jnp.zeros((B, spec.registers, M), dtype).at[:, :, 0].set(1)
    return registers, jax.nn.one_hot(memory, M, dtype=dtype)


@checks(
    spec=Instance(NRAMSpec),
    controller=Function(),
    memory=Array(ndim=2),
    target=Array(ndim=2),
    timesteps=Int(1),
)
def run_fuzzy(
    spec: NRAMSpec,
    controller: Callable,
    memory: jax.Array,
    target: jax.Array,
    timesteps: int,
    *,
    carry=(),
    clip: float | None = None,
    eps: float = 1e-6,
    hard: bool = False,
    dtype=jnp.float32,
) -> Run:
    """Unroll the fuzzy machine for `timesteps` steps in lax.scan (Sec. 3).

    controller(bits (B, R), carry) -> (logits (B, size), carry): an NNX controller or a policy.
    memory, target: (B, M) integers (registers start at 0, Sec. 3.3). dtype: of the distributions
    (the controller's logits are cast to it). Returns a Run of (T, B, ...) arrays.
    """
    if not isinstance(timesteps, (int, np.integer)) or timesteps < 1:
        raise ValueError(f"timesteps must be a positive integer, got {timesteps!r}")
    memory = check_array(memory, "memory", ndim=2, dtype="integer")
    target = check_array(target, "target", shape=memory.shape, dtype="integer")
    if memory.shape[1] < 3:
        raise ValueError(
            f"the tape needs at least 3 cells (the constant TWO), got M={memory.shape[1]}"
        )
    if isinstance(controller, nnx.Module):
        graphdef, state = nnx.split(controller)
        call = lambda bits, c: nnx.merge(graphdef, state)(bits, c)  # noqa: E731
    else:
        call = controller
    registers, tape = _initial_state(spec, memory, dtype)

    def body(state, _):
        registers, tape, carry = state
        logits, carry = call(registers[:, :, 0], carry)
        logits = logits.astype(dtype)
        registers, tape, finish, entropy, _ = fuzzy_step(
            spec, registers, tape, logits, clip=clip, eps=eps, hard=hard
        )
        log_target = safe_log(jnp.take_along_axis(tape, target[:, :, None], -1)[..., 0], eps)
        return (registers, tape, carry), Run(
            log_target,
            jnp.argmax(tape, -1).astype(memory.dtype),
            finish,
            entropy,
            jnp.sum(_entropy(registers, eps), -1),
        )

    _, run = jax.lax.scan(body, (registers, tape, carry), None, length=timesteps)
    return run


# %% book/nram.md
def nram_loss(run: Run, mask: jax.Array, horizon: jax.Array | None = None) -> jax.Array:
    """Eq. nram-loss for each example (B,): the finish-weighted negative log-likelihood of the cells
    to modify (horizon (B,): each example's last step, see finish_probabilities)."""
    nll = -jnp.sum(jnp.where(mask[None], run.log_target, 0.0), -1)
    return jnp.sum(finish_probabilities(run.finish_logits, horizon) * nll, 0)


def run_output(run: Run, horizon: jax.Array | None = None) -> jax.Array:
    """The memory (B, M) the machine outputs: each cell's most likely value at the finishing
    step."""
    t = finish_step(run.finish_logits, horizon)
    return jnp.take_along_axis(run.argmax, t[None, :, None], 0)[0]


@checks(output=Array(ndim=2), target=Array(ndim=2), mask=Array(ndim=2))
def cell_errors(output, target, mask) -> tuple[int, int]:
    """(wrong cells, cells to modify) (Sec. 4.2): the error rate is their ratio."""
    output, target, mask = (np.asarray(x) for x in (output, target, mask))
    for name, a in (("target", target), ("mask", mask)):
        if a.shape != output.shape:
            raise ValueError(f"{name} must have the shape of output {output.shape}, got {a.shape}")
    return int(((output != target) & mask).sum()), int(mask.sum())


# %% book/nram.md
class Curriculum:
    """Difficulty sampling of Appendix B: level D in [1, top], raised when the error falls below
    `threshold`."""

    @checks(top=Int(1), threshold=Float(0, 1), min_gap=Int(0), start=Int(1))
    def __init__(self, top: int, *, threshold: float = 0.1, min_gap: int = 200, start: int = 1):
        if top < 1 or not 1 <= start <= top:
            raise ValueError(f"need 1 <= start <= top, got start={start}, top={top}")
        self.top, self.threshold, self.min_gap = int(top), float(threshold), int(min_gap)
        self.level, self.raised_at = int(start), 0

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Difficulties of `size` examples at the current level."""
        e = rng.geometric(0.5, size) - 1
        high = np.minimum(self.level + e, self.top)
        u = rng.random(size)
        return np.where(
            u < 0.10,
            rng.integers(1, self.top + 1, size),
            np.where(u < 0.35, 1 + (rng.random(size) * high).astype(int), high),
        )

    def update(self, step: int, error: float) -> bool:
        """Raise the level if `error` is below the threshold and min_gap steps passed; True if
        raised."""
        if (
            error < self.threshold
            and self.level < self.top
            and step - self.raised_at >= self.min_gap
        ):
            self.level, self.raised_at = self.level + 1, step
            return True
        return False


# %% book/nram.md
@checks(
    task=OneOf(*TASKS),
    registers=Int(1),
    repeats=Int(1),
    controller=OneOf("mlp", "lstm"),
    hidden=Int(1),
    init_scale=Float(0, low_open=True),
    finish_bias=Float(),
    memory_size=Int(1),
    timesteps=Int(1),
    extra_timesteps=Int(0),
    max_difficulty=Int(1),
    batch_size=Int(1),
    steps=Int(1),
    learning_rate=Float(0, low_open=True),
    clip_activation=Maybe(Float(0, low_open=True)),
    clip_norm=Float(0, low_open=True),
    noise_eta=Float(0),
    noise_decay=Maybe(Float(0, 1, low_open=True)),
    entropy=Float(),
    entropy_decay=Float(0, 1, low_open=True),
    value_entropy=Float(0),
    eps=Float(0, low_open=True),
    threshold=Float(0, 1),
    min_gap=Int(0),
    chunk=Int(1),
    keep_best=Bool(),
    seed=Int(0),
)
@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of Sec. 4.1 (the paper gives no values; these are ours, see Sec. 4 of the
    chapter)."""

    task: str = "copy"
    registers: int = 4
    repeats: int = 1  # the module list repeated (Sec. 4.3)
    controller: str = "mlp"  # "mlp" or "lstm"
    hidden: int = 64
    init_scale: float = 1.0  # the read-out layer's initial weights times this (sharper circuits)
    finish_bias: float = 0.0  # the finish logit's initial bias: f = sigmoid(bias) at first
    extra_timesteps: int = 0  # each example's horizon: timesteps + U{0..extra} (see _chunk_fn)
    memory_size: int = 16
    timesteps: int = 12
    max_difficulty: int = 7
    batch_size: int = 32
    steps: int = 3000
    learning_rate: float = 0.01
    clip_activation: float = 10.0  # C1
    clip_norm: float = 1.0  # C2
    noise_eta: float = 0.01  # gradient-noise variance at step 0
    noise_decay: float | None = None  # None: variance eta / (1 + t)^0.55; else eta * decay^t
    entropy: float = 0.1  # lambda_0; negative: a penalty, sharpening the circuits (item 4)
    entropy_decay: float = 0.999  # gamma, per step
    value_entropy: float = 0.0  # penalty on the entropy of the registers' values (item 4)
    eps: float = 1e-6
    threshold: float = 0.1  # curriculum: raise the level below this error
    min_gap: int = 200
    chunk: int = 50  # steps per jitted call (and per curriculum decision)
    keep_best: bool = True  # return the best controller seen, not the last (see train_nram)
    seed: int = 0

    def spec(self) -> NRAMSpec:
        """The machine of this configuration: the modules `repeats` times, `registers` registers."""
        return NRAMSpec(MODULES * self.repeats, self.registers)


# %% book/nram.md
@checks(config=Instance(TrainConfig))
def make_controller(config: TrainConfig, rngs: nnx.Rngs) -> nnx.Module:
    """The controller of `config` (Sec. 3), its read-out layer's initial weights (Flax's LeCun
    normal) multiplied by `config.init_scale`: at 1 the first circuits are close to uniform
    averages, larger values start from sharper, nearly discrete ones. The finish logit's bias
    starts at `config.finish_bias` (Flax's 0: the machine stops at each step with probability
    about 1/2; negative: it runs on, see Sec. 9 of the chapter)."""
    kinds = {"mlp": MLPController, "lstm": LSTMController}
    if config.controller not in kinds:
        raise ValueError(f"controller must be 'mlp' or 'lstm', got {config.controller!r}")
    spec = config.spec()
    controller = kinds[config.controller](spec, config.hidden, rngs=rngs)
    if config.init_scale != 1.0:
        controller.out.kernel[...] = controller.out.kernel[...] * config.init_scale
    if config.finish_bias != 0.0:
        bias = controller.out.bias[...]
        controller.out.bias[...] = bias.at[spec.layout.finish].set(config.finish_bias)
    return controller


def controller_text(controller: nnx.Module) -> str:
    """The controller's parameters as text (base64 of an .npz) to store beside a result;
    `load_controller` reads it back."""
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer, *[np.asarray(x) for x in jax.tree.leaves(nnx.state(controller, nnx.Param))]
    )
    return base64.b64encode(buffer.getvalue()).decode("ascii")


@checks(config=Instance(TrainConfig), text=Instance(str, what="the text of controller_text"))
def load_controller(config: TrainConfig, text: str) -> nnx.Module:
    """The controller of `config` with the parameters that `controller_text` wrote."""
    # the structure only (nnx.eval_shape): initialising a controller of a new shape compiles a
    # dozen small XLA programs, about a second, for parameters that are overwritten anyway
    abstract = nnx.eval_shape(lambda: make_controller(config, nnx.Rngs(0)))
    graphdef, params, rest = nnx.split(abstract, nnx.Param, ...)
    leaves, treedef = jax.tree.flatten(params)
    try:
        with np.load(io.BytesIO(base64.b64decode(text, validate=True))) as saved:
            arrays = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    except (ValueError, OSError, KeyError) as err:  # binascii.Error is a ValueError
        raise ValueError(
            f"text must be what controller_text wrote (base64 of the parameters): {err}"
        ) from None
    shapes = [x.shape for x in leaves]
    if [a.shape for a in arrays] != shapes:
        raise ValueError(
            f"the saved parameters have shapes {[a.shape for a in arrays]}, a {config.controller} "
            f"controller of this config has {shapes}"
        )
    return nnx.merge(
        graphdef,
        jax.tree.unflatten(treedef, [jnp.asarray(a, x.dtype) for a, x in zip(arrays, leaves)]),
        rest,
    )


# %% book/nram.md
class _NoiseState(NamedTuple):
    count: jax.Array
    rng_key: jax.Array


@checks(eta=Float(0), decay=Float(0, 1, low_open=True), seed=Int(0))
def exponential_noise(eta: float, decay: float, seed: int) -> optax.GradientTransformation:
    """Gaussian noise of variance eta * decay^t added to the updates at step t = 0, 1, ... (the
    schedule Sec. 4.1 of the paper names; optax.add_noise's is eta / (1 + t)^gamma)."""

    def init(params):
        del params
        return _NoiseState(count=jnp.zeros([], jnp.int32), rng_key=jax.random.key(seed))

    def update(updates, state, params=None):
        del params
        leaves, treedef = jax.tree.flatten(updates)
        key, *keys = jax.random.split(state.rng_key, len(leaves) + 1)
        std = jnp.sqrt(eta * jnp.power(decay, state.count.astype(jnp.float32)))
        noisy = [
            x + (std * jax.random.normal(k, x.shape, jnp.float32)).astype(x.dtype)
            for x, k in zip(leaves, keys)
        ]
        return treedef.unflatten(noisy), _NoiseState(count=state.count + 1, rng_key=key)

    return optax.GradientTransformation(init, update)


@checks(config=Instance(TrainConfig))
def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    """Global-norm clipping to C2, decaying gradient noise (Neelakantan et al.'s polynomial
    schedule, or the exponential one if config.noise_decay is set), Adam (Sec. 4.1)."""
    noise = (
        optax.add_noise(config.noise_eta, 0.55, config.seed)
        if config.noise_decay is None
        else exponential_noise(config.noise_eta, config.noise_decay, config.seed)
    )
    return optax.chain(
        optax.clip_by_global_norm(config.clip_norm),
        noise,
        optax.adam(config.learning_rate),
    )


# %% book/nram.md
def _chunk_fn(config: TrainConfig, graphdef, tx):
    """One chunk of training steps, not jitted: (state, batches) -> (state, per-step outputs)."""
    spec = config.spec()

    def loss_fn(params, rest, batch):
        controller = nnx.merge(graphdef, params, rest)
        carry = controller.initial_carry(batch["memory"].shape[0])
        run = run_fuzzy(
            spec,
            controller,
            batch["memory"],
            batch["target"],
            config.timesteps + config.extra_timesteps,
            carry=carry,
            clip=config.clip_activation,
            eps=config.eps,
        )
        horizon = batch["horizon"] if config.extra_timesteps else None
        loss = jnp.mean(nram_loss(run, batch["mask"], horizon))
        bonus = jnp.mean(jnp.sum(run.entropy, 0))  # over all steps run, as without horizons
        out = run_output(run, horizon)
        wrong = jnp.sum((out != batch["target"]) & batch["mask"], -1)
        cost = loss - batch["entropy_coef"] * bonus
        if config.value_entropy:  # footnote 7's penalty, over all steps run as the bonus
            cost = cost + config.value_entropy * jnp.mean(jnp.sum(run.value_entropy, 0))
        return cost, (loss, wrong, jnp.sum(batch["mask"], -1))

    def step(state, batch):
        params, rest, opt_state = state
        (_, (loss, wrong, cells)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            params, rest, batch
        )
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), rest, opt_state), (
            loss,
            wrong,
            cells,
            _global_norm(grads),
        )

    return lambda state, batches: jax.lax.scan(step, state, batches)


# %% book/nram.md
@lru_cache(maxsize=16)
def _compiled_chunk_fn(config: TrainConfig, graphdef, many: bool = False):
    """_chunk_fn jitted, and kept for later runs of the same architecture and optimizer: another
    seed, length or curriculum reuses the compiled step (the optimizer's seed only sets its initial
    state). many: vmapped over runs stacked on a leading axis (train_nram_seeds)."""
    chunk = _chunk_fn(config, graphdef, make_optimizer(config))
    return jax.jit(jax.vmap(chunk) if many else chunk)


def _step_settings(config: TrainConfig) -> TrainConfig:
    """config with the settings that do not enter the compiled step set to their defaults."""
    return dataclasses.replace(
        config,
        steps=1,
        seed=0,
        keep_best=True,
        threshold=0.1,
        min_gap=200,
        max_difficulty=1,
        finish_bias=0.0,
    )


def _check_config(config: TrainConfig) -> None:
    if config.task not in TASKS:
        raise ValueError(f"task must be one of {sorted(TASKS)}, got {config.task!r}")
    need = TASKS[config.task].min_memory(config.max_difficulty)
    if config.memory_size < need:
        raise ValueError(
            f"task {config.task} at max_difficulty={config.max_difficulty} needs memory_size >= "
            f"{need}, "
            f"got {config.memory_size}"
        )
    if config.timesteps < 1:
        raise ValueError(f"timesteps must be at least 1, got {config.timesteps}")


# %% book/nram.md
class _RunBook:
    """The host side of one training run: its data generator and curriculum, its history, and the
    best controller so far (train_nram runs one, train_nram_seeds several side by side)."""

    def __init__(self, config: TrainConfig, params):
        self.config = config
        self.rng = np.random.default_rng(config.seed)
        self.horizons = np.random.default_rng([config.seed, 1])  # a stream of its own
        self.curriculum = Curriculum(
            config.max_difficulty, threshold=config.threshold, min_gap=config.min_gap
        )
        self.history = {
            k: [] for k in ("step", "loss", "error", "error_level", "level", "grad_norm")
        }
        self.best, self.best_step, self.best_key = params, 0, None

    def batches(self, first: int, k: int) -> tuple[np.ndarray, dict]:
        """The difficulties and the examples of steps first .. first+k-1 (numpy, stacked)."""
        config = self.config
        difficulty = np.stack(
            [self.curriculum.sample(self.rng, config.batch_size) for _ in range(k)]
        )
        batches = [make_batch(config.task, d, config.memory_size, self.rng) for d in difficulty]
        stacked = {name: np.stack([getattr(b, name) for b in batches]) for name in Example._fields}
        stacked["entropy_coef"] = (
            config.entropy * config.entropy_decay ** np.arange(first, first + k)
        ).astype(np.float32)
        if config.extra_timesteps:
            stacked["horizon"] = config.timesteps + self.horizons.integers(
                0, config.extra_timesteps + 1, (k, config.batch_size)
            )
        return difficulty, stacked

    def record(self, first: int, difficulty: np.ndarray, outputs, params) -> dict:
        """Book the chunk that ended at step first+k: history, best controller, curriculum. Returns
        the chunk's history entry."""
        loss, wrong, cells, gnorm = (np.asarray(x) for x in outputs)
        last = first + len(loss)
        if not np.all(np.isfinite(loss)):  # NonFiniteError names the first bad step
            bad = int(np.argmin(np.isfinite(loss)))
            check_finite(
                first + bad,
                {"loss": loss[bad], "grad_norm": gnorm[bad]},
                "lower learning_rate or clip_activation",
            )
        error = float(wrong.sum() / cells.sum())
        current = (
            difficulty <= self.curriculum.level
        )  # the level is judged on the examples it covers
        error_level = float(wrong[current].sum() / max(cells[current].sum(), 1))
        entry = {
            "step": last,
            "loss": float(loss.mean()),
            "error": error,
            "error_level": error_level,
            "level": self.curriculum.level,
            "grad_norm": float(gnorm.mean()),
        }
        for name, value in entry.items():
            self.history[name].append(value)
        # higher level first, then lower error there; ties: the later
        key = (self.curriculum.level, -error_level)
        if self.config.keep_best and (self.best_key is None or key >= self.best_key):
            self.best, self.best_step, self.best_key = params(), last, key
        self.curriculum.update(last, error_level)
        return entry


# %% book/nram.md
class _RunLog(_RunBook):
    """A _RunBook that a checkpoint can hold and restore, and that gives the run's result."""

    def extra(self) -> dict:
        """What a checkpoint keeps of the run besides its arrays."""
        return {
            "best_step": self.best_step,
            "best_key": self.best_key,
            "rng": self.rng.bit_generator.state,
            "horizons": self.horizons.bit_generator.state,
            "level": self.curriculum.level,
            "raised_at": self.curriculum.raised_at,
            "history": self.history,
        }

    def restore(self, extra: dict, best) -> None:
        self.best, self.best_step = best, extra["best_step"]
        self.best_key = None if extra["best_key"] is None else tuple(extra["best_key"])
        self.rng.bit_generator.state = extra["rng"]
        if "horizons" in extra:  # checkpoints written before the horizons' stream was kept
            self.horizons.bit_generator.state = extra["horizons"]
        self.curriculum.level, self.curriculum.raised_at = extra["level"], extra["raised_at"]
        self.history = extra["history"]

    def result(self, graphdef, params, rest, seconds: float) -> Trained:
        if not self.config.keep_best:
            self.best, self.best_step = params, self.config.steps
        history = History(
            self.history,
            level=self.curriculum.level,
            wall_seconds=seconds,
            selected_step=self.best_step,
            final_controller=nnx.merge(graphdef, params, rest),
        )
        return Trained(nnx.merge(graphdef, self.best, rest), history)


# %% book/nram.md
def _start_from(config: TrainConfig, init: nnx.Module | None, seed: int) -> nnx.Module:
    """The controller a run starts from: a fresh one of `config` (make_controller, seeded by
    `seed`), or one with the parameters of `init`, which must be a controller of the same kind and
    shapes (its parameters are copied; `init` itself is left as it is)."""
    fresh = make_controller(config, nnx.Rngs(seed))
    if init is None:
        return fresh
    graphdef, params, rest = nnx.split(fresh, nnx.Param, ...)
    given = nnx.state(init, nnx.Param)
    shapes = [np.shape(x) for x in jax.tree.leaves(params)]
    if jax.tree.structure(given) != jax.tree.structure(params) or shapes != [
        np.shape(x) for x in jax.tree.leaves(given)
    ]:
        raise ValueError(
            f"init must be a controller of this config ({config.controller}, hidden "
            f"{config.hidden}, {config.registers} registers, repeats {config.repeats}): its "
            f"parameters have shapes {[np.shape(x) for x in jax.tree.leaves(given)]}, this "
            f"config's {shapes}"
        )
    copied = jax.tree.map(lambda a, b: jnp.array(a, dtype=b.dtype), given, params)
    return nnx.merge(graphdef, copied, rest)


_OVERRIDES = dict(steps=Maybe(Int(1)), batch_size=Maybe(Int(1)), seed=Maybe(Int(0)))
_OVERRIDES |= dict(learning_rate=Maybe(Float(0, low_open=True)))


def _overridden(config: TrainConfig, **settings) -> TrainConfig:
    """config with those of the trainer's keywords (steps, batch_size, ...) that are given."""
    return dataclasses.replace(config, **{k: v for k, v in settings.items() if v is not None})


# %% book/nram.md
@checks(
    config=Instance(TrainConfig),
    progress=Bool(),
    log=Maybe(Function()),
    checkpoint_every=Int(1),
    init=Maybe(Instance(nnx.Module, what="a controller")),
    **_OVERRIDES,
)
def train_nram(
    config: TrainConfig,
    *,
    init: nnx.Module | None = None,
    steps: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    seed: int | None = None,
    progress: bool = True,
    log: Callable | None = None,
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
) -> Trained:
    """Train an NRAM controller on `config.task` from input-output examples (Sec. 4.1, Appendix B);
    steps, batch_size, learning_rate, seed (an integer: numpy draws the data) replace config's.
    Returns Trained(controller, history): per chunk of steps the step, loss, error, level, ...;
    attributes `level` (the last), `wall_seconds`, `selected_step`, `final_controller`.
    Training is unstable (Sec. 4.1): a controller at zero error can collapse a few thousand steps
    later. With `config.keep_best` the controller returned is the one after the chunk with the
    highest curriculum level and, at that level, the lowest error on its training batches (the
    latest on ties), as the paper selects "a model that achieved error 0 during the training".
    checkpoint_dir: save the whole training state there every `checkpoint_every` steps, and resume
    from the latest checkpoint found there: the result is that of an uninterrupted run. init: start
    from this controller's parameters (e.g. `load_controller` of a stored row); the optimizer,
    data, curriculum and best controller start afresh.
    """
    config = _overridden(config, steps=steps, batch_size=batch_size, learning_rate=learning_rate)
    _check_config(config := _overridden(config, seed=seed))
    controller = _start_from(config, init, config.seed)
    graphdef, params, rest = nnx.split(controller, nnx.Param, ...)
    tx = make_optimizer(config)
    state = (params, rest, tx.init(params))
    chunk = _compiled_chunk_fn(_step_settings(config), graphdef)
    run = _RunLog(config, state[0])
    began, n_chunks = time.perf_counter(), -(-config.steps // config.chunk)
    done_chunks, saved_at, spent = 0, 0, 0.0
    if checkpoint_dir is not None:
        restored = restore_checkpoint(checkpoint_dir, {"state": state, "best": run.best})
        if restored is not None:
            saved_at, trees, extra = restored
            state = trees["state"]
            run.restore(extra, trees["best"])
            done_chunks, spent = extra["chunks"], extra["seconds"]
    report = Progress(
        config.steps, f"NRAM {config.task} seed {config.seed}", initial=saved_at, enabled=progress
    )
    for c in range(done_chunks, n_chunks):
        first = c * config.chunk
        difficulty, batches = run.batches(first, min(config.chunk, config.steps - first))
        batches = {name: jnp.asarray(x) for name, x in batches.items()}
        state, outputs = chunk(state, batches)
        entry = run.record(first, difficulty, outputs, lambda: state[0])
        if log is not None:
            log(entry)
        report.update(entry["step"], {name: entry[name] for name in ("loss", "error", "level")})
        if checkpoint_dir is not None and (
            entry["step"] - saved_at >= checkpoint_every or c == n_chunks - 1
        ):
            saved_at = entry["step"]
            save_checkpoint(
                checkpoint_dir,
                saved_at,
                {"state": state, "best": run.best},
                {**run.extra(), "chunks": c + 1, "seconds": spent + time.perf_counter() - began},
            )
    report.close()
    return run.result(graphdef, state[0], state[1], spent + time.perf_counter() - began)


# %% book/nram.md
def _stack(trees):
    return jax.tree.map(lambda *x: jnp.stack(x), *trees)


def _unstack(tree, i: int):
    return jax.tree.map(lambda x: x[i], tree)


def _check_seeds(seeds) -> list:
    """`seeds` as a list of distinct integers >= 0, or a ValueError that says what is wrong."""
    seeds = list(seeds) if isinstance(seeds, (list, tuple, range, np.ndarray)) else seeds
    if not isinstance(seeds, list) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of integers, got {seeds!r}")
    for s in seeds:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 0:
            raise ValueError(f"seeds must hold integers >= 0, got {s!r} in {seeds}")
    if len(set(int(s) for s in seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct, got {seeds}")
    return seeds


def _resume_runs(checkpoint_dir, state, runs: list) -> tuple:
    """(state, chunks done, step saved at, seconds spent) of side-by-side runs: from the latest
    checkpoint in checkpoint_dir (each run's host side restored in place), else from the start."""
    if checkpoint_dir is None:
        return state, 0, 0, 0.0
    restored = restore_checkpoint(
        checkpoint_dir, {"state": state, "best": _stack([r.best for r in runs])}
    )
    if restored is None:
        return state, 0, 0, 0.0
    saved_at, trees, extra = restored
    for i, run in enumerate(runs):
        run.restore(extra["runs"][i], _unstack(trees["best"], i))
    return trees["state"], extra["chunks"], saved_at, extra["seconds"]


# %% book/nram.md
@checks(
    config=Instance(TrainConfig),
    progress=Bool(),
    checkpoint_every=Int(1),
    init=Maybe(Instance(nnx.Module, what="a controller")),
    **{name: arg for name, arg in _OVERRIDES.items() if name != "seed"},
)
def train_nram_seeds(
    config: TrainConfig,
    seeds: Sequence[int],
    *,
    init: nnx.Module | None = None,
    steps: int | None = None,
    batch_size: int | None = None,
    learning_rate: float | None = None,
    progress: bool = True,
    checkpoint_dir=None,
    checkpoint_every: int = 1000,
) -> list[Trained]:
    """train_nram for each seed of `seeds` (config.seed ignored), the runs side by side in one
    compiled program (`jax.vmap` over the parameters, optimizer states and batches): what a seed
    gives here is what `train_nram` gives it, up to floating-point rounding, and each run keeps its
    own data, curriculum and best controller; a Trained pair per seed. history.wall_seconds is the
    time of all the runs; a non-finite step in any stops them all. Other arguments: as train_nram.
    """
    seeds = _check_seeds(seeds)
    config = _overridden(config, steps=steps, batch_size=batch_size, learning_rate=learning_rate)
    _check_config(config)
    configs = [dataclasses.replace(config, seed=int(s)) for s in seeds]
    states, runs = [], []
    for c in configs:
        graphdef, params, rest = nnx.split(_start_from(c, init, c.seed), nnx.Param, ...)
        states.append((params, rest, make_optimizer(c).init(params)))
        runs.append(_RunLog(c, params))
    state = _stack(states)
    chunk = _compiled_chunk_fn(_step_settings(config), graphdef, many=True)
    began = time.perf_counter()
    n_chunks = -(-config.steps // config.chunk)
    state, done_chunks, saved_at, spent = _resume_runs(checkpoint_dir, state, runs)
    report = Progress(
        config.steps * len(seeds),
        f"NRAM {config.task}, {len(seeds)} seeds",
        initial=saved_at * len(seeds),
        enabled=progress,
    )
    for c in range(done_chunks, n_chunks):
        first = c * config.chunk
        k = min(config.chunk, config.steps - first)
        drawn = [run.batches(first, k) for run in runs]
        batches = {name: jnp.asarray(np.stack([b[name] for _, b in drawn])) for name in drawn[0][1]}
        state, outputs = chunk(state, batches)
        outputs = [np.asarray(x) for x in outputs]
        entries = [
            run.record(first, d, [x[i] for x in outputs], lambda i=i: _unstack(state[0], i))
            for i, (run, (d, _)) in enumerate(zip(runs, drawn))
        ]
        report.update(
            (first + k) * len(seeds),
            {
                "lowest level": min(e["level"] for e in entries),
                "highest level": max(e["level"] for e in entries),
                "mean error": float(np.mean([e["error"] for e in entries])),
            },
        )
        if checkpoint_dir is not None and (
            first + k - saved_at >= checkpoint_every or c == n_chunks - 1
        ):
            saved_at, seconds = first + k, spent + time.perf_counter() - began
            trees = {"state": state, "best": _stack([r.best for r in runs])}
            extra = {"runs": [r.extra() for r in runs], "chunks": c + 1, "seconds": seconds}
            save_checkpoint(checkpoint_dir, saved_at, trees, extra)
    report.close()
    seconds = spent + time.perf_counter() - began
    return [
        run.result(graphdef, _unstack(state[0], i), _unstack(state[1], i), seconds)
        for i, run in enumerate(runs)
    ]


# %% book/nram.md
def controller_policy(controller: nnx.Module) -> Callable:
    """The policy of one example (bits (R,), carry) -> (logits, carry) that run_discrete needs, from
    a batched controller."""

    def policy(bits, carry):
        logits, carry = controller(bits[None], jax.tree.map(lambda c: c[None], carry))
        return logits[0], jax.tree.map(lambda c: c[0], carry)

    return policy


class PolicyController(nnx.Module):
    """The other direction: a fixed policy (bits, carry) -> (logits, carry), e.g. a hand-written
    program, as a stateless controller module that `evaluate` and the machines accept."""

    def __init__(self, policy: Callable):
        self.policy = policy

    def initial_carry(self, batch: int):
        """No state between timesteps: the empty carry."""
        return ()

    def __call__(self, bits: jax.Array, carry=()):
        return self.policy(bits, carry)


# %% book/nram.md
@checks(config=Instance(TrainConfig), n=Int(1))
def scaled_size(config: TrainConfig, n: int) -> tuple[int, int]:
    """(memory size, timesteps) for difficulty n: those of training up to its top difficulty; beyond
    it, both grow in proportion to n (never below what the task needs)."""
    if n <= config.max_difficulty:
        return config.memory_size, config.timesteps
    scale = n / config.max_difficulty
    return (
        max(TASKS[config.task].min_memory(n), math.ceil(config.memory_size * scale)),
        math.ceil(config.timesteps * scale),
    )


# %% book/nram.md
@partial(
    jax.jit,
    static_argnames=("graphdef", "spec", "timesteps"),
    compiler_options={"xla_backend_optimization_level": 0},
)
def _both_machines(graphdef, state, memory, target, *, spec: NRAMSpec, timesteps: int):
    """Outputs of the fuzzy and of the discretised machine (compiled once per controller structure
    and shape). Each tape length is a new shape, compiled for one batch or a few: at XLA's lowest
    backend optimisation, compiling takes less than half as long and the runs hardly longer."""
    controller = nnx.merge(graphdef, state)
    run = run_fuzzy(
        spec, controller, memory, target, timesteps, carry=controller.initial_carry(memory.shape[0])
    )
    carry = jax.tree.map(lambda c: c[0], controller.initial_carry(1))
    discrete, _ = jax.vmap(
        lambda m: run_discrete(spec, controller_policy(controller), m, timesteps, carry)
    )(memory)
    return run_output(run), discrete


@checks(
    config=Instance(TrainConfig),
    n=Int(1),
    examples=Int(1),
    seed=Int(0),
    batch_size=Int(1),
    mixed=Bool(),
)
def evaluate(
    controller: nnx.Module,
    config: TrainConfig,
    n: int,
    *,
    examples: int = 100,
    seed: int = 0,
    batch_size: int = 100,
    mixed: bool = False,
) -> dict:
    """Error of the fuzzy and the discretised machine on `examples` fresh examples of difficulty n
    (Sec. 4.4), or with `mixed`, of difficulties drawn uniformly from 1..n (Figure 3's "max task
    complexity" n); the tape and timesteps are those of difficulty n (`scaled_size`).

    Returns {"n", "mixed", "memory_size", "timesteps", "error" (fuzzy), "error_discrete",
    "agreement": share of examples whose output cells the two machines write identically}.
    """
    spec = config.spec()
    M, T = scaled_size(config, n)
    rng = np.random.default_rng(seed)
    graphdef, state = nnx.split(controller)
    machines = partial(_both_machines, graphdef, state, spec=spec, timesteps=T)
    wrong = wrong_d = cells = agree = 0
    for start in range(0, examples, batch_size):
        size = min(batch_size, examples - start)
        batch = make_batch(
            config.task, rng.integers(1, n + 1, size) if mixed else [n] * size, M, rng
        )
        fuzzy, discrete = (
            np.asarray(x) for x in machines(jnp.asarray(batch.memory), jnp.asarray(batch.target))
        )
        w, c = cell_errors(fuzzy, batch.target, batch.mask)
        wrong, cells, wrong_d = (
            wrong + w,
            cells + c,
            wrong_d + cell_errors(discrete, batch.target, batch.mask)[0],
        )
        agree += int(np.all((fuzzy == discrete) | ~batch.mask, axis=1).sum())
    return {
        "n": n,
        "mixed": mixed,
        "memory_size": M,
        "timesteps": T,
        "error": wrong / cells,
        "error_discrete": wrong_d / cells,
        "agreement": agree / examples,
    }


# %% book/nram.md
# compiled once per machine and tape length, for every call of `trace`
_discrete_step = jax.jit(  # a step runs once per call: the lowest optimisation compiles faster
    discrete_step, static_argnums=0, compiler_options={"xla_backend_optimization_level": 0}
)


@checks(spec=Instance(NRAMSpec), policy=Function(), memory=Array(ndim=1), timesteps=Int(1))
def trace(spec: NRAMSpec, policy: Callable, memory, timesteps: int, carry=()) -> list[dict]:
    """Step-by-step record of the discretised machine on one example (Table 2): for each timestep,
    the memory and registers at its start, the logits, the address of every READ ("reads"; the
    first also as "read") and the (address, value) of every WRITE ("writes", "write"), in module
    order, whether it finishes and the controller's finish probability."""
    memory = jnp.asarray(memory)
    registers = jnp.zeros(spec.registers, memory.dtype)
    step = partial(_discrete_step, spec)
    rows = []
    for t in range(timesteps):
        logits, carry = policy((registers == 0).astype(jnp.float32), carry)
        new_registers, new_memory, finish, values, inputs = step(registers, memory, logits)
        inputs = np.asarray(inputs)
        row = {
            "step": t + 1,
            "memory": np.asarray(memory),
            "registers": np.asarray(registers),
            "logits": np.asarray(logits),
            "finish": bool(finish),
            "finish_probability": float(jax.nn.sigmoid(logits[spec.layout.finish])),
            "reads": [int(inputs[i, 0]) for i, m in enumerate(spec.modules) if m == "READ"],
            "writes": [
                (int(inputs[i, 0]), int(inputs[i, 1]))
                for i, m in enumerate(spec.modules)
                if m == "WRITE"
            ],
        }
        if row["reads"]:
            row["read"] = row["reads"][0]
        if row["writes"]:
            row["write"] = row["writes"][0]
        rows.append(row)
        registers, memory = new_registers, new_memory
        if finish:
            break
    return rows


def format_trace(rows: list[dict]) -> str:
    """The rows of `trace` as text, one line per timestep: memory, registers, READ and WRITE
    arguments."""
    lines = []
    for row in rows:
        line = (
            f"step {row['step']:2d}  memory {' '.join(f'{v:2d}' for v in row['memory'])}  "
            f"registers {row['registers']}"
        )
        for p in row["reads"]:
            line += f"  READ p={p:2d}"
        for p, a in row["writes"]:
            line += f"  WRITE p={p:2d} a={a:2d}"
        lines.append(line + ("  finish" if row["finish"] else ""))
    return "\n".join(lines)


# %% book/nram.md
@checks(spec=Instance(NRAMSpec))
def circuit_choices(spec: NRAMSpec, logits) -> tuple[list, list]:
    """The argmax circuit of one timestep: (for each gate, the indices of its inputs; for each
    register, its source)."""
    layout, logits = spec.layout, np.asarray(logits)
    args = [
        [int(np.argmax(logits[s : s + n])) for s, n in layout.args[i]]
        for i in range(len(spec.modules))
    ]
    outs = np.argmax(
        logits[layout.outs : layout.finish].reshape(spec.registers, spec.num_values), -1
    )
    return args, [int(o) for o in outs]


def _circuit_positions(spec: NRAMSpec, args: list, outs: list) -> tuple[list, dict]:
    """The gates that matter in a circuit (their output reaches a register or they write to
    memory), in evaluation order, and where draw_circuit puts each box: the registers r_j in a
    column on the left, the gates left to right, zig-zagging vertically."""
    R = spec.registers
    needed, todo = set(), list(outs) + [R + i for i, m in enumerate(spec.modules) if m == "WRITE"]
    while todo:
        k = todo.pop()
        if k >= R and k not in needed:
            needed.add(k)
            todo += args[k - R]
    gates = sorted(needed)
    pos = {j: (0.0, -1.2 * j) for j in range(R)}
    depth = (len(gates) - 1) or 1
    for row, k in enumerate(gates):
        pos[k] = (1.0 + row, -1.2 * (R - 1) * ((row % 2) * 0.8 + 0.1) - 0.15 * row / depth)
    return gates, pos


# %% book/nram.md
@checks(spec=Instance(NRAMSpec))
def draw_circuit(spec: NRAMSpec, logits, ax=None, title: str | None = None):
    """Draw the argmax circuit of one timestep (Figure 4): registers r_j on the left, the gates that
    matter (their output reaches a register or they write to memory), the new registers r_j' on the
    right."""
    import matplotlib.pyplot as plt

    args, outs = circuit_choices(spec, logits)
    R = spec.registers
    names = [f"r{j + 1}" for j in range(R)] + list(spec.modules)
    gates, pos = _circuit_positions(spec, args, outs)
    ax = ax or plt.subplots(figsize=(2.2 + 1.1 * len(gates), 0.6 * max(R, len(gates)) + 1.2))[1]
    right = 1.0 + len(gates)
    box = dict(boxstyle="round", fc="white", ec="0.3")
    short = {"LESSTHAN": "lt", "LESSOREQUALTHAN": "le", "EQUALITYTEST": "eq"}
    for k, (x, y) in pos.items():
        label = short.get(names[k], names[k].lower()) if k >= R else names[k]
        ax.text(x, y, label, ha="center", va="center", bbox=box, fontsize=9, zorder=3)
    for j in range(R):
        ax.text(
            right, -1.2 * j, f"r{j + 1}'", ha="center", va="center", bbox=box, fontsize=9, zorder=3
        )
    inputs = {"READ": ["p"], "WRITE": ["p", "a"], "SUB": ["x", "y"]}
    inputs |= {"LESSTHAN": ["x", "y"], "LESSOREQUALTHAN": ["x", "y"]}
    for k in gates:
        labels = inputs.get(spec.modules[k - R], [])
        for a_i, src in enumerate(args[k - R]):
            bend = f"arc3,rad={0.15 if a_i else -0.15}"
            wire = dict(arrowstyle="->", color="0.35", shrinkA=9, shrinkB=9, connectionstyle=bend)
            ax.annotate("", pos[k], pos[src], arrowprops=wire)
            if a_i < len(labels):
                x, y = pos[k][0] - 0.28, pos[k][1] + (0.22 if a_i == 0 else -0.22)
                ax.text(x, y, labels[a_i], fontsize=8, color="C3", ha="center", va="center")
    for j, src in enumerate(outs):
        wire = dict(
            arrowstyle="->", color="C0", shrinkA=9, shrinkB=9, connectionstyle="arc3,rad=0.08"
        )
        ax.annotate("", (right, -1.2 * j), pos[src], arrowprops=wire)
    ax.set_xlim(-0.5, right + 0.5)
    ax.set_ylim(-1.2 * (R - 1) - 0.8, 0.8)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


# %% book/nram.md
__all__ = [
    "NRAMSpec",
    "TASKS",
    "Task",
    "Example",
    "EASY_TASKS",
    "HARD_TASKS",
    "TrainConfig",
    "train_nram",
    "train_nram_seeds",
    "Curriculum",
    "MLPController",
    "LSTMController",
    "PolicyController",
    "make_controller",
    "make_optimizer",
    "evaluate",
    "nram_loss",
    "make_batch",
    "run_fuzzy",
    "Run",
    "run_output",
    "fuzzy_step",
    "run_discrete",
    "discrete_step",
    "module_int",
    "module_dist",
    "trace",
    "format_trace",
    "draw_circuit",
    "circuit_choices",
    "circuit_layout",
    "CircuitLayout",
    "controller_text",
    "load_controller",
    "MODULES",
    "ARITY",
    "read",
    "write",
    "circular_add",
    "circular_sub",
    "clip_gradient",
    "renormalise",
    "safe_log",
    "program_logits",
    "copy_program",
    "finish_probabilities",
    "finish_step",
    "cell_errors",
    "exponential_noise",
    "controller_policy",
    "scaled_size",
]
constructor_signatures(globals())  # help() and inspect.signature show __init__'s parameters
