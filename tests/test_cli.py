"""``pfxab run`` end to end: the JSON, the files, and one-line errors for bad input."""

import argparse
import json

import pytest

from pfxab_flower.simulations.cli.main import main
from tests.conftest import CHEAP_ALGORITHMS_FLAG, PFXAB, cli_error_line

REQUIRED_KEYS = {
    "algorithm", "problem", "alpha", "num_clients", "horizon", "seed", "regret", "regret_per_client", "phases",
    "communication_rounds", "final_points", "mean_reward_personalised", "mean_reward_global",
    "mean_reward_local", "optimum_personalised", "wall_seconds",
}


def test_run_json_prints_exactly_one_object_with_the_documented_keys(capsys):
    args = ["run", "--problem", "garland", "--num-clients", "4", "--alpha", "0.5", "--horizon", "20000", "--json"]
    assert main(args) == 0
    out = capsys.readouterr().out
    summary = json.loads(out)  # fails if anything else is printed
    assert summary.keys() >= REQUIRED_KEYS
    assert summary["num_clients"] == 4 and len(summary["regret_per_client"]) == 4
    assert summary["regret"] == pytest.approx(sum(summary["regret_per_client"]))
    assert len(summary["final_points"]) == 4 and len(summary["final_points"][0]) == 1
    assert summary["communication_rounds"] == 2 * summary["phases"] + 1


def test_run_out_writes_the_tables(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "--problem", "doublesine", "--num-clients", "3", "--horizon", "10000", "--out", str(out)]) == 0
    assert "regret" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    clients = (out / "clients.csv").read_text().splitlines()
    curve = (out / "curve.csv").read_text().splitlines()
    assert len(clients) == 1 + 3 and clients[0].startswith("client,site,flower_node,regret")  # which site each row is
    assert curve[0] == "t,regret" and float(curve[-1].split(",")[1]) == pytest.approx(summary["regret"])
    assert not list(out.glob(".*.tmp"))


@pytest.mark.parametrize(
    "flag, value, fragment",
    [
        ("--alpha", "1.5", "alpha=1.5 is invalid; allowed: a number in [0, 1]"),
        ("--alpha", "-0.1", "alpha=-0.1"),
        ("--horizon", "0", "horizon=0 is invalid; allowed: an integer in [1, 10,000,000,000]"),
        ("--horizon", "2.5", "horizon='2.5'"),
        ("--num-clients", "0", "num-clients=0 is invalid"),
        ("--nu1", "0", "nu1=0.0 is invalid; allowed: a number in [1e-12, 1e+12]"),
        ("--nu1", "1e308", "nu1=1e+308 is invalid; allowed: a number in [1e-12, 1e+12]"),  # was an OverflowError
        ("--nu1", "1e-300", "nu1=1e-300 is invalid"),  # was a ZeroDivisionError
        ("--rho", "1e-300", "rho=1e-300 is invalid; allowed: a number in [1e-12, 1)"),  # was a ZeroDivisionError
        ("--rho", "1", "rho=1.0 is invalid; allowed: a number in [1e-12, 1)"),
        ("--engine", "gpu", "--engine='gpu' is invalid; allowed: inprocess, flower"),
        ("--rho", "0", "rho=0.0"),
        ("--noise-sigma", "-1", "noise-sigma=-1.0 is invalid; allowed: a number >= 0"),
        ("--spread", "1", "spread=1.0 is invalid; allowed: a number in [0, 1)"),
        ("--problem", "rosenbrock", "problem='rosenbrock' is invalid; allowed: garland, doublesine"),
        ("--algorithm", "hoo", "algorithm='hoo' is invalid; allowed: pf-xab, fed-pne, pf-pne"),
        ("--max-depth", "0", "max-depth=0 is invalid"),
        ("--seed", "-3", "seed=-3 is invalid"),
        ("--alpha", "nan", "alpha=nan"),
        ("--confidence", "wald", "confidence='wald' is invalid; allowed: hoeffding, bernstein"),
    ],
)
def test_bad_values_give_one_line_exit_2_and_write_nothing(tmp_path, flag, value, fragment):
    out = tmp_path / "out"
    line = cli_error_line("run", flag, value, "--out", str(out), "--json")
    assert fragment in line
    assert not out.exists()


def test_unknown_flag_is_one_line_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--alpah", "0.5"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--alpah" in err[0]


@pytest.mark.parametrize(
    ("args", "abbreviated"),
    [
        (("run", "--alph", "0.3"), "--alph"),
        (("compare", "--seed", "0-2"), "--seed"),
        (("sweep", "x.toml", "--out", "d", "--work", "2"), "--work"),
        (("plot", "d", "--out", "f.png", "--log"), "--log"),
    ],
)
def test_abbreviated_flags_are_refused_with_one_line(args, abbreviated):
    line = cli_error_line(*args)
    assert line == f"pfxab: error: unrecognized arguments: {' '.join(args[args.index(abbreviated):])}"


@pytest.mark.parametrize(("args", "expected"), [
    (("run", "--alph", "0.3"), "pfxab: error: unrecognized arguments: --alph 0.3"),  # the parser's exit
    (("run", "--noise-sigma", "-1"), "pfxab run: error: --noise-sigma=-1.0 is invalid; allowed: a number >= 0"),
])
def test_a_bad_flag_is_one_line_and_exit_2_from_the_command_itself(args, expected):
    """What a shell sees, in a process of its own: one test per exit path (the parser's, a checked value's); the
    other error lines come from ``main()`` in this process, the same code."""
    assert cli_error_line(*args, program=PFXAB) == expected


def test_an_empty_out_is_refused_not_ignored(tmp_path):
    line = cli_error_line("run", "--horizon", "1000", "--out", "")
    assert line == ("pfxab run: error: --out='' is invalid; allowed: a new or empty directory, or one holding only a "
                    "result pfxab wrote (clients.csv, communication.csv, curve.csv, phases.csv, summary.json), "
                    "on a writable file system")


def test_compare_takes_the_confidence_and_reports_it(tmp_path, capsys):
    out = tmp_path / "c"
    args = ["compare", "--problem", "garland", "--num-clients", "3", "--horizon", "20000", "--seeds", "0-1",
            "--confidence", "bernstein", "--no-progress", "--out", str(out), *CHEAP_ALGORITHMS_FLAG]
    assert main(args) == 0
    assert "confidence=bernstein" in capsys.readouterr().out.splitlines()[0]
    runs = (out / "runs.csv").read_text().splitlines()
    header = runs[0].split(",")
    assert {row.split(",")[header.index("confidence")] for row in runs[1:]} == {"bernstein"}
    assert "pulls_per_phase" in header


@pytest.mark.parametrize("arguments", [["--version"], ["--help"]])
def test_version_and_help_import_neither_numpy_nor_the_algorithms(arguments):
    """The command line answers at once: its top level imports no sub-command (benchmarks/cli_startup.py times it)."""
    import subprocess
    import sys

    code = ("import sys\nfrom pfxab_flower.simulations.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\nheavy = sorted(m for m in ('numpy', 'pandas', 'scipy', 'flwr', "
            "'pfxab_flower.algorithms', 'pfxab_flower.running.engine') if m in sys.modules)\nprint('HEAVY', heavy)")
    done = subprocess.run([sys.executable, "-c", code, *arguments], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "HEAVY []"
    assert "pfxab" in done.stdout


def test_a_run_that_only_prints_does_not_import_pandas():
    """Nor what only other runs or commands need: the package's version, process handling, the objective's time
    limit, writing a result, a Ray cluster, what only other algorithms use (each algorithm's module is imported to
    register it: PF-SH's normal quadrature, PF-SMBO's BLAS-thread limit, Random-Search's exact fractions)."""
    import subprocess
    import sys

    unused = ("pandas", "importlib.metadata", "psutil", "multiprocessing", "pfxab_flower.storage.outputs",
              "pfxab_flower.simulations.flower.ray_cluster", "subprocess", "statistics", "numpy.polynomial",
              "threadpoolctl", "fractions")
    code = ("import sys\nfrom pfxab_flower.simulations.cli.main import main\n"
            "main(['run', '--horizon', '20000', '--num-clients', '3'])\n"
            f"print('UNUSED', [m for m in {unused!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "UNUSED []"
    assert "regret" in done.stdout


def test_the_readme_lists_every_flag_of_pfxab_run_as_the_command_declares_it():
    """README's "`pfxab run --help` lists every flag (...)": each flag and choice list, as `pfxab run` has them."""
    import re
    from pathlib import Path

    from pfxab_flower.simulations.cli.main import build_parser

    parser = build_parser(["run"])
    run_parser = next(a for a in parser._actions if a.dest == "command").choices["run"]
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    start = readme.index("`pfxab run --help` lists every flag")
    paragraph = readme[start:readme.index("`pfxab --version` the version", start)]
    flags = {flag: action.metavar for action in run_parser._actions for flag in action.option_strings
             if flag.startswith("--") and flag != "--help" and action.help != argparse.SUPPRESS}
    assert set(re.findall(r"`(--[a-z0-9-]+)", paragraph)) == set(flags)
    for flag, metavar in flags.items():
        if isinstance(metavar, str) and metavar.startswith("{"):  # a choice: the README shows the same choices
            assert f"`{flag} {metavar}`" in paragraph, flag
