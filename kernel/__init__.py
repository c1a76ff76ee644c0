"""The kernel: supervisor, message broker, control API and the `foldermind` command line."""

__version__ = "0.1.0"
