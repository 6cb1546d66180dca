"""Sites whose evaluations wait (0.05 s each, 4 sites, T = 300): what the sleeps cost `flwr run` and `run_simulation`.

``python -m benchmarks.sleeping_sites [--out figures.json]`` (in a loopback-only namespace it enters itself) runs
each configuration with and without the sleep and prints the difference beside the 60 s of sleep in series; the
setting and the figures: docs/performance.md ("Sites that wait").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

SLEEP = 0.05  # seconds per evaluation (one row)
SITES = 4
HORIZON = 300  # trials per site
IN_SERIES = SLEEP * HORIZON * SITES  # 60 s: every site's sleeps one after another
CPUS = (2.0, 1.0, 0.5)  # per simulated client: 1, 2 and 4 sites at once on two cores

APP = {
    "pyproject.toml": f'''
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"

        [project]
        name = "sleeping-sites"
        version = "1.0.0"
        description = "Four sites whose evaluations wait (a benchmark of pfxab-flower)"
        license = "Apache-2.0"
        dependencies = ["pfxab-flower"]

        [tool.hatch.build.targets.wheel]
        packages = ["sleeping"]

        [tool.flwr.app]
        publisher = "pfxab"

        [tool.flwr.app.components]
        serverapp = "sleeping.server:app"
        clientapp = "sleeping.client:app"

        [tool.flwr.app.config]
        algorithm = "pf-xab"
        num-clients = {SITES}
        horizon = {HORIZON}
        seed = 0
        ''',
    "sleeping/__init__.py": '"""Sites whose evaluations wait."""\n',
    "sleeping/task.py": '''
        """Each site's trial sleeps PFXAB_BENCH_SLEEP seconds per row, then succeeds with a bump's probability."""

        import os
        import time

        import numpy as np

        DOMAIN = {"x": (0.0, 1.0), "y": (0.0, 1.0)}
        CENTRES = [(0.3, 0.4), (0.5, 0.6), (0.7, 0.5), (0.4, 0.7)]


        def trials(centre):
            def trial(points, rng):
                time.sleep(float(os.environ.get("PFXAB_BENCH_SLEEP", "0")) * len(points))
                chance = 0.2 + 0.6 * np.exp(-((points - np.asarray(centre)) ** 2).sum(axis=1) / 0.045)
                return (rng.random(len(points)) < chance).astype(float)
            return trial
        ''',
    "sleeping/client.py": '''
        """Every site builds its trial once, from its partition-id."""

        from pfxab_flower.client_apps import from_context, objective_client_app

        from sleeping.task import CENTRES, DOMAIN, trials

        app = objective_client_app(from_context(lambda context: trials(CENTRES[context.node_config["partition-id"]])),
                                   DOMAIN, evaluation="stochastic", value_range=(0.0, 1.0))
        ''',
    "sleeping/server.py": '''
        """The run's strategy, no result file: the benchmark times the run."""

        from flwr.app import Context
        from flwr.serverapp import Grid, ServerApp

        from pfxab_flower.strategies import STRATEGIES

        app = ServerApp()


        @app.main()
        def main(grid: Grid, context: Context) -> None:
            config = context.run_config
            STRATEGIES[config["algorithm"]](num_clients=config["num-clients"], horizon=config["horizon"],
                                            seed=config["seed"], dimensions=2).start(grid=grid)
        ''',
}


def write_app(directory: Path) -> Path:
    for name, text in APP.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return directory


def timed_simulate(app: Path, num_cpus: float, sleep: float) -> float:
    """Wall seconds of ``pfxab simulate --app-dir app`` (``flwr run`` with its own SuperLink and Ray, cleaned up)."""
    env = {**os.environ, "PFXAB_BENCH_SLEEP": str(sleep)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pfxab_flower.simulations.cli.main", "simulate", "--app-dir", str(app),
                           "--num-cpus", str(num_cpus)], env=env, cwd=app, capture_output=True, text=True,
                          timeout=900)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"pfxab simulate failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return seconds


RUN_SIMULATION = '''
import sys, time, warnings
sys.path.insert(0, sys.argv[1])
from flwr.simulation import run_simulation
from pfxab_flower.simulations.flower.simulation_environment import backend_config, ray_environment
from pfxab_flower.strategies import STRATEGIES
from flwr.serverapp import ServerApp
from sleeping.client import app as client_app

server = ServerApp()

@server.main()
def main(grid, context):
    STRATEGIES["pf-xab"](num_clients=4, horizon=300, seed=0, dimensions=2).start(grid=grid)

with ray_environment() as ray_dir, warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    started = time.perf_counter()
    run_simulation(server, client_app, num_supernodes=4, backend_config=backend_config(float(sys.argv[2]), ray_dir))
    print(time.perf_counter() - started)
'''


def timed_run_simulation(app: Path, num_cpus: float, sleep: float) -> float:
    """Wall seconds of ``flwr.simulation.run_simulation`` of the same apps, in a fresh process."""
    env = {**os.environ, "PFXAB_BENCH_SLEEP": str(sleep), "FLWR_LOG_LEVEL": "ERROR"}
    done = subprocess.run([sys.executable, "-c", RUN_SIMULATION, str(app), str(num_cpus)], env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"run_simulation failed: {done.stderr[-2000:]}")
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sleeping_sites", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="also write the figures here as JSON")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    print(f"{SITES} sites, {HORIZON} evaluations each, {SLEEP} s per evaluation: {IN_SERIES:.0f} s of sleep in series")
    print(f"{'engine':<16} {'cpus/site':>9} {'no sleep s':>10} {'sleep s':>8} {'extra s':>8} {'extra/series':>12}")
    with tempfile.TemporaryDirectory(prefix="pfxab-sleeping-") as scratch:
        app = write_app(Path(scratch))
        for engine, timed in (("flwr run", timed_simulate), ("run_simulation", timed_run_simulation)):
            for cpus in CPUS:
                base, slept = timed(app, cpus, 0.0), timed(app, cpus, SLEEP)
                extra = slept - base
                figures[f"{engine} {cpus:g}"] = {"no_sleep_s": base, "sleep_s": slept, "extra_s": extra,
                                                  "extra_over_series": extra / IN_SERIES}
                print(f"{engine:<16} {cpus:>9g} {base:>10.1f} {slept:>8.1f} {extra:>8.1f} {extra / IN_SERIES:>12.2f}",
                      flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    from benchmarks.namespace import run_in_loopback

    run_in_loopback(main, "python -m benchmarks.sleeping_sites")
