"""Run the jaxsched CLI in-process for a test: (exit code, stdout, stderr)."""

from jaxsched import cli


def run(args, capsys):
    """cli.main(args), with argparse's SystemExit turned into its code, and the captured output."""
    try:
        code = cli.main(args)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err
