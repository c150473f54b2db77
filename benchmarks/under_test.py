"""The measuring modules of the package installed from the commit under test, wherever that commit keeps them.

asv runs this suite, as it stands in the working tree, against every commit it measures: the history reaches back
to commits from before the package was split into stages, which keep these modules at its top (sgemm.record)
rather than in sgemm.measuring. ImportError when the commit has neither (or cannot import them: the message says
why).

Each module is imported by name, in an `import` statement of its own rather than through importlib: the gate finds
the code that measurement depends on by following these statements (sgemm.gate.changes).
"""


def _stages_missing(exc: ModuleNotFoundError) -> bool:
    return exc.name in ("sgemm.measuring", "sgemm")


def record():
    try:
        from sgemm.measuring import record
    except ModuleNotFoundError as exc:
        if not _stages_missing(exc):
            raise
        from sgemm import record
    return record


def telemetry():
    try:
        from sgemm.measuring import telemetry
    except ModuleNotFoundError as exc:
        if not _stages_missing(exc):
            raise
        from sgemm import telemetry
    return telemetry


def resources():
    try:
        from sgemm.measuring import resources
    except ModuleNotFoundError as exc:
        if not _stages_missing(exc):
            raise
        from sgemm import resources
    return resources
