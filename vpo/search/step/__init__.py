"""Search beyond best-of-n at matched generated tokens (``vpo eval --search bon|beam|tree``), a wing of
:mod:`vpo.search`: :mod:`~vpo.search.step.search` (bon, beam and tree, their token ledger),
:mod:`~vpo.search.step.score` (step scorers), :mod:`~vpo.search.step.run` (every prompt searched,
the records on disk, the metrics), :mod:`~vpo.search.step.report` (``search.json``, ``search.md``,
the plot) and :mod:`~vpo.search.step.cli` (the command paths of ``vpo eval --search`` and
``vpo compare`` of search runs)."""
