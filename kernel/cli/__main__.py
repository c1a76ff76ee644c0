"""``python -m foldermind.kernel.cli``: the ``foldermind`` command."""

from foldermind.kernel.cli import main

main()
