"""The one exception type for bad user input, so the CLI can tell it from a bug."""


class InputError(ValueError):
    """Invalid input (workload, cluster, settings); the message names what is at fault."""
