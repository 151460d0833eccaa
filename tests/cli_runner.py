"""Run the jaxsched CLI in-process for a test: (exit code, stdout, stderr); read its results."""

import json

from jaxsched import cli


def run(args, capsys):
    """cli.main(args), with argparse's SystemExit turned into its code, and the captured output."""
    try:
        code = cli.main(args)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def results_of(path):
    """A result file's JSON text without its `command` (the command line, which names the output
    file and the devices): the part that must not depend on them."""
    doc = json.loads(open(path).read())
    assert doc.pop("command").startswith("jaxsched ")
    return json.dumps(doc, indent=1)
