"""The command line: flags, configs, errors, JSON output, and seed determinism across devices."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from jaxsched import cli
from cli_runner import results_of, run as run_main
from samples import GOOGLE, needs_samples

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["snapshot", "--machines", "120", "--rho", "0.95", "--trials", "2", "--quiet"]



def test_snapshot_writes_json_and_table(tmp_path, capsys):
    path = tmp_path / "out.json"
    code, out, err = run_main(["snapshot", "--machines", "120", "--rho", "0.95", "--trials", "2",
                               "--policy", "best_fit,alpha_evolve", "--sample-k", "8", "--json", str(path)], capsys)
    assert code == 0, err
    doc = json.loads(path.read_text())
    assert list(doc["policies"]) == ["best_fit", "alpha_evolve"]
    bf = doc["policies"]["best_fit"]
    for key in ("placed", "placed_fraction", "placed_weighted", "utilization_cpu", "utilization_mem",
                "holes", "stranding_cpu", "stranding_mem"):
        assert set(bf[key]) == {"mean", "std", "min", "median", "max", "trials"} and len(bf[key]["trials"]) == 2
    assert doc["settings"]["sample_k"] == 8 and doc["workload"]["machines"] == 120
    assert "best_fit" in out and "alpha_evolve" in out and "placed%" in out
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary left behind


def test_config_file_with_flag_override(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[snapshot]\nmachines = 100\nrho = 0.9\ntrials = 2\npolicy = ["first_fit", "cosine"]\n'
                   'sample-k = 4\nseed = 3\n')
    path = tmp_path / "o.json"
    code, _, err = run_main(["snapshot", "--config", str(cfg), "--trials", "3", "--json", str(path), "--quiet"],
                            capsys)
    assert code == 0, err
    s = json.loads(path.read_text())["settings"]
    assert (s["machines"], s["trials"], s["sample_k"], s["seed"], s["policy"]) == (100, 3, 4, 3, ["first_fit", "cosine"])


def test_shipped_configs_are_valid(capsys):
    configs = [os.path.join(ROOT, "configs", f) for f in os.listdir(os.path.join(ROOT, "configs"))]
    assert configs
    options = {"snapshot": cli.SNAPSHOT_OPTIONS, "evolve": cli.EVOLVE_OPTIONS, "tune": cli.TUNE_OPTIONS,
               "event": cli.EVENT_OPTIONS, "cvx": cli.CVX_OPTIONS}
    for path in configs:
        with open(path, "rb") as f:
            commands = [k for k in cli.tomllib.load(f) if k in options]
        assert commands, path
        for command in commands:
            assert cli.load_config(path, command, options[command])


@pytest.mark.parametrize("args, message", [
    (["--trials", "0"], "--trials: expected an integer >= 1"),
    (["--rho", "abc"], "--rho"),
    (["--policy", "best_fit,nope"], "unknown policy 'nope'"),
    (["--sample-k", "-3"], "--sample-k"),
    (["--genome", "1,2,3"], "--genome: expected 8 numbers"),
    (["--slot", "0,0"], "--slot"),
    (["--json", "/nonexistent-dir/x.json"], "does not exist"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--config", "/nonexistent.toml"], "no such file"),
    (["--inflate-mode", "stretch"], "--inflate-mode: expected one of scale, clone"),
    (["--search-depth", "0"], "--search-depth: expected an integer >= 1"),
    (["--policy", "family", "--genome", "1,1,1,1,1,1,1,nan"], "--genome: expected finite numbers"),
    (["--rho", "50"], "--rho: expected a load in (0, 10]"),
    (["--slot", "-0.05,0.05"], "--slot: slot sizes must be >= 0"),  # read as the flag's value, not as a flag
])
def test_bad_flags_give_one_line_and_exit_2(args, message, capsys):
    code, out, err = run_main(SMALL + args, capsys)
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    ("[snapshot]\nmachinez = 3\n", "unknown key 'machinez'"),
    ("[snapshot]\nmachines = 'many'\n", "key 'machines'"),
    ("[snapshot]\ntrials = 1.5\n", "key 'trials'"),
    ("[snapshot\n", "config"),
])
def test_bad_configs_name_file_and_key(tmp_path, text, message, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    code, _, err = run_main(SMALL + ["--config", str(cfg)], capsys)
    assert code == 2 and message in err and str(cfg) in err and err.count("\n") == 1


def test_help_documents_every_flag():
    out = subprocess.run([sys.executable, "-m", "jaxsched.cli", "snapshot", "--help"], capture_output=True,
                         text=True, check=True).stdout
    for opt in cli.SNAPSHOT_OPTIONS:
        assert f"--{opt.name}" in out
    assert "--config" in out


# One policy of each kind of program (plain, noise-drawing, genome-driven, sqrt/divide,
# slot-counting, spread): six whole policies split over one, two and three devices.
SPLIT_POLICIES = "first_fit,random,alpha_evolve,cosine,slot_loss,worst_fit"


def _run_cli(tmp_path, name, env_extra, prefix=(), top=()):
    path = tmp_path / f"{name}.json"
    env = dict(os.environ, **env_extra)
    cmd = [*prefix, sys.executable, "-m", "jaxsched.cli", *top, "snapshot", "--machines", "150", "--rho", "0.98",
           "--trials", "3", "--policy", SPLIT_POLICIES, "--sample-k", "6", "--seed", "5", "--json", str(path),
           "--quiet"]
    subprocess.run(cmd, env=env, check=True, timeout=600)
    return results_of(path)


def test_same_json_for_a_seed_on_one_and_two_devices_and_threads(tmp_path):
    one = _run_cli(tmp_path, "one", {"XLA_FLAGS": "--xla_force_host_platform_device_count=1"})
    two = _run_cli(tmp_path, "two", {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})
    assert one == two
    three = _run_cli(tmp_path, "three", {}, top=("--cpu-devices", "3"))  # 3 trials on 3 devices
    assert one == three
    if shutil.which("taskset"):
        single_core = _run_cli(tmp_path, "core", {}, prefix=("taskset", "-c", "0"))
        assert one == single_core
    other_seed = json.loads(one)["policies"]["random"]["placed"]["trials"]
    assert len(other_seed) == 3


def test_cpu_devices_count_reaches_jax_and_an_xla_flag_wins_over_auto():
    code = "import jax; from jaxsched.devices import set_cpu_devices; set_cpu_devices({!r}); print(len(jax.devices()))"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    run = lambda value, extra: subprocess.run([sys.executable, "-c", code.format(value)], env=dict(env, **extra),
                                              capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    assert run(3, {}) == "3"
    assert run("auto", {}) == str(len(os.sched_getaffinity(0)))
    assert run("auto", {"XLA_FLAGS": "--xla_force_host_platform_device_count=5"}) == "5"


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_bad_cpu_devices_is_a_usage_error(value, capsys):
    code, _, err = run_main(["--cpu-devices", value] + SMALL, capsys)
    assert code == 2 and "--cpu-devices" in err


def test_two_processes_with_jax_distributed_give_the_same_json(tmp_path):
    """--coordinator/--num-processes/--process-id: the batch split over two processes (one CPU device
    each) gives the single-process JSON byte for byte, and only process 0 writes it."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    args = ["snapshot", "--machines", "80", "--rho", "0.95", "--trials", "3", "--policy", "best_fit,random",
            "--sample-k", "4", "--seed", "2", "--no-inflation", "--quiet"]
    base = [sys.executable, "-m", "jaxsched.cli"]
    subprocess.run(base + args + ["--json", str(tmp_path / "single.json")], env=env, check=True, timeout=600)
    multi = lambda i: base + ["--coordinator", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(i)] \
        + args + ["--json", str(tmp_path / f"multi{i}.json")]
    other = subprocess.Popen(multi(1), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    first = subprocess.run(multi(0), env=env, capture_output=True, text=True, timeout=600)
    assert other.wait(timeout=600) == 0 and first.returncode == 0, first.stderr
    assert results_of(tmp_path / "multi0.json") == results_of(tmp_path / "single.json")
    assert not (tmp_path / "multi1.json").exists()


@pytest.mark.parametrize("extra, message", [
    (["--coordinator", "127.0.0.1:1"], "go together"),
    (["--coordinator", "127.0.0.1:1", "--num-processes", "2", "--process-id", "2"], "--process-id must be in 0..1"),
])
def test_distributed_flags_are_checked(extra, message, capsys):
    code, _, err = run_main(extra + SMALL, capsys)
    assert code == 2 and message in err


def test_flag_names_in_messages_of_evolve_and_at(capsys):
    code, _, err = run_main(["evolve", "--machines", "20", "--population", "1"], capsys)
    assert code == 2 and "--parents (16) must not exceed --population (1)" in err and err.count("\n") == 1


@needs_samples
def test_an_instant_outside_the_trace_names_the_flag_and_the_window(capsys):
    code, _, err = run_main(["snapshot", "--trace-dir", GOOGLE, "--at", "1e12", "--quiet"], capsys)
    assert code == 2 and err.startswith("jaxsched: error: --at: no task is alive at t = 1e+12 s")
    assert "run between 0 and" in err and err.count("\n") == 1


def test_rho_range_is_in_help():
    for command in ("snapshot", "event", "evolve", "cvx"):
        text = subprocess.run([sys.executable, "-m", "jaxsched", command, "--help"], capture_output=True,
                              text=True).stdout
        assert "(0, 10]" in " ".join(text.split()), command


@needs_samples
def test_a_share_of_no_demand_is_shown_undefined_not_zero(tmp_path, capsys):
    """--max-task-dim 1e-9 keeps only tasks requesting nothing: placed_w% is 0/0, printed '-' and explained."""
    out_json = str(tmp_path / "z.json")
    code, out, err = run_main(["snapshot", "--trace-dir", GOOGLE, "--max-task-dim", "1e-9", "--policy", "best_fit",
                               "--trials", "2", "--no-compaction", "--no-inflation", "--json", out_json], capsys)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("best_fit"))
    assert row.split()[2] == "-" and "- placed_w%: undefined, 0/0" in out
    doc = json.load(open(out_json))["policies"]["best_fit"]
    assert "undefined" in doc["placed_weighted"] and doc["placed_fraction"]["mean"] == 1.0


@pytest.mark.parametrize("args, flag", [
    (["snapshot", "--machines", "10000000000"], "--machines 10000000000"),
    (["snapshot", "--machines", "200", "--trials", "100000000"], "--trials 100000000"),
    (["event", "--machines", "10000000000"], "--machines 10000000000"),
])
def test_sizes_that_cannot_fit_are_refused_up_front(args, flag, capsys):
    code, _, err = run_main([*args, "--quiet"], capsys)
    assert code == 2 and err.startswith("jaxsched: error: ") and flag in err and "GiB of memory" in err
    assert err.count("\n") == 1
