"""The public surface of `verihub` is deliberate: changing it should fail a test."""

import verihub


def test_public_api_is_pinned() -> None:
    assert sorted(verihub.__all__) == sorted([
        "Check", "CheckNotFoundError", "CheckParams", "CheckResult", "EnvNotFoundError", "EnvSpec",
        "Environment", "Grade", "GradeStatus", "LayerResult", "LayerStatus", "SpecError", "SpecProblem",
        "VerihubError", "__version__", "check", "load_env",
    ])
    for name in verihub.__all__:
        assert hasattr(verihub, name), name
    assert set(verihub.__all__) <= set(dir(verihub))  # the names load lazily; dir() still lists them
