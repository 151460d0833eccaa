"""The HTML report: built from real command outputs, self-contained, and loaded in headless Chromium."""

import json
import os
import re
import shutil
import subprocess

import pytest

from jaxsched import cli
from cli_runner import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVOLVE = os.path.join(ROOT, "results", "evolve_google2011.json")



@pytest.fixture(scope="module")
def results(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    for args in (["snapshot", "--machines", "60", "--rho", "1.1", "--trials", "2", "--policy",
                  "best_fit,alpha_evolve,cvxcluster", "--json", str(d / "snap.json"), "--quiet"],
                 ["event", "--machines", "40", "--rho", "0.9", "--policy", "first_fit,best_fit", "--json",
                  str(d / "event.json"), "--util-csv", str(d / "util"), "--util-dt", "3600", "--quiet"],
                 ["cvx", "--machines", "20", "--rho", "1.3", "--json", str(d / "cvx.json"), "--quiet"]):
        assert cli.main(args) == 0
    files = [str(d / f) for f in ("snap.json", "event.json", "util_first_fit.csv", "util_best_fit.csv", "cvx.json")]
    return d, files + [EVOLVE]


def test_report_names_every_policy_and_needs_no_network(results, capsys):
    d, files = results
    out = d / "report.html"
    code, _, err = run(["report", *files, "-o", str(out)], capsys)
    assert code == 0, err
    page = out.read_text()
    for name in ("best_fit", "alpha_evolve", "cvxcluster", "first_fit", "champion"):
        assert name in page
    assert "<svg" in page and "latency CDF" in page and "utilization over time: best_fit" in page
    assert "compaction (mean over trials)" in page and "objective per generation" in page
    # Nothing is fetched when viewing: no src/href attributes, no <link>; the only URL is SVG's namespace.
    assert not re.search(r"\b(src|href)\s*=", page) and "<link" not in page
    assert set(re.findall(r"https?://[^\"' <]+", page)) == {"http://www.w3.org/2000/svg"}


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_loads_in_headless_chromium(results, tmp_path, capsys):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    d, files = results
    page = tmp_path / "report.html"
    assert run(["report", *files, "-o", str(page)], capsys)[0] == 0
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
    dom = subprocess.run([browser, *flags, "--dump-dom", f"file://{page}#selftest"], capture_output=True, text=True,
                         timeout=120).stdout
    assert 'data-ready="1"' in dom, "the page's script did not run to its end"
    assert re.search(r'<pre id="errors"></pre>', dom), "console errors: " + dom[dom.find('id="errors"'):][:300]
    assert 'data-sorted="ok"' in dom  # clicking a header sorts the table
    for name in ("best_fit", "alpha_evolve", "cvxcluster", "first_fit"):
        assert name in dom
    shot = tmp_path / "report.png"
    subprocess.run([browser, *flags, "--window-size=1280,2400", f"--screenshot={shot}", f"file://{page}"],
                   capture_output=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 10_000
    keep = os.environ.get("JAXSCHED_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, os.path.join(keep, "report.png"))


@pytest.mark.parametrize("name, content, message", [
    ("x.json", "not json", "not a JSON file"), ("x.json", None, "no such file"), ("util_a.csv", None, "no such file"),
    ("util_b.csv", "a,b\n1,2\n", "not a jaxsched utilization CSV"),
    ("util_c.csv", "time_s,util_cpu\n0,x\n", "not numeric"),
    ("other.json", '{"name": "someone else\'s program"}', "not a jaxsched result"),
    ("list.json", "[1, 2, 3]", "not a jaxsched result"),
    ("bare.json", '{"jaxsched": "0.1.0", "experiment": "snapshot"}', "'policies' must be a non-empty object"),
    ("bare_event.json", '{"jaxsched": "0.1.0", "experiment": "event"}', "'policies' must be a non-empty object"),
    ("num.json", '{"jaxsched": "0.1.0", "experiment": "snapshot", "policies": {"best_fit": 5}}',
     "'policies.best_fit' must be an object"),
    ("cvx.json", '{"jaxsched": "0.1.0", "experiment": "cvx"}', "none of 'cvxcluster', 'exact' and 'online'"),
    ("evo.json", '{"jaxsched": "0.1.0", "experiment": "evolve", "history": []}', "'history' must be"),
    ("gs.json", '{"jaxsched": "0.1.0", "experiment": "gpushare", "policies": {"fgd": {"seeds": [1]}}}', "has no"),
    ("what.json", '{"jaxsched": "0.1.0", "experiment": "dance"}', "unknown experiment"),
    ("bench.json", '{"benchmarks": {"x": {"headlines": [["a", "b"]]}}}', "[figure, value, goal] rows")])
def test_report_refuses_bad_files(tmp_path, capsys, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    code, _, err = run(["report", str(path), "-o", str(tmp_path / "r.html")], capsys)
    assert code == 2 and message in err and str(path) in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def _gpushare_doc(path):
    """A gpushare result of two policies over 131 arrived points (the command's schema)."""
    xs = list(range(131))
    curve = lambda f: dict(mean=[f(x) for x in xs], min=[f(x) - 0.3 for x in xs], max=[f(x) + 0.3 for x in xs],
                           at_100=[f(100)])
    pol = {p: dict(seeds=[1, 2], alloc=curve(lambda x, k=k: min(x, 94.0 + k)), frag=curve(lambda x: x / 10),
                   frag_ratio=curve(lambda x: x / 3)) for k, p in enumerate(("FGD", "BestFit"))}
    path.write_text(json.dumps(dict(jaxsched="0.1.0", experiment="gpushare", arrived_percent=xs, policies=pol,
                                    workload=dict(pod_list="default", nodes=10, gpus=80))))
    return path


def _ticks(svg, axis):
    return [float(t) for t in re.findall(rf'class="{axis}tick"[^>]*>([^<]*)<', svg)]


def test_chart_ticks_are_round_numbers():
    """Ticks are multiples of 1, 2, 2.5 or 5 times a power of ten that cover the data, never the
    data's own extremes split in quarters (0.24, 24.1, 47.9)."""
    from jaxsched.report import Chart, line_chart, log_ticks, nice_ticks

    assert nice_ticks(0.24, 47.9) == [0, 10, 20, 30, 40, 50]
    assert nice_ticks(32.5, 97.5) == [20, 40, 60, 80, 100]
    assert nice_ticks(0.0012, 0.0093) == [0, 0.002, 0.004, 0.006, 0.008, 0.01]
    assert log_ticks(1e-3, 250) == [1e-3, 1e-2, 1e-1, 1, 10, 100, 1000]
    svg = line_chart(Chart("t", "x", "y", {"a": ([0.24, 10.0, 47.9], [32.5, 50.0, 97.5])}))
    assert _ticks(svg, "x") == [0, 10, 20, 30, 40, 50] and _ticks(svg, "y") == [20, 40, 60, 80, 100]


def test_gpushare_report_zooms_on_arrived_80_to_130(tmp_path, capsys):
    doc = _gpushare_doc(tmp_path / "gs.json")
    code, _, err = run(["report", str(doc), "-o", str(tmp_path / "r.html"), "--quiet"], capsys)
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    zooms = [s for s in page.split("<svg")[1:] if "zoom: 80-130%" in s]
    assert len(zooms) == 3  # allocation, fragmentation, fragmented share
    alloc = next(s for s in zooms if "GPU allocation ratio" in s)
    assert _ticks(alloc, "x") == [80, 90, 100, 110, 120, 130]
    # The zoom's y axis spans the zoomed points only (allocation 80..95.3 there), not 0..131.
    assert _ticks(alloc, "y")[0] >= 75 and _ticks(alloc, "y")[-1] <= 100


def test_report_figures_writes_pdf_png_svg(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    doc = _gpushare_doc(tmp_path / "gs.json")
    out = tmp_path / "figs"
    code, text, err = run(["report", str(doc), "-o", str(tmp_path / "r.html"), "--figures", str(out)], capsys)
    assert code == 0, err
    files = sorted(os.listdir(out))
    assert len(files) == 6 * 3 and "wrote 18 figure file(s)" in text
    stem = "gs__gpu_allocation_ratio_against_arrived_workload_zoom_80_130"
    assert {f"{stem}.{x}" for x in ("pdf", "png", "svg")} <= set(files)
    assert (out / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    assert (out / f"{stem}.png").read_bytes().startswith(b"\x89PNG")
    assert b"<svg" in (out / f"{stem}.svg").read_bytes()
    code, _, err = run(["report", str(doc), "-o", str(tmp_path / "r2.html"), "--figures", str(tmp_path / "f2"),
                        "--figure-formats", "svg"], capsys)
    assert code == 0 and sorted(os.listdir(tmp_path / "f2")) == sorted(f for f in files if f.endswith(".svg"))


@pytest.mark.parametrize("extra, message", [
    (["--figure-formats", "pdf,jpeg"], "--figure-formats: jpeg"),
    (["--figure-formats", ","], "--figure-formats: none given"),
])
def test_report_figures_refuses_bad_formats(tmp_path, capsys, extra, message):
    doc = _gpushare_doc(tmp_path / "gs.json")
    code, _, err = run(["report", str(doc), "-o", str(tmp_path / "r.html"), "--figures", str(tmp_path / "f"),
                        *extra], capsys)
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists()


def test_report_figures_needs_matplotlib(tmp_path, capsys, monkeypatch):
    """Without the optional extra: one line saying how to install it, and no page written."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    doc = _gpushare_doc(tmp_path / "gs.json")
    code, _, err = run(["report", str(doc), "-o", str(tmp_path / "r.html"), "--figures", str(tmp_path / "f")],
                       capsys)
    assert code == 2 and "jaxsched[figures]" in err and err.count("\n") == 1
    assert not (tmp_path / "r.html").exists() and not (tmp_path / "f").exists()


def test_report_figures_refuses_a_file_as_directory(tmp_path, capsys):
    doc = _gpushare_doc(tmp_path / "gs.json")
    (tmp_path / "f").write_text("x")
    code, _, err = run(["report", str(doc), "-o", str(tmp_path / "r.html"), "--figures", str(tmp_path / "f")],
                       capsys)
    assert code == 2 and "is not a directory" in err
