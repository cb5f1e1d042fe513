"""``verihub validate``: the gold self-check (:mod:`.validate`: references pass, negatives fail), the
red-team suite of every exploit known against a verifier (:mod:`.redteam`), and judge calibration against
labelled examples, at validate time and as drift during runs (:mod:`.calibration`).

Imports the environment and everything under it; never what serves, evaluates, publishes or trains.
"""
