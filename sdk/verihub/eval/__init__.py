"""``verihub eval``: rollouts, K samples per task graded as each finishes (:mod:`.rollout`), pass@k and
the other metrics with the results on disk (:mod:`.evaluate`, its output directory in ``_outdir``), and
``verihub regrade``: stored answers (:mod:`.stored`: an eval's results, a training run's grade log,
:mod:`.gradelog`) graded again under another verifier version (:mod:`.regrade`).

Imports the environment and everything under it, judge calibration (drift) and the grader pool
(:mod:`verihub.serve.graders`); never the hub or the trainers.
"""
