"""Command-line interface: ``fsmlearn <command> ...`` (see ``fsmlearn --help``)."""
