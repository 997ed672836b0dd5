"""One training job over many processes: `jax.distributed` plus the sharded stage on a global mesh.

Every process runs the same program (JAX's multi-controller model):

    from policy.distributed import initialize, make_distributed_stage, to_host
    procs = initialize()                     # before making arrays; no-op for one process
    trainee = make_train(env, network, hparams)
    stage = make_distributed_stage(trainee)  # shard_map over all processes' devices
    runner = trainee.init(jax.random.key(0))
    runner, metrics = stage(runner, cfgs, jax.random.key(1))
    if procs.is_main:
        print(trainee.summarize(to_host(metrics)))

The mesh `("envs",)` spans `jax.devices()`, the devices of every process. The learner state,
config batch and key are replicated; each device runs `num_envs / D` environments and
generates `pool_size / D` levels of the stage pool (`jaxenv.levels.stage_pool`, so each process
generates only its own devices' shards), the shards are all-gathered, and gradients, counts and
metrics are psum'd across processes. The result equals the one-device stage up to float
summation order, and it comes back replicated: every process holds the same parameters.

Inputs must be the same on every process (same seed, same config values); `make_distributed_stage`
checks the config batch and key across processes before each stage unless told not to.
On CPU, cross-process collectives go through gloo (`jax_cpu_collectives_implementation`,
set by `initialize` where this JAX version leaves it unset).

Joining is bounded: a process other than 0 first waits for the coordinator's port, and the
whole join must finish within `timeout_s` (`ENVENGINEER_COORDINATOR_TIMEOUT`, default
`TIMEOUT_S`). An unreachable coordinator is a `CoordinatorTimeout`; a job whose other processes
never arrive ends this process with one line and exit status 2, before JAX's own timeout would
abort it with a fatal log and a stack dump.

From the shell, `envengineer run --distributed` runs the closed loop this way (docs/scaling.md).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

if TYPE_CHECKING:  # policy.ppo imports gymnax, whose import creates arrays: kept lazy
    from policy.ppo import PPOTrainee, RunnerState

log = logging.getLogger(__name__)

ENV_ADDRESS = "JAX_COORDINATOR_ADDRESS"  # read by jax.distributed itself as well
ENV_COUNT = "JAX_NUM_PROCESSES"
ENV_ID = "JAX_PROCESS_ID"
ENV_TIMEOUT = "ENVENGINEER_COORDINATOR_TIMEOUT"  # seconds to join the job
TIMEOUT_S = 300  # JAX's own default initialization timeout
TIMEOUT_EXIT = 2  # the exit status of a job that did not start (the command line's)
JAX_GRACE_S = 30  # JAX's timeout is set this much later, so that ours fires first


class CoordinatorTimeout(ValueError):
    """The coordinator did not answer within the timeout (a wrong address, or not started)."""


@dataclass(frozen=True)
class Processes:
    """Where this process stands in the job (what `initialize` returns)."""

    index: int
    count: int
    coordinator_address: str | None = None

    @property
    def is_main(self) -> bool:
        """Process 0 writes files and logs; the others only compute."""
        return self.index == 0


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def resolve(coordinator_address: str | None = None, num_processes: int | None = None,
            process_id: int | None = None, environ: Mapping[str, str] | None = None,
            ) -> tuple[str | None, int | None, int | None]:
    """Arguments first, then `JAX_COORDINATOR_ADDRESS`, `JAX_NUM_PROCESSES`, `JAX_PROCESS_ID`."""
    env = os.environ if environ is None else environ
    address = coordinator_address or env.get(ENV_ADDRESS) or None
    count = num_processes if num_processes is not None else _env_int(env, ENV_COUNT)
    pid = process_id if process_id is not None else _env_int(env, ENV_ID)
    return address, count, pid


def timeout(timeout_s: float | None = None, environ: Mapping[str, str] | None = None) -> float:
    """The join timeout in seconds: the argument, else `ENVENGINEER_COORDINATOR_TIMEOUT`, else
    `TIMEOUT_S`; a ValueError unless it is a finite number of at least 1."""
    env = os.environ if environ is None else environ
    raw: Any = timeout_s if timeout_s is not None else env.get(ENV_TIMEOUT) or TIMEOUT_S
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{ENV_TIMEOUT}={raw!r} is not a number of seconds") from None
    if not 1 <= value <= 86_400:  # NaN fails this too
        raise ValueError(f"the coordinator timeout must be 1 to 86400 seconds, got {raw!r}")
    return value


def host_port(address: str) -> tuple[str, int]:
    """'host:port' or '[v6]:port' -> (host, port); a ValueError naming the address otherwise."""
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"coordinator address {address!r} is not host:port")
    return host, int(port)


def wait_for_coordinator(address: str, deadline: float, what: str) -> None:
    """Return once the coordinator's port accepts a connection; `CoordinatorTimeout` at
    `deadline` (`time.monotonic()`), or at once for a host name that does not resolve."""
    host, port = host_port(address)
    while True:
        left = deadline - time.monotonic()
        try:
            socket.create_connection((host, port), timeout=max(0.1, min(2.0, left))).close()
            return
        except socket.gaierror as e:
            raise CoordinatorTimeout(f"coordinator {address}: cannot resolve {host!r} "
                                     f"({e.strerror})") from None
        except OSError:
            if left <= 0:
                raise CoordinatorTimeout(
                    f"no coordinator answered at {address} within the timeout ({what}); start "
                    f"process 0 there first, or wait longer with {ENV_TIMEOUT}") from None
            time.sleep(min(0.5, max(0.0, left)))


@contextmanager
def _exit_after(seconds: float, message: str) -> Iterator[None]:
    """End the process with `message` and `TIMEOUT_EXIT` unless the block is done in time
    (JAX's join blocks in C++ and aborts the process when its own timeout expires)."""

    def give_up() -> None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        os._exit(TIMEOUT_EXIT)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, local_device_ids: Sequence[int] | None = None,
               cpu_devices: int | None = None, timeout_s: float | None = None,
               auto_detect: bool = False) -> Processes:
    """Join the job (`jax.distributed.initialize`); call it before making any JAX array.

    Values come from the arguments, else the environment variables of `resolve`. Nothing set
    (or one process) is a single-process run and a no-op; with `auto_detect`, unset values are
    left to JAX's cluster detection (Slurm, Open MPI, Kubernetes, Cloud TPU). A partial setting
    raises a `ValueError` naming what is missing, so a typo never starts a one-process run.
    `cpu_devices` sets the host CPU devices of this process (`jax_num_cpu_devices`), e.g. to
    try a multi-device job on one machine. `timeout_s` bounds the join (module docstring).
    """
    if jax.distributed.is_initialized():
        return Processes(jax.process_index(), jax.process_count(),
                         resolve(coordinator_address)[0])
    address, count, pid = resolve(coordinator_address, num_processes, process_id)
    if count is not None and count < 1:
        raise ValueError(f"num_processes ({ENV_COUNT}) must be >= 1, got {count}")
    single = count == 1 or (not auto_detect and (address, count, pid) == (None, None, None))
    if single and pid not in (None, 0):
        raise ValueError(f"process_id ({ENV_ID}) must be 0 in a one-process run, got {pid}")
    missing = [f"{arg} (or {var})" for arg, var, v in (
        ("coordinator_address", ENV_ADDRESS, address), ("num_processes", ENV_COUNT, count),
        ("process_id", ENV_ID, pid)) if v is None]
    if not single and missing and not auto_detect:
        raise ValueError("a multi-process run needs coordinator_address, num_processes and "
                         f"process_id; missing: {', '.join(missing)}")
    if pid is not None and count is not None and not 0 <= pid < count:
        raise ValueError(f"process_id must be in [0, {count}), got {pid}")
    if not single:
        limit = timeout(timeout_s)
        deadline = time.monotonic() + limit
        what = f"{limit:g} s, process {pid} of {count}"
        if address is not None:
            host_port(address)
            if pid not in (None, 0):  # process 0 starts the coordinator; the others find it
                wait_for_coordinator(address, deadline, what)
    if single and cpu_devices is None:
        return Processes(0, 1, address)
    _clear_import_time_backends()
    if cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", cpu_devices)
    if single:
        return Processes(0, 1, address)
    if getattr(jax.config, "jax_cpu_collectives_implementation", "gloo") is None:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    left = max(1.0, deadline - time.monotonic())
    with _exit_after(left, f"the distributed job did not start within {what} at coordinator "
                     f"{address}: the other processes never joined (wait longer with "
                     f"{ENV_TIMEOUT})"):
        jax.distributed.initialize(address, count, pid, local_device_ids=local_device_ids,
                                   initialization_timeout=int(left) + JAX_GRACE_S)
    return Processes(jax.process_index(), jax.process_count(), address)


def _clear_import_time_backends() -> None:
    """Let `jax.distributed.initialize` (and CPU device counts) apply after JAX has started.

    Importing gymnax (hence `jaxenv` and `policy`) creates module-level arrays, which starts
    the XLA backends before any user code; `jax.distributed.initialize` refuses to run after
    that. The backends are cleared and recreated as distributed ones; the import-time
    constants stay valid (JAX copies them to the new devices when a program uses them).
    Arrays the caller made before `initialize` belong to the old backend: make the runner state
    and configs afterwards. On an accelerator the old client keeps whatever it preallocated,
    so there the process should import `jaxenv`, `policy` and gymnax after `initialize`, or
    set `XLA_PYTHON_CLIENT_PREALLOCATE=false`.
    """
    from jax._src.xla_bridge import backends_are_initialized  # what jax.distributed checks
    from jax.extend.backend import backends, clear_backends

    if not backends_are_initialized():
        return
    started = sorted(backends())
    if started != ["cpu"] and os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "").lower() \
            not in ("false", "0"):
        log.warning("JAX started %s before jax.distributed; memory preallocated there stays "
                    "held after the restart. Call policy.distributed.initialize before "
                    "importing jaxenv/policy/gymnax, or set XLA_PYTHON_CLIENT_PREALLOCATE=false",
                    started)
    clear_backends()


def global_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """The 1-D `("envs",)` mesh over every process's devices (default: `jax.devices()`)."""
    from policy.sharding import env_mesh

    return env_mesh(jax.devices() if devices is None else devices)


def _host_value(x: Any) -> Any:
    if isinstance(x, jax.Array) and (not x.is_fully_addressable
                                     or jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)):
        return x  # already global, or a typed key (multihost_utils unwraps it itself)
    return np.asarray(x)


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Values held identically by every process -> global arrays replicated over `mesh`.

    Arrays that are already global (e.g. the previous stage's outputs) pass through.
    """
    return multihost_utils.host_local_array_to_global_array(
        jax.tree.map(_host_value, tree), mesh, P())


def to_local(tree: Any) -> Any:
    """Replicated global arrays -> this process's copy on one local device.

    Use it to run single-process code (evaluation, verification) on the result of a stage
    without involving the other processes.
    """
    return jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x,
                        tree)


def to_host(tree: Any) -> Any:
    """Replicated global arrays -> numpy on this process (no communication)."""
    return jax.tree.map(np.asarray, to_local(tree))


def _key_data(key: jax.Array) -> jax.Array:
    return jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype,
                                                             jax.dtypes.prng_key) else key


def distribute(trainee: PPOTrainee, processes: Any) -> PPOTrainee:
    """`trainee` whose `train_stage` runs over every process's devices (with more than one of
    `processes`) and hands its result back local; else `trainee` itself."""
    if processes is None or processes.count <= 1:
        return trainee
    run = make_distributed_stage(trainee)
    return trainee._replace(train_stage=lambda runner, cfgs, key: to_local(run(runner, cfgs,
                                                                                 key)))


def make_distributed_stage(trainee: PPOTrainee,
                           devices: Sequence[jax.Device] | None = None, *,
                           check_inputs: bool = True) -> Callable[..., tuple[RunnerState, dict]]:
    """`stage(runner, cfg_batch, key) -> (runner, metrics)` over the global mesh.

    Every process calls it with the same values; outputs are global arrays replicated on every
    device (feed them to the next call as they are; `to_local` / `to_host` to read them). With
    `check_inputs`, differing config batches or keys across processes raise before the stage
    (an all-gather of a few bytes) instead of silently training on a mix.
    """
    from policy.sharding import sharded_stage

    mesh = global_mesh(devices)
    run = sharded_stage(trainee, list(mesh.devices.flat))
    multi = jax.process_count() > 1

    def stage(runner: RunnerState, cfgs: Any, key: jax.Array) -> tuple[RunnerState, dict]:
        if multi and check_inputs:
            multihost_utils.assert_equal(
                jax.tree.map(_host_value, (cfgs, _key_data(key))),
                "the config batch and key must be the same on every process")
        return run(*replicate((runner, cfgs, key), mesh))

    return stage
