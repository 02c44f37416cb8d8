"""The `lazygraph` command line (``app``: the Typer app; ``main``: its entry point), a thin layer over
``lazygraph.api``: ``app`` (the root, set-up and settings), ``index`` (index, stats, show), ``query``
(query, demo), ``batch``, ``eval``, ``bench``; ``options`` declares the shared options once and
``render`` prints what the API returns."""

from lazygraph.cli.app import app, main

__all__ = ["app", "main"]
