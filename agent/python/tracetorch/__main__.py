"""``python -m tracetorch ARGS...``: the ``tracetorch`` command (tracetorch.cli.main)."""

from tracetorch.cli import main

main()
