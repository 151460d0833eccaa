"""Result files: checked before the work, written atomically with the umask's mode, and never
lost when the write itself fails."""

import json
import os

import pytest

from jaxsched import output
from jaxsched.errors import InputError
from cli_runner import run


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_unwritable_target_is_refused_before_the_work(capsys):
    """/proc passes a permission check for root but takes no new file: the check must try one."""
    code, out, err = run(["snapshot", "--machines", "20", "--policy", "best_fit", "--trials", "1",
                          "--no-compaction", "--no-inflation", "--json", "/proc/x.json"], capsys)
    assert code == 2 and err.startswith("jaxsched: error: --json: cannot write /proc/x.json")
    assert "Traceback" not in err and err.count("\n") == 1 and out == ""


def test_a_failed_write_names_the_path_and_saves_the_results_elsewhere(tmp_path):
    target = tmp_path / "gone" / "x.json"  # its directory is not there at write time
    with pytest.raises(InputError, match=f"cannot write {target}: .*the results were saved to ") as e:
        output.write_json_atomic(str(target), {"placed": [1, 2]})
    fallback = str(e.value).rsplit("saved to ", 1)[1]
    try:
        assert json.load(open(fallback)) == {"placed": [1, 2]}
    finally:
        os.unlink(fallback)
    assert not target.parent.exists()


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_mode_of_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        output.write_json_atomic(str(tmp_path / "a.json"), {})
        output.write_csv_atomic(str(tmp_path / "a.csv"), ["x"], [[1.0]])
        output.write_text_atomic(str(tmp_path / "a.html"), "<p>")
    finally:
        os.umask(old)
    for name in ("a.json", "a.csv", "a.html"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == mode
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "a.html", "a.json"]  # no temporary file left


def test_an_overloaded_snapshot_explains_its_metric_ceilings(tmp_path, capsys):
    """Synthetic at rho 1.6: no policy places every task, so compaction is 1.0 and stranding
    high for all; the table says why and which figures still separate the policies."""
    path = tmp_path / "over.json"
    code, out, _ = run(["snapshot", "--machines", "60", "--rho", "1.6", "--policy", "best_fit,worst_fit",
                        "--trials", "2", "--no-inflation", "--json", str(path)], capsys)
    assert code == 0
    doc = json.loads(path.read_text())
    assert all(m["placed_fraction"]["mean"] < 1 and m["compaction"]["mean"] == 1.0 for m in doc["policies"].values())
    assert "the snapshot is overloaded" in " ".join(out.split())
    from jaxsched.report import build_report
    page = build_report([str(path)])
    assert "the snapshot is overloaded" in page
    code, out, _ = run(["snapshot", "--machines", "60", "--rho", "0.5", "--policy", "best_fit", "--trials", "2",
                        "--no-inflation", "--no-compaction"], capsys)
    assert code == 0 and "overloaded" not in out  # everything placed: no note
