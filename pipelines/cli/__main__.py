"""``python -m pipelines.cli``: the ``formsync`` command."""

from pipelines.cli import main

main()
