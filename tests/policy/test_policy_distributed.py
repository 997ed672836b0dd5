"""Sharded and multi-process training give the one-device update.

One reference process with 4 host CPU devices trains one stage on one device and sharded over
the 4; two processes x 2 devices (jax.distributed, gloo collectives) train it as one job. The
tolerance: parameters after one stage of 2 updates x 2 epochs x 2 minibatches agree to 1e-5
absolute + 1e-4 relative (only the float summation order of the psum'd gradients differs);
episode counts and outcomes exactly; both processes hold the same parameters. The second
update runs on a fresh pool (`pool_every`), generated in slices and all-gathered inside a cond.
Also: how `initialize` reads its settings.

Device counts must be set before JAX starts, so every run is a subprocess of this file run as
a script: `ref` (one process, 4 devices: the one-device and the sharded result) and two
`worker`s on a free localhost port, all three at once, once for the module. A failing or
hanging child is killed and its output shown; nothing outlives the test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

PROCESSES, LOCAL_DEVICES = 2, 2
DEADLINE_S = 480
RTOL, ATOL = 1e-4, 1e-5


# ------------------------------------------------------------------ run in the subprocesses
def _setup():
    """2 configs over 8 envs (shards hold envs of both), one short stage."""
    import jax

    from jaxenv.mapf import Capacity, MAPFFrozenLake
    from policy.network import ActorCritic
    from policy.ppo import Hparams, make_train

    env = MAPFFrozenLake(Capacity(max_size=4, max_agents=2, max_steps=16, label_waits=False))
    cs = env.config_space
    a = cs.default()
    b = dict(a, hole_ratio=[0.3, 0.3], agent_weights=[1.0, 0.0], slip_prob=0.1)
    hp = Hparams(num_envs=8, num_steps=8, num_updates=2, update_epochs=2, num_minibatches=2,
                 pool_size=16, pool_every=1, lr=1e-3)  # a fresh pool (all-gathered) at update 1
    tr = make_train(env, ActorCritic(hidden=16, critic="mappo"), hp)
    return tr, cs.stack([a, b]), tr.init(jax.random.PRNGKey(0)), jax.random.PRNGKey(1)


def _save(path: str, runner, metrics) -> None:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(runner.params)[0]
    np.savez(path, **{"p" + jax.tree_util.keystr(k): np.asarray(v) for k, v in leaves},
             **{"m_" + k: np.asarray(metrics[k]) for k in ("episodes", "outcomes", "loss")})


def _ref(out: str) -> None:
    import jax

    from policy.sharding import sharded_stage

    assert jax.local_device_count() == PROCESSES * LOCAL_DEVICES, jax.devices()
    tr, cfgs, runner, key = _setup()
    _save(f"{out}/init.npz", runner, {k: np.zeros(1) for k in ("episodes", "outcomes", "loss")})
    _save(f"{out}/one.npz", *tr.train_stage(runner, cfgs, key))
    _save(f"{out}/four.npz", *sharded_stage(tr)(runner, cfgs, key))


def _worker(pid: int, port: int, out: str) -> None:
    from policy.distributed import initialize, make_distributed_stage, to_host

    procs = initialize(f"localhost:{port}", PROCESSES, pid, timeout_s=120)
    import jax

    assert (procs.index, procs.count) == (pid, PROCESSES)
    assert (jax.local_device_count(), jax.device_count()) == (LOCAL_DEVICES,
                                                              PROCESSES * LOCAL_DEVICES)
    tr, cfgs, runner, key = _setup()
    new, metrics = make_distributed_stage(tr)(runner, cfgs, key)
    _save(f"{out}/dist{pid}.npz", to_host(new), to_host(metrics))


# --------------------------------------------------------------------------- the test itself
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _run_all(out: str) -> dict[str, str | None]:
    """Start ref and both workers; wait for all; kill every child on failure or timeout.
    Returns, per child, None where it finished or the tail of its log where it did not."""
    from tests.helpers.xla_flags import xla_flags  # here: the script run as a child has no `tests`

    base = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    port = _free_port()
    jobs = {"ref": ([], PROCESSES * LOCAL_DEVICES)}
    jobs.update({f"worker{i}": ([str(i), str(port)], LOCAL_DEVICES) for i in range(PROCESSES)})
    procs: dict[str, subprocess.Popen] = {}
    with contextlib.ExitStack() as stack:
        logs = {n: stack.enter_context(open(f"{out}/{n}.log", "w+")) for n in jobs}
        stack.callback(_kill, procs)
        for name, (args, n_dev) in jobs.items():
            env = dict(base, XLA_FLAGS=xla_flags(n_dev))
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, name.rstrip("0123456789"), *args, out], env=env,
                stdout=logs[name], stderr=subprocess.STDOUT)
        deadline = time.monotonic() + DEADLINE_S
        workers = {n: p for n, p in procs.items() if n != "ref"}
        while True:
            codes = {n: p.poll() for n, p in procs.items()}  # every child, every time
            if any(codes[n] for n in workers):  # its peer would wait for it for ever
                _kill(workers)
                codes = {n: p.poll() for n, p in procs.items()}
            if None not in codes.values() or codes["ref"] or time.monotonic() > deadline:
                break  # the reference runs on alone: the sharded test needs only it
            time.sleep(0.5)
        failed = {}
        for n, p in procs.items():
            failed[n] = None
            if p.returncode != 0:
                logs[n].seek(0)
                failed[n] = (f"--- {n} (rc {p.returncode}, None: still running; deadline "
                             f"{DEADLINE_S}s) ---\n" + logs[n].read()[-3000:])
        return failed


def _kill(procs: dict[str, subprocess.Popen]) -> None:
    for p in procs.values():
        if p.poll() is None:
            p.kill()
            p.wait()


def _load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return dict(z)


def _max_abs_diff(a: dict, b: dict) -> float:
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a if k.startswith("p"))


def _assert_same_update(dist: dict, ref: dict, init: dict) -> None:
    for k in dist:
        if k.startswith("p"):
            np.testing.assert_allclose(dist[k], ref[k], rtol=RTOL, atol=ATOL, err_msg=k)
    np.testing.assert_array_equal(dist["m_episodes"], ref["m_episodes"])
    np.testing.assert_array_equal(dist["m_outcomes"], ref["m_outcomes"])
    np.testing.assert_allclose(dist["m_loss"], ref["m_loss"], rtol=RTOL, atol=ATOL)
    assert _max_abs_diff(ref, init) > 1e-4  # the update did something


@pytest.fixture(scope="module")
def runs():
    """The three children's results (`init`, `one`, `four`, `dist0`, `dist1`), the failed
    children's log tails, and the wall time."""
    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        failed = _run_all(out)
        res = {n: _load(Path(out) / f"{n}.npz") for n in ("init", "one", "four", "dist0",
                                                          "dist1")
               if (Path(out) / f"{n}.npz").is_file()}
        yield res, failed, time.perf_counter() - t


def _finished(failed: dict[str, str | None], *names: str) -> None:
    tails = [failed[n] for n in names if failed[n] is not None]
    assert not tails, "child failed or timed out:\n" + "\n".join(tails)


@pytest.mark.slow
def test_four_devices_equal_one(runs):
    res, failed, _ = runs
    _finished(failed, "ref")
    assert res["one"]["m_episodes"].sum() > 0
    _assert_same_update(res["four"], res["one"], res["init"])


@pytest.mark.slow
def test_two_processes_equal_one_process(runs):
    res, failed, wall = runs
    _finished(failed, "ref", "worker0", "worker1")
    for name in ("dist0", "dist1"):
        _assert_same_update(res[name], res["four"], res["init"])
        _assert_same_update(res[name], res["one"], res["init"])
    for k in res["dist0"]:  # one set of parameters: both processes hold the same values
        np.testing.assert_array_equal(res["dist0"][k], res["dist1"][k], err_msg=k)
    print(f"max |2x2 - 1x4| {_max_abs_diff(res['dist0'], res['four']):.3g}, "
          f"max |2x2 - 1x1| {_max_abs_diff(res['dist0'], res['one']):.3g}, {wall:.0f}s")


# ----------------------------------------------------------------- settings (no subprocess)
def test_initialize_settings(monkeypatch):
    import jax

    from policy import distributed as d

    def boom(*a, **k):
        raise AssertionError("jax.distributed.initialize must not be called")

    monkeypatch.setattr(jax.distributed, "initialize", boom)
    for var in (d.ENV_ADDRESS, d.ENV_COUNT, d.ENV_ID):
        monkeypatch.delenv(var, raising=False)
    assert d.initialize() == d.Processes(0, 1, None)  # nothing set: one process, no-op
    assert d.initialize(num_processes=1).is_main
    monkeypatch.setenv(d.ENV_COUNT, "1")
    assert d.initialize("h:1").count == 1

    monkeypatch.setenv(d.ENV_ADDRESS, "host:1234")
    monkeypatch.setenv(d.ENV_COUNT, "2")
    with pytest.raises(ValueError, match=r"missing: process_id \(or JAX_PROCESS_ID\)$"):
        d.initialize()
    with pytest.raises(ValueError, match=r"process_id must be in \[0, 2\)"):
        d.initialize(process_id=2)
    monkeypatch.setenv(d.ENV_ID, "one")
    with pytest.raises(ValueError, match="JAX_PROCESS_ID='one' is not an integer"):
        d.initialize()
    monkeypatch.delenv(d.ENV_ADDRESS)
    monkeypatch.setenv(d.ENV_ID, "1")
    with pytest.raises(ValueError, match="missing: coordinator_address"):
        d.initialize()
    assert d.resolve("a:1", 4, 3, environ={d.ENV_COUNT: "2"}) == ("a:1", 4, 3)
    assert d.resolve(environ={d.ENV_ADDRESS: "b:2", d.ENV_COUNT: "3", d.ENV_ID: "0"}) == (
        "b:2", 3, 0)


# ------------------------------------------------------------ a coordinator that never comes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_join_timeout_setting(monkeypatch):
    from policy import distributed as d

    assert d.timeout(environ={}) == d.TIMEOUT_S
    assert d.timeout(environ={d.ENV_TIMEOUT: "7.5"}) == 7.5
    assert d.timeout(3, environ={d.ENV_TIMEOUT: "7.5"}) == 3
    for bad in ("nan", "inf", "0", "soon"):
        with pytest.raises(ValueError, match="coordinator timeout|not a number"):
            d.timeout(environ={d.ENV_TIMEOUT: bad})
    assert d.host_port("[::1]:8476") == ("::1", 8476)
    for bad in ("host", ":1", "host:0", "host:99999", "host:port"):
        with pytest.raises(ValueError, match="is not host:port"):
            d.host_port(bad)


def test_a_missing_coordinator_is_one_error_within_the_timeout(monkeypatch):
    """A process other than 0 waits for the coordinator's port, then gives up in time; JAX's
    join (which would abort the process at its own timeout) is never reached."""
    import jax

    from policy import distributed as d

    def boom(*a, **k):
        raise AssertionError("jax.distributed.initialize must not be called")

    monkeypatch.setattr(jax.distributed, "initialize", boom)
    address = f"127.0.0.1:{_free_port()}"
    t0 = time.perf_counter()
    with pytest.raises(d.CoordinatorTimeout, match=f"no coordinator answered at {address} "
                       r"within the timeout \(1 s, process 1 of 2\)"):
        d.initialize(address, 2, 1, timeout_s=1)
    assert 1 <= time.perf_counter() - t0 < 10
    with pytest.raises(d.CoordinatorTimeout, match="cannot resolve 'no-such-host.invalid'"):
        d.initialize("no-such-host.invalid:1234", 2, 1, timeout_s=1)


def test_a_job_whose_others_never_join_ends_with_one_line():
    """Process 0 starts the coordinator and waits for the others: at the timeout it exits with
    status 2 and one line, before JAX's own timeout would abort it with a stack dump."""
    code = ("from policy.distributed import initialize; "
            f"initialize('127.0.0.1:{_free_port()}', 2, 0, timeout_s=1)")
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(Path(__file__).parents[1]))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr[-2000:]
    assert lines[-1].startswith("error: the distributed job did not start within 1 s, "
                                "process 0 of 2"), lines
    assert "Check failure" not in res.stderr


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "ref":
        _ref(rest[0])
    else:
        _worker(int(rest[0]), int(rest[1]), rest[2])
