"""The HTML report: built from real command outputs, self-contained, and loaded in headless Chromium."""

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
